"""Naive Bayes scoring over a `CountTable`: multinomial, Bernoulli and Robinson-Fisher.

scikit-learn's three steps, count → smooth → score, with the SPEC §3 formulas:

    multinomial   P(w|c) = (T_cw + alpha) / (T_c + alpha|V|),  T_c = Σ_{w∈V} T_cw
                  score_c(x) = log P(c) + Σ_{w∈x∩V} n_w log P(w|c)
    Bernoulli     p_cw = (D_cw + alpha) / (N_c + 2·alpha)
                  score_c(x) = log P(c) + Σ_{w∈V} log(1 - p_cw)
                               + Σ_{w∈x∩V} [log p_cw - log(1 - p_cw)]

and the posterior by log-sum-exp. Robinson-Fisher lives in `robinson_fisher`.

Only counts are stored; the log-probabilities are caches, refreshed from the table's journal
(`CountTable.changes_since`) the next time a model is scored — see `Classifier`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, Literal, TypeVar, cast, get_args

import numpy as np
import scipy.sparse
from numpy.typing import ArrayLike, NDArray
from pydantic import Field

from app.bayes import robinson_fisher
from app.bayes.counts import BoolArray, CountArray, CountTable, FloatArray, IntArray, _as_csr
from app.bayes.tokens import TokenIndex, grown_capacity
from app.bayes.vocabulary import candidate_mask, vocabulary_mask

EventModel = Literal["multinomial", "bernoulli", "robinson-fisher"]
Prior = Literal["mle", "laplace", "uniform"]
EVENT_MODELS: tuple[EventModel, ...] = get_args(EventModel)
PRIORS: tuple[Prior, ...] = get_args(Prior)
SPAM_CLASSES = frozenset({"ham", "spam"})

Matrix = scipy.sparse.sparray | scipy.sparse.spmatrix | ArrayLike
ArrayT = TypeVar("ArrayT", bound=NDArray[Any])


@dataclass(frozen=True, kw_only=True)
class NaiveBayesConfig:
    """The model config of SPEC §4 that the mathematics needs, built from the service's
    ModelConfig, which declares each option's default once.

    `rf_max_tokens` is SpamBayes' max_discriminators (150 there; None = every token, as
    bogofilter); no model option sets it.
    """

    event_model: EventModel
    alpha: float
    prior: Prior
    min_df: int
    max_vocab: int | None
    stop_words: frozenset[str]
    rf_strength: float
    rf_assumed: float
    rf_min_dev: float
    rf_max_tokens: int | None = None
    spam_threshold: float
    ham_threshold: float

    def __post_init__(self) -> None:
        if self.event_model not in EVENT_MODELS:
            raise ValueError(
                f"event_model must be one of {list(EVENT_MODELS)}, got {self.event_model!r}"
            )
        if self.prior not in PRIORS:
            raise ValueError(f"prior must be one of {list(PRIORS)}, got {self.prior!r}")
        _check_number("alpha", self.alpha, low=0.0, low_open=True)
        _check_count("min_df", self.min_df, optional=False)
        _check_count("max_vocab", self.max_vocab, optional=True)
        if not isinstance(self.stop_words, frozenset) or not all(
            isinstance(word, str) for word in self.stop_words
        ):
            raise ValueError("stop_words must be a frozenset of strings")
        _check_number("rf_strength", self.rf_strength, low=0.0, low_open=True)
        _check_number(
            "rf_assumed", self.rf_assumed, low=0.0, high=1.0, low_open=True, high_open=True
        )
        _check_number("rf_min_dev", self.rf_min_dev, low=0.0, high=0.5, high_open=True)
        _check_count("rf_max_tokens", self.rf_max_tokens, optional=True)
        _check_number("spam_threshold", self.spam_threshold, low=0.0, high=1.0)
        _check_number("ham_threshold", self.ham_threshold, low=0.0, high=1.0)
        if self.ham_threshold > self.spam_threshold:
            raise ValueError(
                f"ham_threshold must be <= spam_threshold ({self.spam_threshold}), "
                f"got {self.ham_threshold}"
            )


@dataclass(frozen=True)
class Clue:
    """A token that moved the verdict: toward class_, by weight nats of log odds."""

    token: str
    class_: Annotated[str, Field(serialization_alias="class")]  # `class`, as answers name it
    weight: float


def log_prior(class_docs: IntArray, prior: Prior) -> FloatArray:
    """Return log P(c), shape (n_classes,): mle N_c/N, laplace (N_c+1)/(N+K), uniform 1/K.

    Under mle a class with no message has log prior -inf (probability 0).
    """
    n_classes = class_docs.shape[0]
    counts = class_docs.astype(np.float64)
    if prior == "uniform":
        return np.full(n_classes, -math.log(n_classes))
    if prior == "laplace":
        return np.log(counts + 1.0) - math.log(counts.sum() + n_classes)
    total = counts.sum()
    if total == 0:
        raise ValueError("the mle prior needs at least one trained message")
    with np.errstate(divide="ignore"):  # log 0 = -inf: an untrained class is impossible
        return np.log(counts) - math.log(total)


@dataclass(frozen=True)
class VocabularyTotals:
    """Sums over the whole vocabulary V, for scoring a table that holds only some tokens.

    A model not held in memory is scored from its message's token rows alone (`CountTable`
    of those tokens); what naive Bayes needs of the other tokens of V is these sums:

    - size: |V| (the multinomial smoothing alpha|V|);
    - terms: per class, T_c = Σ_{w∈V} T_cw (the multinomial denominator);
    - absent: per class, Σ_{w∈V} log(N_c - D_cw + alpha) (Bernoulli's absent-token sum
      is this minus |V| log(N_c + 2·alpha)).

    They are exact only for the table's class totals and the alpha they were summed with.
    """

    size: int
    terms: IntArray
    absent: FloatArray
    alpha: float


def vocabulary_totals(
    token_docs: IntArray,
    token_terms: IntArray,
    class_docs: IntArray,
    *,
    alpha: float,
    min_df: int = 1,
    stop_word_ids: IntArray | None = None,
) -> VocabularyTotals:
    """Sum V's totals from every token's counts, shape (n_classes, n_tokens) each, leaving
    out `stop_word_ids` (the ids of the model's tokens that are stop words). Not for a
    max_vocab cut, which ranks every token."""
    mask = candidate_mask(token_docs.sum(axis=0), [], min_df=min_df)
    if stop_word_ids is not None:
        mask[stop_word_ids[stop_word_ids < mask.size]] = False
    docs = token_docs[:, mask]
    return VocabularyTotals(
        size=int(mask.sum()),
        terms=token_terms[:, mask].sum(axis=1),
        absent=_log_absent(class_docs[:, None], docs, alpha).sum(axis=1),
        alpha=alpha,
    )


class _VocabularyCache:
    """The V mask alone: Robinson-Fisher and tokens_used need no log-probabilities (a
    multinomial cache would add 24 bytes per token: 24 MB for a million tokens)."""

    def __init__(self) -> None:
        self.generation: int | None = None
        self.mask: BoolArray = np.zeros(0, dtype=np.bool_)

    def rebuild(self, mask: BoolArray) -> None:
        self.mask = mask.copy()

    def update(self, token_ids: IntArray, in_vocabulary: BoolArray) -> None:
        self.mask[token_ids] = in_vocabulary

    def grow(self, n_tokens: int) -> None:
        self.mask = _grown(self.mask, n_tokens)


class _MultinomialCache:
    """log(T_cw + alpha) per token of V (0 elsewhere) plus a V indicator column, and T_c."""

    def __init__(self, n_classes: int, alpha: float) -> None:
        self.alpha = alpha
        self.generation: int | None = None
        self.mask: BoolArray = np.zeros(0, dtype=np.bool_)
        self.vocab_size = 0
        self.vocab_terms: IntArray = np.zeros(n_classes, dtype=np.int64)
        # (capacity, n_classes + 1), token-major so X @ weights needs no copy.
        self.weights: FloatArray = np.zeros((0, n_classes + 1))
        self.log_denominator: FloatArray = np.zeros(n_classes)

    def rebuild(self, table: CountTable, mask: BoolArray) -> None:
        n_classes = len(table.classes)
        terms = table.token_terms[:, mask]
        self.mask = mask.copy()
        self.weights = np.zeros((mask.size, n_classes + 1))
        self.weights[mask, :n_classes] = np.log(terms.T + self.alpha)
        self.weights[mask, n_classes] = 1.0
        self.vocab_terms = terms.sum(axis=1)
        self.vocab_size = int(mask.sum())
        self.update_denominator()

    def update(
        self,
        table: CountTable,
        token_ids: IntArray,
        old_terms: IntArray,
        in_vocabulary: BoolArray,
    ) -> None:
        n_classes = len(table.classes)
        was_in = self.mask[token_ids]
        new_terms = table.token_terms[:, token_ids]
        self.vocab_terms += new_terms[:, in_vocabulary].sum(axis=1) - old_terms[:, was_in].sum(
            axis=1
        )
        self.vocab_size += int(in_vocabulary.sum()) - int(was_in.sum())
        self.weights[token_ids, :n_classes] = np.where(
            in_vocabulary[:, None], np.log(new_terms.T + self.alpha), 0.0
        )
        self.weights[token_ids, n_classes] = in_vocabulary
        self.mask[token_ids] = in_vocabulary
        self.update_denominator()

    def grow(self, n_tokens: int) -> None:
        self.mask = _grown(self.mask, n_tokens)
        self.weights = _grown(self.weights, n_tokens)

    def update_denominator(self) -> None:
        if self.vocab_size == 0:  # no token of V in any message: the term never applies
            self.log_denominator = np.zeros_like(self.log_denominator)
        else:
            self.log_denominator = np.log(self.vocab_terms + self.alpha * self.vocab_size)


class _BernoulliCache:
    """log p_cw - log(1 - p_cw) per token of V (0 elsewhere) and Σ_V log(N_c - D_cw + alpha).

    log p - log(1 - p) = log(D + alpha) - log(N_c - D + alpha) and
    log(1 - p) = log(N_c - D + alpha) - log(N_c + 2·alpha) both depend on N_c, so a class
    whose N_c changed has its column recomputed in full, O(|V|) vectorised (about 10 ms per
    million tokens); tokens changed without a change of N_c (the database change feed) are
    updated alone.
    """

    def __init__(self, n_classes: int, alpha: float) -> None:
        self.alpha = alpha
        self.generation: int | None = None
        self.mask: BoolArray = np.zeros(0, dtype=np.bool_)
        self.vocab_size = 0
        self.class_docs: IntArray = np.zeros(n_classes, dtype=np.int64)
        self.weights: FloatArray = np.zeros((0, n_classes))
        self.absent_numerator: FloatArray = np.zeros(n_classes)

    @property
    def absent(self) -> FloatArray:
        """Σ_{w∈V} log(1 - p_cw), shape (n_classes,)."""
        log_denominator = np.log(self.class_docs + 2.0 * self.alpha)
        result: FloatArray = self.absent_numerator - self.vocab_size * log_denominator
        return result

    def rebuild(self, table: CountTable, mask: BoolArray) -> None:
        self.mask = mask.copy()
        self.vocab_size = int(mask.sum())
        self.class_docs = table.class_docs.copy()
        self.weights = np.zeros((mask.size, len(table.classes)))
        for class_index in range(len(table.classes)):
            self._rebuild_class(table, class_index)

    def update(
        self,
        table: CountTable,
        token_ids: IntArray,
        old_docs: IntArray,
        in_vocabulary: BoolArray,
    ) -> None:
        class_docs = table.class_docs.copy()
        kept = class_docs == self.class_docs  # classes whose N_c did not change
        was_in = self.mask[token_ids]
        new_docs = table.token_docs[:, token_ids]
        absent_old = _log_absent(self.class_docs[:, None], old_docs[:, was_in], self.alpha).sum(
            axis=1
        )
        absent_new = _log_absent(class_docs[:, None], new_docs[:, in_vocabulary], self.alpha).sum(
            axis=1
        )
        self.absent_numerator[kept] += absent_new[kept] - absent_old[kept]
        self.weights[token_ids] = np.where(
            in_vocabulary[:, None], _log_odds(class_docs[:, None], new_docs, self.alpha).T, 0.0
        )
        self.mask[token_ids] = in_vocabulary
        self.vocab_size += int(in_vocabulary.sum()) - int(was_in.sum())
        self.class_docs = class_docs
        for class_index in np.flatnonzero(~kept).tolist():
            self._rebuild_class(table, class_index)

    def grow(self, n_tokens: int) -> None:
        self.mask = _grown(self.mask, n_tokens)
        self.weights = _grown(self.weights, n_tokens)

    def _rebuild_class(self, table: CountTable, class_index: int) -> None:
        n_tokens = table.n_tokens
        mask = self.mask[:n_tokens]
        docs = table.token_docs[class_index, mask]
        class_docs = self.class_docs[class_index]
        self.weights[:n_tokens][mask, class_index] = _log_odds(class_docs, docs, self.alpha)
        self.absent_numerator[class_index] = _log_absent(class_docs, docs, self.alpha).sum()


class Classifier:
    """Scores messages against a CountTable with one NaiveBayesConfig.

    Derived log-probabilities are cached per event model and refreshed lazily, at the next
    score after the table changed, from the table's journal of touched ids:

    - multinomial: the touched tokens' log(T_cw + alpha) and V membership, then the per-class
      scalars T_c (kept exactly, as integers) and log(T_c + alpha|V|): O(K·m) for a trained
      message of m distinct tokens, whatever the table size;
    - Bernoulli: the touched tokens' weights and, for each class whose N_c changed (the
      trained class), one O(|V|) vectorised column: log p_cw and the absent-token sum
      Σ_V log(1 - p_cw) all depend on N_c;
    - with max_vocab, V itself is re-selected in O(n_tokens) on refresh, and tokens that
      entered or left V are updated like touched ones;
    - a journal that no longer reaches back (more than 65,536 ids changed, or a bulk load)
      means a full rebuild, O(K·n_tokens).

    Robinson-Fisher needs no cache: f(w) depends on N_spam and N_ham for every token, so it
    is computed for the tokens present in X only, O(nnz).

    X is a term-count matrix (n_messages, n_tokens); columns beyond the table are ignored,
    a narrower X is read as if padded with zero columns. Scoring holds a lock, so one
    Classifier may serve several threads; changes to the table must not run concurrently.
    """

    def __init__(
        self,
        table: CountTable,
        config: NaiveBayesConfig,
        *,
        totals: VocabularyTotals | None = None,
    ) -> None:
        """With `totals`, the table holds only some tokens of the model (those of the
        messages to score) and V's sums come from `totals` instead of the table."""
        if totals is not None and config.max_vocab is not None:
            raise ValueError("vocabulary totals cannot stand for a max_vocab cut")
        if totals is not None and totals.alpha != config.alpha:
            raise ValueError(f"vocabulary totals summed with alpha {totals.alpha}")
        self.table = table
        self.config = config
        self.totals = totals
        self._check_event_model(config.event_model)
        self._vocabulary = _VocabularyCache()
        self._multinomial = _MultinomialCache(len(table.classes), config.alpha)
        self._bernoulli = _BernoulliCache(len(table.classes), config.alpha)
        self._lock = threading.RLock()

    # ----------------------------------------------------------------- scoring

    def joint_log_likelihood(
        self, X: Matrix, *, event_model: EventModel | None = None
    ) -> FloatArray:
        """Return score_c(x) of SPEC §3, shape (n_messages, n_classes).

        For robinson-fisher: log P(class | x) of its combined probability.
        """
        model = self._event_model(event_model)
        matrix = _as_csr(X)
        with self._lock:
            if model == "multinomial":
                return self._multinomial_scores(matrix)
            if model == "bernoulli":
                return self._bernoulli_scores(matrix)
            return self._robinson_fisher_scores(matrix)

    def predict_log_proba(self, X: Matrix, *, event_model: EventModel | None = None) -> FloatArray:
        """Return log P(c | x), shape (n_messages, n_classes), normalised by log-sum-exp."""
        model = self._event_model(event_model)
        return _log_posterior(self.joint_log_likelihood(X, event_model=model), model)

    def predict_proba(self, X: Matrix, *, event_model: EventModel | None = None) -> FloatArray:
        """Return P(c | x), shape (n_messages, n_classes); rows sum to one."""
        return np.exp(self.predict_log_proba(X, event_model=event_model))

    def spam_log_odds(self, X: Matrix, *, event_model: EventModel | None = None) -> FloatArray:
        """Return log P(spam|x) - log P(ham|x), shape (n_messages,), for ranking (ROC).

        Naive Bayes: score_spam - score_ham. Robinson-Fisher: the log odds of its P, from
        log tail probabilities, so it keeps ordering messages whose P rounds to 0 or 1.
        """
        self._check_spam_classes()
        scores = self.joint_log_likelihood(X, event_model=event_model)
        spam = self.table.class_index("spam")
        ham = self.table.class_index("ham")
        return scores[:, spam] - scores[:, ham]

    def tokens_used(self, X: Matrix, *, event_model: EventModel | None = None) -> IntArray:
        """Return how many distinct tokens of each message took part, shape (n_messages,)."""
        model = self._event_model(event_model)
        matrix = _as_csr(X)
        with self._lock:
            if model == "robinson-fisher":
                rows, _, _, _ = self._robinson_fisher_evidence(matrix)
                return np.bincount(rows, minlength=matrix.shape[0]).astype(np.int64)
            return self._vocabulary_tokens(matrix)

    def assess(
        self, X: Matrix, *, event_model: EventModel | None = None
    ) -> tuple[FloatArray, FloatArray, IntArray]:
        """Return predict_log_proba, joint_log_likelihood (with `event_model`) and tokens_used
        (with the configured event model) of X, sharing the work they have in common.

        What a classification reports; Robinson-Fisher's evidence is found once, not thrice.
        """
        model = self._event_model(event_model)
        matrix = _as_csr(X)
        with self._lock:
            if model == "robinson-fisher":
                rows, _, f, g = self._robinson_fisher_evidence(matrix)
                scores = self._combine_robinson_fisher(rows, f, g, matrix.shape[0])
                used = (
                    np.bincount(rows, minlength=matrix.shape[0]).astype(np.int64)
                    if self.config.event_model == "robinson-fisher"
                    else self._vocabulary_tokens(matrix)
                )
            else:
                scores = (
                    self._multinomial_scores(matrix)
                    if model == "multinomial"
                    else self._bernoulli_scores(matrix)
                )
                used = self.tokens_used(matrix)
        return _log_posterior(scores, model), scores, used

    def warm(self) -> None:
        """Build now the caches the configured event model scores with (else the first score
        builds them): a model is loaded at once, its first message is not slow."""
        with self._lock:
            self._refreshed_vocabulary()
            if self.config.event_model == "multinomial":
                self._refreshed_multinomial()
            elif self.config.event_model == "bernoulli":
                self._refreshed_bernoulli()

    @property
    def vocabulary_size(self) -> int:
        """Return |V|, the number of tokens taking part in scoring."""
        if self.totals is not None:
            return self.totals.size
        with self._lock:
            return int(self._refreshed_vocabulary().mask.sum())

    def explain(
        self, x_row: Matrix, *, limit: int = 10, event_model: EventModel | None = None
    ) -> list[Clue]:
        """Return the tokens of one message that moved the verdict most, strongest first.

        Naive Bayes: a token's contribution to each class score (n_w log P(w|c), or
        log p_cw - log(1 - p_cw) for Bernoulli); it speaks for the class it raises most,
        by the margin over the next class. Robinson-Fisher: the tokens combined, toward
        spam when f(w) > 0.5, weighted by |log f(w) - log(1 - f(w))|.
        """
        model = self._event_model(event_model)
        matrix = _as_csr(x_row)
        if matrix.shape[0] != 1:
            raise ValueError(f"x_row must be one message, got {matrix.shape[0]} rows")
        with self._lock:
            if model == "robinson-fisher":
                _, token_ids, f, g = self._robinson_fisher_evidence(matrix)
                weights = np.log(f) - np.log(g)
                spam, ham = self.table.classes.index("spam"), self.table.classes.index("ham")
                favoured = np.where(weights > 0, spam, ham)
                strength = np.abs(weights)
            else:
                columns = _columns(matrix, self.table.n_tokens)
                token_ids = columns.indices.astype(np.int64)
                counts = columns.data.astype(np.float64)
                if model == "multinomial":
                    cache = self._refreshed_multinomial()
                    keep = cache.mask[token_ids] & (counts > 0)
                    token_ids, counts = token_ids[keep], counts[keep]
                    n_classes = len(self.table.classes)
                    log_likelihood = cache.weights[token_ids, :n_classes] - cache.log_denominator
                    contributions = counts[:, None] * log_likelihood
                else:
                    bernoulli = self._refreshed_bernoulli()
                    keep = bernoulli.mask[token_ids] & (counts > 0)
                    token_ids = token_ids[keep]
                    contributions = bernoulli.weights[token_ids]
                favoured, strength = _margins(contributions)
            return self._clues(token_ids, favoured, strength, limit)

    # ----------------------------------------------------------------- internals

    def _event_model(self, event_model: EventModel | None) -> EventModel:
        model = self.config.event_model if event_model is None else event_model
        self._check_event_model(model)
        return model

    def _check_event_model(self, model: str) -> None:
        if model not in EVENT_MODELS:
            raise ValueError(f"event_model must be one of {list(EVENT_MODELS)}, got {model!r}")
        if model == "robinson-fisher":
            self._check_spam_classes()

    def _check_spam_classes(self) -> None:
        if set(self.table.classes) != SPAM_CLASSES:
            raise ValueError(
                f"robinson-fisher and spam log odds need the classes ['ham', 'spam'], "
                f"got {list(self.table.classes)}"
            )

    def _log_prior(self) -> FloatArray:
        return log_prior(self.table.class_docs, self.config.prior)

    def _multinomial_scores(self, X: scipy.sparse.csr_array) -> FloatArray:
        cache = self._refreshed_multinomial()
        columns = _columns(X, self.table.n_tokens)
        n_classes = len(self.table.classes)
        product = np.asarray(columns @ cache.weights[: columns.shape[1]])
        scores: FloatArray = (
            product[:, :n_classes]
            - product[:, n_classes : n_classes + 1] * cache.log_denominator
            + self._log_prior()
        )
        return scores

    def _bernoulli_scores(self, X: scipy.sparse.csr_array) -> FloatArray:
        cache = self._refreshed_bernoulli()
        columns = _columns(X, self.table.n_tokens)
        present = scipy.sparse.csr_array(
            ((columns.data > 0).astype(np.float64), columns.indices, columns.indptr),
            shape=columns.shape,
        )
        product = np.asarray(present @ cache.weights[: columns.shape[1]])
        scores: FloatArray = product + cache.absent + self._log_prior()
        return scores

    def _vocabulary_tokens(self, X: scipy.sparse.csr_array) -> IntArray:
        """Return per message how many of its distinct tokens are in V."""
        mask = self._refreshed_vocabulary().mask
        columns = _columns(X, self.table.n_tokens)
        present = columns.copy()
        present.data = ((present.data > 0) & mask[present.indices]).astype(np.float64)
        return np.asarray(present.sum(axis=1), dtype=np.int64)

    def _robinson_fisher_scores(self, X: scipy.sparse.csr_array) -> FloatArray:
        rows, _, f, g = self._robinson_fisher_evidence(X)
        return self._combine_robinson_fisher(rows, f, g, X.shape[0])

    def _combine_robinson_fisher(
        self, rows: IntArray, f: FloatArray, g: FloatArray, n_messages: int
    ) -> FloatArray:
        log_spam, log_ham = robinson_fisher.combine(
            np.asarray(np.bincount(rows, weights=np.log(f), minlength=n_messages), np.float64),
            np.asarray(np.bincount(rows, weights=np.log(g), minlength=n_messages), np.float64),
            np.bincount(rows, minlength=n_messages),
        )
        scores = np.empty((n_messages, 2))
        scores[:, self.table.class_index("spam")] = log_spam
        scores[:, self.table.class_index("ham")] = log_ham
        return scores

    def _robinson_fisher_evidence(
        self, X: scipy.sparse.csr_array
    ) -> tuple[IntArray, IntArray, FloatArray, FloatArray]:
        """Return (row, token id, f, 1 - f) of each token of X that the combination uses.

        Tokens present in V, with |f - 0.5| >= min_dev, at most rf_max_tokens per message
        (the most extreme; ties by token id).
        """
        config = self.config
        mask = self._refreshed_vocabulary().mask
        columns = _columns(X, self.table.n_tokens)
        rows = np.repeat(np.arange(columns.shape[0]), np.diff(columns.indptr))
        token_ids = columns.indices.astype(np.int64)
        keep = (columns.data > 0) & mask[token_ids]
        rows, token_ids = rows[keep], token_ids[keep]
        spam, ham = self.table.class_index("spam"), self.table.class_index("ham")
        docs = self.table.token_docs
        f, g = robinson_fisher.token_probabilities(
            docs[spam, token_ids],
            docs[ham, token_ids],
            spam_messages=int(self.table.class_docs[spam]),
            ham_messages=int(self.table.class_docs[ham]),
            strength=config.rf_strength,
            assumed=config.rf_assumed,
        )
        deviation = np.abs(f - 0.5)
        strong = deviation >= config.rf_min_dev
        rows, token_ids, f, g, deviation = (
            rows[strong],
            token_ids[strong],
            f[strong],
            g[strong],
            deviation[strong],
        )
        if config.rf_max_tokens is not None and rows.size:
            order = np.lexsort((token_ids, -deviation, rows))
            rows, token_ids, f, g = rows[order], token_ids[order], f[order], g[order]
            starts = np.searchsorted(rows, rows, side="left")
            first = np.arange(rows.size) - starts < config.rf_max_tokens
            rows, token_ids, f, g = rows[first], token_ids[first], f[first], g[first]
        return rows, token_ids, f, g

    def _refreshed_vocabulary(self) -> _VocabularyCache:
        cache = self._vocabulary
        changes = self._changes(cache.generation, cache.mask)
        if changes is None:
            cache.rebuild(self._full_mask())
        elif changes:
            token_ids, _, _, in_vocabulary = changes
            cache.grow(self.table.n_tokens)
            cache.update(token_ids, in_vocabulary)
        cache.generation = self.table.generation
        return cache

    def _refreshed_multinomial(self) -> _MultinomialCache:
        cache = self._multinomial
        changes = self._changes(cache.generation, cache.mask)
        if changes is None:
            cache.rebuild(self.table, self._full_mask())
        elif changes:
            token_ids, _, old_terms, in_vocabulary = changes
            cache.grow(self.table.n_tokens)
            cache.update(self.table, token_ids, old_terms, in_vocabulary)
        cache.generation = self.table.generation
        if self.totals is not None:  # V's other tokens are not in the table: use V's sums
            cache.vocab_size = self.totals.size
            cache.vocab_terms = self.totals.terms.copy()
            cache.update_denominator()
        return cache

    def _refreshed_bernoulli(self) -> _BernoulliCache:
        cache = self._bernoulli
        changes = self._changes(cache.generation, cache.mask)
        if changes is None:
            cache.rebuild(self.table, self._full_mask())
        elif changes:
            token_ids, old_docs, _, in_vocabulary = changes
            cache.grow(self.table.n_tokens)
            cache.update(self.table, token_ids, old_docs, in_vocabulary)
        cache.generation = self.table.generation
        if self.totals is not None:  # V's other tokens are not in the table: use V's sums
            cache.vocab_size = self.totals.size
            cache.absent_numerator = self.totals.absent.copy()
        return cache

    def _changes(
        self, generation: int | None, mask: BoolArray
    ) -> tuple[IntArray, IntArray, IntArray, BoolArray] | tuple[()] | None:
        """Return what a cache synced at `generation` must update, () if nothing, None to rebuild.

        The tuple is (token ids, their docs and terms at `generation`, their V membership now).
        """
        table = self.table
        if generation == table.generation:
            return ()
        changes = None if generation is None else table.changes_since(generation)
        if changes is None:
            return None
        token_ids, old_docs, old_terms = changes.token_ids, changes.old_docs, changes.old_terms
        config = self.config
        if config.max_vocab is None:
            in_vocabulary = candidate_mask(
                table.token_docs[:, token_ids].sum(axis=0),
                table.tokens,
                min_df=config.min_df,
                stop_words=config.stop_words,
                token_ids=token_ids,
            )
            return token_ids, old_docs, old_terms, in_vocabulary
        full = self._full_mask()
        previous = _grown(mask, table.n_tokens)[: table.n_tokens]
        moved = np.setdiff1d(np.flatnonzero(full != previous), token_ids, assume_unique=True)
        token_ids = np.concatenate([token_ids, moved])
        old_docs = np.concatenate([old_docs, table.token_docs[:, moved]], axis=1)
        old_terms = np.concatenate([old_terms, table.token_terms[:, moved]], axis=1)
        return token_ids, old_docs, old_terms, full[token_ids]

    def _full_mask(self) -> BoolArray:
        config = self.config
        return vocabulary_mask(
            self.table.token_docs.sum(axis=0),
            self.table.tokens,
            min_df=config.min_df,
            max_vocab=config.max_vocab,
            stop_words=config.stop_words,
            token_lookup=partial(self.table.lookup, exact=True),
        )

    def _clues(
        self, token_ids: IntArray, favoured: IntArray, strength: FloatArray, limit: int
    ) -> list[Clue]:
        tokens = self.table.tokens
        classes = self.table.classes
        ranked = sorted(
            zip(token_ids.tolist(), favoured.tolist(), strength.tolist(), strict=True),
            key=lambda clue: (-clue[2], tokens[clue[0]]),
        )
        return [
            Clue(tokens[token_id], classes[class_index], weight)
            for token_id, class_index, weight in ranked[:limit]
        ]


