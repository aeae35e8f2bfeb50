"""Continuous attributes: a Gaussian per class and attribute, as scikit-learn's `GaussianNB`.

Token counts discretize what they see (`size:`, `links:` tokens); a numeric attribute (an SPF
result, an RBL hit count, another engine's score, a message's log size) is kept instead as its
sufficient statistics per class c and attribute j: the number of trained messages that gave it
n_cj, and the sums Σx and Σx² of their values. From them, for a message with value x_j:

    θ_cj = Σx / n_cj,  σ²_cj = Σx² / n_cj - θ_cj² + ε,
    ε = var_smoothing · max_j Var(x_j)   (the variance of each attribute over all classes)
    log N(x_j; θ_cj, σ²_cj) = -½ log(2π σ²_cj) - (x_j - θ_cj)² / (2 σ²_cj)

which is GaussianNB's `_joint_log_likelihood` without the prior (the token scorer adds that).

The sums are kept exact, as rationals (`Fraction`): every float is one, so training a message
and forgetting it returns exactly the sums before, in any order, and the variance is computed
without cancellation. A message names only the attributes it has; an attribute it does not
give is left out of its score (naive Bayes marginalizes a missing attribute), and so is one
that some class has never seen (no Gaussian to score it with).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from app.bayes.counts import FloatArray, IntArray

AttributeValues = Mapping[str, float]
# One stored cell: (attribute name, class index, n, Σx, Σx²).
AttributeCell = tuple[str, int, int, Fraction, Fraction]

_LOG_2PI = math.log(2.0 * math.pi)


@dataclass
class Moments:
    """One attribute's statistics per class: n, Σx and Σx² (exact), each of shape (K,)."""

    n: list[int]
    sums: list[Fraction]
    squares: list[Fraction]

    @classmethod
    def empty(cls, n_classes: int) -> Moments:
        return cls([0] * n_classes, [Fraction(0)] * n_classes, [Fraction(0)] * n_classes)

    def copy(self) -> Moments:
        return Moments(list(self.n), list(self.sums), list(self.squares))


@dataclass(frozen=True)
class MomentsDelta:
    """A change to one (attribute, class) cell: messages, Σx and Σx² added (negative: taken)."""

    n: int
    sum: Fraction
    squares: Fraction


# Every finite float is an integer multiple of 2**-1074 (the least subnormal), and its square
# one of 2**-2148: sums kept as those integers are exact, and adding integers is several times
# cheaper than adding Fractions, which reduce by a gcd at every step (a batch of 500 messages
# with five attributes each adds 2,500 values to a handful of cells).
_SUM_SHIFT = 1074
_SQUARES_SHIFT = 2 * _SUM_SHIFT


@dataclass
class MomentsTally:
    """Messages, Σx and Σx² added to one (attribute, class) cell, exact: the sums as integers
    scaled by 2**1074 and 2**2148 (see above), made Fractions once, by `delta`."""

    n: int = 0
    scaled_sum: int = 0
    scaled_squares: int = 0

    def add(self, value: float, *, sign: int) -> None:
        numerator, denominator = value.as_integer_ratio()
        exponent = denominator.bit_length() - 1  # denominator == 2**exponent, at most 2**1074
        self.n += sign
        self.scaled_sum += sign * (numerator << (_SUM_SHIFT - exponent))
        self.scaled_squares += sign * ((numerator * numerator) << (_SQUARES_SHIFT - 2 * exponent))

    def merge(self, other: MomentsTally) -> None:
        self.n += other.n
        self.scaled_sum += other.scaled_sum
        self.scaled_squares += other.scaled_squares

    def delta(self) -> MomentsDelta:
        return MomentsDelta(
            self.n,
            Fraction(self.scaled_sum, 1 << _SUM_SHIFT),
            Fraction(self.scaled_squares, 1 << _SQUARES_SHIFT),
        )


