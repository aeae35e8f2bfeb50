"""2. Tokenizing: MB/s and messages/s per shared corpus, and linear cost on hostile input.

Raw e-mail goes through `tokenize_raw` (MIME, charsets, HTML, headers), SMS through
`tokenize_text`. The linearity part times 1, 2, 4, 8 MiB of pathological input; a ratio near
2.0 per doubling is linear cost (the tokenizer scans at most `max_scan_bytes` of decoded
text, so the pre-pass over the whole message is what grows).
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable
from functools import partial
from typing import Any

from app.service.corpus import LabelledMessage
from app.text import tokenize_raw, tokenize_text
from app.text.core import COMPILED, CoreChoice, resolve
from bench import data
from bench.timing import rates, ratio, summary, time_interleaved, time_runs

MIB = 1024 * 1024
# The compiled token core first where it is built (the default), then the Python reference.
TOKEN_CORES: list[CoreChoice] = ["compiled", "python"] if COMPILED is not None else ["python"]


def tokenize_all(messages: list[LabelledMessage], token_core: CoreChoice = "auto") -> None:
    core = resolve(token_core)
    for message in messages:
        if message.raw is not None:
            tokenize_raw(message.raw, core=core)
        else:
            tokenize_text(message.text or "", core=core)


def long_words(size: int) -> bytes:
    """One text/plain message of words 50 000 letters long."""
    word = b"x" * 50_000 + b" "
    body = word * (size // len(word) + 1)
    return b"Subject: long words\n\n" + body[:size]


def deep_html(size: int) -> bytes:
    """One text/html message of nested tags, never closed, with a little text between."""
    unit = b"<div><b><span class='a'>word "
    body = unit * (size // len(unit) + 1)
    return b"Subject: deep html\nContent-Type: text/html\n\n<html><body>" + body[:size]


def base64_body(size: int) -> bytes:
    """One message whose text/plain part is base64 of size bytes (76-column lines)."""
    raw = base64.encodebytes(b"spam and eggs " * (size * 3 // 4 // 14 + 1))[:size]
    return b"Subject: base64\nContent-Transfer-Encoding: base64\n\n" + raw


PATHOLOGICAL: dict[str, Callable[[int], bytes]] = {
    "long words": long_words,
    "deep html": deep_html,
    "base64": base64_body,
}


def run(quick: bool) -> dict[str, Any]:
    runs = 3 if quick else 5
    results: dict[str, Any] = {"corpora": {}, "linearity": {}}
    rows: list[dict[str, Any]] = []
    for name in data.CORPUS_NAMES:
        if not data.corpus_path(name).exists():
            results["corpora"][name] = {"skipped": f"{data.corpus_path(name)} not found"}
            continue
        messages = data.load(name, limit=150 if quick else None)
        size = sum(data.size_bytes(m) for m in messages)
        # Each token core in turn, run by run (the compiled one where it is built).
        works = {core: partial(tokenize_all, messages, core) for core in TOKEN_CORES}
        timed = time_interleaved(works, runs=runs)
        for core, (seconds, cpu) in timed.items():
            mb_per_s = summary([size / 1e6 / s for s in seconds], digits=2)
            msgs_per_s = summary(rates(len(messages), seconds), digits=1)
            key = name if core == TOKEN_CORES[0] else f"{name} ({core} core)"
            results["corpora"][key] = {
                "messages": len(messages),
                "bytes": size,
                "token_core": core,
                "mb_per_s": mb_per_s,
                "msgs_per_s": msgs_per_s,
                "mb_per_cpu_s": summary([size / 1e6 / s for s in cpu], digits=2),
                "msgs_per_cpu_s": summary(rates(len(messages), cpu), digits=1),
            }
            rows.append(
                {
                    "corpus": name,
                    "core": core,
                    "messages": len(messages),
                    "MB": round(size / 1e6, 2),
                    "MB/s": mb_per_s,
                    "msg/s": msgs_per_s,
                    "MB/CPU-s": results["corpora"][key]["mb_per_cpu_s"],
                    "msg/CPU-s": results["corpora"][key]["msgs_per_cpu_s"],
                }
            )
        if len(timed) == 2:
            compiled, python = (summary([size / s for s in timed[c][0]]) for c in TOKEN_CORES)
            results["corpora"][name]["compiled_over_python"] = ratio(compiled, python)
    sizes = [MIB // 16, MIB // 8, MIB // 4, MIB // 2] if quick else [MIB, 2 * MIB, 4 * MIB, 8 * MIB]
    linear_rows: list[dict[str, Any]] = []
    auto = resolve("auto")
    for kind, make in PATHOLOGICAL.items():
        timings = []
        for size in sizes:
            message = make(size)
            timings.append(
                summary(time_runs(lambda m=message: tokenize_raw(m, core=auto), runs=runs))
            )
        doubling = [
            round(later["median"] / earlier["median"], 2)
            for earlier, later in itertools.pairwise(timings)
        ]
        results["linearity"][kind] = {
            "sizes_bytes": sizes,
            "seconds": timings,
            "ratio_per_doubling": doubling,
        }
        linear_rows.append(
            {
                "input": kind,
                **{f"{s // 1024} KiB s": t for s, t in zip(sizes, timings, strict=True)},
                "ratio per doubling": " ".join(f"{d:.2f}" for d in doubling),
            }
        )
    results["table"] = rows
    results["linearity_table"] = linear_rows
    results["notes"] = [
        "one thread; raw mail via tokenize_raw, SMS via tokenize_text; "
        "linearity: a ratio near 2.0 per doubling of the input is linear cost"
    ]
    return results