def verdict(probabilities: FloatArray, classes: Sequence[str], config: NaiveBayesConfig) -> str:
    """Return the verdict for one message's class probabilities, shape (n_classes,).

    A ham/spam model says "spam" at P(spam) >= spam_threshold, "ham" at <= ham_threshold,
    else "unsure"; any other model names its most probable class (the first on a tie).
    """
    if len(probabilities) != len(classes):
        raise ValueError(f"got {len(probabilities)} probabilities for {len(classes)} classes")
    if set(classes) == SPAM_CLASSES:
        spam_probability = float(probabilities[list(classes).index("spam")])
        if spam_probability >= config.spam_threshold:
            return "spam"
        if spam_probability <= config.ham_threshold:
            return "ham"
        return "unsure"
    return classes[int(np.argmax(probabilities))]


def top_tokens(
    table: CountTable, config: NaiveBayesConfig, *, limit: int = 20
) -> dict[str, list[tuple[str, float]]]:
    """Return per class the tokens of V that most point to it, by log-likelihood ratio.

    The ratio is against the other classes pooled: multinomial log P(w|c) - log P(w|¬c),
    Bernoulli log p_cw - log p_¬c,w, Robinson-Fisher ±(log f(w) - log(1 - f(w))). Only
    positive ratios are listed, strongest first, ties by token text (the dashboard's list).
    """
    mask = vocabulary_mask(
        table.token_docs.sum(axis=0),
        table.tokens,
        min_df=config.min_df,
        max_vocab=config.max_vocab,
        stop_words=config.stop_words,
        # Stop words looked up, not every token's text compared: 2.6 s on 694,467 tokens.
        token_lookup=partial(table.lookup, exact=True),
    )
    return top_tokens_of(
        table.token_docs,
        table.token_terms,
        table.class_docs,
        table.classes,
        table.tokens,
        np.flatnonzero(mask),
        config,
        limit=limit,
    )


