"""Bernoulli naive Bayes (SPEC §3):

    p_cw = (D_cw + alpha) / (N_c + 2·alpha)
    score_c(x) = log P(c) + Σ_{w∈V} log(1 - p_cw) + Σ_{w∈x∩V} [log p_cw - log(1 - p_cw)]

with 1 - p_cw = (N_c - D_cw + alpha) / (N_c + 2·alpha).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse
from numpy.typing import NDArray

from app.bayes.counts import BoolArray, CountTable, FloatArray, IntArray
from app.bayes.scorers.base import (
    CachedScoring,
    Changes,
    ClassCounts,
    Model,
    Options,
    Reads,
    Scorer,
    TokenCache,
    VocabularyTotals,
    columns,
    margins,
)

Counts = NDArray[np.signedinteger[Any]] | FloatArray


def log_present(docs: Counts, alpha: float) -> FloatArray:
    """log(D + alpha), the numerator of log p."""
    result: FloatArray = np.log(docs + alpha)
    return result


def log_absent(class_docs: IntArray | int, docs: Counts, alpha: float) -> FloatArray:
    """log(N - D + alpha), the numerator of log(1 - p) (N - D clipped at 0)."""
    result: FloatArray = np.log(np.maximum(np.asarray(class_docs) - docs, 0) + alpha)
    return result


def log_denominator(class_docs: IntArray | FloatArray, alpha: float) -> FloatArray:
    """log(N + 2·alpha), the denominator of p and 1 - p."""
    result: FloatArray = np.log(class_docs + 2.0 * alpha)
    return result


def log_odds(class_docs: IntArray | int, docs: Counts, alpha: float) -> FloatArray:
    """log p - log(1 - p)."""
    result: FloatArray = log_present(docs, alpha) - log_absent(class_docs, docs, alpha)
    return result


class _Cache(TokenCache):
    """log p_cw - log(1 - p_cw) per token of V (0 elsewhere) and Σ_V log(N_c - D_cw + alpha).

    Both depend on N_c, so a class whose N_c changed has its column recomputed in full,
    O(|V|) vectorised (about 10 ms per million tokens); tokens changed without a change of
    N_c (the database change feed) are updated alone.
    """

    def __init__(self, n_classes: int, alpha: float) -> None:
        super().__init__(alpha, n_classes)
        self.class_docs: IntArray = np.zeros(n_classes, dtype=np.int64)
        self.absent_numerator: FloatArray = np.zeros(n_classes)

    @property
    def absent(self) -> FloatArray:
        """Σ_{w∈V} log(1 - p_cw), shape (n_classes,)."""
        denominator = log_denominator(self.class_docs, self.alpha)
        result: FloatArray = self.absent_numerator - self.vocab_size * denominator
        return result

    def rebuild(self, table: CountTable, mask: BoolArray) -> None:
        self.mask = mask.copy()
        self.vocab_size = int(mask.sum())
        self.class_docs = table.class_docs.copy()
        self.weights = np.zeros((mask.size, len(table.classes)))
        for class_index in range(len(table.classes)):
            self._rebuild_class(table, class_index)

    def update(self, table: CountTable, changes: Changes) -> None:
        token_ids, in_vocabulary = changes.token_ids, changes.in_vocabulary
        class_docs = table.class_docs.copy()
        kept = class_docs == self.class_docs  # classes whose N_c did not change
        was_in = self.mask[token_ids]
        new_docs = table.token_docs[:, token_ids]
        absent_old = log_absent(
            self.class_docs[:, None], changes.old_docs[:, was_in], self.alpha
        ).sum(axis=1)
        absent_new = log_absent(class_docs[:, None], new_docs[:, in_vocabulary], self.alpha).sum(
            axis=1
        )
        self.absent_numerator[kept] += absent_new[kept] - absent_old[kept]
        self.weights[token_ids] = np.where(
            in_vocabulary[:, None], log_odds(class_docs[:, None], new_docs, self.alpha).T, 0.0
        )
        self.mask[token_ids] = in_vocabulary
        self.vocab_size += int(in_vocabulary.sum()) - int(was_in.sum())
        self.class_docs = class_docs
        for class_index in np.flatnonzero(~kept).tolist():
            self._rebuild_class(table, class_index)

    def use_totals(self, totals: VocabularyTotals) -> None:
        self.vocab_size = totals.size
        self.absent_numerator = totals.absent.copy()

    def _rebuild_class(self, table: CountTable, class_index: int) -> None:
        n_tokens = table.n_tokens
        mask = self.mask[:n_tokens]
        docs = table.token_docs[class_index, mask]
        class_docs = self.class_docs[class_index]
        self.weights[:n_tokens][mask, class_index] = log_odds(class_docs, docs, self.alpha)
        self.absent_numerator[class_index] = log_absent(class_docs, docs, self.alpha).sum()


class _Scoring(CachedScoring["_Cache"]):
    def joint_log_likelihood(self, X: scipy.sparse.csr_array) -> FloatArray:
        self.model.refresh(self.cache)
        cache = self.cache
        present = columns(X, self.model.table.n_tokens)
        indicators = scipy.sparse.csr_array(
            ((present.data > 0).astype(np.float64), present.indices, present.indptr),
            shape=present.shape,
        )
        product = np.asarray(indicators @ cache.weights[: present.shape[1]])
        scores: FloatArray = product + cache.absent + self.model.log_prior()
        return scores

    def contributions(self, x_row: scipy.sparse.csr_array) -> tuple[IntArray, IntArray, FloatArray]:
        self.model.refresh(self.cache)
        present = columns(x_row, self.model.table.n_tokens)
        token_ids = present.indices.astype(np.int64)
        keep = self.cache.mask[token_ids] & (present.data > 0)
        token_ids = token_ids[keep]
        favoured, strength = margins(self.cache.weights[token_ids])
        return token_ids, favoured, strength


class Bernoulli(Scorer):
    name = "bernoulli"
    reads = Reads.ROWS_AND_TOTALS

    def bind(self, model: Model) -> _Scoring:
        return _Scoring(model, _Cache(len(model.table.classes), model.config.alpha))

    def token_ratios(
        self, counts: ClassCounts, token_ids: IntArray, options: Options
    ) -> FloatArray:
        """log p_cw - log p_¬c,w."""
        alpha = options.alpha
        docs = counts.token_docs[:, token_ids].astype(np.float64)
        others = docs.sum(axis=0) - docs
        messages = np.asarray(counts.class_docs, dtype=np.float64)[:, None]
        other_messages = messages.sum() - messages
        ratios: FloatArray = (log_present(docs, alpha) - log_denominator(messages, alpha)) - (
            log_present(others, alpha) - log_denominator(other_messages, alpha)
        )
        return ratios


SCORER = Bernoulli()
