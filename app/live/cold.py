"""Models not held in memory: scored from their messages' own token rows.

What else a read must bring is the scorer's to say (`naive_bayes.reads`): the class totals
alone (Robinson-Fisher), or also sums over the whole vocabulary (|V|, T_c and the absent-token
sum: multinomial, Bernoulli), read once per generation of the model and kept here; a max_vocab
cut ranks every token, so such a model is loaded instead.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from sqlalchemy import Connection

from app.bayes.counts import IntArray
from app.bayes.naive_bayes import NaiveBayesConfig, vocabulary_totals
from app.bayes.scorers import VocabularyTotals
from app.live.held import EngineConfig, LiveModel
from app.store.attributes import read_attribute_sums
from app.store.counts import (
    MessageCounts,
    read_all_counts,
    read_message_counts,
    read_token_ids_starting_with,
)
from app.store.models import ModelRow

# Vocabulary totals kept for models not held, per process: each is a few numbers, so many
# thousands cost well under a megabyte.
MAX_KEPT_TOTALS = 20_000


@dataclass(frozen=True)
class PartialModel:
    """A model as far as some messages need it: their tokens' rows and the class totals.

    Its table numbers the tokens 0..k-1; `token_ids` gives each one's id in the model.
    """

    live: LiveModel
    token_ids: IntArray


def read_partial_model(
    conn: Connection,
    row: ModelRow,
    config: NaiveBayesConfig,
    texts: Sequence[str],
    engine_config: EngineConfig,
    *,
    totals: KeptTotals | None,
) -> PartialModel:
    """The rows of `texts` in model `row`, and V's sums from `totals` when given (through
    `conn`, in one read transaction with `row`)."""
    counts = read_message_counts(conn, row.id, texts, n_classes=len(row.classes))
    sums = None if totals is None else totals.of_model(conn, row, config, counts)
    live = LiveModel.empty(row, engine_config, config=config, totals=sums)
    live.table.place(np.arange(counts.token_ids.size, dtype=np.int64), counts.token_texts)
    token_ids, class_indices, docs, terms = counts.cells()
    if token_ids.size:
        live.table.set_counts(
            np.searchsorted(counts.token_ids, token_ids), class_indices, docs, terms
        )
    live.table.set_class_totals(counts.class_docs, counts.class_terms)
    if config.gaussian_attributes:  # a few rows: the model's attribute sums
        read_attribute_sums(conn, row.id, len(row.classes), into=live.attributes)
    live.synced_generation = row.generation
    return PartialModel(live=live, token_ids=counts.token_ids)


class KeptTotals:
    """V's sums of the models and blends this process scores without holding them whole."""

    def __init__(self) -> None:
        # Per model not held: (generation, V's sums at it); see `of_model`.
        self._models: OrderedDict[
            tuple[int, datetime, float, int, frozenset[str], tuple[str, ...]],
            tuple[int, VocabularyTotals],
        ] = OrderedDict()
        # Per blend (personal and backing model at their generations, and the options the
        # sums depend on): the merged vocabulary's sums; see app/live/blend.py.
        self._blends: OrderedDict[Hashable, VocabularyTotals] = OrderedDict()
        self.blend_lock = threading.Lock()  # held while one blend's sums are made
        self._lock = threading.Lock()  # guards the dicts above for microseconds
        self.reads = 0

    def of_model(
        self, conn: Connection, row: ModelRow, config: NaiveBayesConfig, counts: MessageCounts
    ) -> VocabularyTotals:
        """V's sums for the model at the generation of `row` (read in `conn`'s snapshot):
        kept from an earlier read of that generation, else summed from every count row (no
        texts) in the same snapshot. Every write moves the generation (and expiry the epoch,
        which moves the generation too), so a kept sum is never stale."""
        key = (
            row.id,
            row.created_at,
            config.alpha,
            config.min_df,
            config.stop_words,
            config.excluded_prefixes,
        )
        with self._lock:
            kept = self._models.get(key)
            if kept is not None:
                self._models.move_to_end(key)
        if kept is not None and kept[0] == row.generation:
            return kept[1]
        token_ids, class_indices, docs, terms = read_all_counts(conn, row.id, len(row.classes))
        n_tokens = int(token_ids.max()) + 1 if token_ids.size else 0
        token_docs = np.zeros((len(row.classes), n_tokens), dtype=np.int64)
        token_terms = np.zeros((len(row.classes), n_tokens), dtype=np.int64)
        token_docs[class_indices, token_ids] = docs
        token_terms[class_indices, token_ids] = terms
        stop_word_ids = None
        if config.stop_words:  # V leaves them out: find which of them the model knows
            stop_word_ids = read_message_counts(
                conn, row.id, sorted(config.stop_words), n_classes=len(row.classes)
            ).token_ids
        if config.excluded_prefixes:  # and the tokens of a derived family that is off
            prefixed = read_token_ids_starting_with(conn, row.id, config.excluded_prefixes)
            stop_word_ids = (
                prefixed if stop_word_ids is None else np.concatenate([stop_word_ids, prefixed])
            )
        totals = vocabulary_totals(
            token_docs,
            token_terms,
            counts.class_docs,
            alpha=config.alpha,
            min_df=config.min_df,
            stop_word_ids=stop_word_ids,
        )
        with self._lock:
            self._models[key] = (row.generation, totals)
            self._models.move_to_end(key)
            self.reads += 1
            while len(self._models) > MAX_KEPT_TOTALS:
                self._models.popitem(last=False)
        return totals

    def kept_blend(self, key: Hashable) -> VocabularyTotals | None:
        """The merged vocabulary's sums kept for a blend at `key` (its models' generations)."""
        with self._lock:
            totals = self._blends.get(key)
            if totals is not None:
                self._blends.move_to_end(key)
            return totals

    def keep_blend(self, key: Hashable, totals: VocabularyTotals) -> None:
        """Keep a blend's sums; a few numbers each, the oldest dropped past MAX_KEPT_TOTALS
        (a key names its generations, so an entry is never stale, only unused)."""
        with self._lock:
            self._blends[key] = totals
            self._blends.move_to_end(key)
            self.reads += 1
            while len(self._blends) > MAX_KEPT_TOTALS:
                self._blends.popitem(last=False)
