"""Token text <-> dense id for models of millions of tokens, in numpy arrays.

A `dict[str, int]` with a `list[str]` beside it costs about 135 bytes a token in CPython (the
str object, the dict entry, an int object per id above 256): 135 MB of a million-token model
server's RSS. `TokenIndex` keeps the same mapping in about 40 bytes a token:

- the texts, UTF-8, in one growing byte buffer, with each id's start and length;
- for text -> id, the 64-bit `hash()` of every text in one sorted array with the ids beside it,
  searched with `np.searchsorted`, or, where the compiled lookup is built
  (app/bayes/_index.pyx), through buckets of it by the hashes' top bits (about a byte a token:
  one or two cache misses a hash instead of a binary search's ~20); tokens added a few at a
  time since the last merge wait in a second, small sorted array (searched with
  `np.searchsorted`, so a model just trained is looked up as fast as a merged one: a dict of
  them, probed per token, cost 5 % of classifying), and are merged in bulk once it holds 1/64
  of the large array's count (a copy of the large array per so many tokens: amortised O(1));
- texts whose hash another indexed text already has (checked exactly when they are added)
  in a dict of their own, looked at before the sorted array.

Starts, lengths and ids are kept in the narrowest integer type that holds them (uint32 starts,
uint8 lengths, int32 ids; widened in place should a value ever outgrow it): about 25 bytes a
token with 8-byte texts instead of 36. A model read from the database arrives as
`EncodedTexts` (one UTF-8 buffer and the byte length of each text), which is placed without
encoding each text again.

Scoring takes an unknown token for a known one only if their 64-bit hashes are equal: about
n / 2^64 per lookup (5e-14 for a million tokens). A token's hash is `app.token_hash` (keyed
SipHash of its UTF-8 bytes), the one the tokenizer emits, so scoring looks a message's
tokens up by hash alone (`lookup_hashes`: one `searchsorted` per sorted array for a whole
batch) without making their texts; the hashes of the collided texts are kept apart (a small
sorted array), and only a token with one of those hashes is asked for its text.
(SpamAssassin's Bayes keeps only 40 bits of each token's SHA-1.) Writers look up exactly
(`lookup_exact`, or `lookup(..., exact=True)`), which compares the UTF-8 bytes of every token
found by its hash with the index's, so a new token is never counted under another's id.
"""

from __future__ import annotations

import heapq
import importlib
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from itertools import repeat
from typing import Any, TypeVar, overload

import numpy as np
from numpy.typing import NDArray

from app.token_hash import token_hashes
from app.token_texts import ENCODING, ERRORS, EncodedTexts, HashedTexts, equal_texts, starting_with

IntArray = NDArray[np.int64]
ScalarT = TypeVar("ScalarT", bound=np.generic)

_MIN_CAPACITY = 64
# Above this many hashes, a lookup sorts them before searching (and an index of at most 8 times
# as many entries is searched as it is): sorted needles walk the index in order, where
# unsorted ones fetch the pages of its lower levels once per needle. One message's ~500 hashes
# in a 400,000-token index, just after it was tokenized: 158 -> 131 us to vectorize it with a
# threshold of 64 instead of 2,048 (`python -m bench.lab.lookup_order`); a 1M-token index and
# 126k needles: 35 -> 8 ms.
_SORT_NEEDLES = 64
_MIN_MERGE = 4096  # tokens waiting in the dict before a merge is worth an array copy
# The large sorted array is looked up through buckets of about this many hashes (4 bytes a
# bucket) when it holds at least _MIN_BUCKETED and the compiled lookup is built.
_PER_BUCKET = 4
_MIN_BUCKETED = 1024


def _compiled_bucket_ids() -> Callable[..., IntArray] | None:
    """The compiled lookup through buckets, None where it was not built (no C compiler):
    numpy's binary search then gives the same ids."""
    try:
        module = importlib.import_module("app.bayes._index")
    except ImportError:
        return None
    bucket_ids: Callable[..., IntArray] = module.bucket_ids
    return bucket_ids


