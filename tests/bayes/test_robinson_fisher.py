"""Robinson-Fisher equals a plain-Python reference of SPEC §3 and ranks without saturating."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier, NaiveBayesConfig
from app.bayes.scorers.robinson_fisher import log_chi2_cdf, log_chi2_sf
from tests.bayes.engine_config import engine_config
from tests.bayes.examples import random_counts, rows_of

RF = "robinson-fisher"


def chi2q(x2: float, dof: int) -> float:
    """Return P(chi-square with even dof >= x2): SpamBayes' series."""
    half = x2 / 2.0
    total = term = math.exp(-half)
    for i in range(1, dof // 2):
        term *= half / i
        total += term
    return min(total, 1.0)


def reference_spam_probability(
    tokens: set[str],
    docs: dict[str, tuple[int, int]],
    *,
    spam_messages: int,
    ham_messages: int,
    config: NaiveBayesConfig,
) -> float:
    """SPEC §3 written out: f(w) per token, min_dev, optional cap, Fisher on both tails."""
    s, x = config.rf_strength, config.rf_assumed
    clues = []
    for token in sorted(tokens):
        if token not in docs:
            continue
        spam, ham = docs[token]
        n = spam + ham
        if n == 0:
            continue  # not in V
        p = (spam / spam_messages) / (spam / spam_messages + ham / ham_messages)
        f = (s * x + n * p) / (s + n)
        if abs(f - 0.5) >= config.rf_min_dev:
            clues.append(f)
    if config.rf_max_tokens is not None:
        clues = sorted(clues, key=lambda f: -abs(f - 0.5))[: config.rf_max_tokens]
    if not clues:
        return 0.5
    dof = 2 * len(clues)
    ham_tail = chi2q(-2.0 * sum(math.log(f) for f in clues), dof)
    spam_tail = chi2q(-2.0 * sum(math.log(1.0 - f) for f in clues), dof)
    return (1.0 + ham_tail - spam_tail) / 2.0


def trained_table(seed: int) -> tuple[CountTable, np.ndarray]:
    X, labels = random_counts(seed=seed, n_messages=60, n_tokens=40, density=0.2)
    return CountTable.from_matrix(X, labels, ["ham", "spam"]), X


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"rf_strength": 0.0178, "rf_assumed": 0.52, "rf_min_dev": 0.1},
        {"rf_min_dev": 0.3},
        {"rf_min_dev": 0.0, "rf_max_tokens": 4},
        {"rf_strength": 1.0, "rf_assumed": 0.4, "rf_min_dev": 0.0},
    ],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spam_probability_equals_the_plain_python_formula(options, seed):
    table, _ = trained_table(seed)
    config = engine_config(event_model=RF, **options)
    classifier = Classifier(table, config)
    probe, _ = random_counts(seed=seed + 50, n_messages=25, n_tokens=40, density=0.1)
    ours = classifier.predict_proba(probe)[:, table.class_index("spam")]
    spam, ham = table.class_index("spam"), table.class_index("ham")
    docs = {
        token: (int(table.token_docs[spam, i]), int(table.token_docs[ham, i]))
        for i, token in enumerate(table.tokens)
    }
    for row, (token_ids, _) in enumerate(rows_of(probe)):
        expected = reference_spam_probability(
            {table.tokens[i] for i in token_ids},
            docs,
            spam_messages=int(table.class_docs[spam]),
            ham_messages=int(table.class_docs[ham]),
            config=config,
        )
        assert ours[row] == pytest.approx(expected, rel=1e-9, abs=1e-12)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), min_dev=st.sampled_from([0.0, 0.1, 0.4]))
def test_spam_probability_is_a_probability_and_the_classes_sum_to_one(seed, min_dev):
    table, _ = trained_table(seed % 50)
    classifier = Classifier(table, engine_config(event_model=RF, rf_min_dev=min_dev))
    probe, _ = random_counts(seed=seed, n_messages=20, n_tokens=40, density=0.3)
    probabilities = classifier.predict_proba(probe)
    assert ((probabilities >= 0) & (probabilities <= 1)).all()
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-12)


