"""Vocabulary V, probabilities, verdicts, clues, top tokens and config checks."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st

from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier, top_tokens, verdict
from app.bayes.vocabulary import select_vocabulary
from tests.bayes.engine_config import engine_config
from tests.bayes.examples import random_counts

EVENT_MODELS = ["multinomial", "bernoulli", "robinson-fisher"]


def small_table() -> CountTable:
    """Ham/spam counts where each token's total docs is known: see the comments."""
    table = CountTable(["ham", "spam"])
    table.intern(["viagra", "meeting", "the", "lunch", "zebra", "apple", "free"])
    #             viagra meeting the lunch zebra apple free
    ham_docs, spam_docs = [0, 5, 4, 2, 1, 1, 0], [6, 0, 3, 0, 1, 1, 0]
    ham_terms, spam_terms = [0, 9, 8, 2, 1, 1, 0], [9, 0, 5, 0, 1, 1, 0]
    table.set_counts(
        np.tile(np.arange(7), 2),
        np.repeat([0, 1], 7),
        np.concatenate([ham_docs, spam_docs]),
        np.concatenate([ham_terms, spam_terms]),
    )
    table.set_class_totals([6, 6], [21, 16])
    return table


def test_vocabulary_keeps_tokens_with_enough_docs_minus_stop_words():
    table = small_table()  # total docs: 6 5 7 2 2 2 0
    mask = select_vocabulary(table, min_df=2, stop_words=frozenset({"the", "free"}))
    assert [t for t, kept in zip(table.tokens, mask, strict=True) if kept] == [
        "viagra",
        "meeting",
        "lunch",
        "zebra",
        "apple",
    ]
    assert not select_vocabulary(table)[table.tokens.index("free")]  # no docs: never in V


def test_max_vocab_keeps_the_most_frequent_and_breaks_ties_by_token_text():
    table = small_table()  # total docs: the 7, viagra 6, meeting 5, then lunch/zebra/apple 2
    mask = select_vocabulary(table, max_vocab=4)
    kept = {t for t, k in zip(table.tokens, mask, strict=True) if k}
    assert kept == {"the", "viagra", "meeting", "apple"}
    mask = select_vocabulary(table, max_vocab=5, stop_words=frozenset({"the"}))
    kept = {t for t, k in zip(table.tokens, mask, strict=True) if k}
    assert kept == {"viagra", "meeting", "apple", "lunch", "zebra"}


@pytest.mark.parametrize("event_model", EVENT_MODELS)
def test_tokens_outside_the_vocabulary_do_not_change_scores(event_model):
    table = small_table()
    config = engine_config(
        event_model=event_model, min_df=2, stop_words=frozenset({"the"}), rf_min_dev=0.0
    )
    classifier = Classifier(table, config)
    with_outsiders = table.vectorize([{"viagra": 2, "the": 5, "free": 1, "unknown": 3}])
    without = table.vectorize([{"viagra": 2}])
    np.testing.assert_allclose(
        classifier.joint_log_likelihood(with_outsiders),
        classifier.joint_log_likelihood(without),
        rtol=1e-15,
    )
    assert classifier.tokens_used(with_outsiders)[0] == 1
    assert classifier.vocabulary_size == 5


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 1000),
    n_classes=st.integers(2, 5),
    event_model=st.sampled_from(["multinomial", "bernoulli"]),
    prior=st.sampled_from(["mle", "laplace", "uniform"]),
)
def test_class_probabilities_sum_to_one(seed, n_classes, event_model, prior):
    X, labels = random_counts(seed=seed, n_classes=n_classes, n_messages=40, n_tokens=30)
    table = CountTable.from_matrix(X, labels, [f"c{i}" for i in range(n_classes)])
    config = engine_config(event_model=event_model, prior=prior)
    probabilities = Classifier(table, config).predict_proba(X)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-12)


def test_a_k_class_verdict_is_the_most_probable_class():
    X, labels = random_counts(seed=7, n_classes=4)
    classes = ["news", "work", "family", "shops"]
    table = CountTable.from_matrix(X, labels, classes)
    config = engine_config()
    probabilities = Classifier(table, config).predict_proba(X)
    verdicts = [verdict(row, classes, config) for row in probabilities]
    assert verdicts == [classes[i] for i in probabilities.argmax(axis=1)]


@pytest.mark.parametrize(
    ("spam_probability", "expected"),
    [(0.95, "spam"), (0.9, "spam"), (0.89, "unsure"), (0.5, "unsure"), (0.1, "ham"), (0.0, "ham")],
)
def test_a_ham_spam_verdict_follows_the_thresholds(spam_probability, expected):
    config = engine_config(spam_threshold=0.9, ham_threshold=0.1)
    probabilities = np.array([spam_probability, 1 - spam_probability])
    assert verdict(probabilities, ["spam", "ham"], config) == expected


