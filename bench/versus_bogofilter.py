"""4. Side by side with bogofilter on the SpamAssassin split of `spamsift evaluate`.

Training: every training message (bogofilter: `-s -b` and `-n -b`, one message per file,
file names on stdin, into an empty word list). Classifying: every test message in one bulk
run (`-T -b`). spamsift: in process (`train_batch` in batches of 500 into a fresh database,
`classify_batch` in batches of 1000) and over HTTP against `spamsift serve --workers 2`
(batches of 500 to train and of 100 to classify, from 2 concurrent clients). Wall time
each, several runs, ratio spamsift / bogofilter in messages per second.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from app.config import Settings
from app.service.classification import classify_batch, prepare_messages
from app.service.corpus import LabelledMessage
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from app.text.core import COMPILED, CoreChoice
from bench import data
from bench.databases import fresh_database
from bench.server import Request, Server, json_request, run_load, serve
from bench.serving import classify_batch_requests, train_batch_requests
from bench.timing import ratio, summary

TRAIN_BATCH = 500
CLASSIFY_BATCH = 1000


def find_bogofilter(install: bool) -> tuple[str | None, str]:
    """Return bogofilter's path (installing the Debian package if allowed) and how."""
    found = shutil.which("bogofilter")
    if found:
        return found, "found on PATH"
    if not install:
        return None, "bogofilter is not installed (apt-get install -y bogofilter)"
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None, "bogofilter is not installed and apt-get is not usable here"
    done = subprocess.run(
        ["apt-get", "install", "-y", "-q", "bogofilter"], capture_output=True, text=True
    )
    found = shutil.which("bogofilter")
    if found:
        return found, "installed with apt-get"
    return None, f"apt-get install bogofilter failed: {done.stderr.strip()[-300:]}"


def bogofilter_version(path: str) -> str:
    done = subprocess.run([path, "-V"], capture_output=True, text=True)
    return (done.stdout or done.stderr).splitlines()[0].strip()


def write_files(folder: Path, messages: list[LabelledMessage]) -> list[Path]:
    folder.mkdir(parents=True)
    paths = []
    for index, message in enumerate(messages):
        path = folder / f"{index:05d}"
        path.write_bytes(message.raw or b"")
        paths.append(path)
    return paths


@dataclass
class Timings:
    """Wall seconds and CPU seconds of the runs of one bulk operation."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def rates(self, count: int) -> dict[str, Any]:
        return {
            "msgs_per_s": summary([count / s for s in self.wall], digits=1),
            "msgs_per_cpu_s": summary([count / s for s in self.cpu], digits=1)
            if self.cpu
            else None,
        }


class Bogofilter:
    """bogofilter in bulk mode on message files, one empty word list per training run."""

    def __init__(self, path: str, split: data.Split, folder: Path) -> None:
        self.path = path
        self.folder = folder
        self.spam = write_files(folder / "spam", [m for m in split.train if m.label == "spam"])
        self.ham = write_files(folder / "ham", [m for m in split.train if m.label == "ham"])
        self.test = write_files(folder / "test", split.test)
        self.wordlist: Path | None = None
        self.verdicts: dict[str, int] = {}

    def _bulk(self, arguments: list[str], files: list[Path]) -> str:
        listing = "".join(f"{p}\n" for p in files)
        done = subprocess.run(
            [self.path, "-C", "-d", str(self.wordlist), *arguments, "-b"],
            input=listing,
            capture_output=True,
            text=True,
        )
        if done.returncode not in (0, 1, 2):  # 0 spam, 1 ham, 2 unsure (of the last message)
            raise RuntimeError(f"bogofilter failed ({done.returncode}): {done.stderr[-500:]}")
        return done.stdout

    def train(self, run: int, timings: Timings) -> None:
        self.wordlist = self.folder / f"wordlist-{run}"
        self.wordlist.mkdir()
        with timed(timings, children=True):
            self._bulk(["-s"], self.spam)
            self._bulk(["-n"], self.ham)

    def classify(self, timings: Timings) -> None:
        with timed(timings, children=True):
            output = self._bulk(["-T"], self.test)
        lines = output.splitlines()
        if len(lines) != len(self.test):
            raise RuntimeError(f"bogofilter classified {len(lines)} of {len(self.test)} messages")
        self.verdicts = {}
        for line in lines:
            code = line.split()[1]
            self.verdicts[code] = self.verdicts.get(code, 0) + 1


@contextmanager
def timed(timings: Timings, *, children: bool = False, cpu: bool = True) -> Iterator[None]:
    """Add the block's wall time, and its CPU time (this process's, or its children's; a pool's
    living workers count in neither, so then `cpu=False`)."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    before = resource.getrusage(who)
    started = time.perf_counter()
    yield
    timings.wall.append(time.perf_counter() - started)
    after = resource.getrusage(who)
    if cpu:
        timings.cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)


