"""A write to a model: the one way any use case changes a model's counts.

Train, batch, feedback, forget, a bogofilter import and token expiry all go through
`ModelWrite`, inside the caller's one transaction:

1. take the model's row lock and read its next generation (writers of one model queue there,
   so generations commit in order and a change feed read by generation misses nothing);
2. catch this process's copy up to the generation before, so its token ids are exact
   (1 and 2: `ModelWrite.begin`);
3. give new token texts ids (allocated under the lock) and store them;
4. gather count changes (`add`), and store them as one sorted delta plus class totals, and
   the new generation, token-id counter and vocabulary size in one update of the model's row;

then, after the commit (`write_model` and its siblings share one runner), apply the same
changes to the live copy in place, or read the change feed when another write came in between.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TypeVar

import numpy as np
from sqlalchemy import Connection

from app.bayes.attributes import AttributeValues, MomentsDelta, MomentsTally, cell_changes
from app.bayes.counts import IntArray
from app.errors import TooManyNewTokens
from app.live.held import LiveModel
from app.live.models import LiveModels
from app.store.attributes import add_attribute_sums
from app.store.chunks import NegativeCount
from app.store.counts import (
    CountDelta,
    add_class_totals,
    add_token_counts,
    delete_tokens,
    insert_tokens,
)
from app.store.engine import Database
from app.store.models import LockedModelRow, ModelRow, lock_model_row
from app.token_texts import HashedTexts

T = TypeVar("T")


def _no_maximum(live: LiveModel) -> int | None:
    return None


@dataclass(frozen=True)
class TokenLimits:
    """Bounds on the tokens a write may add (0: none), checked before anything is stored:
    `new_per_write` new tokens in one write (one train, batch or feedback request), and the
    tokens in the model's vocabulary after it: its maximum (`maximum_of`) plus as much again,
    or plus `new_per_write` where that is more. Token
    expiry brings a model back to its maximum every few minutes; in between it may grow that
    far (a small maximum must not refuse the next message), no further."""

    new_per_write: int = 0
    # A model's maximum (None: none): its own option, else the server's; the service says,
    # as it judges options (this room does not).
    maximum_of: Callable[[LiveModel], int | None] = _no_maximum

    def per_model(self, live: LiveModel) -> int:
        """The most tokens `live` may hold after a write (0: no bound)."""
        maximum = self.maximum_of(live)
        return maximum + max(maximum, self.new_per_write) if maximum else 0

    def check_request(self, new: int) -> None:
        """TooManyNewTokens when one write would add `new` tokens, more than it may."""
        if self.new_per_write and new > self.new_per_write:
            raise TooManyNewTokens(
                f"this request would add {new} new tokens to the model, more than "
                f"the {self.new_per_write} one request may add (SPAMSIFT_MAX_NEW_TOKENS_PER_"
                "REQUEST); send fewer messages at once"
            )

    def check_before(self, live: LiveModel, tokens: Sequence[HashedTexts]) -> None:
        """Refuse a flood before the write takes the model's lock: the tokens of the messages
        `tokens` the held copy does not know (a copy a little behind counts a few too many, so
        only what passes the bound by far is refused here; the write checks exactly)."""
        # Fewer tokens than the refusal's threshold can never pass it: no lookup (a click's
        # few hundred tokens, any batch but a flood).
        if self.new_per_write and sum(map(len, tokens)) > 2 * self.new_per_write:
            distinct, _ = HashedTexts.concatenate(tokens).distinct()
            with live.lock:
                unknown = int(np.count_nonzero(live.table.tokens.lookup_exact(distinct) < 0))
            if unknown > 2 * self.new_per_write:
                self.check_request(unknown)

    def check(
        self,
        vocabulary: int,
        *,
        new: int,
        earlier: int,
        earlier_in_request: int | None = None,
        per_model: int = 0,
    ) -> None:
        """TooManyNewTokens when `new` more tokens (after `earlier` in this write, of which
        `earlier_in_request` came from the same request, all of them when None) pass a
        bound on a model of `vocabulary` tokens that may hold `per_model` (0: no bound)."""
        self.check_request((earlier if earlier_in_request is None else earlier_in_request) + new)
        if per_model and vocabulary + earlier + new > per_model:
            raise TooManyNewTokens(
                f"the model has {vocabulary} tokens; {earlier + new} new ones would pass "
                f"the {per_model} it may hold until token expiry runs (its maximum, the "
                "model's max_tokens or else SPAMSIFT_MAX_TOKENS_PER_MODEL, plus as much again, "
                "or plus SPAMSIFT_MAX_NEW_TOKENS_PER_REQUEST where that is more); retry after "
                "expiry made room"
            )


NO_TOKEN_LIMITS = TokenLimits()


class ModelWrite:
    """One transaction's write to one model; begun by `write_model`, never kept after it."""

    def __init__(
        self,
        conn: Connection,
        live: LiveModel,
        row: LockedModelRow,
        limits: TokenLimits = NO_TOKEN_LIMITS,
    ) -> None:
        self.conn = conn
        self.live = live
        self.limits = limits
        self.row = row
        self.generation = row.generation
        self._changes = _CountChanges(len(live.classes))
        self._attributes: dict[tuple[str, int], MomentsTally] = {}
        self._attribute_deltas: dict[tuple[str, int], MomentsDelta] = {}  # stored
        self._new_ids: list[IntArray] = []
        self._new_tokens: list[HashedTexts] = []  # beside `_new_ids`
        self._stored: CountDelta | None = None
        self._removed = False
        self._request_starts_at = 0  # new texts before this in the write: other requests'

    @classmethod
    def begin(
        cls, conn: Connection, live: LiveModel, limits: TokenLimits = NO_TOKEN_LIMITS
    ) -> ModelWrite:
        """Take the model's row lock and its next generation, and catch this process's copy
        up to the generation before, so its token ids are exact."""
        row = lock_model_row(conn, live.id, created_at=live.created_at, epoch=live.epoch)
        live.catch_up(conn, row.generation - 1)
        return cls(conn, live, row, limits)

    @property
    def model_id(self) -> int:
        return self.live.id

    @property
    def classes(self) -> tuple[str, ...]:
        return self.live.classes

    def token_ids(self, tokens: HashedTexts) -> IntArray:
        """Return the id of each of `tokens` (repeats allowed), giving unknown ones new ids.

        Each distinct token is looked up (exactly: its stored UTF-8 compared) once; new tokens
        get consecutive ids in the order they first appear, and are stored now. Only the new
        ones are made `str`s.
        """
        distinct, own = tokens.distinct()
        with self.live.lock:  # other threads of this process may be applying changes
            distinct_ids = self.live.table.tokens.lookup_exact(distinct)
        unknown = np.flatnonzero(distinct_ids < 0)
        new = distinct.take(unknown)
        if self._new_tokens and len(new):
            # Texts given new ids earlier in this write are not in the table until after commit.
            earlier = dict(
                zip(
                    (text for part in self._new_tokens for text in part.strings()),
                    np.concatenate(self._new_ids).tolist(),
                    strict=True,
                )
            )
            found = np.fromiter(map(earlier.get, new.strings(), repeat(-1)), np.int64, len(new))
            distinct_ids[unknown] = found
            still = np.flatnonzero(found < 0)
            unknown, new = unknown[still], new.take(still)
        if len(new):
            new_texts = new.strings()
            earlier_count = self._new_token_count()
            self.limits.check(
                self.row.vocabulary,
                new=len(new_texts),
                earlier=earlier_count,
                earlier_in_request=earlier_count - self._request_starts_at,
                per_model=self.limits.per_model(self.live),
            )
            first_id = self.row.allocate_token_ids(len(new_texts))
            insert_tokens(
                self.conn,
                self.live.id,
                first_id=first_id,
                texts=new_texts,
                generation=self.generation,
            )
            new_ids = np.arange(first_id, first_id + len(new_texts), dtype=np.int64)
            distinct_ids[unknown] = new_ids
            self._new_ids.append(new_ids)
            self._new_tokens.append(new)
        ids: IntArray = distinct_ids[own]
        return ids

    def next_request(self) -> None:
        """Start the next request of a group commit: the bound on one request's new tokens
        counts from here."""
        self._request_starts_at = self._new_token_count()

    def _new_token_count(self) -> int:
        return sum(map(len, self._new_tokens))

    def add(
        self,
        token_ids: IntArray,
        token_terms: IntArray,
        class_index: int,
        *,
        sign: int,
        attributes: AttributeValues | None = None,
    ) -> None:
        """Add (sign=+1) or remove (-1) one message of class `class_index`, with its numeric
        `attributes` (exactly those it was trained with, when removed).

        A message from a ledger may name tokens that expired since it was trained: only the
        tokens that remain are counted (their counts still hold this message's share, since
        expiry deletes whole tokens), so forget and relabel stay exact and never negative.
        """
        if self.live.epoch:  # some tokens expired once: keep those known or made just now
            keep = self.live.present(token_ids)
            if self._new_ids and not keep.all():
                keep |= np.isin(token_ids, np.concatenate(self._new_ids))
            if not keep.all():
                token_ids, token_terms = token_ids[keep], token_terms[keep]
        self._changes.add(token_ids, token_terms, class_index, sign=sign)
        for name, change in cell_changes(attributes or {}, sign=sign).items():
            self._attributes.setdefault((name, class_index), MomentsTally()).merge(change)

    def remove_tokens(self, token_ids: IntArray) -> int:
        """Delete tokens and their counts (expiry); return how many were trained tokens.

        Their terms leave the class term totals; the class message counts stay. Every process
        holding the model reads it again (the epoch moves).
        """
        if not token_ids.size:
            return 0
        with self.live.lock:
            docs = self.live.table.token_docs[:, token_ids]
            terms = self.live.table.token_terms[:, token_ids]
        self._changes.class_terms -= terms.sum(axis=1)
        delete_tokens(
            self.conn,
            self.live.id,
            token_ids.tolist(),
            generation=self.generation,
            n_classes=len(self.classes),
        )
        trained = int(np.count_nonzero(docs.sum(axis=0)))
        self.row.add_vocabulary(-trained)
        self.row.bump_epoch()
        self._removed = True
        return trained

    def add_counts(
        self,
        token_ids: IntArray,
        class_indices: IntArray,
        docs: IntArray,
        terms: IntArray,
        *,
        class_docs: IntArray,
    ) -> None:
        """Add counts that are not whole messages (an imported wordlist): per (token, class)
        cell, and `class_docs` messages per class; the class terms follow from `terms`."""
        self._changes.add_cells(token_ids, class_indices, docs, terms, class_docs=class_docs)

    def store(self) -> CountDelta:
        """Write the gathered changes (once); return them as the sorted delta stored."""
        if self._stored is None:
            delta = self._changes.delta()
            vocabulary_change = self._vocabulary_change(delta)  # refuses a negative count
            add_token_counts(
                self.conn,
                self.live.id,
                delta,
                generation=self.generation,
                n_classes=len(self.classes),
            )
            add_class_totals(
                self.conn,
                self.live.id,
                class_docs=self._changes.class_docs.tolist(),
                class_terms=self._changes.class_terms.tolist(),
            )
            self.row.add_vocabulary(vocabulary_change)
            self._attribute_deltas = {key: t.delta() for key, t in self._attributes.items()}
            with self.live.lock:  # caught up under the row lock: the stored values
                current = self.live.attributes.copy() if self._attribute_deltas else None
            if current is not None:
                add_attribute_sums(
                    self.conn,
                    self.live.id,
                    self._attribute_deltas,
                    current=current,
                    generation=self.generation,
                )
            self.row.save(self.conn)
            self._stored = delta
        return self._stored

    def _vocabulary_change(self, delta: CountDelta) -> int:
        """Tokens this delta brings into (+) or drops out of (-) the trained vocabulary.
        NegativeCount, before anything is stored, when it would drive a count below zero (a
        journal row is not checked by the database: this is where a count is known).

        Exact: the live copy was caught up to the previous generation under the model's lock.
        """
        if not delta.token_ids.size:
            return 0
        with self.live.lock:
            held = delta.token_ids < self.live.table.n_tokens
            cells = (delta.class_indices[held], delta.token_ids[held])
            docs_before = self.live.table.token_docs[cells]
            terms_before = self.live.table.token_terms[cells]
        if (
            (docs_before + delta.docs[held]).min(initial=0) < 0
            or (terms_before + delta.terms[held]).min(initial=0) < 0
            or (~held & ((delta.docs < 0) | (delta.terms < 0))).any()
        ):
            raise NegativeCount("a write would drive a token count below zero")
        token_ids, position = np.unique(delta.token_ids, return_inverse=True)
        added = np.zeros(token_ids.size, dtype=np.int64)
        np.add.at(added, position, delta.docs)
        before = np.zeros(token_ids.size, dtype=np.int64)
        with self.live.lock:
            held = token_ids < self.live.table.n_tokens
            before[held] = self.live.table.token_docs[:, token_ids[held]].sum(axis=0)
        after = before + added
        return int(np.count_nonzero((before == 0) & (after > 0))) - int(
            np.count_nonzero((before > 0) & (after == 0))
        )

    def apply(self, models: LiveModels) -> None:
        """After the commit: update the live copy in place, or read the feed if behind."""
        assert self._stored is not None
        if self._removed:  # deletions are not in any feed: read the model again when used
            models.forget(self.live.name)
            return
        new_ids = np.concatenate(self._new_ids) if self._new_ids else np.zeros(0, np.int64)
        applied = self.live.apply_own_write(
            self.generation,
            new_token_ids=new_ids,
            new_tokens=HashedTexts.concatenate(self._new_tokens),
            delta=self._stored,
            class_docs=self._changes.class_docs,
            class_terms=self._changes.class_terms,
            attributes=self._attribute_deltas,
        )
        if not applied:
            models.sync(self.live)
        else:
            models.resize(self.live)