_bucket_ids = _compiled_bucket_ids()


def grown_capacity(capacity: int, needed: int) -> int:
    """The capacity to grow an array of `capacity` slots to, for `needed` slots.

    Doubling while small; beyond 65,536 slots by an eighth (at least 65,536): still amortised
    O(1) per slot, and a million-token model's first new token costs 12.5 % more room in
    its arrays instead of 100 %.
    """
    return max(needed, capacity + max(capacity // 8, min(capacity, 65_536)), _MIN_CAPACITY)


class TokenIndex(Sequence[str]):
    """Dense ids 0..len-1 and their token texts; "" marks an id not placed yet.

    Not thread-safe: the owner serialises changes against each other and against lookups.
    """

    def __init__(self, *, hash_function: Callable[[str], int] | None = None) -> None:
        # None: `token_hashes`; tests pass a weak one to exercise collisions.
        self._hash = hash_function
        self._size = 0
        self._blob = bytearray()
        # Narrow types, widened by `_fit` when a value outgrows them (see the module's doc).
        self._starts: NDArray[np.unsignedinteger[Any] | np.signedinteger[Any]] = np.zeros(
            _MIN_CAPACITY, dtype=np.uint32
        )
        self._lengths: NDArray[np.unsignedinteger[Any] | np.signedinteger[Any]] = np.zeros(
            _MIN_CAPACITY, dtype=np.uint8
        )
        self._hashes: IntArray = np.zeros(0, dtype=np.int64)  # ascending
        self._hash_ids: NDArray[np.signedinteger[Any]] = np.zeros(0, dtype=np.int32)
        self._buckets: _Buckets | None = None  # of `_hashes`, made at its first lookup
        # Added a few at a time since the last merge; no hash is in both levels.
        self._recent_hashes: IntArray = np.zeros(0, dtype=np.int64)  # ascending
        self._recent_ids: NDArray[np.signedinteger[Any]] = np.zeros(0, dtype=np.int64)
        self._collided: dict[str, int] = {}  # hash equal to another indexed token's
        # Their hashes, ascending: a lookup by hash asks for a token's text only when its
        # hash is one of these.
        self._collided_hashes: IntArray = np.zeros(0, dtype=np.int64)

    @classmethod
    def from_texts(
        cls, texts: Sequence[str], *, hash_function: Callable[[str], int] | None = None
    ) -> TokenIndex:
        """Return the index of distinct, non-empty texts under ids 0..len-1."""
        index = cls(hash_function=hash_function)
        if not all(texts):
            raise ValueError("tokens must be non-empty")
        index.place(np.arange(len(texts), dtype=np.int64), texts)
        return index

    # ----------------------------------------------------------------- Sequence[str]

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, position: int) -> str: ...

    @overload
    def __getitem__(self, position: slice) -> list[str]: ...

    def __getitem__(self, position: int | slice) -> str | list[str]:
        if isinstance(position, slice):
            return [self._text(token_id) for token_id in range(*position.indices(self._size))]
        token_id = int(position)
        if token_id < 0:
            token_id += self._size
        if not 0 <= token_id < self._size:
            raise IndexError(f"token id {position} out of range 0..{self._size - 1}")
        return self._text(token_id)

    def __iter__(self) -> Iterator[str]:
        return map(self._text, range(self._size))

    def __contains__(self, token: object) -> bool:
        return isinstance(token, str) and bool(token) and self._exact_id(token) >= 0

    def index(self, token: object, start: int = 0, stop: int | None = None) -> int:
        token_id = self._exact_id(token) if isinstance(token, str) and token else -1
        if token_id < 0 or not start <= token_id < (self._size if stop is None else stop):
            raise ValueError(f"{token!r} is not a known token")
        return token_id

    def copy(self) -> TokenIndex:
        """Return an independent copy (same process, so the same hashes)."""
        twin = TokenIndex(hash_function=self._hash)
        twin._size = self._size
        twin._blob = bytearray(self._blob)
        twin._starts, twin._lengths = self._starts.copy(), self._lengths.copy()
        twin._hashes, twin._hash_ids = self._hashes.copy(), self._hash_ids.copy()
        twin._recent_hashes = self._recent_hashes.copy()
        twin._recent_ids = self._recent_ids.copy()
        twin._collided = dict(self._collided)
        twin._collided_hashes = self._collided_hashes.copy()
        return twin

    def __reduce__(self) -> tuple[object, ...]:
        # hash() is keyed per process: another process must index the texts anew.
        named = np.flatnonzero(self._lengths[: self._size] > 0)
        texts = [self._text(token_id) for token_id in named.tolist()]
        return (_unpickled, (self._hash, self._size, named, texts))

    def nbytes(self) -> int:
        """Bytes held in arrays and the text buffer (the dict of collided tokens not
        counted: it stays small)."""
        arrays = (
            self._starts,
            self._lengths,
            self._hashes,
            self._hash_ids,
            self._recent_hashes,
            self._recent_ids,
            self._collided_hashes,
        )
        return len(self._blob) + sum(array.nbytes for array in arrays) + self._buckets_nbytes()

    def _buckets_nbytes(self) -> int:
        """The bytes of the large array's buckets, made or about to be (at the first lookup)."""
        if _bucket_ids is None or self._hashes.size < _MIN_BUCKETED:
            return 0
        return _Buckets.size_for(self._hashes.size)

    # ----------------------------------------------------------------- lookups

    def lookup(self, tokens: Sequence[str], *, exact: bool = False) -> IntArray:
        """Return the ids of tokens, -1 for a token the index does not know.

        exact=True also compares the text of every token found by its hash: for writers,
        which must never count a new token under a known one's id, however unlikely.
        """
        if exact:
            return self.lookup_exact(HashedTexts.from_strings(tokens, self._hashes_of(tokens)))
        n = len(tokens)
        ids = np.full(n, -1, dtype=np.int64)
        if self._hashes.size or self._recent_hashes.size:
            ids = self._by_hash(self._hashes_of(tokens))
        if self._collided:
            # map(dict.get, ...) calls the dict in C: 2x faster than a generator.
            extra = np.fromiter(map(self._collided.get, tokens, repeat(-1)), np.int64, n)
            np.copyto(ids, extra, where=extra >= 0)
        return ids

    def lookup_words(self, words: frozenset[str]) -> IntArray:
        """The ids of a set of words (stop words), in no particular order, -1 for a word the
        index does not know; exact, as `lookup(..., exact=True)`. With this index's own hash
        function, a set's UTF-8 and hashes are made once per process, not at every call: a
        model not held builds a new index for each message it scores."""
        if self._hash is None:
            return self.lookup_exact(_hashed_words(words))
        texts = sorted(words)
        return self.lookup_exact(HashedTexts.from_strings(texts, self._hashes_of(texts)))

    def lookup_exact(self, tokens: HashedTexts) -> IntArray:
        """`lookup(texts, exact=True)` for texts given as UTF-8 with their hashes (from this
        index's hash function): `lookup_hashes`, then the bytes of every token found compared
        with the index's in numpy; a `str` is made only of a token whose hash is collided."""
        texts = tokens.texts
        ids = self.lookup_hashes(tokens.hashes, lambda positions: texts.take(positions).strings())
        found = np.flatnonzero(ids >= 0)
        if found.size:
            held = ids[found]
            blob = np.frombuffer(self._blob, dtype=np.uint8)
            try:
                same = equal_texts(
                    blob,
                    self._starts[held].astype(np.int64),
                    self._lengths[held].astype(np.int64),
                    texts.array(),
                    texts.starts[found],
                    texts.lengths[found],
                )
            finally:
                del blob  # the bytearray cannot grow while a view of it exists
            ids[found[~same]] = -1
        return ids

    def lookup_hashes(
        self, hashes: IntArray, texts_at: Callable[[IntArray], Sequence[str]]
    ) -> IntArray:
        """Return the ids of the tokens whose hashes are `hashes`, -1 for one the index does
        not know: `lookup` without a text per token, for scoring.

        `hashes` must come from the index's hash function (`token_hashes`, which the
        tokenizer emits). A token whose hash some other indexed text shares (the
        collided ones: never, but for the hash function's chance collisions) is told apart
        by its text: `texts_at(positions)` gives the texts of the tokens at those positions
        of `hashes`, and is called only then, once.
        """
        hashes = np.asarray(hashes, dtype=np.int64)
        ids = self._by_hash(hashes)
        if self._collided_hashes.size:
            ambiguous = np.flatnonzero(np.isin(hashes, self._collided_hashes))
            if ambiguous.size:
                texts = texts_at(ambiguous)
                if len(texts) != ambiguous.size:
                    raise ValueError(f"asked for {ambiguous.size} texts, got {len(texts)}")
                extra = np.fromiter(
                    map(self._collided.get, texts, repeat(-1)), np.int64, ambiguous.size
                )
                chosen = extra >= 0
                ids[ambiguous[chosen]] = extra[chosen]
        return ids

    def _by_hash(self, hashes: IntArray) -> IntArray:
        """The ids the sorted arrays give `hashes` (-1: none), the collided texts aside."""
        large = self._hashes
        if _bucket_ids is not None and large.size >= _MIN_BUCKETED:
            buckets = self._buckets
            if buckets is None or buckets.of is not large:  # made anew after each change
                buckets = self._buckets = _Buckets.of_hashes(large)
            ids = _bucket_ids(
                large,
                self._hash_ids,
                buckets.starts,
                buckets.shift,
                np.ascontiguousarray(hashes, dtype=np.int64),
            )
        else:
            ids = np.full(hashes.size, -1, dtype=np.int64)
            if large.size:
                positions = _positions(large, hashes)
                found = np.flatnonzero(large[positions] == hashes)
                ids[found] = self._hash_ids[positions[found]]
        if self._recent_hashes.size:
            # No hash is in both arrays: only the tokens the large one lacks are looked for.
            missing = np.flatnonzero(ids < 0)
            positions = _positions(self._recent_hashes, hashes[missing])
            hit = self._recent_hashes[positions] == hashes[missing]
            ids[missing[hit]] = self._recent_ids[positions[hit]]
        return ids

    # ----------------------------------------------------------------- changes

    def grow(self, size: int) -> None:
        """Extend the ids to 0..size-1, the new ones not placed yet."""
        if size <= self._size:
            return
        if size > self._starts.size:
            self.reserve(grown_capacity(self._starts.size, size))
        self._size = size

    def reserve(self, capacity: int) -> None:
        """Room for ids 0..capacity-1 without growing again (the ids stay as they are)."""
        if capacity > self._starts.size:
            self._starts = _resized(self._starts, capacity)
            self._lengths = _resized(self._lengths, capacity)

    def intern(self, tokens: Sequence[str]) -> IntArray:
        """Return the ids of tokens, giving each unknown one the next free id in order."""
        ids = self.lookup(tokens, exact=True)
        unknown = np.flatnonzero(ids < 0)
        if not unknown.size:
            return ids
        new = list(dict.fromkeys(tokens[i] for i in unknown.tolist()))
        if not all(new):
            raise ValueError("tokens must be non-empty")
        first = self._size
        self.grow(first + len(new))
        self._add(np.arange(first, first + len(new), dtype=np.int64), new)
        return self.lookup(tokens, exact=True)

    def place(self, token_ids: IntArray, texts: Sequence[str] | HashedTexts) -> IntArray:
        """Name ids chosen elsewhere (the database); return the ids newly named.

        `texts` as `str`s, as `EncodedTexts` (a model read: kept as one buffer) or as
        `HashedTexts` (a writer's new tokens: neither hashed nor encoded again).
        Re-placing an id under its own text is a no-op; an id already named otherwise, or a
        text already under another id, is a ValueError and changes nothing.
        """
        if token_ids.shape[0] != len(texts):
            raise ValueError(f"got {token_ids.shape[0]} token ids but {len(texts)} tokens")
        if not token_ids.size:
            return token_ids
        given_hashes = None
        if isinstance(texts, HashedTexts):
            given_hashes = texts.hashes if self._hash is None else None  # else not ours
            texts = texts.texts
        encoded = texts if isinstance(texts, EncodedTexts) else None
        if encoded is not None:
            texts = encoded.strings()  # str objects for the hashes, freed after this call
        if token_ids.min() < 0:
            raise ValueError(f"token ids must be >= 0, got {int(token_ids.min())}")
        if not all(texts):
            raise ValueError("tokens must be non-empty")
        inside = token_ids < self._size
        named = np.zeros(token_ids.size, dtype=np.bool_)
        named[inside] = self._lengths[token_ids[inside]] > 0
        for position in np.flatnonzero(named).tolist():
            current = self._text(int(token_ids[position]))
            if current != texts[position]:
                raise ValueError(
                    f"token id {int(token_ids[position])} is {current!r}, "
                    f"cannot place {texts[position]!r}"
                )
        fresh = np.flatnonzero(~named)
        new_ids = token_ids[fresh]
        new_texts = [texts[i] for i in fresh.tolist()] if fresh.size < named.size else texts
        # once, for the lookup, the checks and the index
        if given_hashes is None:
            hashes = self._hashes_of(new_texts)
        else:
            hashes = given_hashes if new_texts is texts else given_hashes[fresh]
        if self._hashes.size or self._recent_hashes.size:  # else nothing to clash with: a load
            if encoded is None:
                new_encoded = EncodedTexts.from_strings(new_texts)
            else:
                new_encoded = encoded if new_texts is texts else encoded.take(fresh)
            owners = self.lookup_exact(HashedTexts(hashes, new_encoded))
        else:
            owners = np.full(len(new_texts), -1, dtype=np.int64)
        clash = np.flatnonzero(owners >= 0)
        if clash.size:
            i = int(clash[0])
            raise ValueError(
                f"token {new_texts[i]!r} has id {int(owners[i])}, cannot place it at {new_ids[i]}"
            )
        new_ids, new_texts, new_hashes, order = _distinct(new_ids, new_texts, hashes)
        if not new_ids.size:
            return new_ids
        self.grow(int(new_ids.max()) + 1)
        # The given buffer is kept as it is (a model read) when every text in it is new.
        whole = encoded if encoded is not None and new_texts is texts else None
        self._add(new_ids, new_texts, new_hashes, encoded=whole, order=order)
        return new_ids

    def merge(self) -> None:
        """Move the tokens waiting in the small sorted array into the large one."""
        if not self._recent_hashes.size:
            return
        hashes, token_ids = self._recent_hashes, self._recent_ids
        self._recent_hashes = np.zeros(0, dtype=np.int64)
        self._recent_ids = np.zeros(0, dtype=np.int64)
        self._hashes, self._hash_ids = _inserted(self._hashes, self._hash_ids, hashes, token_ids)

    def starting_with(
        self, prefixes: tuple[str, ...], token_ids: IntArray | None = None
    ) -> NDArray[np.bool_]:
        """Return which ids' texts start with one of `prefixes`: of every id, shape (len,),
        or of `token_ids` (ids of this index), beside them.

        Compared byte by byte in numpy over the text buffer, no `str` made: a million-token
        model's derived families are found in milliseconds, a message's few hundred tokens
        in microseconds.
        """
        if token_ids is None:
            starts = self._starts[: self._size].astype(np.int64)
            lengths = self._lengths[: self._size].astype(np.int64)
        else:
            starts = self._starts[token_ids].astype(np.int64)
            lengths = self._lengths[token_ids].astype(np.int64)
        blob = np.frombuffer(self._blob, dtype=np.uint8)
        try:
            return starting_with(blob, starts, lengths, prefixes)
        finally:
            del blob  # the bytearray cannot grow while a view of it exists

    def first_by_text(self, token_ids: IntArray, k: int) -> list[int]:
        """Return the ids among `token_ids` of the k texts first in code-point order, in no
        particular order.

        UTF-8 orders bytes as code points: texts are compared 8 bytes at a time as integers
        in numpy, and made as str only for the few still tied at the cut. Making the text of
        every one of 173,474 tied tokens took 1.6 s (a million-token model's stats).
        """
        chosen: list[int] = []
        candidates = np.asarray(token_ids, dtype=np.int64)
        offset = 0
        longest = int(self._lengths[candidates].max()) if candidates.size else 0
        blob = np.frombuffer(self._blob, dtype=np.uint8)
        try:
            while candidates.size > k - len(chosen) > 0 and offset < longest:
                need = k - len(chosen)
                prefixes = self._prefixes(blob, candidates, offset)
                cut = np.partition(prefixes, need - 1)[need - 1]
                chosen.extend(candidates[prefixes < cut].tolist())  # fewer than `need`
                candidates = candidates[prefixes == cut]
                offset += 8
        finally:
            del blob  # the bytearray cannot grow while a view of it exists
        need = k - len(chosen)
        return chosen + heapq.nsmallest(need, candidates.tolist(), key=self._text)

    def _prefixes(
        self, blob: NDArray[np.uint8], token_ids: IntArray, offset: int
    ) -> NDArray[np.uint64]:
        """Bytes offset..offset+7 of each text as a big-endian integer, 0-padded past its end."""
        starts = self._starts[token_ids].astype(np.int64) + offset
        left = self._lengths[token_ids].astype(np.int64) - offset
        prefixes = np.zeros(token_ids.size, dtype=np.uint64)
        for position in range(8):
            present = left > position
            byte = np.zeros(token_ids.size, dtype=np.uint64)
            byte[present] = blob[starts[present] + position]
            prefixes = (prefixes << np.uint64(8)) | byte
        return prefixes

    # ----------------------------------------------------------------- internals

    def _exact_id(self, token: str) -> int:
        return int(self.lookup([token], exact=True)[0])

    def _text(self, token_id: int) -> str:
        start = int(self._starts[token_id])
        return self._blob[start : start + int(self._lengths[token_id])].decode(ENCODING, ERRORS)

    def _hashes_of(self, texts: Sequence[str]) -> IntArray:
        if self._hash is None:
            return token_hashes(texts)
        return np.fromiter(map(self._hash, texts), np.int64, len(texts))

    def _add(
        self,
        token_ids: IntArray,
        texts: Sequence[str],
        hashes: IntArray | None = None,
        *,
        encoded: EncodedTexts | None = None,
        order: IntArray | None = None,
    ) -> None:
        """Store and index distinct texts no id has yet under free ids (`encoded`: the same
        texts already as UTF-8; `order`: the stable argsort of `hashes`, if known)."""
        if encoded is None:
            parts = [text.encode(ENCODING, ERRORS) for text in texts]
            lengths = np.fromiter(map(len, parts), np.int64, len(parts))
            blob = b"".join(parts)
            starts = np.empty_like(lengths)
            starts[0] = len(self._blob)
            np.cumsum(lengths[:-1], out=starts[1:])
            starts[1:] += starts[0]
        else:
            lengths, blob = encoded.lengths, encoded.blob
            starts = encoded.starts + len(self._blob)
        self._blob += blob
        self._starts = _fit(self._starts, len(self._blob))
        self._lengths = _fit(self._lengths, int(lengths.max()))
        self._starts[token_ids] = starts
        self._lengths[token_ids] = lengths
        self._index(token_ids, texts, hashes, order, recent=len(texts) < _MIN_MERGE)
        if self._recent_hashes.size > max(_MIN_MERGE, self._hashes.size // 64):
            self.merge()

    def _index(
        self,
        token_ids: IntArray,
        texts: Sequence[str],
        hashes: IntArray | None = None,
        order: IntArray | None = None,
        *,
        recent: bool = False,
    ) -> None:
        """Insert distinct texts no id has yet into the large sorted hash array (`recent`:
        the small one).

        A text whose hash is already in either, or equal to an earlier one of `texts`, goes
        to the dict of collided texts instead: the arrays never hold one hash twice.
        """
        if hashes is None:
            hashes = self._hashes_of(texts)
        if order is None:
            order = np.argsort(hashes, kind="stable")
        hashes, token_ids = hashes[order], token_ids[order]
        clashes = np.zeros(hashes.size, dtype=np.bool_)
        clashes[1:] = hashes[1:] == hashes[:-1]
        for level in (self._hashes, self._recent_hashes):
            if level.size:  # hashes are sorted here already
                clashes |= (
                    level[np.minimum(np.searchsorted(level, hashes), level.size - 1)] == hashes
                )
        clashing = np.flatnonzero(clashes)
        for position in clashing.tolist():
            self._collided[texts[int(order[position])]] = int(token_ids[position])
        if clashing.size:
            self._collided_hashes = np.union1d(self._collided_hashes, hashes[clashing])
        keep = ~clashes
        hashes, token_ids = hashes[keep], token_ids[keep]
        if recent:
            self._recent_hashes, self._recent_ids = _inserted(
                self._recent_hashes, self._recent_ids, hashes, token_ids
            )
        else:
            self._hashes, self._hash_ids = _inserted(
                self._hashes, self._hash_ids, hashes, token_ids
            )


@lru_cache(maxsize=64)
def _hashed_words(words: frozenset[str]) -> HashedTexts:
    texts = sorted(words)
    return HashedTexts.from_strings(texts, token_hashes(texts))


class _Buckets:
    """Where each bucket of a sorted hash array starts: a bucket holds the hashes whose top
    bits (the sign bit flipped, so that buckets ascend as the signed hashes do) are its
    number; about _PER_BUCKET of them, since the hashes are keyed SipHash (app.token_hash),
    spread evenly whatever tokens a sender chooses."""

    def __init__(self, of: IntArray, starts: NDArray[np.int32], shift: int) -> None:
        self.of = of  # the sorted array indexed (its identity says the buckets are current)
        self.starts = starts  # one more than the buckets: the last is the array's end
        self.shift = shift  # 64 less the bits that number a bucket

    @staticmethod
    def bits_for(size: int) -> int:
        """The bits that number the buckets of `size` hashes."""
        return max(1, (size // _PER_BUCKET).bit_length() - 1)

    @classmethod
    def size_for(cls, size: int) -> int:
        """The bytes of the buckets of `size` hashes."""
        return ((1 << cls.bits_for(size)) + 1) * np.dtype(np.int32).itemsize

    @classmethod
    def of_hashes(cls, sorted_hashes: IntArray) -> _Buckets:
        bits = cls.bits_for(sorted_hashes.size)
        shift = 64 - bits
        flipped = sorted_hashes.view(np.uint64) ^ np.uint64(1 << 63)
        numbers = (flipped >> np.uint64(shift)).astype(np.intp)
        starts = np.zeros((1 << bits) + 1, dtype=np.int32)
        np.cumsum(np.bincount(numbers, minlength=1 << bits), out=starts[1:])
        return cls(sorted_hashes, starts, shift)


def _positions(sorted_hashes: IntArray, hashes: IntArray) -> IntArray:
    """Where each of `hashes` is or would go in `sorted_hashes` (non-empty), clipped to its
    last place."""
    if hashes.size <= _SORT_NEEDLES or sorted_hashes.size <= _SORT_NEEDLES * 8:
        positions = np.searchsorted(sorted_hashes, hashes)
    else:
        # Needles in order walk the array in order (a 1M-token index, 126k needles: 35 -> 8 ms).
        # In the order of their top 16 bits is near enough, and numpy sorts 16-bit keys by
        # radix in linear time: a batch's 460k needles in 27 ms, where with an argsort they took
        # 65 (`python -m bench.lab.classify_steps`).
        order = np.argsort(((hashes >> 48) + (1 << 15)).astype(np.uint16), kind="stable")
        positions = np.empty_like(order)
        positions[order] = np.searchsorted(sorted_hashes, hashes[order])
    np.minimum(positions, sorted_hashes.size - 1, out=positions)
    return positions


def _inserted(
    sorted_hashes: IntArray,
    ids: NDArray[np.signedinteger[Any]],
    hashes: IntArray,
    token_ids: IntArray,
) -> tuple[IntArray, NDArray[np.signedinteger[Any]]]:
    """`sorted_hashes` and the `ids` beside them with ascending `hashes` (none already there)
    and their `token_ids` inserted in order; `ids` widened if a token id outgrows its type."""
    if token_ids.size:
        ids = _fit(ids, int(token_ids.max()))
    if not sorted_hashes.size:  # a model's load: nothing to insert between
        return hashes, token_ids.astype(ids.dtype)
    at = np.searchsorted(sorted_hashes, hashes)
    return np.insert(sorted_hashes, at, hashes), np.insert(ids, at, token_ids)


def _unpickled(
    hash_function: Callable[[str], int] | None, size: int, token_ids: IntArray, texts: list[str]
) -> TokenIndex:
    index = TokenIndex(hash_function=hash_function)
    index.grow(size)
    index.place(token_ids, texts)
    return index


def _distinct(
    token_ids: IntArray, texts: Sequence[str], hashes: IntArray
) -> tuple[IntArray, Sequence[str], IntArray | None, IntArray | None]:
    """Drop repeats of the same (id, text), with their hashes (None when some were dropped)
    and, when none were, the stable argsort of the hashes (for `_index`); a text under two
    ids, or an id under two texts, is a ValueError."""
    order = np.argsort(hashes, kind="stable")
    sorted_hashes = hashes[order]
    ascending = token_ids.size < 2 or bool((token_ids[1:] > token_ids[:-1]).all())  # a load
    sorted_ids = token_ids if ascending else np.sort(token_ids)
    if (
        not (sorted_hashes[1:] == sorted_hashes[:-1]).any()
        and not (sorted_ids[1:] == sorted_ids[:-1]).any()
    ):
        return token_ids, texts, hashes, order  # the usual case, no Python object per token
    by_text: dict[str, int] = {}
    by_id: dict[int, str] = {}
    for token_id, text in zip(token_ids.tolist(), texts, strict=True):
        if by_text.setdefault(text, token_id) != token_id:
            owner = by_text[text]
            raise ValueError(f"token {text!r} has id {owner}, cannot place it at {token_id}")
        if by_id.setdefault(token_id, text) != text:
            raise ValueError(f"token id {token_id} is {by_id[token_id]!r}, cannot place {text!r}")
    if len(by_text) == len(texts):
        return token_ids, texts, hashes, order
    return np.fromiter(by_text.values(), np.int64, len(by_text)), list(by_text), None, None


IntegerArrayT = TypeVar(
    "IntegerArrayT", bound=NDArray[np.unsignedinteger[Any] | np.signedinteger[Any]]
)


def _fit(array: IntegerArrayT, largest: int) -> IntegerArrayT:
    """`array`, widened to int64 if its type cannot hold `largest`."""
    if largest <= np.iinfo(array.dtype).max:
        return array
    return array.astype(np.int64)  # type: ignore[return-value]


def _resized(array: NDArray[ScalarT], capacity: int) -> NDArray[ScalarT]:
    grown = np.zeros(capacity, dtype=array.dtype)
    grown[: array.size] = array
    return grown
