"""A token index's lookup by hash, through buckets or by binary search.

    python -m bench.lab.bucket_lookup [runs]

CPU microseconds per batch, in one process. Every token of the SpamAssassin split's
training messages is interned into a token index (about 600,000 tokens, nearly all merged
into its large sorted array); its test messages are tokenized. For batches of 1, 10, 100 and
1,000 messages, `TokenIndex.lookup_hashes` of the batch's hashes runs with the compiled
lookup through buckets (app/bayes/_index.pyx) and with numpy's binary search (what runs
without a C compiler), the two taking turns run by run and checked to give the same ids;
medians of `runs` (default 5). Each lookup runs twice: straight after the one before (the
index's pages in the CPU's caches), and after 32 MB of other memory was written (a request's
other work in between, as a server's single classifications have it).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

from app.bayes import tokens
from app.bayes.counts import CountTable
from app.text import core, hash_raw
from bench import data

BATCHES = (1, 10, 100, 1000)
_OTHER_WORK = np.zeros(32 << 20, dtype=np.uint8)


def cooled() -> None:
    """Write 32 MB elsewhere: what the CPU's caches held of the index is gone."""
    _OTHER_WORK[::64] += 1


def cpu_us(work: Callable[[], object], repeats: int, *, cool: bool) -> float:
    """Median CPU microseconds of `work` over `repeats` calls, each after `cooled()` if
    `cool` (the cooling not timed)."""
    times = []
    for _ in range(repeats):
        if cool:
            cooled()
        started = time.process_time_ns()
        work()
        times.append((time.process_time_ns() - started) / 1000)
    return statistics.median(times)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    compiled = tokens._bucket_ids
    if compiled is None:
        raise SystemExit("the compiled lookup (app/bayes/_index.pyx) is not built here")
    token_core = core.COMPILED or core.PYTHON
    split = data.split("spamassassin")
    table = CountTable(["ham", "spam"])
    for message in split.train:
        table.intern(list(hash_raw(message.raw or b"", core=token_core).token_counts))
    index = table.tokens
    index.merge()
    probes = [hash_raw(message.raw or b"", core=token_core).hashes for message in split.test]

    def lookup(hashes: np.ndarray, *, buckets: bool) -> np.ndarray:
        tokens._bucket_ids = compiled if buckets else None
        try:
            return index.lookup_hashes(hashes, lambda at: [])
        finally:
            tokens._bucket_ids = compiled

    figures: dict[str, dict[str, list[float]]] = {}
    for size in BATCHES:
        hashes = np.concatenate(probes[:size]).astype(np.int64)
        if not np.array_equal(lookup(hashes, buckets=True), lookup(hashes, buckets=False)):
            raise AssertionError("the ids differ")
        repeats = max(3, 300 // size)
        for cool in (False, True):
            name = f"a batch of {size} ({hashes.size} hashes){', caches cooled' if cool else ''}"
            figure = figures.setdefault(name, {"binary search": [], "buckets": []})
            for _ in range(runs):
                for way, buckets in (("binary search", False), ("buckets", True)):
                    figure[way].append(
                        cpu_us(lambda h=hashes, b=buckets: lookup(h, buckets=b), repeats, cool=cool)
                    )
    print(
        f"index of {len(index)} tokens ({index._hashes.size} in the large array); "
        f"CPU us per lookup, median of {runs} runs (min-max)"
    )
    print("| batch | binary search | buckets | buckets / binary search |")
    print("|---|---:|---:|---:|")
    summary: dict[str, dict[str, float]] = {}
    for name, figure in figures.items():
        medians = {way: statistics.median(values) for way, values in figure.items()}
        summary[name] = medians
        cells = [
            f"{medians[way]:.1f} ({min(figure[way]):.1f}-{max(figure[way]):.1f})"
            for way in ("binary search", "buckets")
        ]
        ratio = medians["buckets"] / medians["binary search"]
        print(f"| {name} | {cells[0]} | {cells[1]} | {ratio:.2f} |")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
