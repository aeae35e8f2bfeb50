"""Per-(class, token) counts of one model, in growable int32 arrays (int64 once needed).

A `CountTable` is the in-memory twin of the counts the database stores: for each
(class, token) the messages containing the token (`docs`, Bernoulli D_cw) and its occurrences
(`terms`, multinomial T_cw), and per class the trained messages N_c and their total terms.
Token ids are dense, 0..n_tokens-1, and are the ids the database hands out, so a table is
loaded with `place` and `set_counts` and kept in step with the change feed; `add` trains or
forgets one message in memory (tests, `spamsift evaluate`). Messages are scored as term
matrices: `vectorize` from token -> count maps, `vectorize_hashed` from the tokenizer's
hashes and counts (no text per token).

Every change bumps `generation` and is written to a short journal (the touched token ids
and their counts before the change), so a `Classifier` refreshes only what changed since it
last looked (`changes_since`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, TypeVar, cast

import numpy as np
import scipy.sparse
from numpy.typing import ArrayLike, NDArray

from app.bayes.tokens import TokenIndex, grown_capacity
from app.token_texts import HashedTexts

IntArray = NDArray[np.int64]
# Counts are kept as int32 (half the memory of a model) until a value outgrows it: then that
# array is widened to int64 in place. Readers get either; sums and arithmetic with int64
# values promote to int64.
CountArray = NDArray[np.int32] | NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]

_MIN_CAPACITY = 64
_INT32_MAX = int(np.iinfo(np.int32).max)
# The journal keeps the old counts of at most this many touched ids; a consumer further
# behind than that rebuilds its caches in full (as it does on the first look).
_JOURNAL_MAX_IDS = 1 << 16


@dataclass(frozen=True)
class TableChanges:
    """Token ids touched since some generation, with their counts at that generation."""

    token_ids: IntArray  # (n_changed,) unique, ascending
    old_docs: IntArray  # (n_classes, n_changed)
    old_terms: IntArray  # (n_classes, n_changed)


@dataclass(frozen=True)
class _JournalEntry:
    generation: int  # the table's generation after this change
    token_ids: IntArray
    old_docs: IntArray
    old_terms: IntArray


class CountTable:
    """Per-(class, token) counts of one model.

    Token ids are dense 0..n_tokens-1 and are the SAME ids the database stores, so the table
    can be loaded from and kept in step with the database. Storage is two arrays of shape
    (n_classes, capacity), int32 until a count outgrows it, whose capacity grows as ids
    arrive (amortised O(1) per new token); no Python object is kept per cell or per token
    (`TokenIndex` holds the texts).

    Not thread-safe: the caller serialises changes against each other and against scoring.
    """

    def __init__(self, classes: Sequence[str]) -> None:
        names = tuple(classes)
        if len(names) < 2:
            raise ValueError(f"classes must name at least 2 classes, got {list(names)}")
        if len(set(names)) != len(names):
            raise ValueError(f"classes must be distinct, got {list(names)}")
        if not all(isinstance(name, str) and name for name in names):
            raise ValueError(f"classes must be non-empty strings, got {list(names)}")
        self.classes: tuple[str, ...] = names
        self.tokens = TokenIndex()  # id <-> token text ("" for a slot not yet known)
        self._docs: CountArray = np.zeros((len(names), _MIN_CAPACITY), dtype=np.int32)
        self._terms: CountArray = np.zeros((len(names), _MIN_CAPACITY), dtype=np.int32)
        self._class_docs: IntArray = np.zeros(len(names), dtype=np.int64)
        self._class_terms: IntArray = np.zeros(len(names), dtype=np.int64)
        self._generation = 0
        self._journal: list[_JournalEntry] = []
        self._journal_ids = 0
        # Consumers synced at a generation below this one cannot be served from the journal.
        self._journal_base = 0

    # ----------------------------------------------------------------- construction

    @classmethod
    def from_matrix(
        cls,
        X: scipy.sparse.sparray | scipy.sparse.spmatrix | ArrayLike,
        y: Sequence[str] | ArrayLike,
        classes: Sequence[str],
        *,
        tokens: Sequence[str] | None = None,
    ) -> CountTable:
        """Count a term matrix X (n_messages, n_tokens) with labels y (class names or indices).

        docs are the (X > 0) counts, terms the sums of X, per class. Token texts default to
        zero-padded "t000…" names, so their text order is their id order.
        """
        matrix = _as_csr(X)
        table = cls(classes)
        n_messages, n_tokens = matrix.shape
        class_indices = table.class_indices(y)
        if class_indices.shape != (n_messages,):
            raise ValueError(f"y must have {n_messages} labels, got {class_indices.shape[0]}")
        if tokens is None:
            width = len(str(max(n_tokens - 1, 0)))
            tokens = [f"t{i:0{width}d}" for i in range(n_tokens)]
        if len(tokens) != n_tokens:
            raise ValueError(f"tokens must have {n_tokens} entries, got {len(tokens)}")
        table.tokens = TokenIndex.from_texts(tokens)
        labels = scipy.sparse.csr_array(
            (
                np.ones(n_messages, dtype=np.int64),
                (class_indices, np.arange(n_messages)),
            ),
            shape=(len(table.classes), n_messages),
        )
        present = matrix.copy()
        present.data = (present.data > 0).astype(np.int64)
        token_terms = np.asarray((labels @ matrix).toarray(), dtype=np.int64)
        token_docs = np.asarray((labels @ present).toarray(), dtype=np.int64)
        table._reserve(n_tokens)
        table._fit_counts(token_docs, token_terms)
        table._docs[:, :n_tokens] = token_docs
        table._terms[:, :n_tokens] = token_terms
        table._class_docs = np.bincount(class_indices, minlength=len(table.classes)).astype(
            np.int64
        )
        table._class_terms = token_terms.sum(axis=1)
        table._bump_unjournaled()
        return table

    def copy(self) -> CountTable:
        """Return an independent copy (same ids, counts and generation; empty journal)."""
        twin = CountTable(self.classes)
        twin.tokens = self.tokens.copy()
        twin._docs = self._docs.copy()
        twin._terms = self._terms.copy()
        twin._class_docs = self._class_docs.copy()
        twin._class_terms = self._class_terms.copy()
        twin._generation = self._generation
        twin._journal_base = self._generation
        return twin

    # ----------------------------------------------------------------- read access

    @property
    def n_tokens(self) -> int:
        """Number of id slots (max id + 1)."""
        return len(self.tokens)

    @property
    def capacity(self) -> int:
        """Id slots allocated (grown ahead of n_tokens, see `grown_capacity`)."""
        return int(self._docs.shape[1])

    @property
    def generation(self) -> int:
        """Counter bumped on every change, so derived caches know when to refresh."""
        return self._generation

    @property
    def token_docs(self) -> CountArray:
        """Read-only view, shape (n_classes, n_tokens): messages of class c containing token."""
        return _read_only(self._docs[:, : self.n_tokens])

    @property
    def token_terms(self) -> CountArray:
        """Read-only view, shape (n_classes, n_tokens): occurrences of token in class c."""
        return _read_only(self._terms[:, : self.n_tokens])

    @property
    def class_docs(self) -> IntArray:
        """Read-only view, shape (n_classes,): trained messages per class, N_c."""
        return _read_only(self._class_docs)

    @property
    def class_terms(self) -> IntArray:
        """Read-only view, shape (n_classes,): total occurrences of all tokens per class."""
        return _read_only(self._class_terms)

    def class_index(self, label: str) -> int:
        """Return the index of class `label`."""
        try:
            return self.classes.index(label)
        except ValueError:
            raise ValueError(f"label must be one of {list(self.classes)}, got {label!r}") from None

    def class_indices(self, labels: Sequence[str] | ArrayLike) -> IntArray:
        """Return class indices for labels given as class names or as indices."""
        values = np.asarray(labels)
        if values.dtype.kind in "iu":
            indices = values.astype(np.int64)
            if indices.size and (indices.min() < 0 or indices.max() >= len(self.classes)):
                raise ValueError(f"class indices must be in 0..{len(self.classes) - 1}")
            return indices
        return np.fromiter(
            (self.class_index(str(label)) for label in values.ravel()),
            dtype=np.int64,
            count=values.size,
        )

    def lookup(self, tokens: Sequence[str], *, exact: bool = False) -> IntArray:
        """Return the ids of tokens, -1 for a token the table does not know (see
        `TokenIndex.lookup` for `exact`)."""
        return self.tokens.lookup(tokens, exact=exact)

    def vectorize(self, messages: Sequence[Mapping[str, int]]) -> scipy.sparse.csr_array:
        """Return the term matrix (n_messages, n_tokens) of token -> count maps.

        Unknown tokens and non-positive counts are dropped. All messages' tokens are looked
        up in one pass and sorted per row at once (a token appears once per message).
        """
        n_messages = len(messages)
        lengths = np.fromiter(map(len, messages), np.int64, n_messages)
        total = int(lengths.sum())
        ids = self.lookup(list(chain.from_iterable(messages)))
        counts = np.fromiter(
            chain.from_iterable(message.values() for message in messages), np.int64, total
        )
        return self._term_matrix(lengths, ids, counts)

    def vectorize_hashed(
        self,
        messages: Sequence[tuple[IntArray, IntArray]],
        texts: Callable[[int], Sequence[str]],
    ) -> scipy.sparse.csr_array:
        """`vectorize` of messages given as (hashes, counts) of their distinct tokens.

        The hashes are the index's (`token_hashes`: the tokenizer's `token_hash`), so no text
        is made: one concatenation and one lookup for the batch. `texts(row)` gives message
        `row`'s texts in the order of its hashes; it is asked only for a message holding a
        token whose hash two indexed texts share (see `TokenIndex.lookup_hashes`).
        """
        n_messages = len(messages)
        lengths = np.fromiter((hashes.size for hashes, _ in messages), np.int64, n_messages)
        if n_messages:
            hashes = np.concatenate([hashes for hashes, _ in messages]).astype(np.int64, copy=False)
            counts = np.concatenate([counts for _, counts in messages]).astype(np.int64, copy=False)
        else:
            hashes = counts = np.zeros(0, dtype=np.int64)
        if hashes.shape != counts.shape:
            raise ValueError("each message needs one count per hash")
        starts = np.cumsum(lengths) - lengths

        def texts_at(positions: IntArray) -> list[str]:
            rows = np.searchsorted(starts, positions, side="right") - 1
            made: dict[int, Sequence[str]] = {}
            found = []
            for row, position in zip(rows.tolist(), positions.tolist(), strict=True):
                if row not in made:
                    made[row] = texts(row)
                found.append(made[row][position - int(starts[row])])
            return found

        ids = self.tokens.lookup_hashes(hashes, texts_at) if hashes.size else hashes.copy()
        return self._term_matrix(lengths, ids, counts)

    def _term_matrix(
        self, lengths: IntArray, ids: IntArray, counts: IntArray
    ) -> scipy.sparse.csr_array:
        """The CSR matrix of messages of `lengths` distinct tokens, their ids (-1: unknown)
        and counts one after the other; unknown tokens and non-positive counts dropped."""
        n_messages = lengths.size
        rows = np.repeat(np.arange(n_messages, dtype=np.int64), lengths)
        keep = (ids >= 0) & (counts > 0)
        rows, ids, counts = rows[keep], ids[keep], counts[keep]
        indptr = np.zeros(n_messages + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n_messages), out=indptr[1:])
        matrix = scipy.sparse.csr_array((counts, ids, indptr), shape=(n_messages, self.n_tokens))
        # Each row's ids sorted in place, row by row: the matrix of a batch of 1,000 messages
        # (350,000 known tokens) in 19 ms, where it took 34 with one argsort of the batch's
        # (row, id) keys (`python -m bench.lab.classify_steps`).
        matrix.sort_indices()
        return matrix

    def changes_since(self, generation: int) -> TableChanges | None:
        """Return the token ids changed after `generation` with their counts back then.

        None when the journal no longer reaches back that far: rebuild from scratch then.
        Changes of class totals alone show as an empty id list; compare `class_docs`.
        """
        if generation > self._generation:
            raise ValueError(f"generation {generation} is ahead of the table's {self._generation}")
        if generation < self._journal_base:
            return None
        entries = [entry for entry in self._journal if entry.generation > generation]
        n_classes = len(self.classes)
        if not entries:
            empty = np.zeros(0, dtype=np.int64)
            return TableChanges(
                empty, np.zeros((n_classes, 0), np.int64), empty.reshape(n_classes, 0)
            )
        ids = np.concatenate([entry.token_ids for entry in entries])
        docs = np.concatenate([entry.old_docs for entry in entries], axis=1)
        terms = np.concatenate([entry.old_terms for entry in entries], axis=1)
        # np.unique reports the first occurrence: the oldest value, the one at `generation`.
        unique_ids, first = np.unique(ids, return_index=True)
        return TableChanges(unique_ids, docs[:, first], terms[:, first])

    # ----------------------------------------------------------------- changes

    def intern(self, tokens: Sequence[str]) -> IntArray:
        """Return the ids of tokens, giving each unknown token the next free dense id."""
        known = self.n_tokens
        ids = self.tokens.intern(tokens)
        if self.n_tokens > known:
            self._reserve(self.n_tokens)
            self._bump(np.arange(known, self.n_tokens, dtype=np.int64))
        return ids

    def place(self, token_ids: ArrayLike, tokens: Sequence[str] | HashedTexts) -> None:
        """Register token texts under ids chosen by the database (see `TokenIndex.place`).

        Ids may arrive out of order and leave gaps (slots with text "" until placed);
        capacity grows geometrically. Re-placing the same (id, text) is a no-op.
        """
        ids = _as_ids(token_ids)
        if ids.shape[0] != len(tokens):
            raise ValueError(f"got {ids.shape[0]} token ids but {len(tokens)} tokens")
        changed = self.tokens.place(ids, tokens)
        self._reserve(self.n_tokens)
        if changed.size:
            self._bump(changed)

    def add(
        self,
        class_index: int,
        token_ids: ArrayLike,
        token_terms: ArrayLike,
        *,
        sign: int = 1,
    ) -> None:
        """Train (sign=+1) or forget (sign=-1) ONE message of class `class_index`.

        token_ids are unique known ids, token_terms their occurrences (>= 1) in the message:
        docs += sign per id, terms += sign * token_terms, class_docs[c] += sign and
        class_terms[c] += sign * sum. Raises ValueError, changing nothing, if any count
        would go negative.
        """
        if sign not in (1, -1):
            raise ValueError(f"sign must be +1 or -1, got {sign}")
        if not 0 <= class_index < len(self.classes):
            raise ValueError(
                f"class_index must be in 0..{len(self.classes) - 1}, got {class_index}"
            )
        ids = _as_ids(token_ids)
        terms = np.asarray(token_terms, dtype=np.int64).ravel()
        if terms.shape != ids.shape:
            raise ValueError(f"got {ids.shape[0]} token ids but {terms.shape[0]} term counts")
        if ids.size:
            if ids.min() < 0 or ids.max() >= self.n_tokens:
                raise ValueError(f"token ids must be in 0..{self.n_tokens - 1}")
            if np.unique(ids).size != ids.size:
                raise ValueError("token ids of one message must be unique")
            if terms.min() < 1:
                raise ValueError(f"token_terms must be >= 1, got {int(terms.min())}")
        new_docs = self._docs[class_index, ids].astype(np.int64) + sign
        new_terms = self._terms[class_index, ids].astype(np.int64) + sign * terms
        new_class_docs = int(self._class_docs[class_index]) + sign
        new_class_terms = int(self._class_terms[class_index]) + sign * int(terms.sum())
        if (
            new_class_docs < 0
            or new_class_terms < 0
            or (ids.size and (new_docs.min() < 0 or new_terms.min() < 0))
        ):
            raise ValueError(
                f"forgetting this message would make counts of class "
                f"{self.classes[class_index]!r} negative; it was not trained"
            )
        self._fit_counts(new_docs, new_terms)
        self._bump(ids)
        self._docs[class_index, ids] = new_docs
        self._terms[class_index, ids] = new_terms
        self._class_docs[class_index] = new_class_docs
        self._class_terms[class_index] = new_class_terms

    def set_counts(
        self,
        token_ids: ArrayLike,
        class_indices: ArrayLike,
        docs: ArrayLike,
        terms: ArrayLike,
    ) -> None:
        """Set absolute (token, class) cells, as read from the database.

        For the initial load and the change feed. Ids beyond n_tokens grow the table (their
        text stays "" until placed). A cell given twice takes its last value.
        """
        ids = _as_ids(token_ids)
        classes = np.asarray(class_indices, dtype=np.int64).ravel()
        doc_values = np.asarray(docs, dtype=np.int64).ravel()
        term_values = np.asarray(terms, dtype=np.int64).ravel()
        if not ids.shape == classes.shape == doc_values.shape == term_values.shape:
            raise ValueError("token_ids, class_indices, docs and terms must have equal lengths")
        if not ids.size:
            return
        if ids.min() < 0:
            raise ValueError(f"token ids must be >= 0, got {int(ids.min())}")
        if classes.min() < 0 or classes.max() >= len(self.classes):
            raise ValueError(f"class indices must be in 0..{len(self.classes) - 1}")
        if doc_values.min() < 0 or term_values.min() < 0:
            raise ValueError("docs and terms must be >= 0")
        self._grow(int(ids.max()) + 1)
        # Keep the last value of each (id, class) cell: the last of each run of equal keys in a
        # stable sort. (np.unique hashes int64 keys: 0.5 s for a million cells, this 0.1 s.)
        cells = ids * len(self.classes) + classes
        order = np.argsort(cells, kind="stable")
        sorted_cells = cells[order]
        last = order[np.append(sorted_cells[1:] != sorted_cells[:-1], True)]
        sorted_ids = ids[order]
        self._fit_counts(doc_values, term_values)
        self._bump(sorted_ids[np.insert(sorted_ids[1:] != sorted_ids[:-1], 0, True)])
        self._docs[classes[last], ids[last]] = doc_values[last]
        self._terms[classes[last], ids[last]] = term_values[last]

    def set_class_totals(self, class_docs: ArrayLike, class_terms: ArrayLike) -> None:
        """Set the per-class totals N_c and terms, shape (n_classes,), as read from the database."""
        new_docs = np.asarray(class_docs, dtype=np.int64).ravel()
        new_terms = np.asarray(class_terms, dtype=np.int64).ravel()
        n_classes = len(self.classes)
        if new_docs.shape != (n_classes,) or new_terms.shape != (n_classes,):
            raise ValueError(f"class_docs and class_terms must have shape ({n_classes},)")
        if new_docs.min() < 0 or new_terms.min() < 0:
            raise ValueError("class_docs and class_terms must be >= 0")
        self._bump(np.zeros(0, dtype=np.int64))
        self._class_docs = new_docs.copy()
        self._class_terms = new_terms.copy()

    # ----------------------------------------------------------------- internals

    def _grow(self, n_tokens: int) -> None:
        """Extend the id slots to n_tokens, new slots unnamed and zero."""
        self._reserve(n_tokens)
        self.tokens.grow(n_tokens)

    def reserve(self, n_tokens: int) -> None:
        """Make room for ids 0..n_tokens-1 at once, exactly: a load that knows how many ids
        the model has given out and reads them in parts then grows nothing on the way, and
        keeps no room beyond them (growing by an eighth leaves up to that much unused)."""
        self.tokens.reserve(n_tokens)
        self._resize(n_tokens)

    def drop_journal(self) -> None:
        """Forget what changed so far: nothing has read the table yet (a model just
        loaded), so no one will ask what changed since an earlier generation."""
        self._journal.clear()
        self._journal_ids = 0
        self._journal_base = self._generation

    def _reserve(self, n_tokens: int) -> None:
        """Make room for n_tokens columns (`grown_capacity`: amortised O(1) per id)."""
        if n_tokens > self._docs.shape[1]:
            self._resize(grown_capacity(self._docs.shape[1], n_tokens))

    def _resize(self, capacity: int) -> None:
        if capacity <= self._docs.shape[1]:
            return
        for name in ("_docs", "_terms"):
            old: CountArray = getattr(self, name)
            new = np.zeros((len(self.classes), capacity), dtype=old.dtype)
            new[:, : old.shape[1]] = old
            setattr(self, name, new)

    def _fit_counts(self, docs: NDArray[np.integer[Any]], terms: NDArray[np.integer[Any]]) -> None:
        """Widen the docs or terms array to int64 if int32 cannot hold the values to store."""
        if docs.size and self._docs.dtype != np.int64 and int(docs.max()) > _INT32_MAX:
            self._docs = self._docs.astype(np.int64)
        if terms.size and self._terms.dtype != np.int64 and int(terms.max()) > _INT32_MAX:
            self._terms = self._terms.astype(np.int64)

    def _bump(self, token_ids: IntArray) -> None:
        """Advance the generation, journaling the current counts of ids about to change."""
        self._generation += 1
        if token_ids.size > _JOURNAL_MAX_IDS:
            self._journal.clear()
            self._journal_ids = 0
            self._journal_base = self._generation
            return
        self._journal.append(
            _JournalEntry(
                self._generation,
                token_ids.copy(),
                self._docs[:, token_ids].astype(np.int64),
                self._terms[:, token_ids].astype(np.int64),
            )
        )
        self._journal_ids += token_ids.size
        while self._journal_ids > _JOURNAL_MAX_IDS:
            dropped = self._journal.pop(0)
            self._journal_ids -= dropped.token_ids.size
            self._journal_base = dropped.generation

    def _bump_unjournaled(self) -> None:
        """Advance the generation after a bulk change no journal entry describes."""
        self._generation += 1
        self.drop_journal()


def _as_ids(token_ids: ArrayLike) -> IntArray:
    ids = np.asarray(token_ids)
    if ids.size and ids.dtype.kind not in "iu":
        raise ValueError(f"token ids must be integers, got dtype {ids.dtype}")
    return ids.astype(np.int64, copy=False).ravel()


ArrayT = TypeVar("ArrayT", bound=NDArray[Any])


def _read_only(array: ArrayT) -> ArrayT:
    view = array.view()
    view.flags.writeable = False
    return view


def _as_csr(X: scipy.sparse.sparray | scipy.sparse.spmatrix | ArrayLike) -> scipy.sparse.csr_array:
    """Return X as a CSR array of non-negative counts (no copy when it already is one)."""
    if isinstance(X, scipy.sparse.csr_array):
        matrix = X
    elif isinstance(X, scipy.sparse.sparray | scipy.sparse.spmatrix):
        # The stubs type no overload for "any sparse"; every sparse format converts to CSR.
        matrix = scipy.sparse.csr_array(cast(Any, X))
    else:
        dense: NDArray[np.float64] = np.asarray(X, dtype=np.float64)
        matrix = scipy.sparse.csr_array(dense)
    if not matrix.has_canonical_format:  # duplicate entries would count a token twice
        matrix = matrix.copy()
        matrix.sum_duplicates()
    if matrix.ndim != 2:
        raise ValueError(f"X must be 2-dimensional, got shape {matrix.shape}")
    if matrix.nnz and matrix.data.min() < 0:
        raise ValueError("X must hold non-negative counts")
    return matrix
