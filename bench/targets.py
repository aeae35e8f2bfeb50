"""7. The speed targets in one table: each measured with the compiled token core and with the
pure-Python core forced, next to bogofilter's figure from the same run.

    python -m bench --only targets            # full size (see docs/performance.md for how long)
    python -m bench --only targets --quick    # tiny sizes: the smoke run

The rows reuse the other parts' measurements, at their sizes, on the SpamAssassin split of
`spamsift evaluate` (4,868 training and 1,178 test messages):

- classify in process: `classify_batch` (batches of 1,000, warm model, one process) against
  bogofilter's bulk scoring (`-T -b`), messages per CPU second (this process's; bogofilter's
  from its rusage);
- classify over HTTP: batches of 100 from two clients to `spamsift serve --workers 2` on
  SQLite, messages per second (wall) and per CPU second of the server's processes;
- train in batches: `train_batch` (batches of 500) into a fresh SQLite and PostgreSQL
  database against bogofilter's bulk registration (`-s -b`, `-n -b`) into an empty word list;
  per CPU second (this process's: PostgreSQL's own work is not in it, so its wall rate is
  shown too) and per second;
- single-message classify over HTTP (message/rfc822, the same server): requests per second
  at 1, 10 and 50 clients in a closed loop, the server's CPU per request at 1 client, and p99
  latency of 50 clients in open loops at 80 % of the 50-client rate and at 250 requests/s;
- writes over HTTP, per database (SQLite, PostgreSQL), each on its own `spamsift serve
  --workers 2`: training in batches of 500 from two clients (messages per second, and per
  CPU second of spamsift's processes: the database server's is not in it), then "mark as
  spam" clicks (feedback with the message) on that model, from one client (the server's CPU
  per click) and in bursts of 50 sent at once (p99 latency), then the database's bytes per
  stored token;
- 10,000 mailboxes: a row saying it is not measured here (`python -m bench.many_models`
  builds them, in far more than this part's time);
- a 1,000,000-token model on SQLite (bench.memory): the model's own memory, (server RSS after
  loading it and 100 classifications - the idle server's RSS) / tokens, and the first
  classification's wall time after the server starts;
- accuracy: 1-ROCA % and the spam missed at <= 0.1 % false positives on the batch split of
  SpamAssassin (bench.accuracy); every corpus and the online protocol are
  `python -m bench.accuracy`.

Runs alternate between bogofilter and the two cores in process, and between the two cores for
the 1 M-token model; each HTTP server (one per core) is measured in turn. Each figure is the
median of the runs with its spread; a ratio is spamsift's median / bogofilter's median.

    python -m bench.targets --verdicts FIGURES.json --json OUT.json

gives the verdicts and the markdown table of figures given (see `verdicts`), measuring nothing:
what tests/bench holds the table's logic to.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
import traceback
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from app.store.engine import Database
from app.text.core import COMPILED, CoreChoice, resolve
from bench import accuracy, data
from bench.databases import database_bytes, fresh_database
from bench.memory import build_model, measure_served_model, probe_requests
from bench.server import Server, run_load, serve, summarize_runs
from bench.serving import (
    BURST_CLICKS,
    OPEN_LOOP_SHARE,
    classify_requests,
    measure_classify_single,
    measure_train_single,
)
from bench.timing import ratio, summary
from bench.versus_bogofilter import (
    Bogofilter,
    Timings,
    bogofilter_version,
    find_bogofilter,
    for_model,
    http_batch_runs,
    in_process_run,
)

Goal = Literal["ratio", "at_most", "same", "report"]
FIXED_RATE = 250.0  # single-message classify requests/s of the latency target
CORE_LABELS = {"compiled": "compiled core", "python": "pure-Python core"}


@dataclass(frozen=True)
class Target:
    """One row: what is measured, its goal, and the medians (with spread) per core."""

    name: str
    goal: Goal
    measured: dict[str, dict[str, Any] | None]  # core -> summary
    bogofilter: dict[str, Any] | None = None
    limit: float = 1.0  # the ratio to reach, or the value not to exceed

    @property
    def goal_text(self) -> str:
        return {
            "ratio": f"ratio ≥ {self.limit:g}",
            "at_most": f"≤ {self.limit:g}",
            "same": "same with both cores",
            "report": "(reported)",
        }[self.goal]

    def ratio(self, core: str) -> float | None:
        """spamsift / bogofilter, where the goal compares them (a rate, or accuracy)."""
        ours = self.measured.get(core)
        if ours is None or self.bogofilter is None or self.goal in ("at_most", "report"):
            return None
        return ratio(ours, self.bogofilter)

    def met(self, core: str) -> bool | None:
        ours = self.measured.get(core)
        if ours is None or ours.get("median") is None:
            return None
        if self.goal == "ratio":
            value = self.ratio(core)
            return None if value is None else value >= self.limit
        if self.goal == "at_most":
            return bool(ours["median"] <= self.limit)
        if self.goal == "same":
            medians = {s["median"] for s in self.measured.values() if s is not None}
            return len(medians) == 1
        return None

    def as_dict(self, cores: tuple[str, ...]) -> dict[str, Any]:
        return {
            "target": self.name,
            "goal": self.goal_text,
            **{core: self.measured.get(core) for core in cores},
            "bogofilter": self.bogofilter,
            **{f"ratio_{core}": self.ratio(core) for core in cores},
            **{f"met_{core}": self.met(core) for core in cores},
        }


def run(quick: bool, postgres_url: str | None) -> dict[str, Any]:
    from bench.run import machine  # bench.run imports this module when the part runs

    started = time.perf_counter()
    at_start = machine()
    runs = 1 if quick else 3
    cores: tuple[CoreChoice, ...] = ("compiled", "python") if COMPILED is not None else ("python",)
    kinds = ["sqlite"] + (["postgresql"] if postgres_url else [])
    split = data.split(
        "spamassassin", train_limit=60 if quick else None, test_limit=30 if quick else None
    )
    bogofilter_path, how = find_bogofilter(install=not quick)
    results: dict[str, Any] = {
        "corpus": "spamassassin",
        "train_messages": len(split.train),
        "test_messages": len(split.test),
        "cores": list(cores),
        "runs": runs,
        "bogofilter": {"status": how},
        "machine": at_start,
    }
    with tempfile.TemporaryDirectory(prefix="spamsift-bench-") as tmp:
        folder = Path(tmp)
        sections: dict[str, Callable[[], Any]] = {
            "in_process": lambda: in_process(
                split, folder, cores, kinds, postgres_url, bogofilter_path, runs
            ),
            "http": lambda: {
                core: over_http(split, folder, core, quick=quick, runs=runs) for core in cores
            },
            "writes": lambda: writes(split, folder, kinds, postgres_url, quick=quick, runs=runs),
            "model_1m": lambda: big_model(folder, cores, bogofilter_path, quick=quick, runs=runs),
            "accuracy": lambda: accuracy_rows(folder, cores, bogofilter_path, quick=quick),
        }
        results["section_seconds"] = {}
        for name, measure in sections.items():
            section_started = time.perf_counter()
            try:
                results[name] = measure()
            except Exception as error:  # the other sections still fill their rows
                results.setdefault("errors", {})[name] = {
                    "error": f"{type(error).__name__}: {error}",
                    "traceback": traceback.format_exc(),
                }
                results[name] = None
            results["section_seconds"][name] = round(time.perf_counter() - section_started)
    if bogofilter_path:
        results["bogofilter"]["version"] = bogofilter_version(bogofilter_path)
    targets = target_rows(results, cores, kinds)
    results["targets"] = [t.as_dict(cores) for t in targets]
    results["table"] = [table_row(t, cores) for t in targets]
    results["load_average_1min_at_end"] = os.getloadavg()[0]
    results["minutes"] = round((time.perf_counter() - started) / 60, 1)
    results["markdown"] = [about(results), "", *markdown(targets, cores)]
    results["notes"] = [
        f"{len(split.train)} training and {len(split.test)} test messages of the spamassassin "
        f"split; {runs} run(s) each; bogofilter: {results['bogofilter'].get('version') or how}",
        "in process, runs alternate between bogofilter and both cores; each HTTP server (one "
        "per core, --workers 2, SQLite) is measured in turn; the load generator shares the "
        "cores with the server",
        "CPU time of training on PostgreSQL is this process's only (the database server's "
        "is not in it): read its wall rate beside it",
        *(f"{name} FAILED: {e['error']}" for name, e in results.get("errors", {}).items()),
    ]
    return results


def in_process(
    split: data.Split,
    folder: Path,
    cores: tuple[CoreChoice, ...],
    kinds: list[str],
    postgres_url: str | None,
    bogofilter_path: str | None,
    runs: int,
) -> dict[str, Any]:
    """Train (every database) and classify (SQLite, warm model) in process with each core,
    and bogofilter in bulk mode, the runs alternating between them."""
    peer = Bogofilter(bogofilter_path, split, folder / "bf") if bogofilter_path else None
    peer_train, peer_classify = Timings(), Timings()
    train = {core: {kind: Timings() for kind in kinds} for core in cores}
    classify = {core: Timings() for core in cores}
    for run in range(runs):
        if peer is not None:
            peer.train(run, peer_train)
            peer.classify(peer_classify)
        for core in cores:
            for kind in kinds:
                chosen = {1: classify[core]} if kind == "sqlite" else {}
                in_process_run(
                    split, folder, kind, postgres_url, train[core][kind], chosen, token_core=core
                )
    n_train, n_test = len(split.train), len(split.test)
    return {
        "bogofilter": {"train": peer_train.rates(n_train), "classify": peer_classify.rates(n_test)}
        if peer is not None
        else None,
        **{
            core: {
                "classify": classify[core].rates(n_test),
                **{f"train_{kind}": train[core][kind].rates(n_train) for kind in kinds},
            }
            for core in cores
        },
    }


def over_http(
    split: data.Split, folder: Path, core: CoreChoice, *, quick: bool, runs: int
) -> dict[str, Any]:
    """One `spamsift serve --workers 2` on SQLite running `core`: a model trained in batches,
    then batch classify and single-message classify against it."""
    with (
        fresh_database("sqlite", folder, None) as url,
        serve(url, workers=2, folder=folder, tokenizer=core) as server,
    ):
        running = served_core(server)
        if running != core:
            raise RuntimeError(f"the server runs the {running} core, not the {core} one")
        # One training client: the model is what is needed here, and two workers writing
        # 500-message batches into SQLite at once can outwait its busy timeout (503) on a
        # loaded machine.
        train, classify, model = http_batch_runs(
            server, split, train_runs=1, classify_runs=runs, train_clients=1
        )
        requests = [for_model(r, model) for r in classify_requests(split.test)]
        closed, open_loop = measure_classify_single(server, requests, quick=quick, runs=runs)
        fixed_rate = summarize_runs(
            [
                run_load(
                    server,
                    requests,
                    clients=50,
                    total=int(FIXED_RATE * (1 if quick else 4)),
                    rate_per_s=FIXED_RATE,
                )
                for _ in range(runs)
            ]
        )
    return {
        "token_core": running,
        "train_batch": train.rates(len(split.train)),
        "classify_batch": classify.rates(len(split.test)),
        "classify_single": closed,
        "classify_single_open_loop": open_loop,
        "classify_single_fixed_rate": fixed_rate,
    }


def writes(
    split: data.Split,
    folder: Path,
    kinds: list[str],
    postgres_url: str | None,
    *,
    quick: bool,
    runs: int,
) -> dict[str, Any]:
    """Per database: `spamsift serve --workers 2` (the default core) trains the split in
    batches of 500 from two clients into `runs` new models; then "mark as spam" clicks on
    the last one (bench.serving's `measure_train_single`: one at a time, and bursts of 50);
    then the database's bytes per stored token."""
    measured: dict[str, Any] = {}
    for kind in kinds:
        with fresh_database(kind, folder, postgres_url) as url:
            with serve(url, workers=2, folder=folder) as server:
                train, _, model = http_batch_runs(
                    server, split, train_runs=runs, classify_runs=0, train_clients=2
                )
                clicks = measure_train_single(
                    server, split.test, model=model, runs=runs, quick=quick
                )
            measured[kind] = {
                "train_batch": train.rates(len(split.train)),
                **clicks,
                **stored_bytes(url),
            }
    return measured


def stored_bytes(url: str) -> dict[str, Any]:
    """The database's size per token its models store: SQLite, the file after a checkpoint;
    PostgreSQL, spamsift's tables with their indexes (`Database.data_bytes`: not the catalog,
    which is most of a small database)."""
    size = database_bytes(url) if url.startswith("sqlite") else None
    db = Database(url)
    try:
        size = db.data_bytes() if size is None else size
        with db.transaction(write=False) as conn:
            tokens = int(conn.exec_driver_sql("SELECT sum(n_tokens) FROM models").scalar_one())
    finally:
        db.dispose()
    return {
        "database_bytes": size,
        "stored_tokens": tokens,
        "bytes_per_token": summary([size / max(tokens, 1)], digits=1),
    }


def served_core(server: Server) -> str:
    """The token core the server says it runs (/healthz)."""
    with urllib.request.urlopen(f"{server.base_url}/healthz", timeout=10) as answer:
        return str(json.loads(answer.read())["token_core"])


def big_model(
    folder: Path,
    cores: tuple[CoreChoice, ...],
    bogofilter_path: str | None,
    *,
    quick: bool,
    runs: int,
) -> dict[str, Any]:
    """bench.memory's 1 M-token model on SQLite, served by each core in turn, `runs` times;
    bogofilter with a word list of as many tokens."""
    n_tokens = 20_000 if quick else 1_000_000
    measured: dict[str, list[dict[str, Any]]] = {core: [] for core in cores}
    with fresh_database("sqlite", folder, None) as url:
        build_seconds = build_model(url, n_tokens)
        for run in range(runs):
            for core in cores:
                measured[core].append(
                    measure_served_model(
                        url, folder, n_tokens, tokenizer=core, train_id=f"probe-{core}-{run}"
                    )
                )
    return {
        "tokens": n_tokens,
        "build_seconds": round(build_seconds, 1),
        "runs": measured,
        "bogofilter": bogofilter_big_wordlist(bogofilter_path, folder, n_tokens, runs=runs)
        if bogofilter_path
        else None,
        **{
            core: {
                name: summary([entry[name] for entry in entries], digits=2)
                for name in (
                    "model_bytes_per_token",
                    "first_classify_seconds",
                    "first_classify_cpu_seconds",
                    "load_seconds",
                    "load_cpu_seconds",
                )
            }
            for core, entries in measured.items()
        },
    }


def bogofilter_big_wordlist(
    bogofilter_path: str, folder: Path, n_tokens: int, *, runs: int
) -> dict[str, Any]:
    """bogofilter's first classification with a word list of `n_tokens` tokens (loaded by
    bogoutil, ~1.17 counts a token like bench.memory's model), and its own memory: the max RSS
    of that run minus the max RSS with a one-token word list, per token.

    bogofilter holds no model between runs: each run opens the word list and reads the pages
    of the message's tokens (the page cache holds them, outside its RSS), so every
    classification is a first one.
    """
    bogoutil = str(Path(bogofilter_path).with_name("bogoutil"))
    message = probe_requests()[0][0].body
    lists = {"big": folder / "bf-big", "tiny": folder / "bf-tiny"}
    contents = {
        "big": "".join(
            f"w{i:07x} {1 + i % 4 if i % 6 == 0 else 0} {1 + i % 5}\n" for i in range(n_tokens)
        ),
        "tiny": "w0000000 1 1\n",
    }
    for name, wordlist in lists.items():
        wordlist.mkdir()
        loaded = subprocess.run(
            [bogoutil, "-C", "-l", str(wordlist / "wordlist.db")],
            input=".MSG_COUNT 5000 5000\n" + contents[name],
            capture_output=True,
            text=True,
        )
        if loaded.returncode != 0:
            raise RuntimeError(f"bogoutil -l failed: {loaded.stderr[-500:]}")
    # The max RSS as GNU time reads it from its own child: a child of this process would
    # count this process's image, which it carries from fork to exec.
    gnu_time = shutil.which("time", path="/usr/bin:/bin")
    seconds: list[float] = []
    rss: dict[str, list[int]] = {"big": [], "tiny": []}
    for _ in range(runs):
        for name, wordlist in lists.items():
            report = folder / f"bf-time-{name}"
            measure = [gnu_time, "-f", "%M", "-o", str(report)] if gnu_time else []
            started = time.perf_counter()
            done = subprocess.run(
                [*measure, bogofilter_path, "-C", "-d", str(wordlist), "-T"],
                input=message,
                capture_output=True,
            )
            if name == "big":
                seconds.append(time.perf_counter() - started)
            if done.returncode not in (0, 1, 2):
                raise RuntimeError(f"bogofilter failed: {done.stderr[-500:]!r}")
            if gnu_time:
                rss[name].append(int(report.read_text().split()[-1]) * 1024)
    return {
        "first_classify_seconds": summary(seconds, digits=4),
        "model_bytes_per_token": summary(
            [(big - tiny) / n_tokens for big, tiny in zip(rss["big"], rss["tiny"], strict=True)],
            digits=2,
        ),
        "max_rss_bytes": rss,
    }


def accuracy_rows(
    folder: Path, cores: tuple[CoreChoice, ...], bogofilter_path: str | None, *, quick: bool
) -> dict[str, Any]:
    """bench.accuracy's batch protocol on the SpamAssassin view, tokenized by each core."""
    view = accuracy.VIEWS[0]  # spamassassin, headers and all
    messages = data.spread(data.load(view.corpus), 300 if quick else None)
    (folder / "accuracy").mkdir()
    peer = accuracy.Bogofilter(bogofilter_path, folder / "accuracy") if bogofilter_path else None
    result: dict[str, Any] = {"view": view.name, "messages": len(messages)}
    for core in cores:
        measured = accuracy.run_view(
            view,
            messages,
            accuracy.config_from([]),
            train_mode="all",
            dropped=(),
            bogofilter=peer,
            folder=folder / f"accuracy-{core}",
            protocols=("batch",),
            core=resolve(core),
        )["batch"]
        result[core] = measured["spamsift"]
        result["test_messages"] = measured["test_messages"]
        if "bogofilter" in measured:
            result["bogofilter"] = measured["bogofilter"]
            peer = None  # bogofilter's figure does not depend on our core: measured once
    return result


def peer_of(pick: Callable[[], dict[str, Any] | None]) -> dict[str, Any] | None:
    """The figure `pick` reads, or None where its section failed (or bogofilter is absent)."""
    try:
        return pick()
    except (KeyError, TypeError):
        return None


def target_rows(results: dict[str, Any], cores: tuple[str, ...], kinds: list[str]) -> list[Target]:
    inproc, http, big, acc = (
        results["in_process"],
        results["http"],
        results["model_1m"],
        results["accuracy"],
    )
    tokens = f"{big['tokens']:,}-token" if big else "1 M-token"
    test_messages = f"{acc['test_messages']} test" if acc else "failed"

    def each(pick: Callable[[str], dict[str, Any] | None]) -> dict[str, dict[str, Any] | None]:
        return {core: peer_of(partial(pick, core)) for core in cores}

    def fixed(value: float | None) -> dict[str, Any]:
        return summary([] if value is None else [value], digits=4)

    written = results.get("writes")

    def served(pick: Callable[[], dict[str, Any] | None]) -> dict[str, dict[str, Any] | None]:
        """The writes section's figure: measured with the server's default core (the first)."""
        return {core: peer_of(pick) if core == cores[0] else None for core in cores}

    rows = [
        Target(
            "classify in process, msg/CPU-s",
            "ratio",
            each(lambda c: inproc[c]["classify"]["msgs_per_cpu_s"]),
            peer_of(lambda: inproc["bogofilter"]["classify"]["msgs_per_cpu_s"]),
        ),
        Target(
            "classify over HTTP, batches of 100, --workers 2, msg/s (wall)",
            "ratio",
            each(lambda c: http[c]["classify_batch"]["msgs_per_s"]),
            peer_of(lambda: inproc["bogofilter"]["classify"]["msgs_per_s"]),
        ),
        Target(
            "classify over HTTP, batches of 100, --workers 2, msg/CPU-s (server)",
            "ratio",
            each(lambda c: http[c]["classify_batch"]["msgs_per_cpu_s"]),
            peer_of(lambda: inproc["bogofilter"]["classify"]["msgs_per_cpu_s"]),
        ),
    ]
    for kind in kinds:
        name = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}[kind]
        rows += [
            Target(
                f"train in batches of 500, {name}, msg/CPU-s",
                "ratio",
                each(lambda c, k=kind: inproc[c][f"train_{k}"]["msgs_per_cpu_s"]),
                peer_of(lambda: inproc["bogofilter"]["train"]["msgs_per_cpu_s"]),
            ),
            Target(
                f"train in batches of 500, {name}, msg/s (wall)",
                "ratio",
                each(lambda c, k=kind: inproc[c][f"train_{k}"]["msgs_per_s"]),
                peer_of(lambda: inproc["bogofilter"]["train"]["msgs_per_s"]),
            ),
        ]
    for kind in kinds:
        name = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}[kind]
        rows += [
            Target(
                f"train over HTTP, batches of 500, 2 clients, --workers 2, {name}, msg/s (wall)",
                "ratio",
                served(lambda k=kind: written[k]["train_batch"]["msgs_per_s"]),
                peer_of(lambda: inproc["bogofilter"]["train"]["msgs_per_s"]),
                limit=0.5,
            ),
            Target(
                f"train over HTTP, batches of 500, {name}, msg/CPU-s (spamsift's processes)",
                "ratio",
                served(lambda k=kind: written[k]["train_batch"]["msgs_per_cpu_s"]),
                peer_of(lambda: inproc["bogofilter"]["train"]["msgs_per_cpu_s"]),
                limit=0.5,
            ),
            Target(
                f'single-message train ("mark as spam", 1 client), {name}, server CPU ms',
                "at_most",
                served(lambda k=kind: written[k]["train_single"]["server_cpu_ms_per_request"]),
                limit=1.5,
            ),
            Target(
                f"burst of {BURST_CLICKS} concurrent clicks on one model, {name}, p99 ms",
                "at_most",
                served(lambda k=kind: written[k]["train_burst"]["p99_ms"]),
                limit=50,
            ),
            Target(
                f"database bytes per stored token after training, {name}",
                "report",
                served(lambda k=kind: written[k]["bytes_per_token"]),
            ),
        ]
    rows.append(
        Target(
            "single-message classify over HTTP, 1 client, server CPU ms/request",
            "at_most",
            each(lambda c: http[c]["classify_single"][1]["server_cpu_ms_per_request"]),
            limit=1,
        )
    )
    for clients in (1, 10, 50):
        rows.append(
            Target(
                f"single-message classify over HTTP, {clients} client"
                + ("s" if clients > 1 else "")
                + ", req/s",
                "report",
                each(lambda c, n=clients: http[c]["classify_single"][n]["items_per_s"]),
            )
        )
    rows += [
        Target(
            f"p99 of 50 clients, open loop at {OPEN_LOOP_SHARE:.0%} of the 50-client rate, ms",
            "at_most",
            each(lambda c: http[c]["classify_single_open_loop"]["p99_ms"]),
            limit=20,
        ),
        Target(
            f"p99 of 50 clients, open loop at {FIXED_RATE:g} req/s, ms",
            "at_most",
            each(lambda c: http[c]["classify_single_fixed_rate"]["p99_ms"]),
            limit=20,
        ),
        Target(
            f"{tokens} model: model's own memory, bytes/token",
            "at_most",
            each(lambda c: big[c]["model_bytes_per_token"]),
            peer_of(lambda: big["bogofilter"]["model_bytes_per_token"]),
            limit=60,
        ),
        Target(
            f"{tokens} model: first classification, s (wall)",
            "at_most",
            each(lambda c: big[c]["first_classify_seconds"]),
            peer_of(lambda: big["bogofilter"]["first_classify_seconds"]),
            limit=2,
        ),
        Target(
            f"{tokens} model: first request loading it (train 1), s (wall)",
            "report",
            each(lambda c: big[c]["load_seconds"]),
        ),
        Target(
            f"accuracy, spamassassin batch split ({test_messages}): 1-ROCA % (lower is better)",
            "same",
            each(lambda c: fixed(acc[c]["one_minus_roca_percent"])),
            peer_of(lambda: fixed(acc["bogofilter"]["one_minus_roca_percent"])),
        ),
        Target(
            "accuracy, same split: spam missed at ≤ 0.1 % false positives, % (lower is better)",
            "same",
            each(lambda c: fixed(100 * acc[c]["fnr_at_max_fpr"])),
            peer_of(lambda: fixed(100 * acc["bogofilter"]["fnr_at_max_fpr"])),
        ),
        Target(
            "10,000 mailboxes: not measured in this run (python -m bench.many_models)",
            "report",
            dict.fromkeys(cores),
        ),
    ]
    return rows