def test_balanced_evidence_and_empty_messages_give_one_half():
    table = CountTable(["ham", "spam"])
    table.intern(["cheap", "meeting", "unseen"])
    table.set_counts([0, 0, 1, 1], [1, 0, 1, 0], [3, 1, 1, 3], [3, 1, 1, 3])
    table.set_class_totals([4, 4], [4, 4])
    classifier = Classifier(table, engine_config(event_model=RF, rf_min_dev=0.0))
    X = table.vectorize([{"cheap": 1, "meeting": 2}, {}, {"unseen": 1}, {"unknown": 1}])
    np.testing.assert_allclose(classifier.predict_proba(X), 0.5, rtol=1e-12)
    spammy = classifier.predict_proba(table.vectorize([{"cheap": 1}]))
    assert spammy[0, table.class_index("spam")] > 0.5


def test_ranking_keeps_ordering_where_the_probability_rounds_to_one():
    table = CountTable(["ham", "spam"])
    n_tokens = 400
    table.intern([f"spam{i}" for i in range(n_tokens)] + [f"ham{i}" for i in range(n_tokens)])
    ids = np.arange(2 * n_tokens)
    spam_docs = np.where(ids < n_tokens, 1000, 1)
    table.set_counts(
        np.concatenate([ids, ids]),
        np.repeat([1, 0], 2 * n_tokens),
        np.concatenate([spam_docs, 1001 - spam_docs]),
        np.concatenate([spam_docs, 1001 - spam_docs]),
    )
    table.set_class_totals([1001, 1001], [1, 1])
    classifier = Classifier(table, engine_config(event_model=RF))
    messages = [{f"spam{i}": 1 for i in range(k)} for k in (50, 100, 200, 400)]
    messages += [{f"ham{i}": 1 for i in range(k)} for k in (50, 100, 200, 400)]
    X = table.vectorize(messages)
    probabilities = classifier.predict_proba(X)
    assert (probabilities[:4, table.class_index("spam")] == 1.0).all()  # saturated in doubles
    assert (probabilities[4:, table.class_index("ham")] == 1.0).all()
    odds = classifier.spam_log_odds(X)
    assert np.isfinite(odds).all()
    assert (np.diff(odds[:4]) > 0).all()  # more spam evidence, higher rank
    assert (np.diff(odds[4:]) < 0).all()


def test_log_tails_of_chi_square_agree_with_the_series_where_it_does_not_underflow():
    for x in (0.5, 5.0, 40.0, 300.0, 1200.0):
        for m in (1, 3, 20, 150):
            survival = chi2q(x, 2 * m)
            if survival > 1e-300:
                assert log_chi2_sf(np.array([x]), np.array([float(m)]))[0] == pytest.approx(
                    math.log(survival), rel=1e-10, abs=1e-12
                )
            if 1 - survival > 1e-6:  # below, the series itself loses the digits
                assert log_chi2_cdf(np.array([x]), np.array([float(m)]))[0] == pytest.approx(
                    math.log1p(-survival), rel=1e-9, abs=1e-12
                )
    far = log_chi2_sf(np.array([1e5]), np.array([10.0]))[0]
    assert far == pytest.approx(-5e4 + 9 * math.log(5e4) - math.lgamma(10), rel=1e-6)


def test_robinson_fisher_needs_exactly_ham_and_spam():
    X, labels = random_counts(seed=3, n_classes=3)
    table = CountTable.from_matrix(X, labels, ["ham", "spam", "news"])
    with pytest.raises(ValueError, match="ham"):
        Classifier(table, engine_config(event_model=RF))
    classifier = Classifier(table, engine_config())
    with pytest.raises(ValueError, match="ham"):
        classifier.predict_proba(X, event_model=RF)