def write_model(
    db: Database,
    models: LiveModels,
    live: LiveModel,
    work: Callable[[ModelWrite], T],
    *,
    limits: TokenLimits = NO_TOKEN_LIMITS,
) -> T:
    """Run `work` on a write to `live` in one transaction; apply it to `live` after commit.
    `limits` bound the new tokens it may add (TooManyNewTokens, nothing written).

    `work` may run more than once (the transaction is retried on a deadlock or a
    serialization failure); each run gets a fresh write, and only the committed one is applied.
    """
    return _run_writes(
        db,
        models,
        lambda conn: [ModelWrite.begin(conn, live, limits)],
        lambda writes: work(writes[0]),
    )


def write_models(
    db: Database,
    models: LiveModels,
    lives: Sequence[LiveModel],
    work: Callable[[list[ModelWrite]], T],
    *,
    limits: TokenLimits = NO_TOKEN_LIMITS,
) -> T:
    """`write_model` for several models in one transaction (feedback that trains a personal
    model and the model backing it: both or neither). `work` gets one write per model, in the
    order of `lives`; the models are locked in id order, so two such writes cannot deadlock."""

    def begin(conn: Connection) -> list[ModelWrite]:
        by_id = {
            live.id: ModelWrite.begin(conn, live, limits)
            for live in sorted(lives, key=lambda m: m.id)
        }
        return [by_id[live.id] for live in lives]

    return _run_writes(db, models, begin, work)


