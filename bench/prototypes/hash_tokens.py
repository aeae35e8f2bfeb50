"""Tokens as 64-bit hashes on the classify hot path, measured whole.

    python -m bench.prototypes.hash_tokens check [corpus]   # hash_raw equal to strings?
    python -m bench.prototypes.hash_tokens classify [runs]  # CPU per step, both ways
    python -m bench.prototypes.hash_tokens index-hashes     # UTF-8 hashes in TokenIndex

The hash path here is the production one (`hash_raw` of the compiled core, app/text/_core.pyx);
it began as a prototype beside this script (bench/prototypes/hash_tokens_core.pyx, removed
once the core gave the same answers; its hash-function comparison, `functions`, went with it:
see docs/token-hashes.md).

`check`: for every message of a corpus, the compiled `hash_raw` gives the same (hash, count)
list, in first-emission order, as `tokenize_raw`'s token counts each hashed with `token_hash`,
the same defects and the same message-key digest as `token_digest`
(tests/text/test_hash_parity.py checks the same and more).

`classify`: the SpamAssassin test split against a held model's index (every token of the
training split in a `TokenIndex`, as a loaded model holds it), raw message in, CSR row out,
compiled core, CPU time (`time.process_time`) per step, the two paths taking turns run by run,
medians. The string path is `tokenize_raw` + `token_digest` + `CountTable.vectorize`'s lookup
and CSR build; the hash path is `hash_raw` (parse, all families, counting, digest) + one
`searchsorted` in the same index's sorted hashes + the CSR build. Scoring and everything after
the CSR matrix is the same both ways and not timed.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from itertools import chain

import numpy as np
import scipy.sparse

from app.bayes.tokens import TokenIndex, _positions, token_hashes
from app.text import core, hash_raw, token_digest, token_hash, tokenize_raw
from app.text.limits import DEFAULT_LIMITS
from app.text.mime import ParsedMessage, parse_message
from app.text.pairs import pair_tokens
from app.text.shape import shape_tokens
from app.text.tokenize import _utf8_size, count_tokens, tokenize
from bench import data

utf8_hash = token_hash  # CPython's hash of the token's UTF-8 bytes: hash(token) for ASCII


def raws(corpus: str) -> list[bytes]:
    return [message.raw or b"" for message in data.load(corpus)]


def reference(raw: bytes) -> tuple[list[tuple[int, int]], str, tuple[str, ...]]:
    tokenized = tokenize_raw(raw)
    pairs = [(token_hash(t), c) for t, c in tokenized.token_counts.items()]
    return pairs, token_digest(tokenized.token_counts), tokenized.defects


def hashed(raw: bytes) -> tuple[list[tuple[int, int]], str, tuple[str, ...]]:
    result = hash_raw(raw)
    pairs = list(zip(result.hashes.tolist(), result.counts.tolist(), strict=True))
    return pairs, result.digest, result.defects


def check(corpus: str) -> int:
    """Compare every message both ways; return the mismatches."""
    messages = raws(corpus)
    wrong = 0
    for number, raw in enumerate(messages):
        if reference(raw) != hashed(raw):
            wrong += 1
            if wrong <= 3:
                texts = list(hash_raw(raw).token_counts)
                ref_texts = list(tokenize_raw(raw).token_counts)
                print(f"  message {number}: {len(texts)} vs {len(ref_texts)} tokens")
                print("   missing", [t for t in ref_texts if t not in set(texts)][:8])
                print("   extra", [t for t in texts if t not in set(ref_texts)][:8])
    print(f"{corpus}: {len(messages) - wrong} of {len(messages)} messages equal")
    return wrong


# ---------------------------------------------------------------------------- classify


def csr(rows_ids: Sequence[np.ndarray], rows_counts: Sequence[np.ndarray], n_tokens: int):
    """CountTable.vectorize's CSR build from per-message id and count arrays."""
    lengths = np.fromiter(map(len, rows_ids), np.int64, len(rows_ids))
    ids = np.concatenate(rows_ids)
    counts = np.concatenate(rows_counts)
    rows = np.repeat(np.arange(len(rows_ids), dtype=np.int64), lengths)
    keep = (ids >= 0) & (counts > 0)
    rows, ids, counts = rows[keep], ids[keep], counts[keep]
    order = np.lexsort((ids, rows))
    indptr = np.zeros(len(rows_ids) + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=len(rows_ids)), out=indptr[1:])
    return scipy.sparse.csr_array(
        (counts[order], ids[order], indptr), shape=(len(rows_ids), n_tokens)
    )


