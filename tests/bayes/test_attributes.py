"""Gaussian attributes: equal to scikit-learn's GaussianNB, and exactly reversible."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB

from app.bayes.attributes import (
    AttributeSums,
    MomentsTally,
    attribute_evidence,
    fit_gaussians,
)
from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier, log_prior
from app.bayes.scorers.robinson_fisher import attribute_clues
from app.service.model_config import ModelConfig

CLASSES = ("ham", "spam")


def numeric_table(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=60)
    X = rng.normal(size=(60, 4)) * np.array([1.0, 10.0, 0.1, 1000.0]) + y[:, None] * 0.8
    return X, y


def sums_of(X: np.ndarray, y: np.ndarray, n_classes: int = 2) -> AttributeSums:
    sums = AttributeSums(n_classes)
    for row, label in zip(X, y, strict=True):
        sums.add({f"a{j}": float(v) for j, v in enumerate(row)}, int(label), sign=1)
    return sums


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_gaussians_equal_gaussian_nb_theta_var_and_epsilon(seed: int) -> None:
    X, y = numeric_table(seed)
    reference = GaussianNB(var_smoothing=1e-9).fit(X, y)
    gaussians = fit_gaussians(sums_of(X, y), var_smoothing=1e-9)
    assert gaussians.names == ("a0", "a1", "a2", "a3")
    np.testing.assert_allclose(gaussians.means.T, reference.theta_, rtol=1e-12)
    np.testing.assert_allclose(gaussians.variances.T, reference.var_, rtol=1e-10)
    assert gaussians.epsilon == pytest.approx(reference.epsilon_, rel=1e-10)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_prior_plus_gaussian_evidence_is_gaussian_nb_predict_proba(seed: int) -> None:
    X, y = numeric_table(seed)
    reference = GaussianNB(var_smoothing=1e-9).fit(X, y)
    queries = np.random.default_rng(seed + 10).normal(size=(15, 4)) * 3
    evidence = attribute_evidence(
        sums_of(X, y),
        [{f"a{j}": float(v) for j, v in enumerate(row)} for row in queries],
        var_smoothing=1e-9,
    )
    class_docs = np.bincount(y, minlength=2)
    joint = log_prior(class_docs, "mle") + evidence.log_likelihood(len(queries))
    np.testing.assert_allclose(joint, reference.predict_joint_log_proba(queries), rtol=1e-9)
    log_proba = joint - np.logaddexp.reduce(joint, axis=1, keepdims=True)
    np.testing.assert_allclose(
        np.exp(log_proba), reference.predict_proba(queries), rtol=1e-8, atol=1e-15
    )


def test_a_classifier_adds_the_gaussians_to_naive_bayes_scores_only_when_configured() -> None:
    X, y = numeric_table(3)
    table = CountTable(CLASSES)
    ids = table.intern(["word"])
    for label in y.tolist():
        table.add(int(label), ids, [1])
    sums = sums_of(X, y)
    values = [{f"a{j}": float(v) for j, v in enumerate(row)} for row in X[:5]]
    matrix = table.vectorize([{"word": 1}] * 5)
    off = ModelConfig(event_model="multinomial").to_engine()
    on = ModelConfig(event_model="multinomial", gaussian_attributes=True).to_engine()
    plain = Classifier(table, off, attributes=sums).assess(matrix, attribute_values=values)[1]
    scored = Classifier(table, on, attributes=sums).assess(matrix, attribute_values=values)[1]
    evidence = attribute_evidence(sums, values, var_smoothing=1e-9)
    np.testing.assert_allclose(scored, plain + evidence.log_likelihood(5), rtol=1e-12)


def test_training_then_forgetting_in_any_order_restores_the_sums_exactly() -> None:
    rng = random.Random(7)
    sums = AttributeSums(2)
    base = [({"x": rng.uniform(-1e6, 1e6), "y": rng.random() * 1e-300}, rng.randrange(2))]
    for values, label in base:
        sums.add(values, label, sign=1)
    before = sums.copy()
    added = [
        ({"x": rng.gauss(0, 1) * 10 ** rng.randint(-20, 20), "y": 0.1}, rng.randrange(2))
        for _ in range(200)
    ]
    for values, label in added:
        sums.add(values, label, sign=1)
    rng.shuffle(added)
    for values, label in added:
        sums.add(values, label, sign=-1)
    assert list(sums.cells()) == list(before.cells())
    assert sums.moments["y"].sums[base[0][1]] == Fraction(base[0][0]["y"])


def test_a_tally_sums_any_floats_exactly_as_fractions_do() -> None:
    rng = random.Random(5)
    values = [5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -0.0, 0.1, 3.0]
    values += [rng.uniform(-1e6, 1e6) * 10.0 ** rng.randint(-300, 300) for _ in range(200)]
    signs = [rng.choice((1, 1, -1)) for _ in values]
    tally, other = MomentsTally(), MomentsTally()
    for position, (value, sign) in enumerate(zip(values, signs, strict=True)):
        (tally if position % 2 else other).add(value, sign=sign)
    tally.merge(other)

    delta = tally.delta()

    assert delta.n == sum(signs)
    assert delta.sum == sum(sign * Fraction(v) for v, sign in zip(values, signs, strict=True))
    assert delta.squares == sum(
        sign * Fraction(v) ** 2 for v, sign in zip(values, signs, strict=True)
    )
    for value, sign in zip(values, signs, strict=True):  # and taken away, nothing is left
        tally.add(value, sign=-sign)
    assert tally == MomentsTally()


def test_an_attribute_a_class_never_saw_or_a_message_lacks_is_left_out() -> None:
    sums = AttributeSums(2)
    sums.add({"seen": 1.0, "spam_only": 5.0}, 1, sign=1)
    sums.add({"seen": 2.0, "spam_only": 7.0}, 1, sign=1)
    sums.add({"seen": 0.0}, 0, sign=1)
    sums.add({"seen": 0.5}, 0, sign=1)
    evidence = attribute_evidence(
        sums, [{"seen": 1.0, "spam_only": 6.0}, {}, {"unknown": 3.0}], var_smoothing=1e-9
    )
    assert evidence.names == ("seen",)
    assert evidence.rows.tolist() == [0]
    assert not evidence.log_likelihood(3)[1:].any()


def test_a_robinson_fisher_attribute_clue_leans_where_the_densities_do() -> None:
    sums = AttributeSums(2)
    for value in (0.0, 0.1, -0.1, 0.05):
        sums.add({"score": value}, 0, sign=1)
    for value in (5.0, 5.5, 4.5, 6.0):
        sums.add({"score": value}, 1, sign=1)
    evidence = attribute_evidence(
        sums, [{"score": 5.2}, {"score": 0.02}, {"score": 2.6}], var_smoothing=1e-9
    )
    f, g = attribute_clues(evidence, spam=1, ham=0, strength=0.03, assumed=0.5)
    assert f[0] > 0.99
    assert f[1] < 0.01
    np.testing.assert_allclose(f + g, 1.0, rtol=1e-12)
    assert ((f > 0) & (f < 1) & (g > 0)).all()  # shrunk toward x: never a certain clue


def test_a_classifier_scores_with_the_very_sums_it_was_given_as_they_fill() -> None:
    table = CountTable(CLASSES)
    ids = table.intern(["word"])
    table.add(0, ids, [1])
    table.add(1, ids, [1])
    sums = AttributeSums(2)  # empty when given: filled as messages are trained
    classifier = Classifier(
        table,
        ModelConfig(event_model="bernoulli", gaussian_attributes=True).to_engine(),
        attributes=sums,
    )
    matrix = table.vectorize([{"word": 1}])
    before = classifier.assess(matrix, attribute_values=[{"x": 0.0}])[1]
    sums.add({"x": 0.0}, 0, sign=1)
    sums.add({"x": 0.5}, 0, sign=1)
    sums.add({"x": 9.0}, 1, sign=1)
    sums.add({"x": 10.0}, 1, sign=1)
    after = classifier.assess(matrix, attribute_values=[{"x": 0.0}])[1]
    assert after[0, 0] - after[0, 1] > before[0, 0] - before[0, 1] + 10
