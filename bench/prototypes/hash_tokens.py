"""Tokens as 64-bit hashes on the classify hot path, measured whole (prototype only).

    pip install cython
    python -m bench.prototypes.hash_tokens check [corpus [mode ...]]  # equal to strings?
    python -m bench.prototypes.hash_tokens classify [runs]   # CPU per step, both ways
    python -m bench.prototypes.hash_tokens functions         # the hash functions alone
    python -m bench.prototypes.hash_tokens index-hashes      # UTF-8 hashes in TokenIndex

`check`: for every message of a corpus, the prototype (hash_tokens_core.pyx, built with
pyximport) gives the same (hash, count) list, in first-emission order, as `tokenize_raw`'s
token counts each hashed the same way, the same defects, and the same message-key digest as
`token_digest`; with each hash function.

`classify`: the SpamAssassin test split against a held model's index (every token of the
training split in a `TokenIndex`, as a loaded model holds it), raw message in, CSR row out,
compiled core, CPU time (`time.process_time`) per step, the two paths taking turns run by run,
medians. The string path is today's `tokenize_raw` + `token_digest` + `CountTable.vectorize`'s
lookup and CSR build; the hash path is `parse_message` + the prototype (all families, counting,
digest) + one `searchsorted` in the same index's sorted hashes + the CSR build. Scoring and
everything after the CSR matrix is the same both ways and not timed.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from itertools import chain

import numpy as np
import pyximport
import scipy.sparse

from app.bayes.tokens import TokenIndex
from app.service.messages import token_digest
from app.text import core, tokenize_raw
from app.text.limits import DEFAULT_LIMITS
from app.text.mime import ParsedMessage, parse_message
from app.text.pairs import pair_tokens
from app.text.shape import shape_tokens
from app.text.tokenize import _utf8_size, count_tokens, tokenize
from bench import data

pyximport.install(language_level=3)
from bench.prototypes import hash_tokens_core as prototype  # noqa: E402

MODES = {"python-hash": 0, "fnv1a": 1, "siphash24": 2, "siphash13": 3, "python-utf8": 4}


def utf8_hash(token: str) -> int:
    """Mode python-utf8 in Python: CPython's hash of the token's UTF-8 bytes, which for an
    ASCII token (nearly all) is its str's own cached hash."""
    return hash(token) if token.isascii() else hash(token.encode("utf-8", "surrogatepass"))


KEY = (0x0706050403020100, 0x0F0E0D0C0B0A0908)  # the SipHash reference key, for the checks


def raws(corpus: str) -> list[bytes]:
    return [message.raw or b"" for message in data.load(corpus)]


def reference(
    raw: bytes, token_hash: Callable[[str], int]
) -> tuple[list[tuple[int, int]], str, tuple[str, ...]]:
    tokenized = tokenize_raw(raw)
    pairs = [(token_hash(t), c) for t, c in tokenized.token_counts.items()]
    return pairs, token_digest(tokenized.token_counts), tokenized.defects


def hashed(
    counter: prototype.HashCounter, raw: bytes
) -> tuple[list[tuple[int, int]], str, tuple[str, ...]]:
    message = parse_message(raw, limits=DEFAULT_LIMITS)
    hashes, counts, digest, found = prototype.hash_tokens(counter, message, DEFAULT_LIMITS)
    return list(zip(hashes.tolist(), counts.tolist(), strict=True)), digest, found