@dataclass
class AttributeSums:
    """The Gaussian statistics of a model's attributes: attribute name -> `Moments`."""

    n_classes: int
    moments: dict[str, Moments] = field(default_factory=dict)
    version: int = 0  # bumped by every change: what a Gaussians cache is checked against

    def add(self, values: AttributeValues, class_index: int, *, sign: int) -> None:
        """Add (sign=+1) or take away (-1) one message's values in class `class_index`."""
        for name, tally in cell_changes(values, sign=sign).items():
            self.change(name, class_index, tally.delta())

    def change(self, name: str, class_index: int, delta: MomentsDelta) -> None:
        moments = self.moments.get(name)
        if moments is None:
            moments = self.moments[name] = Moments.empty(self.n_classes)
        self.version += 1
        moments.n[class_index] += delta.n
        moments.sums[class_index] += delta.sum
        moments.squares[class_index] += delta.squares

    def set(
        self, name: str, class_index: int, *, n: int, total: Fraction, squares: Fraction
    ) -> None:
        """Put a cell's absolute values (as stored)."""
        moments = self.moments.get(name)
        if moments is None:
            moments = self.moments[name] = Moments.empty(self.n_classes)
        self.version += 1
        moments.n[class_index] = n
        moments.sums[class_index] = total
        moments.squares[class_index] = squares

    def set_cells(self, cells: Iterable[AttributeCell]) -> None:
        for name, class_index, n, total, squares in cells:
            self.set(name, class_index, n=n, total=total, squares=squares)

    def copy(self) -> AttributeSums:
        return AttributeSums(self.n_classes, {k: m.copy() for k, m in self.moments.items()})

    def merged(self, other: AttributeSums, *, weight: int = 1) -> AttributeSums:
        """These sums times `weight` plus `other`'s (a personal model over its backing one)."""
        result = other.copy()
        for name, moments in self.moments.items():
            for c in range(self.n_classes):
                delta = MomentsDelta(
                    weight * moments.n[c], weight * moments.sums[c], weight * moments.squares[c]
                )
                result.change(name, c, delta)
        return result

    def cells(self) -> Iterator[AttributeCell]:
        """(name, class index, n, Σx, Σx²) of every cell, names sorted."""
        for name in sorted(self.moments):
            moments = self.moments[name]
            for c in range(self.n_classes):
                yield name, c, moments.n[c], moments.sums[c], moments.squares[c]

    def __len__(self) -> int:
        return len(self.moments)


def cell_changes(values: AttributeValues, *, sign: int) -> dict[str, MomentsTally]:
    """What one message's `values` add (sign=+1) or take (-1): name -> its tally, exact."""
    changes: dict[str, MomentsTally] = {}
    for name, value in values.items():
        if not math.isfinite(value):
            raise ValueError(f"attribute {name!r} must be finite, got {value!r}")
        tally = changes[name] = MomentsTally()
        tally.add(float(value), sign=sign)
    return changes


@dataclass(frozen=True)
class Gaussians:
    """The Gaussians of the attributes every class has seen: names, θ and σ² (smoothed) of
    shape (n_attributes, K), and n per class and attribute."""

    names: tuple[str, ...]
    means: FloatArray
    variances: FloatArray
    observations: IntArray
    epsilon: float
    n_classes: int

    def index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.names)}


