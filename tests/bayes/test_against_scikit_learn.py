"""On the same count matrix the scores equal scikit-learn's MultinomialNB and BernoulliNB.

Tolerances: SPEC §3 asks for 1e-9 relative. Joint log-likelihoods and probabilities are
compared at rtol 1e-9. Log-probabilities near 0 (a confident class) are differences of two
scores of magnitude |score|, so both implementations carry an absolute rounding error of
about eps·|score| there; they get atol 1e-11 besides rtol 1e-9.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.naive_bayes import BernoulliNB, MultinomialNB

from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier
from tests.bayes.engine_config import engine_config
from tests.bayes.examples import corpus_messages, non_empty_columns, random_counts, word_counts

ALPHAS = [0.01, 0.5, 1.0, 2.5]
PRIORS = ["mle", "laplace", "uniform"]


def scikit_model(event_model: str, alpha: float, prior: str, labels: np.ndarray, n_classes: int):
    """Return the unfitted scikit-learn estimator matching an event model and prior."""
    options: dict[str, object] = {"alpha": alpha, "force_alpha": True}
    if prior == "uniform":
        options["fit_prior"] = False
    elif prior == "laplace":
        class_docs = np.bincount(labels, minlength=n_classes)
        options["class_prior"] = (class_docs + 1) / (class_docs.sum() + n_classes)
    if event_model == "multinomial":
        return MultinomialNB(**options)
    return BernoulliNB(binarize=0.0, **options)


def assert_scores_match(ours: Classifier, theirs, X, X_theirs, event_model: str) -> None:
    np.testing.assert_allclose(
        ours.joint_log_likelihood(X, event_model=event_model),
        theirs.predict_joint_log_proba(X_theirs),
        rtol=1e-9,
    )
    np.testing.assert_allclose(
        ours.predict_log_proba(X, event_model=event_model),
        theirs.predict_log_proba(X_theirs),
        rtol=1e-9,
        atol=1e-11,
    )
    np.testing.assert_allclose(
        ours.predict_proba(X, event_model=event_model),
        theirs.predict_proba(X_theirs),
        rtol=1e-9,
        atol=1e-300,
    )


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli"])
@pytest.mark.parametrize("n_classes", [2, 3, 5])
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("prior", PRIORS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scores_equal_scikit_learn_on_random_counts(event_model, n_classes, alpha, prior, seed):
    X, labels = random_counts(seed=seed, n_classes=n_classes)
    classes = [f"class{i}" for i in range(n_classes)]
    table = CountTable.from_matrix(X, labels, classes)
    classifier = Classifier(table, engine_config(event_model=event_model, alpha=alpha, prior=prior))
    columns = non_empty_columns(X)  # scikit-learn's vocabulary is its columns: V
    theirs = scikit_model(event_model, alpha, prior, labels, n_classes).fit(X[:, columns], labels)
    X_new, _ = random_counts(seed=seed + 100, n_classes=n_classes)
    for matrix in (X, X_new):
        assert_scores_match(classifier, theirs, matrix, matrix[:, columns], event_model)


@settings(max_examples=60, deadline=None)
@given(
    counts=arrays(
        np.int64,
        st.tuples(st.integers(2, 12), st.integers(1, 10)),
        elements=st.integers(0, 4),
    ),
    n_classes=st.integers(2, 4),
    alpha=st.sampled_from(ALPHAS),
    event_model=st.sampled_from(["multinomial", "bernoulli"]),
    data=st.data(),
)
def test_scores_equal_scikit_learn_on_any_small_matrix(counts, n_classes, alpha, event_model, data):
    n_messages = counts.shape[0]
    labels = np.arange(n_messages) % n_classes
    labels = np.asarray(data.draw(st.permutations(labels.tolist())), dtype=np.int64)
    X = scipy.sparse.csr_array(counts)
    columns = non_empty_columns(X)
    if columns.size == 0 or np.bincount(labels, minlength=n_classes).min() == 0:
        return  # scikit-learn needs a feature and every class
    table = CountTable.from_matrix(X, labels, [f"c{i}" for i in range(n_classes)])
    classifier = Classifier(table, engine_config(event_model=event_model, alpha=alpha))
    theirs = scikit_model(event_model, alpha, "mle", labels, n_classes).fit(X[:, columns], labels)
    assert_scores_match(classifier, theirs, X, X[:, columns], event_model)


@pytest.mark.corpus
@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli"])
@pytest.mark.parametrize("alpha", [0.1, 1.0])
def test_scores_equal_scikit_learn_on_the_sms_corpus(event_model, alpha):
    messages = corpus_messages("sms-spam-collection")
    table = CountTable(["ham", "spam"])
    vectors = [word_counts(text) for _, text in messages]
    for token_counts in vectors:
        table.intern(list(token_counts))
    labels = table.class_indices([label for label, _ in messages])
    X = table.vectorize(vectors)
    train = np.arange(len(messages)) % 5 != 0
    for row in np.flatnonzero(train):
        start, end = X.indptr[row], X.indptr[row + 1]
        table.add(int(labels[row]), X.indices[start:end], X.data[start:end])
    classifier = Classifier(table, engine_config(event_model=event_model, alpha=alpha))
    columns = non_empty_columns(X[train])
    theirs = scikit_model(event_model, alpha, "mle", labels[train], 2).fit(
        X[train][:, columns], labels[train]
    )
    test = X[~train]
    assert_scores_match(classifier, theirs, test, test[:, columns], event_model)