def create_and_write(
    db: Database,
    models: LiveModels,
    create: Callable[[Connection], ModelRow],
    work: Callable[[ModelWrite], T],
) -> T:
    """Make a model (`create` inserts its row) and write to it in the same transaction, so a
    failed write leaves no model; hold it in this process after the commit."""

    def begin(conn: Connection) -> list[ModelWrite]:
        row = create(conn)
        live = LiveModel.empty(row, models.engine_config)
        live.synced_generation = row.generation  # nothing to read: it was made just now
        return [ModelWrite.begin(conn, live)]

    return _run_writes(db, models, begin, lambda writes: work(writes[0]), hold=True)


def _run_writes(
    db: Database,
    models: LiveModels,
    begin: Callable[[Connection], list[ModelWrite]],
    work: Callable[[list[ModelWrite]], T],
    *,
    hold: bool = False,
) -> T:
    """The one runner of the helpers above: in one transaction, `begin` the writes, run `work`
    on them and store them; after the commit, apply each to its live copy (first held by this
    process, with `hold`). A retried transaction begins fresh writes: only the committed ones
    are applied."""
    writes: list[ModelWrite] = []

    def run(conn: Connection) -> T:
        writes[:] = begin(conn)
        result = work(list(writes))
        for write in writes:
            write.store()
        return result

    result = db.run(run)
    for write in writes:
        if hold:
            models.hold(write.live)
        write.apply(models)
    return result


