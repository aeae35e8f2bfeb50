"""What a scorer is, and what it reads of the classifier that holds it.

A scorer (scikit-learn's naive Bayes variants: `_count`, `_update_feature_log_prob`,
`_joint_log_likelihood`) turns a `CountTable` into scores. It owns its smoothing formulas (one
copy, used by scoring, clues and top tokens alike) and the caches derived from them; the counts,
the vocabulary V and the class priors are shared and stay with the `Classifier`.
"""

from __future__ import annotations

import abc
import enum
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

import numpy as np
import scipy.sparse
from numpy.typing import NDArray

from app.bayes.attributes import AttributeEvidence
from app.bayes.counts import BoolArray, CountArray, CountTable, FloatArray, IntArray
from app.bayes.tokens import grown_capacity

ArrayT = TypeVar("ArrayT", bound=NDArray[Any])

SPAM_CLASSES = frozenset({"ham", "spam"})


class Reads(enum.Enum):
    """What a model not held in memory must read to be scored by a scorer."""

    # Each message's own token rows and the class totals.
    MESSAGE_ROWS = "message rows"
    # The same, plus sums over the whole vocabulary (`VocabularyTotals`).
    ROWS_AND_TOTALS = "message rows and vocabulary totals"
    # Every token: the model is loaded.
    WHOLE_TABLE = "whole table"


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


@dataclass(frozen=True)
class ClassCounts:
    """A table's counts, or a copy of them: docs and terms per class (rows) and token, and
    trained messages per class."""

    token_docs: CountArray
    token_terms: CountArray
    class_docs: IntArray
    classes: tuple[str, ...]


@dataclass(frozen=True)
class Changes:
    """What a cache synced at an older generation must update: these token ids, their docs
    and terms at that generation, and whether each is in V now."""

    token_ids: IntArray
    old_docs: IntArray
    old_terms: IntArray
    in_vocabulary: BoolArray


class Options(Protocol):
    """The options scorers read (`NaiveBayesConfig` has them)."""

    @property
    def alpha(self) -> float: ...
    @property
    def rf_strength(self) -> float: ...
    @property
    def rf_assumed(self) -> float: ...
    @property
    def rf_min_dev(self) -> float: ...
    @property
    def rf_max_tokens(self) -> int | None: ...
    @property
    def rf_evidence_cap(self) -> int | None: ...


class Model(Protocol):
    """What a scorer reads of the classifier it scores for (`Classifier`)."""

    @property
    def table(self) -> CountTable: ...
    @property
    def config(self) -> Options: ...
    @property
    def totals(self) -> VocabularyTotals | None: ...

    def vocabulary(self) -> BoolArray:
        """The mask of V over the table's ids, refreshed."""
        ...

    def vocabulary_tokens(self, X: scipy.sparse.csr_array) -> IntArray:
        """Per message, how many of its distinct tokens are in V."""
        ...

    def refresh(self, cache: Cache) -> None:
        """Bring `cache` up to the table's generation (rebuilt, or updated from its journal)."""
        ...

    def log_prior(self) -> FloatArray: ...


class Cache(Protocol):
    """Values a scorer derives per token of V, refreshed by `Model.refresh`."""

    generation: int | None
    mask: BoolArray

    def rebuild(self, table: CountTable, mask: BoolArray) -> None: ...
    def update(self, table: CountTable, changes: Changes) -> None: ...
    def grow(self, n_tokens: int) -> None: ...
    def use_totals(self, totals: VocabularyTotals) -> None:
        """V's other tokens are not in the table: take V's sums from `totals`."""
        ...


class TokenCache:
    """What the caches of weights per token of V share: the mask of V they were built for,
    its size, and the weights (token-major, so X @ weights needs no copy), grown as the table."""

    def __init__(self, alpha: float, n_columns: int) -> None:
        self.alpha = alpha
        self.generation: int | None = None
        self.mask: BoolArray = np.zeros(0, dtype=np.bool_)
        self.vocab_size = 0
        self.weights: FloatArray = np.zeros((0, n_columns))

    def grow(self, n_tokens: int) -> None:
        self.mask = grown(self.mask, n_tokens)
        self.weights = grown(self.weights, n_tokens)


CacheT = TypeVar("CacheT", bound=Cache)


