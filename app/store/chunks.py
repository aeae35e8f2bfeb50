"""How token counts are laid out in the database: packed chunks behind a journal.

A model's counts live in `count_chunks` rows, each holding CHUNK_IDS consecutive token ids'
entries: per token its docs and terms for each class and the generation that last changed
it, little-endian int64. A write does not rewrite the chunks it touches: it appends its
whole delta to `count_journal` as one row, and once the journal holds JOURNAL_CELLS cells the
writer folds it into the chunks, under the model's row lock, in the same transaction. So a
"mark as spam" click is one small insert, not an upsert per (token, class), and a batch
writes each chunk it touches once (docs/performance.md, "Storage layout for training").

Everything here is pure: bytes in, arrays out. The SQL is in `app.store.counts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]

# Token ids a chunk holds. Scoring a message of a model not held reads one chunk per token
# of it (its tokens are spread over the whole id range), so a chunk is kept small: 16 ids of
# two classes are 640 bytes. The storage lab measured 16 against 64 and 256.
CHUNK_IDS = 16
# The journal is folded into the chunks once it would hold more (token, class) cells than
# this: about 20 clicks of ~400 cells. Every read of a model not held reads the whole journal
# (32 bytes a cell), so it stays a few hundred KB at most.
JOURNAL_CELLS = 8_192
_CELL_COLUMNS = 4  # a journal cell: token id, class index, docs, terms
_INT = np.dtype("<i8")


class NegativeCount(ValueError):
    """A write would drive a count below zero: a bug, refused before anything is stored."""


def entry_width(n_classes: int) -> int:
    """int64 values per token in a chunk: docs and terms per class, then its generation."""
    return 2 * n_classes + 1


def chunk_of(token_ids: IntArray) -> IntArray:
    """The chunk number holding each token id."""
    return token_ids // CHUNK_IDS


@dataclass(frozen=True)
class TokenEntries:
    """Some tokens' counts: docs and terms per class (one row per token) and the generation
    that last changed each; token ids ascending and distinct."""

    token_ids: IntArray
    docs: IntArray  # (tokens, classes)
    terms: IntArray  # (tokens, classes)
    generations: IntArray

    @classmethod
    def empty(cls, n_classes: int) -> TokenEntries:
        none = np.zeros(0, dtype=np.int64)
        return cls(
            none, np.zeros((0, n_classes), np.int64), np.zeros((0, n_classes), np.int64), none
        )

    def __len__(self) -> int:
        return int(self.token_ids.size)

    def where(self, keep: NDArray[np.bool_]) -> TokenEntries:
        return TokenEntries(
            self.token_ids[keep], self.docs[keep], self.terms[keep], self.generations[keep]
        )

    def among(self, token_ids: IntArray) -> TokenEntries:
        """The entries of those of `token_ids` present here."""
        return self.where(np.isin(self.token_ids, token_ids))

    def add_to(self, token_ids: IntArray, docs: IntArray, terms: IntArray) -> None:
        """Add these entries' counts to the rows of `docs` and `terms` (one per token of the
        ascending `token_ids`) whose token is here; tokens not in `token_ids` are left out."""
        if not len(self) or not token_ids.size:
            return
        rows = np.minimum(np.searchsorted(token_ids, self.token_ids), token_ids.size - 1)
        here = token_ids[rows] == self.token_ids
        docs[rows[here]] += self.docs[here]
        terms[rows[here]] += self.terms[here]

    def plus(self, other: TokenEntries) -> TokenEntries:
        """Both sets of tokens; where a token is in both, its counts summed and the later
        generation (`other` holds deltas on top of these: the journal on the chunks)."""
        if not len(other):
            return self
        if not len(self):
            return other
        token_ids, position = np.unique(
            np.concatenate([self.token_ids, other.token_ids]), return_inverse=True
        )
        n_classes = self.docs.shape[1]
        docs = np.zeros((token_ids.size, n_classes), dtype=np.int64)
        terms = np.zeros((token_ids.size, n_classes), dtype=np.int64)
        generations = np.zeros(token_ids.size, dtype=np.int64)
        np.add.at(docs, position, np.concatenate([self.docs, other.docs]))
        np.add.at(terms, position, np.concatenate([self.terms, other.terms]))
        np.maximum.at(generations, position, np.concatenate([self.generations, other.generations]))
        return TokenEntries(token_ids, docs, terms, generations)

    def cells(self, *, every_class: bool) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """(token ids, class indices, docs, terms) per (token, class): every class of each
        token (absolute values a change feed sets, zeros included), or only the cells that
        hold a count."""
        n_tokens, n_classes = self.docs.shape
        token_ids = np.repeat(self.token_ids, n_classes)
        class_indices = np.tile(np.arange(n_classes, dtype=np.int64), n_tokens)
        docs, terms = self.docs.ravel(), self.terms.ravel()
        if every_class:
            return token_ids, class_indices, docs.copy(), terms.copy()
        held = (docs != 0) | (terms != 0)
        return token_ids[held], class_indices[held], docs[held], terms[held]


def unpack_chunks(numbers: Sequence[int], blobs: Sequence[bytes], n_classes: int) -> TokenEntries:
    """The entries present (ever counted, not deleted) in chunks `numbers` stored as `blobs`."""
    if not numbers:
        return TokenEntries.empty(n_classes)
    width = entry_width(n_classes)
    table = np.frombuffer(b"".join(blobs), dtype=_INT).reshape(len(numbers), CHUNK_IDS, width)
    token_ids = (
        np.asarray(numbers, dtype=np.int64)[:, None] * CHUNK_IDS
        + np.arange(CHUNK_IDS, dtype=np.int64)
    ).ravel()
    return _present(token_ids, table.reshape(-1, width), n_classes)


def entry_counts(blobs: Sequence[bytes | None], n_classes: int) -> tuple[IntArray, IntArray]:
    """The docs and terms (a row per blob, a column per class) of single tokens' entries, each
    cut from its chunk; zeros for None (no chunk holds the token yet)."""
    width = entry_width(n_classes)
    empty = bytes(width * _INT.itemsize)
    table = np.frombuffer(
        b"".join([empty if blob is None else blob for blob in blobs]), dtype=_INT
    ).reshape(-1, width)
    return (
        table[:, :n_classes].astype(np.int64),
        table[:, n_classes : 2 * n_classes].astype(np.int64),
    )


def _present(token_ids: IntArray, table: NDArray[np.int64], n_classes: int) -> TokenEntries:
    """The entries `table` (one row per token of `token_ids`) that are present (a generation
    past 0), in ascending token ids."""
    order = np.argsort(token_ids, kind="stable")
    token_ids, table = token_ids[order], table[order]
    present = table[:, -1] > 0
    table = table[present]
    return TokenEntries(
        token_ids[present],
        table[:, :n_classes].astype(np.int64),
        table[:, n_classes : 2 * n_classes].astype(np.int64),
        table[:, -1].astype(np.int64),
    )


def pack_delta(
    token_ids: IntArray, class_indices: IntArray, docs: IntArray, terms: IntArray
) -> bytes:
    """One write's count changes as a journal row's bytes."""
    return np.stack([token_ids, class_indices, docs, terms], axis=1).astype(_INT).tobytes()


def delta_cells(blob: bytes) -> int:
    return len(blob) // (_CELL_COLUMNS * _INT.itemsize)


def journal_entries(rows: Sequence[tuple[int, bytes]], n_classes: int) -> TokenEntries:
    """The summed deltas of journal rows (generation, delta), per token, each with the last
    generation that changed it."""
    kept = [(generation, blob) for generation, blob in rows if blob]
    if not kept:
        return TokenEntries.empty(n_classes)
    cells = np.frombuffer(b"".join(bytes(blob) for _, blob in kept), dtype=_INT).reshape(
        -1, _CELL_COLUMNS
    )
    generations = np.repeat(
        np.array([generation for generation, _ in kept], dtype=np.int64),
        [delta_cells(bytes(blob)) for _, blob in kept],
    )
    columns = cells.astype(np.int64)
    return cell_entries(
        columns[:, 0],
        columns[:, 1],
        columns[:, 2],
        columns[:, 3],
        generations,
        n_classes=n_classes,
    )


def cell_entries(
    token_ids: IntArray,
    class_indices: IntArray,
    docs: IntArray,
    terms: IntArray,
    generations: IntArray,
    *,
    n_classes: int,
) -> TokenEntries:
    """(token, class) cells summed per token, each token with its latest cell's generation."""
    unique_ids, position = np.unique(token_ids, return_inverse=True)
    token_docs = np.zeros((unique_ids.size, n_classes), dtype=np.int64)
    token_terms = np.zeros((unique_ids.size, n_classes), dtype=np.int64)
    np.add.at(token_docs, (position, class_indices), docs)
    np.add.at(token_terms, (position, class_indices), terms)
    last = np.zeros(unique_ids.size, dtype=np.int64)
    np.maximum.at(last, position, generations)
    return TokenEntries(unique_ids.astype(np.int64), token_docs, token_terms, last)