def in_process_run(
    split: data.Split,
    folder: Path,
    kind: str,
    postgres_url: str | None,
    train: Timings,
    classify: dict[int, Timings],
    *,
    train_processes: int = 1,
    token_core: CoreChoice = "auto",
) -> None:
    """Train the split into a fresh database, then classify the test split (warm model)."""
    items = [(Message(raw=m.raw, text=m.text, message_id=m.id), m.label) for m in split.train]
    test = [Message(raw=m.raw, text=m.text) for m in split.test]
    with fresh_database(kind, folder, postgres_url) as url:
        db = Database(url)
        upgrade_schema(db)
        runtime = Runtime(bench_settings(url, token_core), db)
        try:
            if train_processes > 1:  # warm: the pool started (it serves the whole process)
                prepare_messages(runtime, [m for m, _ in items[:100]], "train", processes=2)
            with timed(train, cpu=train_processes == 1):
                for start in range(0, len(items), TRAIN_BATCH):
                    train_batch(
                        runtime,
                        model_name="default",
                        items=items[start : start + TRAIN_BATCH],
                        processes=train_processes,
                    )
            for processes, timings in classify.items():
                classify_all(runtime, test, processes)  # warm: model loaded, pool started
                with timed(timings, cpu=processes == 1):
                    classify_all(runtime, test, processes)
        finally:
            runtime.close()


def bench_settings(url: str, token_core: CoreChoice = "auto") -> Settings:
    """Settings for in-process runs: every message tokenized in full (no time budget cuts)."""
    return Settings(  # type: ignore[call-arg]
        database_url=url,
        tokenizer=token_core,
        classify_time_budget_seconds=600,
        train_time_budget_seconds=600,
        _env_file=None,
    )


def classify_all(runtime: Runtime, messages: list[Message], processes: int = 1) -> None:
    for start in range(0, len(messages), CLASSIFY_BATCH):
        classify_batch(
            runtime,
            model_name="default",
            messages=messages[start : start + CLASSIFY_BATCH],
            processes=processes,
        )


def http_runs(split: data.Split, folder: Path, runs: int) -> tuple[Timings, Timings]:
    """Against `spamsift serve --workers 2` on SQLite: each run trains a new model.

    CPU time is the server processes' (the load generator's is left out).
    """
    with (
        fresh_database("sqlite", folder, None) as url,
        serve(url, workers=2, folder=folder) as server,
    ):
        train, classify, _ = http_batch_runs(server, split, train_runs=runs, classify_runs=runs)
    return train, classify