class Scoring(abc.ABC):
    """One scorer bound to one classifier (`model`): its caches, and the scores made with them.
    By default the tokens that take part are the message's tokens of V.

    X is a term-count CSR matrix (n_messages, n_tokens). The caller holds the classifier's lock.
    """

    def __init__(self, model: Model) -> None:
        # A proxy, not a reference: the classifier keeps its scorings, and a scoring that
        # referred back to it would make each model a reference cycle, freed only by the
        # cyclic garbage collector's rare full passes. A server that loads and evicts many
        # models in turn then held hundreds of MB of evicted models (1.4 GB over a 64 MB
        # budget among 10,000 mailboxes).
        self.model: Model = weakref.proxy(model)

    def warm(self) -> None:
        """Build the caches now (else the first score builds them)."""
        self.model.vocabulary()

    @abc.abstractmethod
    def joint_log_likelihood(self, X: scipy.sparse.csr_array) -> FloatArray: ...

    def assess(self, X: scipy.sparse.csr_array) -> tuple[FloatArray, IntArray]:
        """joint_log_likelihood and tokens_used, sharing the work they have in common."""
        return self.joint_log_likelihood(X), self.tokens_used(X)

    def tokens_used(self, X: scipy.sparse.csr_array) -> IntArray:
        """Per message, how many distinct tokens took part."""
        return self.model.vocabulary_tokens(X)

    def assess_with(
        self, X: scipy.sparse.csr_array, evidence: AttributeEvidence
    ) -> tuple[FloatArray, IntArray]:
        """`assess` with the Gaussian evidence of the messages' attributes. Naive Bayes adds
        each attribute's log density to its class's score (GaussianNB's joint likelihood)."""
        scores, used = self.assess(X)
        return scores + evidence.log_likelihood(X.shape[0]), used

    def attribute_contributions(self, evidence: AttributeEvidence) -> tuple[IntArray, FloatArray]:
        """For one message's attributes in `evidence`: the class each speaks for, by how much
        (the margin of its log density over the next class's), for `Classifier.explain`."""
        return margins(evidence.log_densities)

    @abc.abstractmethod
    def contributions(self, x_row: scipy.sparse.csr_array) -> tuple[IntArray, IntArray, FloatArray]:
        """For one message's tokens that took part: (token id, the class it speaks for, by how
        much), for `Classifier.explain`."""


class CachedScoring(Scoring, Generic[CacheT]):
    """A scoring from one cache, brought up to the table's generation before each use."""

    def __init__(self, model: Model, cache: CacheT) -> None:
        super().__init__(model)
        self.cache = cache

    def warm(self) -> None:
        self.model.refresh(self.cache)


class Scorer(abc.ABC):
    """An event model: its name, what it reads, which classes it serves, how it scores. By
    default it serves any classes and its joint scores are normalised by log-sum-exp."""

    name: str
    reads: Reads

    def unfit_reason(self, classes: Sequence[str]) -> str | None:
        """Why it cannot score a model of `classes`, or None if it can."""
        return None

    @abc.abstractmethod
    def bind(self, model: Model) -> Scoring: ...

    def log_posterior(self, scores: FloatArray) -> FloatArray:
        """log P(c | x) from its joint scores."""
        return normalised(scores)

    @abc.abstractmethod
    def token_ratios(
        self, counts: ClassCounts, token_ids: IntArray, options: Options
    ) -> FloatArray:
        """Per class and token of `token_ids` (the ids of V), the log-likelihood ratio of the
        token for the class against the other classes pooled, shape (n_classes, n): what
        `top_tokens` ranks."""


# --------------------------------------------------------------------- helpers


def normalised(scores: FloatArray) -> FloatArray:
    """Return scores - log Σ_c exp(scores): log P(c | x) from joint scores."""
    # log-sum-exp by hand: scipy's logsumexp costs more than the scoring on small batches.
    top = scores.max(axis=1, keepdims=True)
    normaliser = top + np.log(np.exp(scores - top).sum(axis=1, keepdims=True))
    result: FloatArray = scores - normaliser
    return result


def margins(contributions: FloatArray) -> tuple[IntArray, FloatArray]:
    """Return per token (row) its highest class and the margin over the next, >= 0."""
    if contributions.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    order = np.argsort(-contributions, axis=1, kind="stable")
    best = order[:, 0]
    rows = np.arange(contributions.shape[0])
    margin = contributions[rows, best] - contributions[rows, order[:, 1]]
    return best.astype(np.int64), margin


def columns(X: scipy.sparse.csr_array, n_tokens: int) -> scipy.sparse.csr_array:
    """Return X without the columns beyond the table's n_tokens."""
    if X.shape[1] <= n_tokens:
        return X
    return scipy.sparse.csr_array(X[:, :n_tokens])


def grown(array: ArrayT, n_tokens: int) -> ArrayT:
    """Return array with at least n_tokens rows, zero-padded, capacity grown (as the table's)."""
    if array.shape[0] >= n_tokens:
        return array
    capacity = grown_capacity(array.shape[0], n_tokens)
    result = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    result[: array.shape[0]] = array
    return cast(ArrayT, result)