def check(corpus: str, modes: Sequence[str] = tuple(MODES)) -> int:
    """Compare every message both ways under each hash function; return the mismatches.

    The reference hashes each str token: with CPython's `hash()` itself for python-hash (so
    the bytes the prototype hashes are shown to give the str's own hash), with the
    prototype's function of the token's UTF-8 for the others."""
    # SipHash-2-4 of the empty input under the reference key (the paper's test vector).
    prototype.configure(MODES["siphash24"], *KEY)
    assert prototype.token_hash("") == 0x726FDB47DD0E0E31
    messages = raws(corpus)
    counter = prototype.HashCounter()
    bad = 0
    for name in modes:
        prototype.configure(MODES[name], *KEY)
        token_hash = {"python-hash": hash, "python-utf8": utf8_hash}.get(name, prototype.token_hash)
        wrong = 0
        for number, raw in enumerate(messages):
            expected, got = reference(raw, token_hash), hashed(counter, raw)
            if expected != got:
                wrong += 1
                if wrong <= 3:
                    ref_texts = list(tokenize_raw(raw).token_counts)
                    texts = counter.texts()
                    print(
                        f"  message {number}: {len(expected[0])} vs {len(got[0])} tokens;",
                        f"digest {expected[1] == got[1]}; defects {expected[2]} {got[2]}",
                    )
                    print("   missing", [t for t in ref_texts if t not in set(texts)][:8])
                    print("   extra", [t for t in texts if t not in set(ref_texts)][:8])
        print(f"{corpus}, {name}: {len(messages) - wrong} of {len(messages)} messages equal")
        bad += wrong
    prototype.configure(0)
    return bad


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
    positions = index._positions(hashes)
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
    index = TokenIndex.from_texts(vocabulary)  # today's: hash() of each str
    # The hash path's: the same ids under mode python-utf8 (see hash_tokens_core.pyx).
    utf8_index = TokenIndex.from_texts(vocabulary, hash_function=utf8_hash)
    assert not utf8_index._collided, "a chance collision: rerun"
    test = [m.raw or b"" for m in split.test]
    counter = prototype.HashCounter()
    prototype.configure(MODES["python-utf8"])
    limits = DEFAULT_LIMITS
    parsed = [parse_message(raw, limits=limits) for raw in test]

    def strings_whole() -> object:
        counts = [tokenize_raw(raw).token_counts for raw in test]
        digests = [token_digest(c) for c in counts]
        return string_vectorize(index, counts), digests

    def hashes_whole() -> object:
        results = [
            prototype.hash_tokens(counter, parse_message(raw, limits=limits), limits)
            for raw in test
        ]
        ids = batch_ids(utf8_index, [r[0] for r in results])
        return csr(ids, [r[1] for r in results], len(utf8_index)), [r[2] for r in results]

    def parse() -> object:
        return [parse_message(raw, limits=limits) for raw in test]

    def hash_core() -> object:
        return [prototype.hash_tokens(counter, m, limits) for m in parsed]

    results = hash_core()
    counts = [tokenize_raw(raw).token_counts for raw in test]

    def string_lookup() -> object:
        return string_vectorize(index, counts)

    def hash_lookups() -> object:
        ids = batch_ids(utf8_index, [r[0] for r in results])
        return csr(ids, [r[1] for r in results], len(utf8_index))

    # Same answers before timing: the same matrix and the same digests.
    a, b = strings_whole(), hashes_whole()
    differ = (a[0] != b[0]).tocoo()
    # Today's index takes an unknown CJK token for the ASCII one whose bytes its str holds
    # ("\u3067" for "g0", see hash_tokens_core.pyx): those cells, and only those, may differ.
    for row, column in zip(differ.row.tolist(), differ.col.tolist(), strict=True):
        tokens = [
            t
            for t in counts[row]
            if utf8_index.lookup([t])[0] < 0 and hash(t) == hash(index[column])
        ]
        print(f"cell ({row}, {index[column]!r}) differs: today's path took {tokens} for it")
        assert tokens, "the two paths give other matrices"
    assert a[1] == b[1], "the two paths give other digests"
    works: dict[str, Callable[[], object]] = {
        "string path, whole (tokenize_raw + digest + vectorize)": strings_whole,
        "hash path, whole (parse + hash core + searchsorted + CSR)": hashes_whole,
        "parse_message": parse,
        "hash core (all families, count, digest)": hash_core,
        "string lookup + CSR (vectorize)": string_lookup,
        "hash lookup + CSR": hash_lookups,
        **split_steps(parsed),
    }
    for family in ("PAIRS", "SHAPE", "DIGEST"):
        families = prototype.ALL & ~getattr(prototype, family)
        works[f"hash core without {family.lower()}"] = lambda families=families: [
            prototype.hash_tokens(counter, m, limits, families) for m in parsed
        ]
    cpu: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(runs):
        for name, work in works.items():
            started = time.process_time()
            work()
            cpu[name].append(time.process_time() - started)
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


# ---------------------------------------------------------------------------- functions


