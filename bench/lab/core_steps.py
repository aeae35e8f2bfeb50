"""What each loop of the compiled token core buys: `python -m bench.lab.core_steps [runs]`.

CPU seconds of `tokenize_raw` over every SpamAssassin message, the Python core with one more
compiled function at each step (the variants take turns run by run); median of the runs.
The lines a message key hashes (`token_lines`) are not part of `tokenize_raw`:
`python -m bench.lab.hot_path` measures them, and the other steps after tokenizing.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time

from app.text import core, tokenize_raw
from bench import data


def main() -> None:
    compiled = core.COMPILED
    if compiled is None:
        sys.exit("the compiled token core is not built")
    python = core.PYTHON
    raws = [m.raw or b"" for m in data.load("spamassassin")]
    size = sum(map(len, raws))
    steps = {
        "python": python,
        "+ header block split": dataclasses.replace(
            python, split_header_block=compiled.split_header_block
        ),
        "+ header words": dataclasses.replace(
            python,
            split_header_block=compiled.split_header_block,
            header_tokens=compiled.header_tokens,
        ),
        "+ body words": dataclasses.replace(
            compiled,
            decode_header_values=python.decode_header_values,
            content_fields=python.content_fields,
            pair_tokens=python.pair_tokens,
            count_prefixed=python.count_prefixed,
        ),
        "+ header values, content fields": dataclasses.replace(
            compiled, pair_tokens=python.pair_tokens, count_prefixed=python.count_prefixed
        ),
        "+ word pairs, links counted (all)": compiled,
    }
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(runs):
        for name, variant in steps.items():
            started = time.process_time()
            for raw in raws:
                tokenize_raw(raw, core=variant)
            cpu[name].append(time.process_time() - started)
    base = statistics.median(cpu["python"])
    print(f"{len(raws)} messages, {size / 1e6:.1f} MB; CPU seconds, median of {runs}")
    print("| core | MB per CPU-s | CPU s (min-max) | vs Python |")
    for name, values in cpu.items():
        median = statistics.median(values)
        print(
            f"| {name} | {size / 1e6 / median:.2f} | {min(values):.2f}-{max(values):.2f} "
            f"| {base / median:.2f} x |"
        )


if __name__ == "__main__":
    main()