def fold(
    numbers: IntArray, blobs: Sequence[bytes | None], changes: TokenEntries, n_classes: int
) -> tuple[list[bytes], IntArray]:
    """The chunks `numbers` (stored as `blobs`, None where there is none yet) with `changes`
    added: counts summed, each changed token's generation set; with each chunk's generation,
    its latest entry's (a change feed reads the chunks changed after its own generation).
    NegativeCount when a count would go below zero."""
    width = entry_width(n_classes)
    empty = bytes(CHUNK_IDS * width * _INT.itemsize)
    table = (
        np.frombuffer(b"".join(empty if blob is None else bytes(blob) for blob in blobs), _INT)
        .reshape(numbers.size, CHUNK_IDS, width)
        .copy()
    )
    row = np.searchsorted(numbers, chunk_of(changes.token_ids))
    slot = changes.token_ids % CHUNK_IDS
    table[row, slot, :n_classes] += changes.docs
    table[row, slot, n_classes : 2 * n_classes] += changes.terms
    table[row, slot, -1] = np.maximum(table[row, slot, -1], changes.generations)
    if table[:, :, : 2 * n_classes].min(initial=0) < 0:
        raise NegativeCount("a write would drive a token count below zero")
    return [chunk.tobytes() for chunk in table], table[:, :, -1].max(axis=1)


def without(
    numbers: IntArray, blobs: Sequence[bytes], token_ids: IntArray, n_classes: int
) -> tuple[list[bytes], IntArray]:
    """The chunks `numbers` with the entries of `token_ids` cleared (deleted tokens), and each
    chunk's generation; 0 for a chunk left empty."""
    width = entry_width(n_classes)
    table = (
        np.frombuffer(b"".join(bytes(blob) for blob in blobs), _INT)
        .reshape(numbers.size, CHUNK_IDS, width)
        .copy()
    )
    table[np.searchsorted(numbers, chunk_of(token_ids)), token_ids % CHUNK_IDS] = 0
    return [chunk.tobytes() for chunk in table], table[:, :, -1].max(axis=1)