def http_batch_runs(
    server: Server,
    split: data.Split,
    *,
    train_runs: int,
    classify_runs: int,
    train_clients: int = 2,
) -> tuple[Timings, Timings, str]:
    """Train the split in batches into `train_runs` new models (by default two clients, one
    batch per worker), then classify the test split in batches of 100 with the last one,
    `classify_runs` times after a warm-up; return the timings and the last model's name."""
    train, classify = Timings(), Timings()
    name = ""
    for run in range(train_runs):
        name = f"bench-{run}"
        created = run_load(server, [json_request("/v1/models", {"name": name})], clients=1)
        if created.errors:
            raise RuntimeError(f"could not create model {name}: {created.statuses}")
        requests = [for_model(r, name) for r in train_batch_requests(split.train, TRAIN_BATCH)]
        cpu = server.cpu_seconds()
        trained = run_load(server, requests, clients=train_clients)
        train.cpu.append(server.cpu_seconds() - cpu)
        if trained.errors:
            raise RuntimeError(f"training over HTTP failed: {trained.statuses}")
        train.wall.append(trained.seconds)
    batches = [for_model(r, name) for r in classify_batch_requests(split.test, 100)]
    warm_until_steady(server, batches)
    for _ in range(classify_runs):
        cpu = server.cpu_seconds()
        classified = run_load(server, batches, clients=2)
        classify.cpu.append(server.cpu_seconds() - cpu)
        if classified.errors:
            raise RuntimeError(f"classifying over HTTP failed: {classified.statuses}")
        classify.wall.append(classified.seconds)
    return train, classify, name


def warm_until_steady(server: Server, batches: list[Request], *, passes: int = 5) -> None:
    """Classify `batches` (2 clients) until a pass costs the server no more CPU than the pass
    before (within 15 %), at most `passes` times: a worker that did not hold the model after
    training (both training connections may reach one worker) loads it in the background
    after 50 messages, taking longer than one pass; a timed run then paid that one load."""
    before: float | None = None
    for _ in range(passes):
        done = run_load(server, batches, clients=2)
        if done.errors:
            raise RuntimeError(f"classifying over HTTP failed: {done.statuses}")
        if before is not None and done.server_cpu_seconds <= before * 1.15:
            return
        before = done.server_cpu_seconds


def for_model(request: Request, name: str) -> Request:
    """The same request (body and content type), to the model `name` instead of `default`."""
    return replace(request, path=request.path.replace("/default/", f"/{name}/"))