def top_tokens_of(
    token_docs: CountArray,
    token_terms: CountArray,
    class_docs: IntArray,
    classes: Sequence[str],
    tokens: TokenIndex,
    token_ids: IntArray,
    config: NaiveBayesConfig,
    *,
    limit: int = 20,
) -> dict[str, list[tuple[str, float]]]:
    """`top_tokens` over count arrays (n_classes, n_tokens) and the ids of V, `token_ids`:
    for a copy of a table's arrays, ranked while the table itself goes on changing."""
    alpha = config.alpha
    ratios: FloatArray
    if config.event_model == "robinson-fisher":
        if set(classes) != SPAM_CLASSES:
            raise ValueError(
                f"robinson-fisher needs the classes ['ham', 'spam'], got {list(classes)}"
            )
        spam, ham = list(classes).index("spam"), list(classes).index("ham")
        f, g = robinson_fisher.token_probabilities(
            token_docs[spam, token_ids],
            token_docs[ham, token_ids],
            spam_messages=int(class_docs[spam]),
            ham_messages=int(class_docs[ham]),
            strength=config.rf_strength,
            assumed=config.rf_assumed,
        )
        ratios = np.zeros((2, token_ids.size))
        ratios[spam] = np.log(f) - np.log(g)
        ratios[ham] = -ratios[spam]
    elif config.event_model == "multinomial":
        terms = token_terms[:, token_ids].astype(np.float64)
        others = terms.sum(axis=0) - terms
        class_totals = terms.sum(axis=1, keepdims=True)
        other_totals = class_totals.sum() - class_totals
        smoothing = alpha * token_ids.size
        ratios = (np.log(terms + alpha) - np.log(class_totals + smoothing)) - (
            np.log(others + alpha) - np.log(other_totals + smoothing)
        )
    else:
        docs = token_docs[:, token_ids].astype(np.float64)
        others = docs.sum(axis=0) - docs
        messages = np.asarray(class_docs, dtype=np.float64)[:, None]
        other_messages = messages.sum() - messages
        ratios = (np.log(docs + alpha) - np.log(messages + 2 * alpha)) - (
            np.log(others + alpha) - np.log(other_messages + 2 * alpha)
        )
    return {
        name: _strongest(ratios[class_index], token_ids, tokens, limit)
        for class_index, name in enumerate(classes)
    }


