"""Multinomial naive Bayes (SPEC §3):

P(w|c) = (T_cw + alpha) / (T_c + alpha|V|),  T_c = Σ_{w∈V} T_cw
score_c(x) = log P(c) + Σ_{w∈x∩V} n_w log P(w|c)
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from app.bayes.counts import BoolArray, CountArray, CountTable, FloatArray, IntArray
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


def log_numerator(terms: CountArray | FloatArray, alpha: float) -> FloatArray:
    """log(T_cw + alpha)."""
    result: FloatArray = np.log(terms + alpha)
    return result


def log_denominator(class_terms: IntArray | FloatArray, size: int, alpha: float) -> FloatArray:
    """log(T_c + alpha|V|), |V| = size."""
    result: FloatArray = np.log(class_terms + alpha * size)
    return result


class _Cache(TokenCache):
    """log(T_cw + alpha) per token of V (0 elsewhere) plus a V indicator column, and T_c.

    Refreshed from the touched tokens: their log(T_cw + alpha) and V membership, then the
    per-class scalars T_c (kept exactly, as integers) and log(T_c + alpha|V|): O(K·m) for a
    trained message of m distinct tokens, whatever the table size.
    """

    def __init__(self, n_classes: int, alpha: float) -> None:
        super().__init__(alpha, n_classes + 1)
        self.vocab_terms: IntArray = np.zeros(n_classes, dtype=np.int64)
        self.log_denominator: FloatArray = np.zeros(n_classes)

    def rebuild(self, table: CountTable, mask: BoolArray) -> None:
        n_classes = len(table.classes)
        terms = table.token_terms[:, mask]
        self.mask = mask.copy()
        self.weights = np.zeros((mask.size, n_classes + 1))
        self.weights[mask, :n_classes] = log_numerator(terms.T, self.alpha)
        self.weights[mask, n_classes] = 1.0
        self.vocab_terms = terms.sum(axis=1)
        self.vocab_size = int(mask.sum())
        self._update_denominator()

    def update(self, table: CountTable, changes: Changes) -> None:
        token_ids, in_vocabulary = changes.token_ids, changes.in_vocabulary
        n_classes = len(table.classes)
        was_in = self.mask[token_ids]
        new_terms = table.token_terms[:, token_ids]
        self.vocab_terms += new_terms[:, in_vocabulary].sum(axis=1) - changes.old_terms[
            :, was_in
        ].sum(axis=1)
        self.vocab_size += int(in_vocabulary.sum()) - int(was_in.sum())
        self.weights[token_ids, :n_classes] = np.where(
            in_vocabulary[:, None], log_numerator(new_terms.T, self.alpha), 0.0
        )
        self.weights[token_ids, n_classes] = in_vocabulary
        self.mask[token_ids] = in_vocabulary
        self._update_denominator()

    def use_totals(self, totals: VocabularyTotals) -> None:
        self.vocab_size = totals.size
        self.vocab_terms = totals.terms.copy()
        self._update_denominator()

    def _update_denominator(self) -> None:
        if self.vocab_size == 0:  # no token of V in any message: the term never applies
            self.log_denominator = np.zeros_like(self.log_denominator)
        else:
            self.log_denominator = log_denominator(self.vocab_terms, self.vocab_size, self.alpha)


class _Scoring(CachedScoring["_Cache"]):
    def joint_log_likelihood(self, X: scipy.sparse.csr_array) -> FloatArray:
        self.model.refresh(self.cache)
        cache = self.cache
        table = self.model.table
        present = columns(X, table.n_tokens)
        n_classes = len(table.classes)
        product = np.asarray(present @ cache.weights[: present.shape[1]])
        scores: FloatArray = (
            product[:, :n_classes]
            - product[:, n_classes : n_classes + 1] * cache.log_denominator
            + self.model.log_prior()
        )
        return scores

    def contributions(self, x_row: scipy.sparse.csr_array) -> tuple[IntArray, IntArray, FloatArray]:
        self.model.refresh(self.cache)
        cache = self.cache
        present = columns(x_row, self.model.table.n_tokens)
        token_ids = present.indices.astype(np.int64)
        counts = present.data.astype(np.float64)
        keep = cache.mask[token_ids] & (counts > 0)
        token_ids, counts = token_ids[keep], counts[keep]
        n_classes = len(self.model.table.classes)
        log_likelihood = cache.weights[token_ids, :n_classes] - cache.log_denominator
        favoured, strength = margins(counts[:, None] * log_likelihood)
        return token_ids, favoured, strength


class Multinomial(Scorer):
    name = "multinomial"
    reads = Reads.ROWS_AND_TOTALS

    def bind(self, model: Model) -> _Scoring:
        return _Scoring(model, _Cache(len(model.table.classes), model.config.alpha))

    def token_ratios(
        self, counts: ClassCounts, token_ids: IntArray, options: Options
    ) -> FloatArray:
        """log P(w|c) - log P(w|¬c)."""
        alpha, size = options.alpha, token_ids.size
        terms = counts.token_terms[:, token_ids].astype(np.float64)
        others = terms.sum(axis=0) - terms
        class_totals = terms.sum(axis=1, keepdims=True)
        other_totals = class_totals.sum() - class_totals
        ratios: FloatArray = (
            log_numerator(terms, alpha) - log_denominator(class_totals, size, alpha)
        ) - (log_numerator(others, alpha) - log_denominator(other_totals, size, alpha))
        return ratios


SCORER = Multinomial()