def about(results: dict[str, Any]) -> str:
    """Where and how the table was measured, in one sentence above it."""
    where = results["machine"]
    return (
        f"{where['cpu']}, {where['cpus']} CPUs, Python {where['python']}, {where['date']}; "
        f"load average (1 min) {where['load_average_1min_at_start']:.2f} at the start and "
        f"{results['load_average_1min_at_end']:.2f} at the end; "
        f"{results['bogofilter'].get('version') or 'bogofilter absent'}; "
        f"{results['runs']} run(s) per figure; {results['minutes']} minutes."
    )


def _met(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def table_row(target: Target, cores: tuple[str, ...]) -> dict[str, Any]:
    """The row as bench.run prints it (its cells formatted there)."""
    row: dict[str, Any] = {"target": target.name, "goal": target.goal_text}
    for core in cores:
        row[CORE_LABELS[core]] = target.measured.get(core) or "—"
    row["bogofilter"] = target.bogofilter or "—"
    for core in cores:
        row[f"{core} ratio"] = _ratio(target.ratio(core))
    row["met"] = " / ".join(_met(target.met(core)) for core in cores)
    return row


def markdown(targets: list[Target], cores: tuple[str, ...]) -> list[str]:
    """The table as markdown, ready to paste: medians ± spread (max - min, % of the median)."""
    from bench.run import cell  # bench.run imports this module when the part runs

    head = (
        ["target", "goal"]
        + [CORE_LABELS[c] for c in cores]
        + ["bogofilter"]
        + [f"{CORE_LABELS[c]} / bogofilter" for c in cores]
        + ["met (" + ", ".join(cores) + ")"]
    )
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---", "---"] + ["---:"] * (2 * len(cores) + 1) + ["---"]) + "|",
    ]
    for target in targets:
        values = (
            [target.name, target.goal_text]
            + [cell(target.measured.get(c) or "—") for c in cores]
            + [cell(target.bogofilter or "—")]
            + [_ratio(target.ratio(c)) for c in cores]
            + [" / ".join(_met(target.met(c)) for c in cores)]
        )
        lines.append("| " + " | ".join(values) + " |")
    return lines


def verdicts(figures: dict[str, Any]) -> dict[str, Any]:
    """The rows (as the JSON report has them) and the markdown table of targets given by their
    figures: `targets`, each {name, goal, measured: {core: [values] | null}, bogofilter:
    [values] | null, limit}; or `results` as `run` gathers them (a section null where it
    failed) and the database `kinds`. `cores` names the cores."""
    cores = tuple(figures["cores"])
    if "results" in figures:
        targets = target_rows(figures["results"], cores, figures["kinds"])
    else:
        targets = [
            Target(
                given["name"],
                given["goal"],
                {
                    core: None if values is None else summary(values)
                    for core, values in given["measured"].items()
                },
                None if given.get("bogofilter") is None else summary(given["bogofilter"]),
                given.get("limit", 1.0),
            )
            for given in figures["targets"]
        ]
    return {
        "targets": [target.as_dict(cores) for target in targets],
        "markdown": markdown(targets, cores),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="the targets table of figures given")
    parser.add_argument("--verdicts", type=Path, required=True, help="the figures (JSON)")
    parser.add_argument("--json", type=Path, required=True, help="where to write the table")
    args = parser.parse_args()
    table = verdicts(json.loads(args.verdicts.read_text()))
    args.json.write_text(json.dumps(table, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
