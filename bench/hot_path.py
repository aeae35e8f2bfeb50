"""What each step of the tokenizer's hot path costs: `python -m bench.hot_path [runs]`.

CPU milliseconds per message over the SpamAssassin test split, for the steps a profile of
classify found hot besides the word loops: each step as it was before this work (commit
980aa9f; its code is kept below as the baseline, the same code the tests keep as their
oracle) against the step that runs now, with the Python and with the compiled core. The
variants take turns run by run; medians. The last rows are the whole of `prepare`
(tokenize, Message-ID, key) with each core.
"""

from __future__ import annotations

import hashlib
import re
import statistics
import sys
import time
from collections.abc import Callable
from itertools import islice
from typing import Any

from app.service.messages import (
    MAX_MESSAGE_ID_CHARS,
    Message,
    header_message_id,
    prepare,
    token_digest,
)
from app.text import TokenizerLimits, core, evidence_count, parse_message, tokenize, tokenize_raw
from app.text.pairs import _SKIPPED_WORDS
from app.text.tokenize import DERIVED_PREFIXES
from app.text.words import normalize_text
from bench import data

LIMITS = TokenizerLimits()
_FIELD_NAME = re.compile(rb"[!-9;-~]+:")


# -- the steps as they were before ------------------------------------------------------------


def links_before(tokens: list[str]) -> int:
    return sum(1 for token in tokens if token.startswith("url:"))


def evidence_before(token_counts: dict[str, int]) -> int:
    return sum(1 for token in token_counts if not token.startswith(DERIVED_PREFIXES))


def pairs_before(tokens: list[str], max_token_chars: int) -> list[str]:
    words = [token for token in tokens if token not in _SKIPPED_WORDS and ":" not in token]
    return [
        f"pair:{first} {second}"
        if len(first) + len(second) < max_token_chars
        else f"pair:{(first + ' ' + second)[:max_token_chars]}"
        for first, second in zip(words, islice(words, 1, None), strict=False)
    ]


def digest_before(token_counts: dict[str, int]) -> str:
    lines = [f"{token}\t{token_counts[token]}\n" for token in sorted(token_counts)]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def message_id_before(raw: bytes) -> str | None:
    header: list[bytes] = []
    current = b""
    for line in raw.split(b"\n"):
        if line.startswith(b"From ") and not header and not current:
            continue
        if line[:1] in (b" ", b"\t") and current:
            current += line
            continue
        if current:
            header.append(current)
        if not _FIELD_NAME.match(line):
            current = b""
            break
        current = line
    if current:
        header.append(current)
    for field in header:
        name, _, value = field.partition(b":")
        if name.strip().lower() == b"message-id":
            text = " ".join(value.decode("utf-8", "replace").split())
            if text and len(text) <= MAX_MESSAGE_ID_CHARS and text.isprintable():
                return text
            return None
    return None


# -- the measurement ------------------------------------------------------------------------


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    raws = [m.raw or b"" for m in data.split("spamassassin").test]
    chars = LIMITS.max_token_chars
    token_lists = [tokenize(parse_message(raw, limits=LIMITS), limits=LIMITS) for raw in raws]
    counts = [tokenize_raw(raw).token_counts for raw in raws]
    texts = [
        core.active().text_tokens(normalize_text(text), chars)
        for raw in raws
        for text in parse_message(raw, limits=LIMITS).texts
    ]
    messages = [Message(raw=raw) for raw in raws]

    def each(function: Callable[[Any], object], inputs: list[Any]) -> Callable[[], None]:
        def run() -> None:
            for item in inputs:
                function(item)

        return run

    active = core.active
    steps: dict[str, tuple[str, Callable[[], None]]] = {
        "links (shape), before": ("python", each(links_before, token_lists)),
        "links (shape), now": ("", each(lambda t: active().count_prefixed(t, "url:"), token_lists)),
        "evidence_count, before": ("python", each(evidence_before, counts)),
        "evidence_count, now": ("", each(evidence_count, counts)),
        "pair_tokens, before": ("python", each(lambda t: pairs_before(t, chars), texts)),
        "pair_tokens, now": ("", each(lambda t: active().pair_tokens(t, chars), texts)),
        "token_digest, before": ("python", each(digest_before, counts)),
        "token_digest, now": ("", each(token_digest, counts)),
        "header_message_id, before": ("python", each(message_id_before, raws)),
        "header_message_id, now": ("python", each(header_message_id, raws)),
        "prepare (whole), now": (
            "",
            each(lambda m: prepare(m, limits=LIMITS, max_message_bytes=10**8), messages),
        ),
    }
    cores = ["python"] + (["compiled"] if core.COMPILED is not None else [])
    cpu: dict[tuple[str, str], list[float]] = {}
    for _ in range(runs):
        for name, (only, run) in steps.items():
            for choice in [only] if only else cores:
                core.use_core(choice)  # type: ignore[arg-type]
                started = time.process_time()
                run()
                cpu.setdefault((name, choice), []).append(time.process_time() - started)
    core.use_core("auto")
    print(f"{len(raws)} messages (SpamAssassin test split); CPU ms per message, median of {runs}")
    print("| step | core | ms per message (min-max) |")
    print("|---|---|---|")
    for (name, choice), values in cpu.items():
        per = 1e3 / len(raws)
        print(
            f"| {name} | {choice} | {statistics.median(values) * per:.3f} "
            f"({min(values) * per:.3f}-{max(values) * per:.3f}) |"
        )


if __name__ == "__main__":
    main()
