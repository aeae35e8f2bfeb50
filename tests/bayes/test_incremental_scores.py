"""Cached log-probabilities refreshed from the journal equal those of a fresh Classifier."""

from __future__ import annotations

import numpy as np
import pytest

from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier
from tests.bayes.engine_config import engine_config
from tests.bayes.examples import random_counts, rows_of

CONFIGS = {
    "plain": {},
    "min_df": {"min_df": 3},
    "max_vocab": {"max_vocab": 25, "stop_words": frozenset({"t03", "t10"})},
    "stop_words": {"stop_words": frozenset({"t00", "t01", "t02"}), "alpha": 0.3},
}


def assert_same_scores(classifier: Classifier, X, event_model: str) -> None:
    fresh = Classifier(classifier.table, classifier.config)
    np.testing.assert_allclose(
        classifier.joint_log_likelihood(X, event_model=event_model),
        fresh.joint_log_likelihood(X, event_model=event_model),
        rtol=1e-12,
        atol=1e-12,
    )
    assert classifier.vocabulary_size == fresh.vocabulary_size


def refuse_rebuilds(classifier: Classifier, monkeypatch) -> None:
    """Make the classifier's full rebuilds fail, so passing tests prove the incremental refresh."""

    def refuse(*args, **kwargs):
        raise AssertionError("full rebuild where an incremental refresh was expected")

    for scoring in classifier._scorings.values():  # the scorers used so far: their caches
        cache = getattr(scoring, "cache", None)
        if cache is not None:
            monkeypatch.setattr(cache, "rebuild", refuse)


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli", "robinson-fisher"])
@pytest.mark.parametrize("config_name", list(CONFIGS))
def test_scores_after_interleaved_training_equal_a_fresh_classifiers(
    event_model, config_name, monkeypatch
):
    X, labels = random_counts(seed=11, n_messages=150, n_tokens=50)
    first = 40
    table = CountTable.from_matrix(X[:first], labels[:first], ["ham", "spam"])
    config = engine_config(event_model=event_model, **CONFIGS[config_name])
    classifier = Classifier(table, config)
    probe, _ = random_counts(seed=12, n_messages=30, n_tokens=50)
    assert_same_scores(classifier, probe, event_model)
    refuse_rebuilds(classifier, monkeypatch)
    rows = rows_of(X)
    for step in range(first, X.shape[0]):
        token_ids, terms = rows[step]
        table.add(int(labels[step]), token_ids, terms)
        if step % 7 == 0:  # a user's correction: forget an earlier message, relabel it
            old_ids, old_terms = rows[step - 30]
            table.add(int(labels[step - 30]), old_ids, old_terms, sign=-1)
            table.add(1 - int(labels[step - 30]), old_ids, old_terms)
        if step % 5 == 0:
            assert_same_scores(classifier, probe, event_model)
    assert_same_scores(classifier, probe, event_model)


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli"])
def test_scores_follow_a_database_change_feed_and_new_tokens(event_model, monkeypatch):
    X, labels = random_counts(seed=21, n_messages=80, n_tokens=40)
    table = CountTable.from_matrix(X, labels, ["ham", "spam"])
    classifier = Classifier(table, engine_config(event_model=event_model, min_df=2))
    probe, _ = random_counts(seed=22, n_messages=20, n_tokens=45)  # 5 columns not yet known
    assert_same_scores(classifier, probe, event_model)
    refuse_rebuilds(classifier, monkeypatch)
    # Another process trained: the feed brings absolute cells, then the totals.
    docs = np.array(table.token_docs)
    table.set_counts([3, 3, 7], [0, 1, 1], docs[[0, 1, 1], [3, 3, 7]] + 1, [9, 9, 9])
    assert_same_scores(classifier, probe, event_model)
    table.set_class_totals(table.class_docs + np.array([1, 2]), table.class_terms + 9)
    assert_same_scores(classifier, probe, event_model)
    # New ids placed by the database, out of order, then counted.
    table.place(np.array([43, 41]), ["new43", "new41"])
    table.set_counts([43, 41, 43], [1, 1, 0], [4, 2, 3], [5, 2, 3])
    assert_same_scores(classifier, probe, event_model)
    table.place(np.array([40, 42, 44]), ["new40", "new42", "new44"])
    table.add(0, np.array([40, 42, 44]), np.array([1, 2, 3]))
    assert_same_scores(classifier, probe, event_model)


def test_a_classifier_far_behind_the_journal_rebuilds():
    X, labels = random_counts(seed=31)
    table = CountTable.from_matrix(X, labels, ["ham", "spam"])
    classifier = Classifier(table, engine_config())
    classifier.joint_log_likelihood(X)
    n = 70_000
    table.set_counts(np.arange(n), np.ones(n, np.int64), np.ones(n, np.int64), np.ones(n))
    assert_same_scores(classifier, X, "multinomial")


def test_scoring_accepts_matrices_narrower_or_wider_than_the_table():
    X, labels = random_counts(seed=41, n_tokens=30)
    table = CountTable.from_matrix(X, labels, ["ham", "spam"])
    classifier = Classifier(table, engine_config())
    wide = np.hstack([X.toarray(), np.full((X.shape[0], 5), 3)])
    narrow = X.toarray()[:, :20]
    for event_model in ("multinomial", "bernoulli", "robinson-fisher"):
        np.testing.assert_allclose(
            classifier.joint_log_likelihood(wide, event_model=event_model),
            classifier.joint_log_likelihood(X, event_model=event_model),
        )
        padded = np.hstack([narrow, np.zeros((X.shape[0], 10), np.int64)])
        np.testing.assert_allclose(
            classifier.joint_log_likelihood(narrow, event_model=event_model),
            classifier.joint_log_likelihood(padded, event_model=event_model),
        )
