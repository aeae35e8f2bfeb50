"""1. Scoring: the engine's batch scoring of a CSR matrix vs scikit-learn's predict_proba.

Both score the same count matrix: the SpamAssassin test split as the training split's
vocabulary sees it (the quick mode: a small synthetic Zipf matrix). Each side is fitted
before the clock starts; only predict_proba is timed, warm caches, several runs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import scipy.sparse

from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier
from app.service.evaluation import CLASSES, LabelledMessage
from app.service.model_config import ModelConfig
from app.text import tokenize_raw
from app.text.core import resolve
from bench import data
from bench.timing import rates, ratio, summary, time_interleaved


def corpus_matrices(
    train: list[LabelledMessage], test: list[LabelledMessage]
) -> tuple[CountTable, scipy.sparse.csr_array, np.ndarray, scipy.sparse.csr_array]:
    """Return the training counts, the training matrix and labels, and the test matrix."""
    table = CountTable(CLASSES)
    core = resolve("auto")
    train_counts = [tokenize_raw(m.raw or b"", core=core).token_counts for m in train]
    for counts in train_counts:
        table.intern(list(counts))
    X_train = table.vectorize(train_counts)
    y = np.array([CLASSES.index(m.label) for m in train])
    X_test = table.vectorize([tokenize_raw(m.raw or b"", core=core).token_counts for m in test])
    return CountTable.from_matrix(X_train, y, CLASSES, tokens=table.tokens), X_train, y, X_test


def synthetic_matrices(
    n_train: int, n_test: int, n_tokens: int, tokens_per_message: int, seed: int = 0
) -> tuple[CountTable, scipy.sparse.csr_array, np.ndarray, scipy.sparse.csr_array]:
    """Zipf-distributed token counts, two classes with shifted vocabularies."""
    rng = np.random.default_rng(seed)

    def matrix(n: int, labels: np.ndarray) -> scipy.sparse.csr_array:
        ranks = rng.zipf(1.3, size=(n, tokens_per_message)) % n_tokens
        ids = (ranks + labels[:, None] * 7) % n_tokens
        rows = np.repeat(np.arange(n), tokens_per_message)
        values = np.ones(rows.size, dtype=np.int64)
        result = scipy.sparse.csr_array((values, (rows, ids.ravel())), shape=(n, n_tokens))
        result.sum_duplicates()
        return result

    y = rng.integers(0, 2, n_train)
    X_train = matrix(n_train, y)
    X_test = matrix(n_test, rng.integers(0, 2, n_test))
    return CountTable.from_matrix(X_train, y, CLASSES), X_train, y, X_test


def run(quick: bool) -> dict[str, Any]:
    from sklearn.naive_bayes import BernoulliNB, MultinomialNB

    if quick:
        table, X_train, y, X_test = synthetic_matrices(400, 2000, 20_000, 200)
        source = "synthetic Zipf matrix"
        runs, repeat = 3, 1
    else:
        split = data.split("spamassassin")
        table, X_train, y, X_test = corpus_matrices(split.train, split.test)
        source = "spamassassin test split"
        runs, repeat = 7, 8
    # Several copies of the test rows, so one timed call is long enough to measure well.
    X = scipy.sparse.csr_array(scipy.sparse.vstack([X_test] * repeat))
    X.sort_indices()
    n_messages = X.shape[0]
    rows: list[dict[str, Any]] = []
    results: dict[str, Any] = {
        "source": source,
        "messages": n_messages,
        "tokens": X.shape[1],
        "nonzeros": int(X.nnz),
    }
    peers = {"multinomial": MultinomialNB(alpha=1.0), "bernoulli": BernoulliNB(alpha=1.0)}
    works: dict[str, Callable[[], object]] = {}
    differences: dict[str, float] = {}
    for event_model, peer in peers.items():
        peer.fit(X_train, y)
        config = ModelConfig(event_model=event_model, stop_words="none").to_engine()
        classifier = Classifier(table, config)
        ours = np.asarray(classifier.predict_proba(X))
        theirs = np.asarray(peer.predict_proba(X))
        differences[event_model] = float(np.abs(ours - theirs).max())
        works[f"spamsift {event_model}"] = partial(classifier.predict_proba, X)
        works[f"sklearn {event_model}"] = partial(peer.predict_proba, X)
    # SpamBayes' s and min_dev, as this part has always measured
    robinson_config = ModelConfig(stop_words="none", rf_strength=0.45, rf_min_dev=0.1)
    robinson = Classifier(table, robinson_config.to_engine())
    works["spamsift robinson-fisher"] = partial(robinson.predict_proba, X)
    timings = time_interleaved(works, runs=runs)

    def measured(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        wall, cpu = timings[name]
        return summary(rates(n_messages, wall)), summary(rates(n_messages, cpu))

    for event_model in (*peers, "robinson-fisher"):
        spamsift, spamsift_cpu = measured(f"spamsift {event_model}")
        entry: dict[str, Any] = {
            "spamsift_msgs_per_s": spamsift,
            "spamsift_msgs_per_cpu_s": spamsift_cpu,
        }
        row: dict[str, Any] = {"event model": event_model, "spamsift msg/s": spamsift}
        if event_model in peers:
            sklearn, sklearn_cpu = measured(f"sklearn {event_model}")
            entry.update(
                sklearn_msgs_per_s=sklearn,
                sklearn_msgs_per_cpu_s=sklearn_cpu,
                ratio=ratio(spamsift, sklearn),
                ratio_cpu=ratio(spamsift_cpu, sklearn_cpu),
                max_probability_difference=differences[event_model],
            )
            row.update(
                {
                    "scikit-learn msg/s": sklearn,
                    "ratio": entry["ratio"],
                    "ratio by CPU time": entry["ratio_cpu"],
                    "max |ΔP|": f"{differences[event_model]:.1e}",
                }
            )
        else:
            row.update({"scikit-learn msg/s": "—", "ratio": "—", "ratio by CPU time": "—"})
            row["max |ΔP|"] = "—"
        results[event_model] = entry
        rows.append(row)
    results["table"] = rows
    results["notes"] = [
        f"{source}: {n_messages} messages x {X.shape[1]} tokens, {X.nnz} nonzeros; "
        "predict_proba only, models fitted beforehand, one thread, the scorers taking turns"
    ]
    return results
