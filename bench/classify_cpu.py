"""Classifying raw mail in process, by CPU time, beside bogofilter: the shortest run that gives
the classify ratio.

The SpamAssassin split of `spamsift evaluate` is trained once (spamsift into a fresh SQLite
database, bogofilter into an empty word list); then the test split is classified `--runs`
times by each variant in turn: spamsift's `classify_batch` (batches of 1,000, the model held
and warm) with the compiled token core and with the pure-Python core forced, and bogofilter
in one bulk run (`-T -b`). CPU time: this process's for spamsift, bogofilter's from its
rusage. Medians in messages per CPU second, their spread, and the ratios to bogofilter; and
per message, the CPU time of tokenizing alone (`prepare_messages`: parse, tokens, hashes,
digest, message id) beside the whole classification, the rest being the lookup, scoring and
the batch's bookkeeping.

    python -m bench.classify_cpu --runs 7
    python -m bench.classify_cpu --runs 1 --profile 25   # and where classify_batch's time goes

The load average is printed at the start and the end: on a shared machine, compare within
one run.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from app.service.classification import prepare_messages
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from app.text.core import COMPILED, CoreChoice, resolve
from bench import data
from bench.databases import fresh_database
from bench.timing import ratio
from bench.versus_bogofilter import (
    CLASSIFY_BATCH,
    TRAIN_BATCH,
    Bogofilter,
    Timings,
    bench_settings,
    classify_all,
    timed,
)


def cores() -> list[CoreChoice]:
    """The compiled core where it is built, and the pure-Python one."""
    return ["python"] if COMPILED is None else ["compiled", "python"]


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def run(runs: int, profile_lines: int) -> dict[str, Any]:
    split = data.split("spamassassin")
    items = [(Message(raw=m.raw, text=m.text, message_id=m.id), m.label) for m in split.train]
    test = [Message(raw=m.raw, text=m.text) for m in split.test]
    path = shutil.which("bogofilter")
    print(f"load average at start: {load()}; {len(items)} training, {len(test)} test messages")
    variants = cores()
    timings: dict[str, Timings] = {core: Timings() for core in variants}
    timings["bogofilter"] = Timings()
    preparing: dict[str, Timings] = {core: Timings() for core in variants}
    with tempfile.TemporaryDirectory(prefix="classify-cpu-") as temporary:
        folder = Path(temporary)
        bogofilter = Bogofilter(path, split, folder) if path else None
        if bogofilter is not None:
            bogofilter.train(0, Timings())
        with fresh_database("sqlite", folder, None) as url:
            db = Database(url)
            upgrade_schema(db)
            runtime = Runtime(bench_settings(url, variants[0]), db)
            try:
                for start in range(0, len(items), TRAIN_BATCH):
                    train_batch(
                        runtime, model_name="default", items=items[start : start + TRAIN_BATCH]
                    )
                for core in variants:  # warm: the model held, each core's first use done
                    runtime.core = resolve(core)  # this run's core, on the one runtime
                    classify_all(runtime, test)
                for _ in range(runs):  # the variants take turns, so a change of load hits all
                    for core in variants:
                        runtime.core = resolve(core)
                        with timed(timings[core]):
                            classify_all(runtime, test)
                        with timed(preparing[core]):
                            for start in range(0, len(test), CLASSIFY_BATCH):
                                prepare_messages(
                                    runtime, test[start : start + CLASSIFY_BATCH], "classify"
                                )
                    if bogofilter is not None:
                        bogofilter.classify(timings["bogofilter"])
                if profile_lines:
                    runtime.core = resolve(variants[0])
                    profiler = cProfile.Profile()
                    profiler.runcall(classify_all, runtime, test)
                    stats = pstats.Stats(profiler).strip_dirs().sort_stats("cumulative")
                    print(f"cProfile of classify_batch, {variants[0]} core, {len(test)} messages:")
                    stats.print_stats(profile_lines)
                    stats.sort_stats("tottime").print_stats(profile_lines)
            finally:
                runtime.close()
    results: dict[str, Any] = {
        name: timing.rates(len(test))["msgs_per_cpu_s"] for name, timing in timings.items()
    }
    print(f"load average at end: {load()}; {runs} run(s) each, messages per CPU second:")
    for name in [*variants, "bogofilter"]:
        rate = results[name]
        if rate is None:
            print(f"  {name:10s} not measured (bogofilter is not installed)")
            continue
        versus = ratio(rate, results["bogofilter"]) if results["bogofilter"] else None
        print(
            f"  {name:10s} {rate['median']:8.1f} msg/CPU-s (spread {rate['spread_pct']} %)"
            + ("" if versus is None or name == "bogofilter" else f"  {versus:.3f} x bogofilter")
        )
    print("CPU µs per message (medians): tokenizing alone, the whole classification")
    for core in variants:
        whole = statistics.median(timings[core].cpu) / len(test) * 1e6
        tokenizing = statistics.median(preparing[core].cpu) / len(test) * 1e6
        results[f"{core}_us_per_message"] = {"tokenizing": tokenizing, "whole": whole}
        print(f"  {core:10s} {tokenizing:6.0f} of {whole:6.0f} (the rest {whole - tokenizing:.0f})")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each variant (default 5)")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="LINES", help="also profile one classify run"
    )
    arguments = parser.parse_args()
    run(arguments.runs, arguments.profile)


if __name__ == "__main__":
    main()