def run(quick: bool, postgres_url: str | None) -> dict[str, Any]:
    runs = 1 if quick else 3
    split = data.split(
        "spamassassin", train_limit=60 if quick else None, test_limit=30 if quick else None
    )
    n_train, n_test = len(split.train), len(split.test)
    bogofilter, how = find_bogofilter(install=not quick)
    results: dict[str, Any] = {
        "corpus": "spamassassin",
        "train_messages": n_train,
        "test_messages": n_test,
        "bogofilter": {"status": how},
    }
    rows: list[dict[str, Any]] = []
    kinds = ["sqlite"] + (["postgresql"] if postgres_url else [])
    with tempfile.TemporaryDirectory(prefix="spamsift-bench-") as tmp:
        folder = Path(tmp)
        peer = Bogofilter(bogofilter, split, folder / "bf") if bogofilter else None
        peer_timings = (Timings(), Timings())
        ours = {kind: (Timings(), {1: Timings(), 2: Timings()}) for kind in kinds}
        ours_parallel_train = {kind: Timings() for kind in kinds}
        # The pure-Python token core forced, where the compiled one is the default.
        ours_python = (Timings(), {1: Timings()}) if COMPILED is not None else None
        # Runs alternate between the systems, so that each sees the same machine load.
        for run in range(runs):
            if peer is not None:
                peer.train(run, peer_timings[0])
                peer.classify(peer_timings[1])
            for kind in kinds:
                in_process_run(split, folder, kind, postgres_url, *ours[kind])
                in_process_run(
                    split,
                    folder,
                    kind,
                    postgres_url,
                    ours_parallel_train[kind],
                    {},
                    train_processes=2,
                )
            if ours_python is not None:
                in_process_run(split, folder, "sqlite", None, *ours_python, token_core="python")
        peer_train = peer_classify = None
        if peer is not None:
            peer_train = peer_timings[0].rates(n_train)
            peer_classify = peer_timings[1].rates(n_test)
            results["bogofilter"].update(
                version=bogofilter_version(peer.path),
                train=peer_train,
                classify=peer_classify,
                verdicts=peer.verdicts,
            )
            rows.append(_row("bogofilter (C, bulk mode)", peer_train, peer_classify, None, None))
        for kind in kinds:
            train_timings, classify_timings = ours[kind]
            ours_train = train_timings.rates(n_train)
            parallel_train = ours_parallel_train[kind].rates(n_train)
            for processes, timings in classify_timings.items():
                ours_train = train_timings.rates(n_train) if processes == 1 else parallel_train
                ours_classify = timings.rates(n_test)
                results[f"spamsift_in_process_{kind}_{processes}_process"] = {
                    "train": ours_train,
                    "classify": ours_classify,
                    **_ratios(ours_train, ours_classify, peer_train, peer_classify),
                }
                rows.append(
                    _row(
                        f"spamsift in process, {kind}, {processes} process"
                        + ("es" if processes > 1 else "")
                        + " tokenizing",
                        ours_train,
                        ours_classify,
                        peer_train,
                        peer_classify,
                    )
                )
        if ours_python is not None:
            python_train = ours_python[0].rates(n_train)
            python_classify = ours_python[1][1].rates(n_test)
            results["spamsift_in_process_sqlite_1_process_python_core"] = {
                "train": python_train,
                "classify": python_classify,
                **_ratios(python_train, python_classify, peer_train, peer_classify),
            }
            rows.append(
                _row(
                    "spamsift in process, sqlite, 1 process tokenizing, pure-Python core forced",
                    python_train,
                    python_classify,
                    peer_train,
                    peer_classify,
                )
            )
        http_train_timings, http_classify_timings = http_runs(split, folder, runs)
        http_train = http_train_timings.rates(n_train)
        http_classify = http_classify_timings.rates(n_test)
        results["spamsift_http_2_workers_sqlite"] = {
            "train": http_train,
            "classify": http_classify,
            **_ratios(http_train, http_classify, peer_train, peer_classify),
        }
        rows.append(
            _row(
                "spamsift HTTP --workers 2, sqlite",
                http_train,
                http_classify,
                peer_train,
                peer_classify,
            )
        )
    results["table"] = rows
    results["notes"] = [
        f"{n_train} training and {n_test} test messages of the spamassassin split; "
        "wall time of the whole bulk operation",
        "bogofilter: " + (results["bogofilter"].get("version") or how),
    ]
    return results


def _ratios(
    train: dict[str, Any],
    classify: dict[str, Any],
    peer_train: dict[str, Any] | None,
    peer_classify: dict[str, Any] | None,
) -> dict[str, Any]:
    """spamsift / bogofilter, by wall time and by CPU time where both have it."""
    result: dict[str, Any] = {}
    for name, ours, theirs in (("train", train, peer_train), ("classify", classify, peer_classify)):
        if theirs is None:
            continue
        result[f"{name}_ratio"] = ratio(ours["msgs_per_s"], theirs["msgs_per_s"])
        if ours["msgs_per_cpu_s"] and theirs["msgs_per_cpu_s"]:
            result[f"{name}_ratio_cpu"] = ratio(ours["msgs_per_cpu_s"], theirs["msgs_per_cpu_s"])
    return result


def _row(
    who: str,
    train: dict[str, Any],
    classify: dict[str, Any],
    peer_train: dict[str, Any] | None,
    peer_classify: dict[str, Any] | None,
) -> dict[str, Any]:
    ratios = _ratios(train, classify, peer_train, peer_classify)
    return {
        "system": who,
        "train msg/s": train["msgs_per_s"],
        "train msg/CPU-s": train["msgs_per_cpu_s"] or "—",
        "classify msg/s": classify["msgs_per_s"],
        "classify msg/CPU-s": classify["msgs_per_cpu_s"] or "—",
        "train ratio": ratios.get("train_ratio", "—"),
        "classify ratio": ratios.get("classify_ratio", "—"),
        "classify ratio CPU": ratios.get("classify_ratio_cpu", "—"),
    }
