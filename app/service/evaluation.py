"""Use case: train and test in memory on a labelled corpus, and measure each scorer.

The split is fixed so results compare with other filters run on the same corpora: a message is
in the test set when int(sha256(id).hexdigest(), 16) % 5 == 0, else in the training set.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import rankdata

from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier, EventModel, NaiveBayesConfig, verdict
from app.service.corpus import LabelledMessage
from app.text import TokenizerLimits, text_only, tokenize_raw, tokenize_text

FloatArray = NDArray[np.float64]
CLASSES = ("ham", "spam")
EVENT_MODELS: tuple[EventModel, ...] = ("multinomial", "bernoulli", "robinson-fisher")
MAX_FPR = 0.001  # the strict operating point: FNR while at most 0.1 % of ham is called spam


@dataclass(frozen=True)
class ScorerResult:
    event_model: str
    accuracy: float  # most probable class vs label, all test messages
    precision: float  # of the spam verdicts
    recall: float  # share of test spam given the spam verdict
    f1: float
    roc_auc: float
    one_minus_roca_percent: float
    false_positive_rate: float  # ham given the spam verdict / test ham
    false_negative_rate: float  # spam given the ham verdict / test spam
    unsure: int
    fnr_at_max_fpr: float  # spam let through at the strictest threshold with FPR <= 0.1 %
    classify_seconds: float
    classify_messages_per_second: float


@dataclass(frozen=True)
class EvaluationReport:
    corpus: str
    text_only: bool
    train_messages: int
    test_messages: int
    test_spam: int
    test_ham: int
    vocabulary: int
    train_seconds: float
    train_messages_per_second: float
    scorers: list[ScorerResult]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_test_message(message_id: str) -> bool:
    return int(hashlib.sha256(message_id.encode("utf-8")).hexdigest(), 16) % 5 == 0


def evaluate(
    messages: Iterable[LabelledMessage],
    *,
    corpus: str,
    config: NaiveBayesConfig,
    event_models: Sequence[EventModel] = EVENT_MODELS,
    text_only_view: bool = False,
    limits: TokenizerLimits | None = None,
) -> EvaluationReport:
    """Train on the training split, score the test split with each event model."""
    limits = limits or TokenizerLimits()
    train: list[LabelledMessage] = []
    test: list[LabelledMessage] = []
    for message in messages:
        (test if is_test_message(message.id) else train).append(message)

    started = time.perf_counter()
    table = CountTable(CLASSES)
    for message in train:
        token_counts = _tokens(message, text_only_view, limits)
        if not token_counts:
            continue
        token_ids = table.intern(list(token_counts))
        order = np.argsort(token_ids)
        terms = np.fromiter(token_counts.values(), np.int64, len(token_counts))
        table.add(CLASSES.index(message.label), token_ids[order], terms[order])
    train_seconds = time.perf_counter() - started

    labels = np.array([CLASSES.index(message.label) for message in test])
    scorers = []
    vocabulary = 0
    for event_model in event_models:
        started = time.perf_counter()
        X = table.vectorize([_tokens(message, text_only_view, limits) for message in test])
        classifier = Classifier(table, replace(config, event_model=event_model))
        probabilities = classifier.predict_proba(X)
        ranking = classifier.spam_log_odds(X)
        verdicts = [verdict(row, CLASSES, classifier.config) for row in probabilities]
        seconds = time.perf_counter() - started
        vocabulary = classifier.vocabulary_size
        scorers.append(_measure(event_model, labels, probabilities, ranking, verdicts, seconds))

    return EvaluationReport(
        corpus=corpus,
        text_only=text_only_view,
        train_messages=len(train),
        test_messages=len(test),
        test_spam=int(labels.sum()),
        test_ham=int((labels == 0).sum()),
        vocabulary=vocabulary,
        train_seconds=train_seconds,
        train_messages_per_second=len(train) / train_seconds if train_seconds else 0.0,
        scorers=scorers,
    )


def _tokens(
    message: LabelledMessage, text_only_view: bool, limits: TokenizerLimits
) -> dict[str, int]:
    if message.raw is None:
        return tokenize_text(message.text or "", limits=limits).token_counts
    if text_only_view:
        return tokenize_text(text_only(message.raw), limits=limits).token_counts
    return tokenize_raw(message.raw, limits=limits).token_counts


def _measure(
    event_model: str,
    labels: NDArray[np.int64],
    probabilities: FloatArray,
    ranking: FloatArray,
    verdicts: list[str],
    seconds: float,
) -> ScorerResult:
    is_spam = labels == 1
    called_spam = np.array([v == "spam" for v in verdicts])
    called_ham = np.array([v == "ham" for v in verdicts])
    true_positives = int((called_spam & is_spam).sum())
    precision = true_positives / max(int(called_spam.sum()), 1)
    recall = true_positives / max(int(is_spam.sum()), 1)
    auc = roc_auc(ranking, is_spam)
    return ScorerResult(
        event_model=event_model,
        accuracy=float((probabilities.argmax(axis=1) == labels).mean()),
        precision=precision,
        recall=recall,
        f1=2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        roc_auc=auc,
        one_minus_roca_percent=100 * (1 - auc),
        false_positive_rate=int((called_spam & ~is_spam).sum()) / max(int((~is_spam).sum()), 1),
        false_negative_rate=int((called_ham & is_spam).sum()) / max(int(is_spam.sum()), 1),
        unsure=int((~called_spam & ~called_ham).sum()),
        fnr_at_max_fpr=fnr_at_fpr(ranking, is_spam, max_fpr=MAX_FPR),
        classify_seconds=seconds,
        classify_messages_per_second=len(labels) / seconds if seconds else 0.0,
    )


def roc_auc(scores: FloatArray, positive: NDArray[np.bool_]) -> float:
    """Area under the ROC curve (Mann-Whitney U, ties counted half)."""
    n_positive = int(positive.sum())
    n_negative = len(positive) - n_positive
    if not n_positive or not n_negative:
        return float("nan")
    ranks = rankdata(scores)
    u = ranks[positive].sum() - n_positive * (n_positive + 1) / 2
    return float(u / (n_positive * n_negative))


def fnr_at_fpr(scores: FloatArray, positive: NDArray[np.bool_], *, max_fpr: float) -> float:
    """Share of positives scored at or below the strictest threshold that calls at most
    `max_fpr` of the negatives positive (ties with a negative count against the positive)."""
    negatives = np.sort(scores[~positive])[::-1]
    allowed = int(np.floor(max_fpr * len(negatives)))
    if allowed >= len(negatives):
        return 0.0
    threshold = negatives[allowed]  # spam must score strictly above this to be caught
    return float((scores[positive] <= threshold).mean())