def fit_gaussians(sums: AttributeSums, *, var_smoothing: float) -> Gaussians:
    """θ_cj and σ²_cj + ε from the exact sums (GaussianNB's `theta_`, `var_`, `epsilon_`).

    ε is var_smoothing times the largest variance of any attribute over all classes pooled;
    attributes some class has not seen are left out (their variance still counts for ε).
    """
    largest = 0.0
    names: list[str] = []
    means: list[list[float]] = []
    variances: list[list[float]] = []
    observations: list[list[int]] = []
    for name in sorted(sums.moments):
        moments = sums.moments[name]
        total_n = sum(moments.n)
        if total_n > 0:
            pooled_mean = sum(moments.sums) / total_n
            largest = max(largest, float(sum(moments.squares) / total_n - pooled_mean**2))
        if min(moments.n) <= 0:
            continue
        names.append(name)
        class_means = [s / n for s, n in zip(moments.sums, moments.n, strict=True)]
        means.append([float(m) for m in class_means])
        variances.append(
            [
                float(q / n - m * m)
                for q, n, m in zip(moments.squares, moments.n, class_means, strict=True)
            ]
        )
        observations.append(list(moments.n))
    epsilon = var_smoothing * largest
    n_classes = sums.n_classes
    return Gaussians(
        names=tuple(names),
        means=np.array(means, dtype=np.float64).reshape(len(names), n_classes),
        variances=np.array(variances, dtype=np.float64).reshape(len(names), n_classes) + epsilon,
        observations=np.array(observations, dtype=np.int64).reshape(len(names), n_classes),
        epsilon=epsilon,
        n_classes=n_classes,
    )


@dataclass(frozen=True)
class AttributeEvidence:
    """The Gaussian evidence of some messages' attributes: for each (message, attribute) the
    message gives and the model can score, its row, the attribute's name, the log densities
    log N(x; θ_c, σ²_c) per class (shape (k, K)) and the trained messages that gave it."""

    rows: IntArray
    names: tuple[str, ...]
    log_densities: FloatArray
    observations: IntArray

    def log_likelihood(self, n_messages: int) -> FloatArray:
        """Σ_j log N(x_j; θ_cj, σ²_cj) per message and class, shape (n_messages, K)."""
        n_classes = self.log_densities.shape[1]
        result = np.zeros((n_messages, n_classes))
        np.add.at(result, self.rows, self.log_densities)
        return result

    def of_row(self, row: int) -> AttributeEvidence:
        keep = self.rows == row
        return AttributeEvidence(
            rows=np.zeros(int(keep.sum()), dtype=np.int64),
            names=tuple(name for name, k in zip(self.names, keep.tolist(), strict=True) if k),
            log_densities=self.log_densities[keep],
            observations=self.observations[keep],
        )


def attribute_evidence(
    sums: AttributeSums, messages: Sequence[AttributeValues], *, var_smoothing: float
) -> AttributeEvidence:
    """The Gaussian evidence of each message's attributes under the model's `sums`."""
    return evidence_of(fit_gaussians(sums, var_smoothing=var_smoothing), messages)


def evidence_of(gaussians: Gaussians, messages: Sequence[AttributeValues]) -> AttributeEvidence:
    """`attribute_evidence` with the Gaussians fitted already."""
    index = gaussians.index()
    rows: list[int] = []
    names: list[str] = []
    positions: list[int] = []
    values: list[float] = []
    for row, message in enumerate(messages):
        for name in sorted(message):
            position = index.get(name)
            if position is None or not (gaussians.variances[position] > 0).all():
                continue  # unseen by a class, or no spread at all: no Gaussian scores it
            rows.append(row)
            names.append(name)
            positions.append(position)
            values.append(float(message[name]))
    n_classes = gaussians.n_classes
    if not rows:
        return AttributeEvidence(
            rows=np.zeros(0, dtype=np.int64),
            names=(),
            log_densities=np.zeros((0, n_classes)),
            observations=np.zeros((0, n_classes), dtype=np.int64),
        )
    at = np.array(positions, dtype=np.int64)
    x = np.array(values, dtype=np.float64)[:, None]
    means, variances = gaussians.means[at], gaussians.variances[at]
    log_densities = -0.5 * (_LOG_2PI + np.log(variances)) - 0.5 * (x - means) ** 2 / variances
    return AttributeEvidence(
        rows=np.array(rows, dtype=np.int64),
        names=tuple(names),
        log_densities=log_densities,
        observations=gaussians.observations[at],
    )
