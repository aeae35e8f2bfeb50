"""What word pairs and shape tokens cost in tokenizing, interleaved in one process.

    python -m bench.lab.token_families_cost [--step 3] [--rounds 5]

Tokenizes every `step`-th spamassassin message (raw, `tokenize_raw`) and every `step`-th SMS
(`tokenize_text`) with the default tokenizer and with pairs and shape tokens turned off,
alternately, `rounds` times each, and prints CPU milliseconds per message (median and range)
and distinct tokens per message. CPU time of this thread: other processes on a shared machine
slow the wall clock, not this.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import statistics
import time
from collections.abc import Iterator

from app.service.corpus import LabelledMessage
from app.text import core, tokenize_raw, tokenize_text
from bench import data


@contextlib.contextmanager
def without_shape() -> Iterator[None]:
    """Tokenize without shape tokens: they return nothing (pairs: `without_pairs`)."""
    tokenize = importlib.import_module("app.text.tokenize")
    saved = tokenize.shape_of
    tokenize.shape_of = lambda _size, _urls, _types: []
    try:
        yield
    finally:
        tokenize.shape_of = saved


def without_pairs(token_core: core.TokenCore) -> core.TokenCore:
    """`token_core` whose word pairs return nothing."""
    return dataclasses.replace(token_core, pair_tokens=lambda _tokens, _chars: [])


def one_pass(messages: list[LabelledMessage], token_core: core.TokenCore) -> tuple[float, float]:
    """Return (CPU ms per message, distinct tokens per message)."""
    distinct = 0
    start = time.thread_time()
    for message in messages:
        if message.raw is not None:
            distinct += len(tokenize_raw(message.raw, core=token_core).token_counts)
        else:
            distinct += len(tokenize_text(message.text or "", core=token_core).token_counts)
    seconds = time.thread_time() - start
    return 1000 * seconds / len(messages), distinct / len(messages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--step", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    token_core = core.resolve("auto")
    for corpus in ("spamassassin", "sms-spam-collection"):
        messages = data.load(corpus)[:: args.step]
        runs: dict[str, list[tuple[float, float]]] = {"before": [], "with pairs and shape": []}
        for _ in range(args.rounds):
            with without_shape():
                runs["before"].append(one_pass(messages, without_pairs(token_core)))
            runs["with pairs and shape"].append(one_pass(messages, token_core))
        for name, results in runs.items():
            ms = [r[0] for r in results]
            print(
                f"{corpus} ({len(messages)} messages) {name}: "
                f"{statistics.median(ms):.3f} ms/message CPU "
                f"(range {min(ms):.3f}-{max(ms):.3f}), {results[0][1]:.0f} distinct tokens/message"
            )


if __name__ == "__main__":
    main()
