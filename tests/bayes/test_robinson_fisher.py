"""Robinson-Fisher equals a plain-Python reference of SPEC §3 and ranks without saturating."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier, NaiveBayesConfig
from app.bayes.scorers.robinson_fisher import bound_evidence, log_chi2_cdf, log_chi2_sf
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
    """SPEC §3 written out: f(w) per token, min_dev, optional cap, Fisher on both tails; with
    rf_evidence_cap k < m clues, Brown's correction: both statistics times k/m on 2k dof."""
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
    k = len(clues)
    if config.rf_evidence_cap is not None:
        k = min(k, config.rf_evidence_cap)
    scale = k / len(clues)
    ham_tail = chi2q(-2.0 * scale * sum(math.log(f) for f in clues), 2 * k)
    spam_tail = chi2q(-2.0 * scale * sum(math.log(1.0 - f) for f in clues), 2 * k)
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
        {"rf_min_dev": 0.0, "rf_evidence_cap": 3},
        {"rf_min_dev": 0.1, "rf_evidence_cap": 1},
        {"rf_min_dev": 0.0, "rf_max_tokens": 6, "rf_evidence_cap": 4},
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


def uniform_evidence_table(n_tokens: int, spam_docs: int, ham_docs: int) -> CountTable:
    """Tokens t0 … t{n-1}, each in `spam_docs` of 100 spam and `ham_docs` of 100 ham: every
    token carries the same evidence, the extreme of correlation (each a copy of the others)."""
    table = CountTable(["ham", "spam"])
    table.intern([f"t{i}" for i in range(n_tokens)])
    ids = np.arange(n_tokens)
    docs = np.concatenate([np.full(n_tokens, ham_docs), np.full(n_tokens, spam_docs)])
    table.set_counts(np.concatenate([ids, ids]), np.repeat([0, 1], n_tokens), docs, docs)
    table.set_class_totals([100, 100], [100, 100])
    return table


def test_bound_evidence_scales_long_messages_to_the_cap_and_leaves_short_ones():
    log_f = np.array([-1.0, -30.0, -600.0, 0.0])
    log_g = np.array([-2.0, -6.0, -90.0, 0.0])
    counts = np.array([2, 10, 300, 0])

    f, g, m = bound_evidence(log_f, log_g, counts, 10)

    np.testing.assert_allclose(f, [-1.0, -30.0, -20.0, 0.0])  # -600 · 10/300
    np.testing.assert_allclose(g, [-2.0, -6.0, -3.0, 0.0])
    assert m.tolist() == [2, 10, 10, 0]
    unchanged = bound_evidence(log_f, log_g, counts, None)
    assert all(a is b for a, b in zip(unchanged, (log_f, log_g, counts), strict=True))


def test_evidence_repeated_past_the_cap_adds_nothing():
    table = uniform_evidence_table(200, spam_docs=90, ham_docs=10)
    messages = [{f"t{i}": 1 for i in range(m)} for m in (5, 10, 20, 50, 200)]
    X = table.vectorize(messages)
    bounded = Classifier(table, engine_config(event_model=RF, rf_min_dev=0.0, rf_evidence_cap=10))
    unbounded = Classifier(table, engine_config(event_model=RF, rf_min_dev=0.0))

    capped, free = bounded.spam_log_odds(X), unbounded.spam_log_odds(X)

    assert (np.diff(free) > 0).all()  # Fisher alone: each copy is new evidence, no bound
    assert capped[0] == pytest.approx(free[0], rel=1e-12)  # at most k tokens: as before
    assert capped[1] == pytest.approx(free[1], rel=1e-12)
    np.testing.assert_allclose(capped[1:], capped[1], rtol=1e-12)  # 20 copies weigh as 10
    assert capped[-1] < free[-1] / 10


def test_the_bound_keeps_the_mean_evidence_so_mixed_messages_still_rank():
    """Past the cap a message scores by the mean evidence of its tokens: more spam-like
    tokens among the same number rank it higher, as without the bound."""
    table = CountTable(["ham", "spam"])
    table.intern([f"s{i}" for i in range(100)] + [f"h{i}" for i in range(100)])
    ids = np.arange(200)
    spam_docs = np.where(ids < 100, 90, 10)
    table.set_counts(
        np.concatenate([ids, ids]),
        np.repeat([0, 1], 200),
        np.concatenate([100 - spam_docs, spam_docs]),
        np.concatenate([100 - spam_docs, spam_docs]),
    )
    table.set_class_totals([100, 100], [100, 100])
    bounded = Classifier(table, engine_config(event_model=RF, rf_min_dev=0.0, rf_evidence_cap=8))
    mixes = [
        {**{f"s{i}": 1 for i in range(spam)}, **{f"h{i}": 1 for i in range(40 - spam)}}
        for spam in (10, 20, 30, 40)
    ]

    odds = bounded.spam_log_odds(table.vectorize(mixes))

    assert (np.diff(odds) > 0).all()
    assert odds[1] == pytest.approx(0.0, abs=1e-9)  # 20 against 20: even


def test_clue_weights_share_the_bound():
    table = uniform_evidence_table(40, spam_docs=90, ham_docs=10)
    X = table.vectorize([{f"t{i}": 1 for i in range(40)}])
    weights = {}
    for cap in (None, 10):
        classifier = Classifier(
            table, engine_config(event_model=RF, rf_min_dev=0.0, rf_evidence_cap=cap)
        )
        weights[cap] = [clue.weight for clue in classifier.explain(X, limit=40)]
    np.testing.assert_allclose(weights[10], np.asarray(weights[None]) * 10 / 40, rtol=1e-12)


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