def _strongest(
    row: FloatArray, token_ids: IntArray, tokens: TokenIndex, limit: int
) -> list[tuple[str, float]]:
    """The `limit` positive entries of `row` ranked by (-ratio, token text), as a full sort
    of every positive one would rank them, with texts made only for the few that can rank:
    those above the limit-th ratio, and the first by text of the ones equal to it. Sorting
    every positive token took 6.5 s of the 9.8 s stats of the spamassassin corpus's model
    (694,467 tokens; cProfile of `model_stats`); this takes 0.06 s."""
    positive = np.flatnonzero(row > 0)
    if limit <= 0 or positive.size == 0:
        return []
    if positive.size > limit:
        values = row[positive]
        cutoff = np.partition(values, values.size - limit)[values.size - limit]
        above = positive[values > cutoff]
        tied = positive[values == cutoff]
        first = tokens.first_by_text(token_ids[tied], limit - above.size)
        chosen = above.tolist() + tied[np.isin(token_ids[tied], first)].tolist()
    else:
        chosen = positive.tolist()
    ranked = sorted(
        ((tokens[int(token_ids[i])], float(row[i])) for i in chosen),
        key=lambda item: (-item[1], item[0]),
    )
    return ranked[:limit]


# --------------------------------------------------------------------- helpers


