"""CPU per message of tokenizing by hash against by string: `python -m bench.lab.hash_path [runs]
[--json PATH]`.

The 1,178 messages of the SpamAssassin test split, raw bytes in; each variant tokenizes all of
them once per run, the variants taking turns run by run; CPU time of the process
(`time.process_time`); median and min-max over the runs, in µs per message:

- string path: `tokenize_raw` + `token_digest` (what `prepare` did before hashes), with the
  compiled and with the Python core;
- hash_raw, reference: the string tokenizer's counts, each text hashed, digest (the Python
  core's `hash_raw`; run over the compiled string core as well, which is what `hash_raw`
  cost before the compiled core counted by hash);
- hash_raw, compiled: the compiled core counting by hash;
- parse_message alone: the MIME and HTML parse every variant starts with.

Prints a Markdown table, and the same numbers as JSON (to PATH with --json, else stdout),
with the machine's load average when the runs ended.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial

from app.text import (
    HashedTokens,
    TokenizerLimits,
    core,
    hash_raw,
    parse_message,
    token_digest,
    tokenize_raw,
)
from app.text.core import TokenCore
from bench import data

LIMITS = TokenizerLimits()


def string_path(raw: bytes, core: TokenCore) -> str:
    return token_digest(tokenize_raw(raw, limits=LIMITS, core=core).token_counts, core=core)


def reference_hash_raw(raw: bytes, core: TokenCore) -> HashedTokens:
    """The Python core's hash_raw over `core`'s string tokens."""
    tokenized = tokenize_raw(raw, limits=LIMITS, core=core)
    return HashedTokens.of(tokenized.token_counts, tokenized.defects, core=core)


def parse_only(raw: bytes, core: TokenCore) -> object:
    return parse_message(raw, limits=LIMITS, core=core)


def hashed(raw: bytes, core: TokenCore) -> HashedTokens:
    return hash_raw(raw, limits=LIMITS, core=core)


def variants() -> dict[str, Callable[[bytes], object]]:
    """name -> the work on one message, with its token core."""
    python = core.PYTHON
    found: dict[str, Callable[[bytes], object]] = {
        "parse_message alone": partial(parse_only, core=python),
        "string path (tokenize_raw + token_digest), Python core": partial(string_path, core=python),
        "hash_raw, reference (Python core)": partial(hashed, core=python),
    }
    compiled = core.COMPILED
    if compiled is not None:
        found |= {
            "string path (tokenize_raw + token_digest), compiled core": partial(
                string_path, core=compiled
            ),
            "hash_raw, reference over the compiled string core (before)": partial(
                reference_hash_raw, core=compiled
            ),
            "hash_raw, compiled core (now)": partial(hashed, core=compiled),
        }
    return found


def measure(runs: int) -> dict[str, object]:
    raws = [m.raw or b"" for m in data.split("spamassassin").test]
    work = variants()
    cpu: dict[str, list[float]] = {name: [] for name in work}
    for _ in range(runs):
        for name, function in work.items():
            started = time.process_time()
            for raw in raws:
                function(raw)
            cpu[name].append(time.process_time() - started)
    per = 1e6 / len(raws)
    return {
        "load_average": [round(load, 2) for load in os.getloadavg()],  # 1, 5, 15 min, at the end
        "messages": len(raws),
        "runs": runs,
        "unit": "CPU microseconds per message",
        "variants": {
            name: {
                "median": round(statistics.median(values) * per, 1),
                "min": round(min(values) * per, 1),
                "max": round(max(values) * per, 1),
            }
            for name, values in cpu.items()
        },
    }


def main() -> None:
    arguments = sys.argv[1:]
    json_path = None
    if "--json" in arguments:
        at = arguments.index("--json")
        json_path = arguments[at + 1]
        del arguments[at : at + 2]
    runs = int(arguments[0]) if arguments else 5
    result = measure(runs)
    print(
        f"{result['messages']} messages (SpamAssassin test split), CPU µs per message, "
        f"median of {runs} runs (min-max); load average {result['load_average']}"
    )
    print("| variant | µs per message |")
    print("|---|---:|")
    variants_measured = result["variants"]
    assert isinstance(variants_measured, dict)
    for name, values in variants_measured.items():
        print(f"| {name} | {values['median']:.0f} ({values['min']:.0f}-{values['max']:.0f}) |")
    text = json.dumps(result, indent=2)
    if json_path is None:
        print(text)
    else:
        with open(json_path, "w", encoding="utf-8") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