def functions() -> None:
    """Each hash function over the tokens of the SpamAssassin test split."""
    import hashlib

    test = data.split("spamassassin").test
    tokens = list(chain.from_iterable(tokenize_raw(m.raw or b"").token_counts for m in test))
    n = len(tokens)
    rounds = 20
    mean = np.mean([len(t) for t in tokens])
    print(f"{n} tokens (each distinct one per message), mean {mean:.1f} chars")
    for name, mode in MODES.items():
        prototype.configure(mode, *KEY)
        values = []
        for _ in range(5):
            started = time.process_time()
            prototype.hash_throughput(tokens, rounds)
            values.append(time.process_time() - started)
        each = statistics.median(values) / rounds / n
        print(f"| {name}, C, from UTF-8 bytes | {each * 1e9:.1f} ns |")
    prototype.configure(0)

    fresh = [t.encode().decode() for t in tokens]  # new str objects: no cached hash
    key = b"k" * 16
    pure: dict[str, Callable[[str], int]] = {
        "hash(str), new str (hash not cached)": hash,
        "blake2b(key, digest_size=8) of UTF-8": lambda t: int.from_bytes(
            hashlib.blake2b(t.encode(), key=key, digest_size=8).digest(), "little"
        ),
        "siphash24 in pure Python": lambda t: _siphash24_python(t.encode(), *KEY),
        "fnv1a in pure Python": lambda t: _fnv1a_python(t.encode()),
    }
    sample = fresh[:20000]
    for name, function in pure.items():
        values = []
        for _ in range(3):
            texts = [t.encode().decode() for t in sample]
            started = time.process_time()
            for text in texts:
                function(text)
            values.append(time.process_time() - started)
        print(f"| {name}, Python | {statistics.median(values) / len(sample) * 1e9:.0f} ns |")


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
        hashes = np.fromiter(map(hash, tokens), np.int64, n)
        wide = np.flatnonzero(~np.fromiter(map(str.isascii, tokens), np.bool_, n))
        hashes[wide] = [hash(tokens[i].encode("utf-8", "surrogatepass")) for i in wide.tolist()]
        return hashes

    assert (per_token() == isascii_test()).all()
    works = {
        "hash(str) (today)": str_hash,
        "utf8_hash per token": per_token,
        "hash(str), isascii test": isascii_test,
    }
    cpu: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(7):
        for name, work in works.items():
            started = time.process_time()
            work()
            cpu[name].append(time.process_time() - started)
    for name, values in cpu.items():
        median = statistics.median(values)
        print(
            f"| {name} | {median * 1000:.1f} ms for {n} tokens "
            f"| {median / len(test) * 1e6:.1f} us/msg |"
        )


_MASK = (1 << 64) - 1


def _fnv1a_python(data: bytes) -> int:
    value = 14695981039346656037
    for byte in data:
        value = ((value ^ byte) * 1099511628211) & _MASK
    return value


def _siphash24_python(data: bytes, k0: int, k1: int) -> int:
    def rotl(x: int, b: int) -> int:
        return ((x << b) | (x >> (64 - b))) & _MASK

    v0, v1 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D
    v2, v3 = k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573

    def rounds(n: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(n):
            v0 = (v0 + v1) & _MASK
            v1 = rotl(v1, 13) ^ v0
            v0 = rotl(v0, 32)
            v2 = (v2 + v3) & _MASK
            v3 = rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & _MASK
            v3 = rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & _MASK
            v1 = rotl(v1, 17) ^ v2
            v2 = rotl(v2, 32)

    length = len(data)
    end = length - length % 8
    for i in range(0, end, 8):
        m = int.from_bytes(data[i : i + 8], "little")
        v3 ^= m
        rounds(2)
        v0 ^= m
    b = ((length & 0xFF) << 56) | int.from_bytes(data[end:], "little")
    v3 ^= b
    rounds(2)
    v0 ^= b
    v2 ^= 0xFF
    rounds(4)
    return v0 ^ v1 ^ v2 ^ v3


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else "classify"
    if core.COMPILED is None:
        sys.exit("the compiled token core is not built")
    if command == "check":
        corpus = sys.argv[2] if len(sys.argv) > 2 else "spamassassin"
        sys.exit(1 if check(corpus, sys.argv[3:] or tuple(MODES)) else 0)
    elif command == "classify":
        classify(int(sys.argv[2]) if len(sys.argv) > 2 else 5)
    elif command == "functions":
        functions()
    elif command == "index-hashes":
        index_hashes()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