def _log_posterior(scores: FloatArray, model: EventModel) -> FloatArray:
    """Return log P(c | x) from joint scores: normalised by log-sum-exp (Robinson-Fisher's
    scores already are log probabilities)."""
    if model == "robinson-fisher":
        return scores
    # log-sum-exp by hand: scipy's logsumexp costs more than the scoring on small batches.
    top = scores.max(axis=1, keepdims=True)
    normaliser = top + np.log(np.exp(scores - top).sum(axis=1, keepdims=True))
    result: FloatArray = scores - normaliser
    return result


def _log_odds(
    class_docs: IntArray | int, docs: NDArray[np.signedinteger[Any]], alpha: float
) -> FloatArray:
    """Return log p - log(1 - p) = log(D + alpha) - log(N - D + alpha) (N - D clipped at 0)."""
    absent = np.maximum(np.asarray(class_docs) - docs, 0)
    result: FloatArray = np.log(docs + alpha) - np.log(absent + alpha)
    return result


def _log_absent(
    class_docs: IntArray | int, docs: NDArray[np.signedinteger[Any]], alpha: float
) -> FloatArray:
    """Return log(N - D + alpha), the numerator of log(1 - p) (N - D clipped at 0)."""
    result: FloatArray = np.log(np.maximum(np.asarray(class_docs) - docs, 0) + alpha)
    return result


def _margins(contributions: FloatArray) -> tuple[IntArray, FloatArray]:
    """Return per token (row) its highest class and the margin over the next, >= 0."""
    if contributions.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    order = np.argsort(-contributions, axis=1, kind="stable")
    best = order[:, 0]
    rows = np.arange(contributions.shape[0])
    margin = contributions[rows, best] - contributions[rows, order[:, 1]]
    return best.astype(np.int64), margin


def _columns(X: scipy.sparse.csr_array, n_tokens: int) -> scipy.sparse.csr_array:
    """Return X without the columns beyond the table's n_tokens."""
    if X.shape[1] <= n_tokens:
        return X
    return scipy.sparse.csr_array(X[:, :n_tokens])


def _grown(array: ArrayT, n_tokens: int) -> ArrayT:
    """Return array with at least n_tokens rows, zero-padded, capacity grown (as the table's)."""
    if array.shape[0] >= n_tokens:
        return array
    capacity = grown_capacity(array.shape[0], n_tokens)
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[: array.shape[0]] = array
    return cast(ArrayT, grown)


def _check_number(
    name: str,
    value: object,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value}")
    if high is not None and (value > high or (high_open and value == high)):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high}, got {value}")


def _check_count(name: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