def string_vectorize(index: TokenIndex, messages: list[dict[str, int]]):
    """CountTable.vectorize (app/bayes/counts.py), on a bare index."""
    n_messages = len(messages)
    lengths = np.fromiter(map(len, messages), np.int64, n_messages)
    ids = index.lookup(list(chain.from_iterable(messages)))
    counts = np.fromiter(
        chain.from_iterable(m.values() for m in messages), np.int64, int(lengths.sum())
    )
    rows = np.repeat(np.arange(n_messages, dtype=np.int64), lengths)
    keep = (ids >= 0) & (counts > 0)
    rows, ids, counts = rows[keep], ids[keep], counts[keep]
    order = np.lexsort((ids, rows))
    indptr = np.zeros(n_messages + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_messages), out=indptr[1:])
    return scipy.sparse.csr_array(
        (counts[order], ids[order], indptr), shape=(n_messages, len(index))
    )


def batch_ids(index: TokenIndex, per_message: list[np.ndarray]) -> list[np.ndarray]:
    """Ids of every message's hashes in one lookup (as vectorize looks up a batch)."""
    ids = hash_lookup(index, np.concatenate(per_message))
    return np.split(ids, np.cumsum([h.size for h in per_message])[:-1])


def hash_lookup(index: TokenIndex, hashes: np.ndarray) -> np.ndarray:
    """Ids of hashes in the index's sorted array (-1: unknown), as TokenIndex._lookup does
    for a held model (its dicts of recent and collided tokens empty)."""
    sorted_hashes = index._hashes
    positions = _positions(sorted_hashes, hashes)
    ids = np.full(hashes.size, -1, dtype=np.int64)
    found = np.flatnonzero(sorted_hashes[positions] == hashes)
    ids[found] = index._hash_ids[positions[found]]
    return ids


def split_steps(messages: list[ParsedMessage]) -> dict[str, Callable[[], object]]:
    """The string path's steps after parsing, each over every message (for the breakdown)."""
    limits = DEFAULT_LIMITS
    tokens = [tokenize(m, limits=limits) for m in messages]
    body_words = [
        core.active().text_tokens(text, limits.max_token_chars)
        for m in messages
        for text in m.texts
    ]
    counted = [count_tokens(t, set(), limits).token_counts for t in tokens]

    def pairs() -> object:
        return [pair_tokens(words, limits.max_token_chars) for words in body_words]

    def shape() -> object:
        return [
            shape_tokens(sum(map(_utf8_size, m.texts)), t, m.part_types)
            for m, t in zip(messages, tokens, strict=True)
        ]

    return {
        "tokens (all families, pairs incl.)": lambda: [
            tokenize(m, limits=limits) for m in messages
        ],
        "  of which pairs": pairs,
        "shape": shape,
        "Counter": lambda: [count_tokens(t, set(), limits) for t in tokens],
        "digest": lambda: [token_digest(c) for c in counted],
    }


