"""Token texts as UTF-8 in one buffer, with or without their hashes: how tokens travel in bulk
between the tokenizer, a model's token index and the store, without a `str` per token.

- `EncodedTexts`: texts back to back in one `bytes`, each at a start with a length. The
  tokenizer's compiled core hands a message's distinct tokens over so (its arena, copied once);
  the store reads a model's texts so; a `TokenIndex` keeps its own the same way.
- `HashedTexts`: the same with each text's `token_hash`, which the tokenizer computed already:
  a writer looks a message's tokens up by hash and compares their bytes with the index's
  (`equal_texts`), and makes a `str` only of the tokens that are new, to store them.
- `starting_with` and `equal_texts`: the byte comparisons both sides make, in numpy.

A module of its own below text and bayes (which import no other room): both use it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
from numpy.typing import NDArray

from app.token_hash import token_hashes

IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
ENCODING = "utf-8"
ERRORS = "surrogatepass"  # any str round-trips; the tokenizer never makes surrogates


_HEAD = 8  # bytes of each text compared at once, as one integer
_CHUNK = 1 << 16  # texts at a time: an index of a million stays within a few MB of scratch


def starting_with(
    blob: NDArray[np.uint8],
    starts: IntArray,
    lengths: IntArray,
    prefixes: Sequence[str],
    *,
    heads: NDArray[np.uint64] | None = None,
) -> BoolArray:
    """Which of the texts at `starts` (with `lengths`) in `blob` start with one of `prefixes`:
    compared in numpy, no `str` made (a million-token model's derived families in
    milliseconds, a message's few hundred tokens in microseconds).

    Each text's first 8 bytes are read once as one integer, and a prefix of up to 8 bytes is
    one masked comparison of those (a message's prefixes are all that short); longer ones go
    on byte by byte among the texts that matched so far. `heads`: `text_heads` of the texts,
    when the caller keeps them.
    """
    found = np.zeros(starts.size, dtype=np.bool_)
    encoded = [prefix.encode(ENCODING, ERRORS) for prefix in prefixes]
    for first in range(0, starts.size, _CHUNK):
        chunk = slice(first, first + _CHUNK)
        chunk_lengths = lengths[chunk]
        chunk_heads = text_heads(blob, starts[chunk]) if heads is None else heads[chunk]
        for prefix in encoded:
            size = min(len(prefix), _HEAD)
            # Little-endian: the prefix's bytes are the integer's low ones. Bytes past a text's
            # end are another text's, but a text shorter than the prefix is not a candidate.
            matched = (chunk_heads & np.uint64((1 << (8 * size)) - 1)) == np.uint64(
                int.from_bytes(prefix[:size], "little")
            )
            # max(..., 1): an empty prefix finds every text, never an unplaced (empty) slot
            matched &= chunk_lengths >= max(len(prefix), 1)
            if len(prefix) <= _HEAD:
                found[chunk] |= matched
                continue
            candidates = np.flatnonzero(matched) + first
            for position in range(_HEAD, len(prefix)):
                candidates = candidates[blob[starts[candidates] + position] == prefix[position]]
            found[candidates] = True
    return found


def text_heads(blob: NDArray[np.uint8], starts: IntArray) -> NDArray[np.uint64]:
    """The 8 bytes from each start as a little-endian integer (bytes past the buffer's end as
    copies of its last: the caller compares no byte past a text's end)."""
    if not blob.size:
        return np.zeros(starts.size, dtype=np.uint64)
    at = np.minimum(starts[:, None] + np.arange(_HEAD, dtype=np.int64), blob.size - 1)
    heads: NDArray[np.uint64] = blob[at].view("<u8").reshape(-1)
    return heads


def equal_texts(
    blob: NDArray[np.uint8],
    starts: IntArray,
    lengths: IntArray,
    other_blob: NDArray[np.uint8],
    other_starts: IntArray,
    other_lengths: IntArray,
) -> BoolArray:
    """Whether text i of `blob` equals text i of `other_blob`, byte for byte, for each i:
    every byte of the texts of equal length gathered and compared at once, no `str` made."""
    same: BoolArray = lengths == other_lengths
    rows = np.flatnonzero(same & (lengths > 0))
    if rows.size:
        sizes = lengths[rows]
        firsts = np.cumsum(sizes) - sizes  # where each row's bytes begin in the gathered ones
        within = np.arange(int(sizes.sum()), dtype=np.int64)
        differ = (
            blob[np.repeat(starts[rows] - firsts, sizes) + within]
            != other_blob[np.repeat(other_starts[rows] - firsts, sizes) + within]
        )
        wrong = np.flatnonzero(differ)  # nearly always none: cheaper than a reduce per row
        if wrong.size:
            same[rows[np.searchsorted(firsts, wrong, side="right") - 1]] = False
    return same


class EncodedTexts(Sequence[str]):
    """Texts in one UTF-8 buffer: text i is `blob[starts[i] : starts[i] + lengths[i]]`.

    How the store hands over a model's token texts in bulk (one string per 100,000 tokens
    instead of a row tuple per token); `TokenIndex.place` keeps the buffer as it is, bytes
    between the texts included. Indexing decodes one text; `strings` gives them all.
    """

    __slots__ = ("_heads", "_strings", "blob", "lengths", "starts")

    def __init__(
        self,
        blob: bytes,
        starts: IntArray,
        lengths: IntArray,
        *,
        strings: list[str] | None = None,
    ) -> None:
        starts = np.asarray(starts, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=np.int64)
        if starts.shape != lengths.shape or starts.ndim != 1:
            raise ValueError("starts and lengths must be 1-dimensional and of equal length")
        if starts.size and (
            starts.min() < 0 or lengths.min() < 0 or (starts + lengths).max() > len(blob)
        ):
            raise ValueError(f"every text must lie within the {len(blob)} bytes given")
        if strings is not None and len(strings) != starts.size:
            raise ValueError(f"got {len(strings)} strings for {starts.size} texts")
        self.blob = blob
        self.starts = starts
        self.lengths = lengths
        self._strings = strings
        self._heads: NDArray[np.uint64] | None = None  # made by the first `starting_with`

    @classmethod
    def from_strings(cls, texts: Sequence[str]) -> EncodedTexts:
        """`texts` encoded, kept beside their `str`s (which `strings` then gives back)."""
        strings = texts if isinstance(texts, list) else list(texts)
        joined = "".join(strings)
        blob = joined.encode(ENCODING, ERRORS)
        lengths = np.fromiter(map(len, strings), np.int64, len(strings))
        if len(blob) != len(joined):  # not all ASCII: measure the others' UTF-8
            other = np.flatnonzero(~np.fromiter(map(str.isascii, strings), np.bool_, len(strings)))
            lengths[other] = [len(strings[i].encode(ENCODING, ERRORS)) for i in other.tolist()]
        return cls(blob, np.cumsum(lengths) - lengths, lengths, strings=strings)

    @classmethod
    def from_offsets(cls, blob: bytes, offsets: IntArray) -> EncodedTexts:
        """Texts back to back: text i is `blob[offsets[i] : offsets[i + 1]]`."""
        offsets = np.asarray(offsets, dtype=np.int64)
        return cls(blob, offsets[:-1], np.diff(offsets))

    @classmethod
    def from_terminated(cls, joined: str, terminator: str, count: int) -> EncodedTexts | None:
        """`count` texts, each followed by the ASCII character `terminator`; None when some
        text holds that character (the split then finds more than `count`)."""
        if len(terminator) != 1 or not terminator.isascii():
            raise ValueError(f"the terminator must be one ASCII character, got {terminator!r}")
        strings = joined.split(terminator)
        if strings.pop() != "" or len(strings) != count:
            return None
        blob = joined.encode(ENCODING, ERRORS)
        # An ASCII byte never occurs inside another character's UTF-8 sequence, and none of
        # the texts holds this one: each such byte ends a text.
        ends = np.flatnonzero(np.frombuffer(blob, dtype=np.uint8) == ord(terminator))
        starts = np.zeros(count, dtype=np.int64)
        starts[1:] = ends[:-1] + 1
        lengths = ends - starts
        # Kept without the terminators: text i then starts i bytes earlier.
        compact = blob.replace(terminator.encode("ascii"), b"")
        return cls(compact, starts - np.arange(count), lengths, strings=strings)

    @classmethod
    def concatenate(cls, parts: Sequence[EncodedTexts]) -> EncodedTexts:
        if len(parts) == 1:
            return parts[0]
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return cls(b"", empty, empty, strings=[])
        offsets = np.cumsum([0] + [len(part.blob) for part in parts[:-1]])
        strings: list[str] | None = []
        for part in parts:
            if strings is not None and part._strings is not None:
                strings.extend(part._strings)
            else:
                strings = None
        return cls(
            b"".join(part.blob for part in parts),
            np.concatenate(
                [part.starts + offset for part, offset in zip(parts, offsets.tolist(), strict=True)]
            ),
            np.concatenate([part.lengths for part in parts]),
            strings=strings,
        )

    def take(self, positions: IntArray) -> EncodedTexts:
        """The texts at `positions`, in that order (the buffer shared, not copied)."""
        strings = self._strings
        taken = EncodedTexts(
            self.blob,
            self.starts[positions],
            self.lengths[positions],
            strings=None if strings is None else [strings[i] for i in positions.tolist()],
        )
        if self._heads is not None:
            taken._heads = self._heads[positions]
        return taken

    def starting_with(self, prefixes: Sequence[str]) -> BoolArray:
        """Which texts start with one of `prefixes` (see `starting_with`; each text's first
        bytes are read once and kept: a message's texts are filtered a few times over)."""
        blob = self.array()
        if self._heads is None:
            self._heads = text_heads(blob, self.starts)
        return starting_with(blob, self.starts, self.lengths, prefixes, heads=self._heads)

    def equal_to(self, other: EncodedTexts) -> BoolArray:
        """Whether each text equals the text at the same position of `other`."""
        if len(other) != len(self):
            raise ValueError(f"comparing {len(self)} texts with {len(other)}")
        return equal_texts(
            self.array(), self.starts, self.lengths, other.array(), other.starts, other.lengths
        )

    def array(self) -> NDArray[np.uint8]:
        """The buffer as a numpy array of bytes (a view, no copy)."""
        return np.frombuffer(self.blob, dtype=np.uint8)

    def __len__(self) -> int:
        return int(self.starts.size)

    @overload
    def __getitem__(self, position: int) -> str: ...

    @overload
    def __getitem__(self, position: slice) -> list[str]: ...

    def __getitem__(self, position: int | slice) -> str | list[str]:
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        if self._strings is not None:
            return self._strings[position]
        start = int(self.starts[position])
        end = start + int(self.lengths[position])
        return self.blob[start:end].decode(ENCODING, ERRORS)

    def __iter__(self) -> Iterator[str]:
        return iter(self.strings())

    def strings(self) -> list[str]:
        """Every text as a str (kept: the store's split made them already)."""
        if self._strings is None:
            blob = self.blob
            self._strings = [
                blob[start : start + length].decode(ENCODING, ERRORS)
                for start, length in zip(self.starts.tolist(), self.lengths.tolist(), strict=True)
            ]
        return self._strings


@dataclass(frozen=True)
class HashedTexts:
    """Texts with their `token_hash`es beside them (`hashes[i]` is text i's)."""

    hashes: IntArray
    texts: EncodedTexts

    def __post_init__(self) -> None:
        if self.hashes.shape != (len(self.texts),):
            raise ValueError(f"got {self.hashes.size} hashes for {len(self.texts)} texts")

    @classmethod
    def from_strings(cls, texts: Sequence[str], hashes: IntArray | None = None) -> HashedTexts:
        """`texts` encoded, with `hashes` (default: their `token_hashes`)."""
        hashes = token_hashes(texts) if hashes is None else np.asarray(hashes, dtype=np.int64)
        return cls(hashes, EncodedTexts.from_strings(texts))

    @classmethod
    def concatenate(cls, parts: Sequence[HashedTexts]) -> HashedTexts:
        if len(parts) == 1:
            return parts[0]
        hashes = [part.hashes for part in parts]
        return cls(
            np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.int64),
            EncodedTexts.concatenate([part.texts for part in parts]),
        )

    def __len__(self) -> int:
        return int(self.hashes.size)

    def take(self, positions: IntArray) -> HashedTexts:
        return HashedTexts(self.hashes[positions], self.texts.take(positions))

    def strings(self) -> list[str]:
        return self.texts.strings()

    def distinct(self) -> tuple[HashedTexts, IntArray]:
        """The distinct texts in the order they first appear, and for each text the position
        of its own among them.

        Told apart by hash, then checked byte for byte: two texts of one hash (a chance
        collision of the keyed hash) are told apart by their `str`s instead."""
        if len(self) < 2:
            return self, np.arange(len(self), dtype=np.int64)
        firsts, inverse = _first_of_each(self.hashes)
        # Only a repeat can differ from the first text of its hash, and most of a batch's
        # tokens are repeats (233,034 tokens of 500 messages, 94,080 distinct).
        repeats = np.flatnonzero(firsts[inverse] != np.arange(len(self)))
        if not self.texts.take(repeats).equal_to(self.texts.take(firsts[inverse[repeats]])).all():
            positions: dict[str, int] = {}
            firsts_by_text: list[int] = []
            own = []
            for at, text in enumerate(self.strings()):
                if text not in positions:
                    positions[text] = len(firsts_by_text)
                    firsts_by_text.append(at)
                own.append(positions[text])
            firsts = np.asarray(firsts_by_text, dtype=np.int64)
            inverse = np.asarray(own, dtype=np.int64)
        return self.take(firsts), inverse.astype(np.int64)


def _first_of_each(hashes: IntArray) -> tuple[IntArray, IntArray]:
    """The position of each distinct value's first appearance, in the order of appearance,
    and for each value the index of its own among them: `np.unique`'s return_index and
    return_inverse, reordered, from one unstable argsort (its stable sort took 4 times as
    long: 21 against 5 ms for a batch of 233,034 hashes)."""
    order = np.argsort(hashes)
    ordered = hashes[order]
    new_value = np.concatenate(([True], ordered[1:] != ordered[:-1]))
    starts = np.flatnonzero(new_value)
    group = np.cumsum(new_value) - 1  # each sorted position's value, counted from 0
    first = np.minimum.reduceat(order, starts)  # the least position of each value
    by_appearance = np.argsort(first)
    rank = np.empty_like(by_appearance)
    rank[by_appearance] = np.arange(by_appearance.size)
    inverse = np.empty_like(order)
    inverse[order] = rank[group]
    return first[by_appearance], inverse
