"""Training's write path: CPU time of batch training on SQLite and PostgreSQL, tokenizing left
out (the messages are tokenized once, before any timing).

Each run trains the SpamAssassin training split's first WARM messages into a fresh database
in batches of 500 (untimed: a model the size of a day's mail), then the next TIMED messages in
batches of 500, timed: this process's CPU seconds, and on PostgreSQL (a local server) the CPU
seconds of the server processes serving the bench's database, read from /proc. Runs alternate
the databases. To compare two versions of the code, run this on each in turn:

    python -m bench.train_path [--runs 3] [--postgres URL] [--json FILE] [--set KEY=VALUE]

`--set` gives the model an option (repeatable), e.g. `--set pairs_until_log_odds=0`. The
split's messages come in the harness's fixed shuffle (`bench.data.split`), both classes mixed
as mail arrives.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.service.messages import Message, PreparedMessage
from app.service.models import update_model
from app.service.runtime import Runtime
from app.service.training import train_prepared
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from bench import data
from bench.accuracy import options_from
from bench.databases import fresh_database, postgres_server_url
from bench.timing import process_cpu_seconds, summary
from bench.versus_bogofilter import TRAIN_BATCH, bench_settings

WARM = 2000
TIMED = 2000


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def server_cpu(database: str) -> float:
    """CPU seconds so far of the local PostgreSQL processes serving `database` (0 when none
    can be read: a remote server)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # the process ended meanwhile
            continue
        if command.startswith("postgres: ") and f" {database} " in command:
            total += process_cpu_seconds(int(entry.name)) or 0.0
    return total


def prepare_all(messages: Sequence[tuple[Message, str]]) -> list[tuple[PreparedMessage, str]]:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/prepare.db"
        runtime = Runtime(bench_settings(url), Database(url))
        try:
            return [(runtime.prepare(message, "train"), label) for message, label in messages]
        finally:
            runtime.close()


def one_run(
    kind: str,
    items: list[tuple[PreparedMessage, str]],
    folder: Path,
    postgres: str | None,
    options: dict[str, Any],
) -> dict[str, float]:
    with fresh_database(kind, folder, postgres) as url:
        db = Database(url)
        upgrade_schema(db)
        runtime = Runtime(bench_settings(url), db)
        database = url.rsplit("/", 1)[1]
        try:
            if options:
                update_model(runtime, name="default", changes=options)
            for start in range(0, WARM, TRAIN_BATCH):
                train_prepared(
                    runtime, model_name="default", items=items[start : start + TRAIN_BATCH]
                )
            cpu, server, wall = own_cpu(), server_cpu(database), time.perf_counter()
            for start in range(WARM, WARM + TIMED, TRAIN_BATCH):
                train_prepared(
                    runtime, model_name="default", items=items[start : start + TRAIN_BATCH]
                )
            return {
                "cpu": own_cpu() - cpu,
                "server_cpu": server_cpu(database) - server if kind == "postgresql" else 0.0,
                "wall": time.perf_counter() - wall,
            }
        finally:
            runtime.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", default=None, help="server URL (default: the env's)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--set", action="append", default=[], help="model option key=value")
    args = parser.parse_args(argv)
    options = options_from(args.set)
    postgres = postgres_server_url(args.postgres)
    kinds = ["sqlite"] + (["postgresql"] if postgres else [])
    train = data.split("spamassassin").train
    messages = [(Message(raw=m.raw, text=m.text, message_id=m.id), m.label) for m in train]
    items = prepare_all(messages[: WARM + TIMED])
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.runs):
            for kind in kinds:
                runs[kind].append(one_run(kind, items, Path(folder), postgres, options))
    report: dict[str, Any] = {
        "warm": WARM,
        "timed": TIMED,
        "options": options,
        "order": "shuffled, seed 0",
        "load": os.getloadavg()[0],
    }
    for kind, timings in runs.items():
        cpu = [run["cpu"] for run in timings]
        both = [run["cpu"] + run["server_cpu"] for run in timings]
        report[kind] = {
            "cpu_s": summary(cpu, digits=2),
            "cpu_with_server_s": summary(both, digits=2),
            "wall_s": summary([run["wall"] for run in timings], digits=2),
            "msg_per_cpu_s": round(TIMED / report_median(cpu)),
            "msg_per_cpu_s_with_server": round(TIMED / report_median(both)),
        }
        print(
            f"{kind}: {TIMED} messages after {WARM}: process CPU {report[kind]['cpu_s']}, "
            f"with the server's {report[kind]['cpu_with_server_s']}, wall {report[kind]['wall_s']}"
        )
    print(json.dumps(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def report_median(values: Sequence[float]) -> float:
    return float(summary(values)["median"])


if __name__ == "__main__":
    raise SystemExit(main())