def classify(runs: int) -> None:
    split = data.split("spamassassin")
    trained = (tokenize_raw(m.raw or b"").token_counts for m in split.train)
    vocabulary = list(dict.fromkeys(chain.from_iterable(trained)))
    index = TokenIndex.from_texts(vocabulary)  # each text's UTF-8 hash, as hash_raw's
    assert not index._collided, "a chance collision: rerun"
    test = [m.raw or b"" for m in split.test]
    limits = DEFAULT_LIMITS
    parsed = [parse_message(raw, limits=limits) for raw in test]

    def strings_whole() -> object:
        counts = [tokenize_raw(raw).token_counts for raw in test]
        digests = [token_digest(c) for c in counts]
        return string_vectorize(index, counts), digests

    def hashes_whole() -> object:
        results = [hash_raw(raw, limits=limits) for raw in test]
        ids = batch_ids(index, [r.hashes for r in results])
        return csr(ids, [r.counts for r in results], len(index)), [r.digest for r in results]

    def parse() -> object:
        return [parse_message(raw, limits=limits) for raw in test]

    def hash_core() -> object:
        return [hash_raw(raw, limits=limits) for raw in test]

    results = hash_core()
    counts = [tokenize_raw(raw).token_counts for raw in test]

    def string_lookup() -> object:
        return string_vectorize(index, counts)

    def hash_lookups() -> object:
        ids = batch_ids(index, [r.hashes for r in results])
        return csr(ids, [r.counts for r in results], len(index))

    # Same answers before timing: the same matrix and the same digests.
    a, b = strings_whole(), hashes_whole()
    assert (a[0] != b[0]).nnz == 0, "the two paths give other matrices"
    assert a[1] == b[1], "the two paths give other digests"
    works: dict[str, Callable[[], object]] = {
        "string path, whole (tokenize_raw + digest + vectorize)": strings_whole,
        "hash path, whole (hash_raw + searchsorted + CSR)": hashes_whole,
        "parse_message": parse,
        "hash_raw (parse, all families, count, digest)": hash_core,
        "string lookup + CSR (vectorize)": string_lookup,
        "hash lookup + CSR": hash_lookups,
        **split_steps(parsed),
    }
    cpu = cpu_seconds(works, runs)
    n = len(test)
    print(
        f"{n} test messages, index of {len(index)} tokens (training split), "
        f"CPU ms median of {runs} (min-max), us per message"
    )
    for name, values in cpu.items():
        median = statistics.median(values)
        print(
            f"| {name} | {median * 1000:.0f} ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"
            f" | {median / n * 1e6:.0f} |"
        )


def cpu_seconds(works: dict[str, Callable[[], object]], runs: int) -> dict[str, list[float]]:
    """CPU seconds of each work, `runs` times, the works taking turns run by run."""
    cpu: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(runs):
        for name, work in works.items():
            started = time.process_time()
            work()
            cpu[name].append(time.process_time() - started)
    return cpu


# ---------------------------------------------------------------------------- index hashes


def index_hashes() -> None:
    """What hashing each token's UTF-8 would cost today's string lookup (TokenIndex)."""
    test = data.split("spamassassin").test
    tokens = list(chain.from_iterable(tokenize_raw(m.raw or b"").token_counts for m in test))
    n = len(tokens)

    def str_hash() -> np.ndarray:
        return np.fromiter(map(hash, tokens), np.int64, n)

    def per_token() -> np.ndarray:
        return np.fromiter(map(utf8_hash, tokens), np.int64, n)

    def isascii_test() -> np.ndarray:
        return token_hashes(tokens)  # the index's way: hash(), then the non-ASCII ones encoded

    assert (per_token() == isascii_test()).all()
    works: dict[str, Callable[[], object]] = {
        "hash(str) (today)": str_hash,
        "utf8_hash per token": per_token,
        "hash(str), isascii test (token_hashes)": isascii_test,
    }
    cpu = cpu_seconds(works, 7)
    for name, values in cpu.items():
        median = statistics.median(values)
        print(
            f"| {name} | {median * 1000:.1f} ms for {n} tokens "
            f"| {median / len(test) * 1e6:.1f} us/msg |"
        )


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else "classify"
    if core.COMPILED is None:
        sys.exit("the compiled token core is not built")
    if command == "check":
        corpus = sys.argv[2] if len(sys.argv) > 2 else "spamassassin"
        sys.exit(1 if check(corpus) else 0)
    elif command == "classify":
        classify(int(sys.argv[2]) if len(sys.argv) > 2 else 5)
    elif command == "index-hashes":
        index_hashes()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
