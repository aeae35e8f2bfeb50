"""Measure what 64-bit token hashes from the core would buy classification (prototype only).

    pip install cython && python -m bench.prototypes.token_hashes

Body words of the SpamAssassin test split (ASCII texts, the bulk of every message's tokens),
two ways, CPU time, median of 5 runs, taking turns:
- today's compiled core: a str per distinct word, a Counter, then the model's TokenIndex
  lookup (which hashes each str again) of the distinct words;
- hashes: the prototype counts FNV-1a hashes of the words in a C table, then one
  np.searchsorted in the model's sorted hash array.
The model: every body word of the training split.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter

import numpy as np
import pyximport

from app.bayes.tokens import TokenIndex
from app.text.core import COMPILED
from app.text.limits import DEFAULT_LIMITS
from app.text.mime import parse_message
from app.text.words import normalize_text
from bench import data

pyximport.install(language_level=3)
from bench.prototypes.token_hashes_core import word_hash_counts  # noqa: E402


def ascii_body_texts(messages: list) -> list[str]:
    texts = []
    for message in messages:
        parsed = parse_message(message.raw, limits=DEFAULT_LIMITS)
        text = normalize_text(" ".join(parsed.texts))
        text = text if text.isascii() else text.encode("ascii", "replace").decode()
        texts.append(text.replace("$", " "))  # the prototype keeps no currency sign
    return texts


def fnv(word: str) -> int:
    value = 14695981039346656037
    for byte in word.encode():
        value = ((value ^ byte) * 1099511628211) % 2**64
    return value or 1


def main() -> None:
    assert COMPILED is not None, "build the compiled core first"
    split = data.split("spamassassin")
    train, test = ascii_body_texts(split.train), ascii_body_texts(split.test)
    vocabulary = sorted({w for text in train for w in COMPILED.word_tokens(text, 40)})
    index = TokenIndex.from_texts(vocabulary)
    model_hashes = np.array(sorted(fnv(w) for w in vocabulary), dtype=np.uint64)

    def with_strings() -> int:
        found = 0
        for text in test:
            counts = Counter(COMPILED.word_tokens(text, 40))
            found += int((index.lookup(list(counts)) >= 0).sum())
        return found

    def with_hashes() -> int:
        found = 0
        for text in test:
            capacity = 1 << max(6, (len(text) // 2).bit_length())
            keys = np.zeros(capacity, dtype=np.uint64)
            counts = np.zeros(capacity, dtype=np.int64)
            order = np.empty(capacity, dtype=np.int64)
            distinct = word_hash_counts(text, keys, counts, order)
            hashes = keys[order[:distinct]]
            positions = np.searchsorted(model_hashes, hashes).clip(0, len(model_hashes) - 1)
            found += int((model_hashes[positions] == hashes).sum())
        return found

    works = {"strings": with_strings, "hashes": with_hashes}
    # Warm; the counts differ only by the strings' `digits:N` tokens, which the prototype
    # does not make (about 1 %).
    results = {name: work() for name, work in works.items()}
    cpu: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(5):
        for name, work in works.items():
            started = time.process_time()
            work()
            cpu[name].append(time.process_time() - started)
    words = sum(len(COMPILED.word_tokens(text, 40)) for text in test)
    print(f"{len(test)} test messages, {words} body words, known distinct found: {results}")
    for name, values in cpu.items():
        median = statistics.median(values)
        print(
            f"{name}: {median * 1000:.0f} ms CPU (min {min(values) * 1000:.0f}, max "
            f"{max(values) * 1000:.0f}), {median / len(test) * 1e6:.0f} us per message"
        )


if __name__ == "__main__":
    main()