class _CountChanges:
    """The (token, class) count changes of one transaction, gathered as arrays, summed once.

    Replaces a dict updated token by token in Python: training 4,868 spamassassin messages
    spent 30 % of its time there.
    """

    def __init__(self, n_classes: int) -> None:
        self.n_classes = n_classes
        self.class_docs = np.zeros(n_classes, dtype=np.int64)
        self.class_terms = np.zeros(n_classes, dtype=np.int64)
        self._token_ids: list[IntArray] = []
        self._class_indices: list[IntArray] = []
        self._docs: list[IntArray] = []
        self._terms: list[IntArray] = []

    def add(
        self, token_ids: IntArray, token_terms: IntArray, class_index: int, *, sign: int
    ) -> None:
        self._token_ids.append(token_ids)
        self._class_indices.append(np.full(token_ids.size, class_index, dtype=np.int64))
        self._docs.append(np.full(token_ids.size, sign, dtype=np.int64))
        self._terms.append(sign * token_terms)
        self.class_docs[class_index] += sign
        self.class_terms[class_index] += sign * int(token_terms.sum())

    def add_cells(
        self,
        token_ids: IntArray,
        class_indices: IntArray,
        docs: IntArray,
        terms: IntArray,
        *,
        class_docs: IntArray,
    ) -> None:
        self._token_ids.append(token_ids)
        self._class_indices.append(class_indices)
        self._docs.append(docs)
        self._terms.append(terms)
        self.class_docs += class_docs
        np.add.at(self.class_terms, class_indices, terms)

    def delta(self) -> CountDelta:
        """Return the summed non-zero changes, sorted by (token_id, class_index)."""
        if not self._token_ids:
            empty = np.zeros(0, dtype=np.int64)
            return CountDelta(empty, empty, empty, empty)
        cells = np.concatenate(self._token_ids) * self.n_classes + np.concatenate(
            self._class_indices
        )
        keys, position = np.unique(cells, return_inverse=True)
        docs = np.zeros(keys.size, dtype=np.int64)
        terms = np.zeros(keys.size, dtype=np.int64)
        np.add.at(docs, position, np.concatenate(self._docs))
        np.add.at(terms, position, np.concatenate(self._terms))
        changed = (docs != 0) | (terms != 0)
        keys = keys[changed]
        return CountDelta(
            token_ids=keys // self.n_classes,
            class_indices=keys % self.n_classes,
            docs=docs[changed],
            terms=terms[changed],
        )
