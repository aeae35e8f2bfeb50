"""Robinson's token probabilities combined by Fisher's inverse chi-square (SPEC §3).

This is the `chi2_spamprob` of SpamBayes and the `fisher` method of bogofilter. For the m
tokens of a message that deviate enough from 0.5, with f = f(w) and g = 1 - f(w):

    H = Q(-2 Σ ln f, 2m)    Q = chi-square survival function ("C⁻¹" in Robinson's notes)
    S = Q(-2 Σ ln g, 2m)
    P(spam) = (1 + H - S) / 2

Orientation: a spammy token has f near 1, so ln f near 0 and -2 Σ ln f is small for spam,
making H = Q(small) near 1; meanwhile ln g is very negative, -2 Σ ln g is large and S near 0:
P -> (1 + 1 - 0)/2 = 1. Ham mirrors it, P -> 0. bogofilter's `fis_get_spamicity` computes
exactly this, `(1 + q_pr - p_pr) / 2` with q_pr = Q(-2 ln Π f) and p_pr = Q(-2 ln Π(1-f)).
SpamBayes writes the same value as (S' - H' + 1)/2 with its S' = 1 - Q(-2 Σ ln g) and
H' = 1 - Q(-2 Σ ln f) (the SPEC's "(1 + S - H)/2" uses those names).

Both P and 1 - P are sums of two non-negative tail probabilities,

    P     = (Q(x_h) + CDF(x_s)) / 2,      1 - P = (CDF(x_h) + Q(x_s)) / 2,

so they are computed as log-sum-exp of log tails, never as 1 - (something near 1): the log
odds log P - log(1 - P) keep ranking messages long after P itself rounds to 0 or 1.

Fisher's method assumes the m tokens independent; they are not (a word and the pairs it is in,
a long newsletter's hundreds of related words), so -2 Σ ln f grows with m without bound and a
long message can outrank any shorter one on evidence counted many times. `rf_evidence_cap` k
bounds it by Brown's method for dependent tests: with m > k, the statistic of m correlated
tokens is read as c·χ²(2m/c) with c = m/k, that is (k/m)·(-2 Σ ln f) on 2k degrees of
freedom: the message's mean evidence per token, counted as k independent tokens. A message of
at most k tokens is scored as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse
from scipy import special

from app.bayes.attributes import AttributeEvidence
from app.bayes.counts import CountArray, FloatArray, IntArray
from app.bayes.scorers.base import (
    SPAM_CLASSES,
    ClassCounts,
    Model,
    Options,
    Reads,
    Scorer,
    Scoring,
    columns,
)

# Below this a tail probability is taken from its closed form in log space instead.
_TINY = 1e-280
_LN2 = float(np.log(2.0))


def token_probabilities(
    spam_docs: IntArray,
    ham_docs: IntArray,
    *,
    spam_messages: int,
    ham_messages: int,
    strength: float,
    assumed: float,
) -> tuple[FloatArray, FloatArray]:
    """Return f(w) and 1 - f(w) for tokens with docs D_spam,w and D_ham,w, shape (n,).

    p(w) = (D_spam/N_spam) / (D_spam/N_spam + D_ham/N_ham), f(w) = (s·x + n·p)/(s + n),
    n = D_spam + D_ham. Where p(w) is undefined (no docs, or a class with no message) f is
    x, as in bogofilter. 1 - f is computed from its own formula, not by subtraction, so
    ln(1 - f) stays exact for tokens with f near 1.
    """
    spam = spam_docs.astype(np.float64)
    ham = ham_docs.astype(np.float64)
    n = spam + ham
    spam_rate = spam * ham_messages  # ∝ D_spam/N_spam, sharing the denominator N_spam·N_ham
    ham_rate = ham * spam_messages
    rates = spam_rate + ham_rate
    defined = (rates > 0) & (spam_messages > 0) & (ham_messages > 0)
    p = np.divide(spam_rate, rates, out=np.zeros_like(rates), where=defined)
    q = np.divide(ham_rate, rates, out=np.zeros_like(rates), where=defined)
    weight = np.where(defined, n, 0.0)
    f = (strength * assumed + weight * p) / (strength + weight)
    g = (strength * (1.0 - assumed) + weight * q) / (strength + weight)
    return f, g


def combine(
    log_f_sums: FloatArray, log_g_sums: FloatArray, counts: IntArray
) -> tuple[FloatArray, FloatArray]:
    """Return (log P(spam), log P(ham)) from Σ ln f, Σ ln(1 - f) and m per message.

    A message with no usable token (m = 0) gets P = 0.5.
    """
    log_spam = np.full(log_f_sums.shape, -_LN2)
    log_ham = np.full(log_f_sums.shape, -_LN2)
    used = counts > 0
    if used.any():
        m = counts[used].astype(np.float64)
        x_ham = -2.0 * log_f_sums[used]
        x_spam = -2.0 * log_g_sums[used]
        log_spam[used] = np.logaddexp(log_chi2_sf(x_ham, m), log_chi2_cdf(x_spam, m)) - _LN2
        log_ham[used] = np.logaddexp(log_chi2_cdf(x_ham, m), log_chi2_sf(x_spam, m)) - _LN2
    return log_spam, log_ham


def bound_evidence(
    log_f_sums: FloatArray, log_g_sums: FloatArray, counts: IntArray, cap: int | None
) -> tuple[FloatArray, FloatArray, IntArray]:
    """Return Σ ln f, Σ ln(1 - f) and m with more than `cap` tokens read as `cap` independent
    ones: both sums times cap/m, m = cap (Brown's correction; `cap` None: unchanged)."""
    if cap is None:
        return log_f_sums, log_g_sums, counts
    scale = cap / np.maximum(counts, cap).astype(np.float64)
    return log_f_sums * scale, log_g_sums * scale, np.minimum(counts, cap)


def log_chi2_sf(x: FloatArray, m: FloatArray) -> FloatArray:
    """Return log Q(x, 2m): the log survival function of chi-square with 2m (m >= 1) dof.

    Q(x, 2m) = Γ(m, x/2)/Γ(m) = (x/2)^m e^(-x/2) U(1, m + 1, x/2) / Γ(m) (DLMF 8.5.3 with
    Kummer's transformation) where the direct value underflows.
    """
    y = np.maximum(x, 0.0) / 2.0
    direct = special.gammaincc(m, y)
    out = np.empty_like(y)
    near = direct > _TINY
    out[near] = np.log(direct[near])
    far = ~near
    if far.any():
        yf, mf = y[far], m[far]
        out[far] = (
            mf * np.log(yf) - yf - special.gammaln(mf) + np.log(special.hyperu(1.0, mf + 1.0, yf))
        )
    return out


def log_chi2_cdf(x: FloatArray, m: FloatArray) -> FloatArray:
    """Return log(1 - Q(x, 2m)): the log distribution function of chi-square with 2m dof.

    P(m, y) = y^m e^(-y) M(1, m + 1, y) / Γ(m + 1), y = x/2 (DLMF 8.5.1) where the direct
    value underflows; -inf at x = 0.
    """
    y = np.maximum(x, 0.0) / 2.0
    direct = special.gammainc(m, y)
    out = np.full_like(y, -np.inf)
    near = direct > _TINY
    out[near] = np.log(direct[near])
    far = ~near & (y > 0)
    if far.any():
        yf, mf = y[far], m[far]
        out[far] = (
            mf * np.log(yf)
            - yf
            - special.gammaln(mf + 1.0)
            + np.log(special.hyp1f1(1.0, mf + 1.0, yf))
        )
    return out


def attribute_clues(
    evidence: AttributeEvidence, *, spam: int, ham: int, strength: float, assumed: float
) -> tuple[FloatArray, FloatArray]:
    """f and 1 - f of each attribute of `evidence`, as a token's f(w).

    A Gaussian attribute enters Fisher's combination as one more clue: its p is the spam
    class's density over the sum of both classes' densities at the message's value (Graham's
    p(w) with densities in place of the shares D_c,w/N_c, so equal priors as there), shrunk
    toward x as a token seen n = n_spam + n_ham times: f = (s·x + n·p)/(s + n). 1 - f keeps
    its own formula, so ln(1 - f) stays exact where p rounds to 1.
    """
    difference = evidence.log_densities[:, spam] - evidence.log_densities[:, ham]
    p = special.expit(difference)
    q = special.expit(-difference)
    n = (evidence.observations[:, spam] + evidence.observations[:, ham]).astype(np.float64)
    f = (strength * assumed + n * p) / (strength + n)
    g = (strength * (1.0 - assumed) + n * q) / (strength + n)
    return np.asarray(f, dtype=np.float64), np.asarray(g, dtype=np.float64)


class _Scoring(Scoring):
    """No cache: f(w) depends on N_spam and N_ham for every token, so it is computed for the
    tokens present in X only, O(nnz)."""

    def joint_log_likelihood(self, X: scipy.sparse.csr_array) -> FloatArray:
        return self.assess(X)[0]

    def assess(self, X: scipy.sparse.csr_array) -> tuple[FloatArray, IntArray]:
        rows, _, f, g = self._evidence(X)
        return self._combined(rows, f, g, X.shape[0]), np.bincount(
            rows, minlength=X.shape[0]
        ).astype(np.int64)

    def assess_with(
        self, X: scipy.sparse.csr_array, evidence: AttributeEvidence
    ) -> tuple[FloatArray, IntArray]:
        """Each attribute is one more clue of Fisher's combination (see `attribute_clues`)."""
        rows, _, f, g = self._evidence(X)
        used = np.bincount(rows, minlength=X.shape[0]).astype(np.int64)
        clue_rows, clue_f, clue_g = self._attribute_clues(evidence)
        return (
            self._combined(
                np.concatenate([rows, clue_rows]),
                np.concatenate([f, clue_f]),
                np.concatenate([g, clue_g]),
                X.shape[0],
            ),
            used,
        )

    def attribute_contributions(self, evidence: AttributeEvidence) -> tuple[IntArray, FloatArray]:
        _, f, g = self._attribute_clues(evidence, keep_weak=True)
        weights = np.log(f) - np.log(g)
        classes = self.model.table.classes
        spam, ham = classes.index("spam"), classes.index("ham")
        return np.where(weights > 0, spam, ham), np.abs(weights)

    def _attribute_clues(
        self, evidence: AttributeEvidence, *, keep_weak: bool = False
    ) -> tuple[IntArray, FloatArray, FloatArray]:
        """(row, f, 1 - f) of each attribute clue with |f - 0.5| >= min_dev (see
        `attribute_clues`)."""
        options = self.model.config
        classes = self.model.table.classes
        f, g = attribute_clues(
            evidence,
            spam=classes.index("spam"),
            ham=classes.index("ham"),
            strength=options.rf_strength,
            assumed=options.rf_assumed,
        )
        strong = np.ones(f.size, dtype=np.bool_)
        if not keep_weak:
            strong = np.abs(f - 0.5) >= options.rf_min_dev
        return evidence.rows[strong], f[strong], g[strong]

    def _combined(
        self, rows: IntArray, f: FloatArray, g: FloatArray, n_messages: int
    ) -> FloatArray:
        log_spam, log_ham = combine(
            *bound_evidence(
                np.asarray(np.bincount(rows, weights=np.log(f), minlength=n_messages), np.float64),
                np.asarray(np.bincount(rows, weights=np.log(g), minlength=n_messages), np.float64),
                np.bincount(rows, minlength=n_messages),
                self.model.config.rf_evidence_cap,
            )
        )
        table = self.model.table
        scores = np.empty((n_messages, 2))
        scores[:, table.class_index("spam")] = log_spam
        scores[:, table.class_index("ham")] = log_ham
        return scores

    def tokens_used(self, X: scipy.sparse.csr_array) -> IntArray:
        rows, _, _, _ = self._evidence(X)
        return np.bincount(rows, minlength=X.shape[0]).astype(np.int64)

    def contributions(self, x_row: scipy.sparse.csr_array) -> tuple[IntArray, IntArray, FloatArray]:
        """Toward spam when f(w) > 0.5, weighted by |log f(w) - log(1 - f(w))| (times cap/m
        where rf_evidence_cap bounds a message of m tokens)."""
        _, token_ids, f, g = self._evidence(x_row)
        weights = np.log(f) - np.log(g)
        cap = self.model.config.rf_evidence_cap
        if cap is not None and token_ids.size > cap:
            weights = weights * (cap / token_ids.size)
        classes = self.model.table.classes
        spam, ham = classes.index("spam"), classes.index("ham")
        return token_ids, np.where(weights > 0, spam, ham), np.abs(weights)

    def _evidence(
        self, X: scipy.sparse.csr_array
    ) -> tuple[IntArray, IntArray, FloatArray, FloatArray]:
        """Return (row, token id, f, 1 - f) of each token of X that the combination uses.

        Tokens present in V, with |f - 0.5| >= min_dev, at most rf_max_tokens per message
        (the most extreme; ties by token id).
        """
        options = self.model.config
        table = self.model.table
        mask = self.model.vocabulary()
        present = columns(X, table.n_tokens)
        rows = np.repeat(np.arange(present.shape[0]), np.diff(present.indptr))
        token_ids = present.indices.astype(np.int64)
        keep = (present.data > 0) & mask[token_ids]
        rows, token_ids = rows[keep], token_ids[keep]
        f, g = _probabilities(table.token_docs, table.class_docs, table.classes, token_ids, options)
        deviation = np.abs(f - 0.5)
        strong = deviation >= options.rf_min_dev
        rows, token_ids, f, g, deviation = (
            rows[strong],
            token_ids[strong],
            f[strong],
            g[strong],
            deviation[strong],
        )
        if options.rf_max_tokens is not None and rows.size:
            order = np.lexsort((token_ids, -deviation, rows))
            rows, token_ids, f, g = rows[order], token_ids[order], f[order], g[order]
            starts = np.searchsorted(rows, rows, side="left")
            first = np.arange(rows.size) - starts < options.rf_max_tokens
            rows, token_ids, f, g = rows[first], token_ids[first], f[first], g[first]
        return rows, token_ids, f, g


def _probabilities(
    token_docs: CountArray,
    class_docs: IntArray,
    classes: Sequence[str],
    token_ids: IntArray,
    options: Options,
) -> tuple[FloatArray, FloatArray]:
    """f(w) and 1 - f(w) of `token_ids` from a table's counts (the smoothing, one copy)."""
    spam, ham = list(classes).index("spam"), list(classes).index("ham")
    return token_probabilities(
        token_docs[spam, token_ids],
        token_docs[ham, token_ids],
        spam_messages=int(class_docs[spam]),
        ham_messages=int(class_docs[ham]),
        strength=options.rf_strength,
        assumed=options.rf_assumed,
    )


class RobinsonFisher(Scorer):
    name = "robinson-fisher"
    reads = Reads.MESSAGE_ROWS  # a token's probability is its own counts against N_c

    def unfit_reason(self, classes: Sequence[str]) -> str | None:
        if set(classes) == SPAM_CLASSES:
            return None
        return "robinson-fisher needs exactly the classes ham and spam"

    def bind(self, model: Model) -> _Scoring:
        return _Scoring(model)

    def log_posterior(self, scores: FloatArray) -> FloatArray:
        return scores  # already log probabilities

    def token_ratios(
        self, counts: ClassCounts, token_ids: IntArray, options: Options
    ) -> FloatArray:
        """±(log f(w) - log(1 - f(w)))."""
        classes = counts.classes
        reason = self.unfit_reason(classes)
        if reason is not None:
            raise ValueError(f"{reason}, got {list(classes)}")
        spam, ham = classes.index("spam"), classes.index("ham")
        f, g = _probabilities(counts.token_docs, counts.class_docs, classes, token_ids, options)
        ratios = np.zeros((2, token_ids.size))
        ratios[spam] = np.log(f) - np.log(g)
        ratios[ham] = -ratios[spam]
        return ratios


SCORER = RobinsonFisher()