@pytest.mark.parametrize("event_model", EVENT_MODELS)
def test_clues_name_the_tokens_that_moved_the_verdict_strongest_first(event_model):
    table = small_table()
    classifier = Classifier(table, engine_config(event_model=event_model, rf_min_dev=0.0))
    X = table.vectorize([{"viagra": 1, "meeting": 1, "zebra": 1, "unknown": 1}])
    clues = classifier.explain(X, limit=10)
    assert {clue.token for clue in clues} <= {"viagra", "meeting", "zebra"}
    assert {clue.token: clue.class_ for clue in clues}["viagra"] == "spam"
    assert {clue.token: clue.class_ for clue in clues}["meeting"] == "ham"
    weights = [clue.weight for clue in clues]
    assert weights == sorted(weights, reverse=True)
    assert all(weight >= 0 for weight in weights)
    assert len(classifier.explain(X, limit=1)) == 1


def test_clues_of_a_k_class_model_point_to_each_tokens_favourite_class():
    X = scipy.sparse.csr_array(np.array([[5, 0, 0], [0, 5, 0], [0, 0, 5], [1, 1, 1]]))
    table = CountTable.from_matrix(X, [0, 1, 2, 0], ["a", "b", "c"], tokens=["x", "y", "z"])
    clues = Classifier(table, engine_config()).explain(table.vectorize([{"y": 1, "z": 2}]))
    assert [(clue.token, clue.class_) for clue in clues] == [("z", "c"), ("y", "b")]


@pytest.mark.parametrize("event_model", EVENT_MODELS)
def test_top_tokens_rank_each_class_by_log_likelihood_ratio(event_model):
    table = small_table()
    top = top_tokens(table, engine_config(event_model=event_model), limit=3)
    assert set(top) == {"ham", "spam"}
    assert top["spam"][0][0] == "viagra"
    assert top["ham"][0][0] == "meeting"
    for ranked in top.values():
        assert len(ranked) <= 3
        assert all(weight > 0 for _, weight in ranked)
        assert [w for _, w in ranked] == sorted((w for _, w in ranked), reverse=True)
    if event_model != "multinomial":  # equal docs in classes of equal size: no evidence
        assert all(token != "zebra" for ranked in top.values() for token, _ in ranked)


@pytest.mark.parametrize("event_model", EVENT_MODELS)
@pytest.mark.parametrize("limit", [1, 3, 20, 1000])
def test_top_tokens_are_a_full_sort_by_ratio_then_text_cut_to_the_limit(event_model, limit):
    # Counts of a few values over many tokens: long runs of equal ratios cross the cut.
    rng = np.random.default_rng(7)
    n_tokens = 400
    matrix = rng.integers(1, 3, size=(30, n_tokens)) * (rng.random((30, n_tokens)) < 0.1)
    texts = [f"t{rng.integers(0, 10**6)}-{i}" for i in range(n_tokens)]
    labels = ["ham"] * 18 + ["spam"] * 12
    table = CountTable.from_matrix(matrix, labels, ["ham", "spam"], tokens=texts)
    config = engine_config(event_model=event_model)
    unlimited = top_tokens(table, config, limit=n_tokens)
    top = top_tokens(table, config, limit=limit)
    for label, ranked in unlimited.items():
        assert ranked == sorted(ranked, key=lambda item: (-item[1], item[0]))
        assert top[label] == ranked[:limit]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"alpha": 0}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"event_model": "graham"}, "event_model"),
        ({"prior": "flat"}, "prior"),
        ({"min_df": 0}, "min_df"),
        ({"max_vocab": 0}, "max_vocab"),
        ({"stop_words": {"the"}}, "stop_words"),
        ({"rf_strength": 0.0}, "rf_strength"),
        ({"rf_assumed": 1.0}, "rf_assumed"),
        ({"rf_min_dev": 0.5}, "rf_min_dev"),
        ({"rf_max_tokens": 0}, "rf_max_tokens"),
        ({"spam_threshold": 1.5}, "spam_threshold"),
        ({"ham_threshold": 0.95}, "ham_threshold"),
        ({"min_df": True}, "min_df"),
    ],
)
def test_invalid_config_is_refused_naming_the_field(options, field):
    with pytest.raises(ValueError, match=field):
        engine_config(**options)


def test_scoring_an_untrained_model_under_the_mle_prior_is_a_programming_error():
    table = CountTable(["ham", "spam"])
    table.intern(["a"])
    with pytest.raises(ValueError, match="trained"):
        Classifier(table, engine_config()).predict_proba(table.vectorize([{"a": 1}]))
