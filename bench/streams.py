"""Mail as it arrives: in-order streams, each system scored then trained message by message.

What `python -m bench.accuracy` (its streams) and `python -m bench.personal --enron` (its
per-user blends) share: the streams, the peers run in the same protocol, and the measures of a
scored stream beside its cost.

Streams: trec07p-early (raw mail with full headers, in delivery order: its file order) and
enron-spam's six users (each its own stream and its own model, in arrival order: the file order
within a `source`). A `--limit` takes the first N messages of each stream (a slice keeps the
order), not a spread.

Peers, in the same order and protocol (score a message with the model of the messages before
it, then train it with its label):

- bogofilter (`bench.accuracy.Bogofilter.online`): one `-TT` and one `-s`/`-n` per message.
- scikit-learn's `MultinomialNB` (term counts) and `BernoulliNB` (Boolean: a token present or
  not), defaults (alpha 1), the two event models of Metsis et al. 2006, on spamsift's own tokens
  of each message. Each message is scored (`predict_joint_log_proba`), then trained with
  `partial_fit`, one message at a time (`every` > 1: a block of that many messages is scored,
  then trained in one `partial_fit`). The feature space is every token of the stream, indexed
  up front, as sklearn's out-of-core setups fix `n_features` (HashingVectorizer's 2**20): a
  token not yet trained counts in V with zero counts.

Cost, per system: tokens in the model at the end (spamsift: tokens with a count; sklearn:
features with a count; bogofilter: its word list's tokens, `bogoutil -d`) and CPU per message
(`time.process_time` of tokenizing, scoring and training; bogofilter: its processes' CPU,
`resource.getrusage(RUSAGE_CHILDREN)`).

Verdicts at spamsift's default thresholds (spam at P(spam) >= spam_threshold, ham at <=
ham_threshold, else unsure) are read from each system's own P(spam): spamsift's and sklearn's
posterior, bogofilter's spamicity.

Drift: the stream in five successive stretches, each with its own 1-ROCA % and FNR at
FPR <= 1 % (the threshold from the stretch's own ham). New spam: a message's novelty is the
share of its distinct tokens (spamsift's) that occur in no earlier message of the stream;
after the first tenth (where everything is new), the 5 % of spam with the highest novelty are
"of a new kind" (a share, not a fixed novelty: raw mail repeats its headers, enron's
preprocessed text does not, so their novelties differ several-fold). Reported: FNR of the
new-kind spam, of the other spam among the `AFTER_NEW` messages that follow one (does the
model catch the rest of a new campaign once it has seen one?), and of the remaining spam after
the first tenth, each at the threshold that calls 1 % of the stream's ham spam.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import scipy.sparse
from numpy.typing import NDArray

from app.bayes.naive_bayes import NaiveBayesConfig
from app.service.corpus import LabelledMessage
from app.service.evaluation import (
    LOOSE_FPR,
    Example,
    fnr_at_fpr,
    ranking_measures,
    roc_auc,
)

STRETCHES = 5
WARM_UP = 0.1  # the first tenth of a stream, where every message is new: not counted as new
NEW_SHARE = 0.05  # the spam with the most new tokens, this share of them, is "of a new kind"
AFTER_NEW = 50  # messages after a new-kind spam whose spam are "after new"
SKLEARN_MODELS = {"multinomial_nb": "MultinomialNB", "bernoulli_nb": "BernoulliNB"}


@dataclass(frozen=True)
class Stream:
    name: str
    corpus: str
    source: str | None  # the user: messages whose id starts "<source>/"; None: all


STREAMS = (
    Stream("trec07p-inorder", "trec07p-early", None),
    *(Stream(f"enron{n}", "enron-spam", f"enron{n}") for n in range(1, 7)),
)


def stream_messages(
    stream: Stream, corpus: Sequence[LabelledMessage], limit: int | None
) -> list[LabelledMessage]:
    """The stream's messages in file order (its arrival order), the first `limit` of them."""
    chosen = [m for m in corpus if stream.source is None or m.id.startswith(f"{stream.source}/")]
    return chosen if limit is None else chosen[:limit]


@dataclass(frozen=True)
class Run:
    """One system over one stream: what it said of each message before training it."""

    scores: NDArray[np.float64]  # spam log odds (higher = more spam-like)
    verdicts: list[str]
    cpu_seconds: float
    tokens: int  # in the model at the end


def verdicts_of(spam_log_odds: NDArray[np.float64], config: NaiveBayesConfig) -> list[str]:
    """spamsift's verdict rule on another system's P(spam) = sigmoid(log odds)."""
    p = 1.0 / (1.0 + np.exp(-np.clip(spam_log_odds, -700, 700)))
    return [
        "spam" if q >= config.spam_threshold else "ham" if q <= config.ham_threshold else "unsure"
        for q in p.tolist()
    ]


def sklearn_stream(examples: Sequence[Example], model: str, *, every: int = 1) -> Run:
    """scikit-learn's MultinomialNB or BernoulliNB over the stream, scored then trained."""
    from sklearn.naive_bayes import BernoulliNB, MultinomialNB

    started = time.process_time()
    index: dict[str, int] = {}
    indices: list[int] = []
    data: list[int] = []
    pointers = [0]
    for example in examples:
        for token, count in example.tokens.items():
            indices.append(index.setdefault(token, len(index)))
            data.append(count)
        pointers.append(len(indices))
    X = scipy.sparse.csr_matrix(
        (np.asarray(data, dtype=np.float64), np.asarray(indices), np.asarray(pointers)),
        shape=(len(examples), max(len(index), 1)),
    )
    y = np.array([example.label == "spam" for example in examples], dtype=np.int64)
    estimator = MultinomialNB() if model == "multinomial_nb" else BernoulliNB()
    scores = np.zeros(len(examples))
    seen = np.zeros(2, dtype=bool)
    for first in range(0, len(examples), every):
        end = min(first + every, len(examples))
        block = X[first:end]
        if seen.all():
            joint = estimator.predict_joint_log_proba(block)
            scores[first:end] = joint[:, 1] - joint[:, 0]
        estimator.partial_fit(block, y[first:end], classes=[0, 1])
        seen[y[first:end]] = True
    cpu = time.process_time() - started
    tokens = int((estimator.feature_count_.sum(axis=0) > 0).sum())
    return Run(scores, [], cpu, tokens)


