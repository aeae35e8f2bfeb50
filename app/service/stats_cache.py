"""What the dashboard's stats keep between requests: the token figures of each model, per model
generation, and the database's part of the last answer.

Ranking a model's tokens and counting its vocabulary reads every token (a few hundred
milliseconds of numpy on a million tokens). It runs once per generation of the model, on a
copy of its count arrays taken under the model's lock (milliseconds), so classification never
waits for it, and a second stats request of the same generation (the dashboard's range switch,
another page, another operator) costs nothing. One ranking at a time in the process: several
operators opening the overview at once must not take every core from classification.

This is not what classification scores with (`app.live`): dropping it changes no verdict.

The database's part of an answer (activity, relations, the database's size) is kept too, with
the time it was read: while the database cannot be read, stats answer from memory and say so.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from app.bayes.naive_bayes import NaiveBayesConfig, top_tokens_of, vocabulary_of
from app.bayes.scorers.base import ClassCounts
from app.live.held import LiveModel

# Entries of a few dozen tokens each: ten thousand models cost a few megabytes at most.
MAX_KEPT_MODELS = 10_000


@dataclass(frozen=True)
class TokenFigures:
    """A model's vocabulary and strongest tokens at one generation."""

    generation: int
    tokens: int  # distinct tokens counted in at least one trained message
    effective: int  # of those, the ones in V (min_df, stop words, max_vocab)
    top: dict[str, list[tuple[str, float]]]  # per class, strongest first; {} until trained


@dataclass(frozen=True)
class DatabaseFigures:
    """The part of a stats answer read from the database, and when it was read."""

    model_id: int
    read_at: datetime
    figures: dict[str, Any]  # activity, last_trained_hour, relations, database_bytes


# What a model's token figures depend on: the model (id, creation, epoch), its generation and
# the options that decide V and the ratios.
_Key = tuple[int, datetime, int, int, NaiveBayesConfig]


class StatsCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards the dicts for microseconds
        self._ranking = threading.Lock()  # one ranking at a time (see the module's doc)
        self._tokens: OrderedDict[str, tuple[_Key, TokenFigures]] = OrderedDict()
        self._database: OrderedDict[str, DatabaseFigures] = OrderedDict()

    def token_figures(self, live: LiveModel, *, limit: int) -> TokenFigures:
        """The token figures of `live` as it is now: kept ones if its generation has not
        moved, else ranked anew from a copy of its arrays."""
        kept = self._kept_tokens(live)
        if kept is not None:
            return kept
        with self._ranking:
            kept = self._kept_tokens(live)  # ranked by another request meanwhile
            if kept is not None:
                return kept
            key, figures = _rank(live, limit=limit)
        with self._lock:
            _put(self._tokens, live.name, (key, figures))
        return figures

    def _kept_tokens(self, live: LiveModel) -> TokenFigures | None:
        with self._lock:
            kept = self._tokens.get(live.name)
        if kept is None or kept[0] != _key_of(live):
            return None
        return kept[1]

    def keep_database_figures(self, name: str, figures: DatabaseFigures) -> None:
        with self._lock:
            _put(self._database, name, figures)

    def database_figures(self, name: str) -> DatabaseFigures | None:
        with self._lock:
            return self._database.get(name)


def _put(kept: OrderedDict[str, Any], name: str, value: Any) -> None:
    kept[name] = value
    kept.move_to_end(name)
    while len(kept) > MAX_KEPT_MODELS:
        kept.popitem(last=False)


def _key_of(live: LiveModel) -> _Key:
    return (live.id, live.created_at, live.epoch, live.synced_generation, live.config)


def _rank(live: LiveModel, *, limit: int) -> tuple[_Key, TokenFigures]:
    """Copy what ranking needs under the model's lock, then rank outside it.

    Measured on the spamassassin corpus's model (694,467 tokens): the copy holds the lock
    ~10 ms; ranking outside it took 0.4 s, all of which classification waited for before.
    """
    with live.lock:
        key = _key_of(live)
        table, config = live.table, live.config
        # Both counts are copied, whichever the scorer ranks by: the ranking (app.bayes) knows
        # which it reads, and the copy of a million tokens' terms is a few milliseconds.
        counts = ClassCounts(
            table.token_docs.copy(), table.token_terms.copy(), table.class_docs.copy(), live.classes
        )
        tokens = table.tokens.copy()
    total_docs = counts.token_docs.sum(axis=0)
    in_vocabulary = vocabulary_of(total_docs, tokens, config)
    trained = bool(counts.class_docs.size) and bool(np.all(counts.class_docs > 0))
    top = (
        top_tokens_of(counts, tokens, np.flatnonzero(in_vocabulary), config, limit=limit)
        if trained
        else {}
    )
    figures = TokenFigures(
        generation=key[3],
        tokens=int(np.count_nonzero(total_docs)),
        effective=int(np.count_nonzero(in_vocabulary)),
        top=top,
    )
    return key, figures
