"""Repeated timings, reported as the median of several runs with their spread."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def summary(values: Sequence[float], *, digits: int = 4) -> dict[str, Any]:
    """Return the median of `values`, their min and max, and the spread in % of the median."""
    if not values:
        return {"median": None, "min": None, "max": None, "spread_pct": None, "runs": 0}
    median = statistics.median(values)
    spread = (max(values) - min(values)) / abs(median) * 100 if median else 0.0
    return {
        "median": round(median, digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "spread_pct": round(spread, 1),
        "runs": len(values),
    }


def time_runs(work: Callable[[], object], *, runs: int, warmup: int = 1) -> list[float]:
    """Return the wall seconds of `runs` calls of `work`, after `warmup` untimed calls."""
    for _ in range(warmup):
        work()
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        seconds.append(time.perf_counter() - started)
    return seconds


def time_interleaved(
    works: dict[str, Callable[[], object]], *, runs: int, warmup: int = 1
) -> dict[str, tuple[list[float], list[float]]]:
    """Return per name the wall and CPU seconds of `runs` calls, the names taking turns run
    by run, so that a busy machine weighs on each alike. CPU time is this process's.

    The order rotates by one each run, so that no work always runs right after the same other
    one (and so always starts with the caches that one left).
    """
    for work in works.values():
        for _ in range(warmup):
            work()
    timings: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in works}
    names = list(works)
    for run in range(runs):
        shift = run % len(names)
        for name in names[shift:] + names[:shift]:
            work = works[name]
            cpu, started = time.process_time(), time.perf_counter()
            work()
            timings[name][0].append(time.perf_counter() - started)
            timings[name][1].append(time.process_time() - cpu)
    return timings


def rates(count: int, seconds: Sequence[float]) -> list[float]:
    """Return count / s for each timing (items per second)."""
    return [count / s if s > 0 else float("inf") for s in seconds]


def ratio(numerator: dict[str, Any], denominator: dict[str, Any]) -> float | None:
    """Return the ratio of two summaries' medians."""
    if not numerator.get("median") or not denominator.get("median"):
        return None
    return round(numerator["median"] / denominator["median"], 3)


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds process `pid` has used so far (from /proc); None once it has
    ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