class ChildCpu:
    """CPU seconds of the child processes waited for since `start` (bogofilter's)."""

    def __init__(self) -> None:
        self.started = self._now()

    @staticmethod
    def _now() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def seconds(self) -> float:
        return self._now() - self.started


def novelty(examples: Sequence[Example]) -> NDArray[np.float64]:
    """Share of each message's distinct tokens that occur in no earlier message."""
    seen: set[str] = set()
    shares = np.zeros(len(examples))
    for position, example in enumerate(examples):
        tokens = example.tokens.keys()
        if tokens:
            shares[position] = sum(token not in seen for token in tokens) / len(tokens)
        seen.update(tokens)
    return shares


def threshold_at_fpr(
    scores: NDArray[np.float64], is_spam: NDArray[np.bool_], max_fpr: float
) -> float:
    """The score a spam must exceed to be caught where at most `max_fpr` of the ham is
    called spam (as `fnr_at_fpr`)."""
    ham = np.sort(scores[~is_spam])[::-1]
    allowed = int(np.floor(max_fpr * ham.size))
    return float(ham[allowed]) if allowed < ham.size else float("-inf")


def stretches(
    scores: NDArray[np.float64], is_spam: NDArray[np.bool_], parts: int = STRETCHES
) -> list[dict[str, Any]]:
    """The stream cut into `parts` successive stretches, each measured on its own."""
    result = []
    for first, end in pairwise(np.linspace(0, len(scores), parts + 1).astype(int).tolist()):
        s, p = scores[first:end], is_spam[first:end]
        both = bool(p.any() and (~p).any())
        result.append(
            {
                "first": first,
                "messages": end - first,
                "spam": int(p.sum()),
                "one_minus_roca_percent": 100 * (1 - roc_auc(s, p)) if both else float("nan"),
                "fnr_at_1pct_fpr": fnr_at_fpr(s, p, max_fpr=LOOSE_FPR) if both else float("nan"),
            }
        )
    return result


def new_spam(
    scores: NDArray[np.float64], is_spam: NDArray[np.bool_], shares: NDArray[np.float64]
) -> dict[str, Any]:
    """FNR at FPR <= 1 % of new-kind spam, of the spam just after one, and of the rest."""
    threshold = threshold_at_fpr(scores, is_spam, LOOSE_FPR)
    counted = np.zeros(len(scores), dtype=bool)
    counted[int(WARM_UP * len(scores)) :] = True
    candidates = counted & is_spam
    new = np.zeros(len(scores), dtype=bool)
    if candidates.any():
        cut = np.quantile(shares[candidates], 1 - NEW_SHARE)
        new = candidates & (shares >= cut) & (shares > 0)
    after = np.zeros(len(scores), dtype=bool)
    for position in np.flatnonzero(new).tolist():
        after[position + 1 : position + 1 + AFTER_NEW] = True
    after &= candidates & ~new
    rest = candidates & ~new & ~after

    def missed(mask: NDArray[np.bool_]) -> dict[str, Any]:
        count = int(mask.sum())
        return {
            "spam": count,
            "fnr_at_1pct_fpr": float((scores[mask] <= threshold).mean()) if count else float("nan"),
        }

    return {"new": missed(new), "after_new": missed(after), "other": missed(rest)}


def measure_run(
    run: Run,
    is_spam: NDArray[np.bool_],
    ids: Sequence[str],
    shares: NDArray[np.float64],
    *,
    messages: int,
) -> dict[str, Any]:
    """Everything reported of one system on one stream."""
    ranking = ranking_measures(run.scores, is_spam, ids)
    called = np.array(run.verdicts)
    spam, ham = int(is_spam.sum()), int((~is_spam).sum())
    return {
        "one_minus_roca_percent": ranking.one_minus_roca_percent,
        "one_minus_roca_percent_ci95": ranking.one_minus_roca_percent_ci95,
        "fnr_at_max_fpr": ranking.fnr_at_max_fpr,
        "fnr_at_1pct_fpr": ranking.fnr_at_1pct_fpr,
        "fnr_at_0fp": ranking.fnr_at_0fp,
        "fnr_at_1fp": ranking.fnr_at_1fp,
        "spam_recall": int(((called == "spam") & is_spam).sum()) / max(spam, 1),
        "ham_recall": int(((called == "ham") & ~is_spam).sum()) / max(ham, 1),
        "false_positives": int(((called == "spam") & ~is_spam).sum()),
        "false_negatives": int(((called == "ham") & is_spam).sum()),
        "unsure_share": int((called == "unsure").sum()) / max(len(called), 1),
        "tokens": run.tokens,
        "cpu_ms_per_message": 1000 * run.cpu_seconds / max(messages, 1),
        "stretches": stretches(run.scores, is_spam),
        "new_spam": new_spam(run.scores, is_spam, shares),
        "top_errors": [vars(error) for error in ranking.top_errors],
    }
