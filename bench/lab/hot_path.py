"""What each step of the tokenizer's hot path costs: `python -m bench.lab.hot_path [runs]`.

CPU milliseconds per message over the SpamAssassin test split, for the steps a profile of
classify found hot besides the word loops: each step as it was before this work (commit
980aa9f: the code below, and for the Message-ID and the digest the tests' oracle in
tests/text/message_identity_oracle.py) against the step that runs now, with the Python and with
the compiled core. The variants take turns run by run; medians. The last rows are the whole of
`prepare` (tokenize, Message-ID, key) with each core.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from itertools import islice
from typing import Any

from app.service.messages import Message, header_message_id, prepare, token_digest
from app.text import (
    HashedTokens,
    TokenizerLimits,
    core,
    evidence_count,
    hash_raw,
    parse_message,
    tokenize_raw,
)
from app.text.core import TokenCore
from app.text.pairs import SKIPPED_WORDS
from app.text.tokenize import DERIVED_PREFIXES
from app.text.words import normalize_text
from bench import data
from tests.text.message_identity_oracle import digest_before, message_id_before

LIMITS = TokenizerLimits()


# -- the steps as they were before ------------------------------------------------------------


def links_before(tokens: list[str]) -> int:
    return sum(1 for token in tokens if token.startswith("url:"))


def evidence_before(token_counts: dict[str, int]) -> int:
    return sum(1 for token in token_counts if not token.startswith(DERIVED_PREFIXES))


def pairs_before(tokens: list[str], max_token_chars: int) -> list[str]:
    words = [token for token in tokens if token not in SKIPPED_WORDS and ":" not in token]
    return [
        f"pair:{first} {second}"
        if len(first) + len(second) < max_token_chars
        else f"pair:{(first + ' ' + second)[:max_token_chars]}"
        for first, second in zip(words, islice(words, 1, None), strict=False)
    ]


# -- the measurement ------------------------------------------------------------------------


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    raws = [m.raw or b"" for m in data.split("spamassassin").test]
    chars = LIMITS.max_token_chars
    reference = core.PYTHON
    counts = [tokenize_raw(raw, core=reference).token_counts for raw in raws]
    # The counter's own output now: hashes and UTF-8, from the compiled core where it is built.
    hashed = [hash_raw(raw, core=core.COMPILED or reference) for raw in raws]
    # Each core reads the evidence off its own counter's result (the compiled one's UTF-8).
    hashed_by = {"python": [hash_raw(raw, core=reference) for raw in raws], "compiled": hashed}
    # The links step counted `url:` over the message's tokens before they were counted: each
    # token as often as it was emitted.
    token_lists = [list(Counter(each).elements()) for each in counts]
    texts = [
        reference.text_tokens(normalize_text(text), chars)
        for raw in raws
        for text in parse_message(raw, limits=LIMITS, core=reference).texts
    ]
    messages = [Message(raw=raw) for raw in raws]

    def each(
        function: Callable[[Any, TokenCore], object], inputs: list[Any]
    ) -> Callable[[TokenCore], None]:
        def run(token_core: TokenCore) -> None:
            for item in inputs:
                function(item, token_core)

        return run

    def evidence_count_of(tokens: HashedTokens, token_core: TokenCore) -> int:
        return evidence_count(tokens, core=token_core)

    def before(function: Callable[[Any], object]) -> Callable[[Any, TokenCore], object]:
        return lambda item, _core: function(item)

    steps: dict[str, tuple[str, Callable[[TokenCore], None]]] = {
        "links (shape), before": ("python", each(before(links_before), token_lists)),
        "links (shape), now": ("", each(lambda t, c: c.count_prefixed(t, "url:"), token_lists)),
        "evidence_count, before": ("python", each(before(evidence_before), counts)),
        "evidence_count, now": ("", lambda c: each(evidence_count_of, hashed_by[c.name])(c)),
        "pair_tokens, before": ("python", each(before(lambda t: pairs_before(t, chars)), texts)),
        "pair_tokens, now": ("", each(lambda t, c: c.pair_tokens(t, chars), texts)),
        "token_digest, before": ("python", each(before(digest_before), counts)),
        "token_digest, now": ("", each(lambda t, c: token_digest(t, core=c), counts)),
        "header_message_id, before": ("python", each(before(message_id_before), raws)),
        "header_message_id, now": ("python", each(before(header_message_id), raws)),
        "prepare (whole), now": (
            "",
            each(lambda m, c: prepare(m, limits=LIMITS, max_message_bytes=10**8, core=c), messages),
        ),
    }
    cores = ["python"] + (["compiled"] if core.COMPILED is not None else [])
    cpu: dict[tuple[str, str], list[float]] = {}
    for _ in range(runs):
        for name, (only, run) in steps.items():
            for choice in [only] if only else cores:
                token_core = core.resolve(choice)  # type: ignore[arg-type]
                started = time.process_time()
                run(token_core)
                cpu.setdefault((name, choice), []).append(time.process_time() - started)
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
