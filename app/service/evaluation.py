"""Use case: measure a configuration on a labelled corpus, in memory, in two protocols.

- Batch split (`evaluate`): a message is in the test set when
  int(sha256(id).hexdigest(), 16) % 5 == 0, else in the training set; train on the training
  set, score the test set with each event model. Fixed, so results compare with other filters
  run on the same split.
- Online (`evaluate_online`): the TREC Spam Track's immediate-feedback protocol. Messages
  arrive one at a time in delivery order; each is scored by the model trained on everything
  before it, then trained with its true label as the train mode says (`all`, on `error`, or on
  error and `unsure`). Every message is scored, so the measures rest on all of a corpus's ham.
  Corpora whose file order is not delivery order are streamed in a fixed shuffle
  (`stream_order`: sorted by sha256 of "<seed>:<id>").

Both report the ranking measures of `RankingMeasures`: 1-ROCA %, FNR at FPR <= 0.1 % and 1 %,
FNR at 0, 1 and 2 false positives, bootstrap 95 % intervals, and the top-ranked errors.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Literal, Protocol, TypeVar

import numpy as np
import scipy.sparse
from numpy.typing import NDArray
from scipy.stats import rankdata

from app.bayes.attributes import AttributeSums
from app.bayes.counts import CountTable
from app.bayes.expiry import choose_expired, on_probation
from app.bayes.naive_bayes import Classifier, NaiveBayesConfig, verdict
from app.bayes.scorers import EVENT_MODELS, EventModel
from app.service.corpus import LabelledMessage
from app.text import TokenizerLimits, text_only, tokenize_raw, tokenize_text
from app.text.core import TokenCore
from app.text.families import ALL_FAMILIES, FAMILY_PREFIXES, Family
from app.text.features import mail_features

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
CLASSES = ("ham", "spam")
MAX_FPR = 0.001  # the strict operating point: FNR while at most 0.1 % of ham is called spam
LOOSE_FPR = 0.01
BOOTSTRAP_REPLICATES = 200
TOP_ERRORS = 5
LEARNING_CURVE_POINTS = 10
TrainMode = Literal["all", "error", "unsure"]
TRAIN_MODES: tuple[TrainMode, ...] = ("all", "error", "unsure")


@dataclass(frozen=True)
class Example:
    """A tokenized corpus message: what both protocols score and train."""

    id: str
    label: str
    tokens: dict[str, int]
    # Raw mail's own numeric features (app.text.features), in the full view; learned always,
    # scored where the config's gaussian_attributes is on.
    attributes: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RankedError:
    """A ham ranked among the most spam-like, or a spam among the most ham-like."""

    id: str
    label: str
    spam_log_odds: float


@dataclass(frozen=True)
class RankingMeasures:
    """Threshold-free measures of a ranking of messages by spam log odds."""

    one_minus_roca_percent: float
    one_minus_roca_percent_ci95: tuple[float, float]
    fnr_at_max_fpr: float  # spam let through at the strictest threshold with FPR <= 0.1 %
    fnr_at_1pct_fpr: float
    fnr_at_0fp: float  # spam scored at or below the most spam-like ham
    fnr_at_1fp: float  # ... below the second most spam-like ham (one false positive allowed)
    fnr_at_1fp_ci95: tuple[float, float]
    fnr_at_2fp: float
    fnr_at_2fp_ci95: tuple[float, float]
    top_errors: list[RankedError]  # the most spam-like ham, then the most ham-like spam


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
    ranking: RankingMeasures


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


@dataclass(frozen=True)
class CurvePoint:
    """One stretch of the online stream: its errors and its own 1-ROCA."""

    first: int  # position in the stream, 0-based
    messages: int
    spam: int
    ham: int
    false_positives: int  # ham given the spam verdict
    false_negatives: int  # spam given the ham verdict
    unsure: int
    one_minus_roca_percent: float  # within the stretch (nan if it holds one class only)


@dataclass(frozen=True)
class OnlineReport:
    corpus: str
    text_only: bool
    event_model: str
    train_mode: str
    order: str  # "corpus order" or "shuffled, seed N"
    messages: int
    spam: int
    ham: int
    trained: int
    false_positives: int
    false_negatives: int
    unsure: int
    vocabulary: int
    seconds: float
    messages_per_second: float
    ranking: RankingMeasures
    learning_curve: list[CurvePoint]
    expiry: StreamExpiry | None = None
    expired_tokens: int = 0  # deletions by expiry over the stream (a token deleted twice: 2)


def is_test_message(message_id: str) -> bool:
    return int(hashlib.sha256(message_id.encode("utf-8")).hexdigest(), 16) % 5 == 0


def message_tokens(
    message: LabelledMessage,
    *,
    core: TokenCore,
    text_only_view: bool = False,
    limits: TokenizerLimits | None = None,
    families: frozenset[Family] = ALL_FAMILIES,
) -> dict[str, int]:
    """Return the token counts of a corpus message in the full or the text-only view, with
    the derived token `families` that are on (a model's `token_families()`)."""
    limits = limits or TokenizerLimits()
    if message.raw is None:
        text = message.text or ""
    elif text_only_view:
        text = text_only(message.raw, core=core)
    else:
        return tokenize_raw(message.raw, limits=limits, core=core, families=families).token_counts
    return tokenize_text(text, limits=limits, core=core, families=families).token_counts


def tokenize_corpus(
    messages: Iterable[LabelledMessage],
    *,
    core: TokenCore,
    text_only_view: bool = False,
    limits: TokenizerLimits | None = None,
    families: frozenset[Family] = ALL_FAMILIES,
) -> list[Example]:
    limits = limits or TokenizerLimits()
    return [
        Example(
            m.id,
            m.label,
            message_tokens(
                m, core=core, text_only_view=text_only_view, limits=limits, families=families
            ),
            message_features(m, text_only_view=text_only_view, limits=limits),
        )
        for m in messages
    ]


def message_features(
    message: LabelledMessage, *, text_only_view: bool, limits: TokenizerLimits
) -> dict[str, float]:
    """Raw mail's own numeric features in the full view (none for text), as the API's."""
    if message.raw is None or text_only_view:
        return {}
    return mail_features(message.raw, max_scan_bytes=limits.max_scan_bytes)


class _Identified(Protocol):
    @property
    def id(self) -> str: ...


Identified = TypeVar("Identified", bound=_Identified)


def stream_order(examples: Sequence[Identified], shuffle_seed: int | None) -> list[Identified]:
    """Return the examples (or corpus messages) in corpus order (seed None) or in the fixed
    shuffle of `seed`: sorted by sha256 of "<seed>:<id>", the same on every machine and Python
    version."""
    if shuffle_seed is None:
        return list(examples)

    def key(example: Identified) -> bytes:
        return hashlib.sha256(f"{shuffle_seed}:{example.id}".encode()).digest()

    return sorted(examples, key=key)


def evaluate(
    messages: Iterable[LabelledMessage],
    *,
    corpus: str,
    config: NaiveBayesConfig,
    core: TokenCore,
    event_models: Sequence[EventModel] = EVENT_MODELS,
    text_only_view: bool = False,
    limits: TokenizerLimits | None = None,
    families: frozenset[Family] = ALL_FAMILIES,
) -> EvaluationReport:
    """Train on the training split, score the test split with each event model."""
    started = time.perf_counter()
    examples = tokenize_corpus(
        messages, core=core, text_only_view=text_only_view, limits=limits, families=families
    )
    tokenize_seconds = time.perf_counter() - started
    return evaluate_examples(
        examples,
        corpus=corpus,
        config=config,
        event_models=event_models,
        text_only_view=text_only_view,
        tokenize_seconds=tokenize_seconds,
    )


def evaluate_examples(
    examples: Sequence[Example],
    *,
    corpus: str,
    config: NaiveBayesConfig,
    event_models: Sequence[EventModel] = EVENT_MODELS,
    text_only_view: bool = False,
    tokenize_seconds: float = 0.0,
) -> EvaluationReport:
    """`evaluate` on tokenized messages. Tokenizing is timed with training and classifying in
    the share of each split (`tokenize_seconds` is the whole corpus's)."""
    train: list[Example] = []
    test: list[Example] = []
    for example in examples:
        (test if is_test_message(example.id) else train).append(example)
    per_message = tokenize_seconds / max(len(examples), 1)

    started = time.perf_counter()
    table = CountTable(CLASSES)
    attributes = AttributeSums(len(CLASSES))
    known = _intern_all(table, train)
    for example in train:
        if example.tokens:
            token_ids, terms = _ids_and_terms(known, example)
            table.add(CLASSES.index(example.label), token_ids, terms)
            attributes.add(example.attributes, CLASSES.index(example.label), sign=1)
    train_seconds = time.perf_counter() - started + per_message * len(train)

    labels = np.array([CLASSES.index(example.label) for example in test], dtype=np.int64)
    ids = [example.id for example in test]
    scorers = []
    vocabulary = 0
    for event_model in event_models:
        started = time.perf_counter()
        X = table.vectorize([example.tokens for example in test])
        classifier = Classifier(
            table, replace(config, event_model=event_model), attributes=attributes
        )
        log_proba, joint, _ = classifier.assess(
            X, attribute_values=[example.attributes for example in test]
        )
        probabilities = np.exp(log_proba)
        ranking = joint[:, CLASSES.index("spam")] - joint[:, CLASSES.index("ham")]
        verdicts = [verdict(row, CLASSES, classifier.config) for row in probabilities]
        seconds = time.perf_counter() - started + per_message * len(test)
        vocabulary = classifier.vocabulary_size
        scorers.append(
            _measure(event_model, labels, ids, probabilities, ranking, verdicts, seconds)
        )

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


def evaluate_online(
    examples: Sequence[Example],
    *,
    corpus: str,
    config: NaiveBayesConfig,
    train_mode: TrainMode = "all",
    shuffle_seed: int | None = 0,
    text_only_view: bool = False,
    expiry: StreamExpiry | None = None,
) -> OnlineReport:
    """Score each message with the model trained on the ones before it, then train it.

    Train modes: `all` trains every message; `error` (train on error) the messages scored on
    the wrong side of even odds or at even odds; `unsure` (thick threshold, train until no
    error) those and every message whose verdict is not its label (called unsure). `expiry`:
    token expiry between the messages, as a server with a token maximum runs it.
    """
    if train_mode not in TRAIN_MODES:
        raise ValueError(f"train_mode must be one of {list(TRAIN_MODES)}, got {train_mode!r}")
    stream = stream_order(examples, shuffle_seed)
    started = time.perf_counter()
    scored = score_stream(stream, config, train_mode, expiry=expiry)
    seconds = time.perf_counter() - started
    scores, verdicts, trained = scored.scores, scored.verdicts, scored.trained

    labels = np.array([CLASSES.index(example.label) for example in stream], dtype=np.int64)
    is_spam = labels == 1
    called_spam = np.array([v == "spam" for v in verdicts], dtype=bool)
    called_ham = np.array([v == "ham" for v in verdicts], dtype=bool)
    return OnlineReport(
        corpus=corpus,
        text_only=text_only_view,
        event_model=config.event_model,
        train_mode=train_mode,
        order="corpus order" if shuffle_seed is None else f"shuffled, seed {shuffle_seed}",
        messages=len(stream),
        spam=int(is_spam.sum()),
        ham=int((~is_spam).sum()),
        trained=trained,
        false_positives=int((called_spam & ~is_spam).sum()),
        false_negatives=int((called_ham & is_spam).sum()),
        unsure=int((~called_spam & ~called_ham).sum()),
        vocabulary=scored.vocabulary,
        seconds=seconds,
        messages_per_second=len(stream) / seconds if seconds else 0.0,
        ranking=ranking_measures(scores, is_spam, [example.id for example in stream]),
        learning_curve=learning_curve(scores, is_spam, called_spam, called_ham),
        expiry=expiry,
        expired_tokens=scored.expired_tokens,
    )


@dataclass(frozen=True)
class StreamExpiry:
    """Token expiry in a stream, the service's rules (`app.bayes.expiry`) after every `every`
    messages: the model keeps at most `max_tokens` tokens (None: no maximum), a token's last
    sighting being the last message that trained it; with `pair_probation`, a word pair
    counted in one trained message only goes once that many newer messages were trained. A
    server runs it every few minutes (`max_tokens_per_model`, a model's `max_tokens` and
    `pair_probation`); `every` is how many messages arrive meanwhile."""

    max_tokens: int | None
    every: int
    pair_probation: int | None = None

    def __post_init__(self) -> None:
        if self.max_tokens is None and self.pair_probation is None:
            raise ValueError("expiry needs max_tokens or pair_probation")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.pair_probation is not None and self.pair_probation < 1:
            raise ValueError(f"pair_probation must be >= 1, got {self.pair_probation}")
        if self.every < 1:
            raise ValueError(f"every must be >= 1, got {self.every}")


@dataclass(frozen=True)
class ScoredStream:
    scores: FloatArray  # spam log odds of each message, before it was trained
    verdicts: list[str]
    trained: int
    vocabulary: int  # |V| at the end
    stored_tokens: int  # tokens with a count in the model at the end (|V| and stop words)
    expired_tokens: int = 0  # tokens expiry deleted over the stream


def score_stream(
    stream: Sequence[Example],
    config: NaiveBayesConfig,
    train_mode: TrainMode = "all",
    *,
    start: CountTable | None = None,
    weight: int = 1,
    expiry: StreamExpiry | None = None,
) -> ScoredStream:
    """Score each example with the model of the examples trained before it, then train it
    with its label if `train_mode` says so (see `evaluate_online`).

    `start`: a model the stream is added to (copied, not changed): a personal model's blend
    with the model backing it, whose counts are summed (`app.bayes.blend.merge_counts`);
    `weight`: each trained example counts this many times (the blend's `personal_weight`).
    A trained example adds the tokens the service's writer stores (`config.not_learned`).
    `expiry`: token expiry after every `expiry.every` messages (see `StreamExpiry`).
    """
    if weight < 1:
        raise ValueError(f"weight must be >= 1, got {weight}")
    if expiry is not None and start is not None:
        # The server expires each model alone: the summed table would lose the backing's too.
        raise ValueError("expiry of a stream added to a backing model is not measured")
    table = start.copy() if start is not None else CountTable(CLASSES)
    # Every token of the stream gets its id up front, with zero counts: a token no message has
    # been trained with is outside V until it is, so scores are those of a table interned as
    # it goes, and each message costs a dict lookup per token rather than an index update.
    ids = _intern_all(table, stream)
    attributes = AttributeSums(len(CLASSES))
    classifier = Classifier(table, config, attributes=attributes)
    spam_index = CLASSES.index("spam")
    scores = np.empty(len(stream))
    verdicts: list[str] = []
    trained = expired = 0
    prefixed: dict[tuple[str, ...], NDArray[np.bool_]] = {}  # every token is interned above
    # Expiry's "last seen" (the last message that trained a token) and the order tokens were
    # made in as the service gives ids: when first trained, and again when trained after
    # expiry deleted them (the stream's ids are given up front, in order of first sighting).
    last_trained = np.full(table.n_tokens, -1, dtype=np.int64)
    made = np.full(table.n_tokens, -1, dtype=np.int64)
    made_so_far = 0
    trained_at: list[int] = []  # the positions of the trained messages, for pair probation
    for position, example in enumerate(stream):
        token_ids, terms = _ids_and_terms(ids, example)
        X = scipy.sparse.csr_array(
            (terms, token_ids, np.array([0, len(token_ids)])), shape=(1, table.n_tokens)
        )
        weighed = bool(table.class_docs.min() > 0)
        if not weighed:
            # Until each class has a message no model can weigh the classes: even odds.
            score, called = 0.0, "unsure"
        else:
            log_proba, joint, _ = classifier.assess(X, attribute_values=[example.attributes])
            score = float(joint[0, spam_index] - joint[0, 1 - spam_index])
            called = verdict(np.exp(log_proba[0]), CLASSES, config)
        scores[position] = score
        verdicts.append(called)
        # An error: on the wrong side of even odds, or on it (an empty model errs on all).
        wrong = score <= 0 if example.label == "spam" else score >= 0
        if token_ids.size and (
            train_mode == "all"
            or (train_mode == "error" and wrong)
            or (train_mode == "unsure" and called != example.label)
        ):
            # The log odds of its label (the spam log odds, of ham their negative).
            margin = None if not weighed else (score if example.label == "spam" else -score)
            left_out = config.not_learned(margin)
            if left_out:
                if left_out not in prefixed:
                    prefixed[left_out] = table.tokens.starting_with(left_out)
                kept = ~prefixed[left_out][token_ids]
                token_ids, terms = token_ids[kept], terms[kept]
            if expiry is not None:
                made_so_far = _make_new(table, made, made_so_far, ids, example, token_ids)
            for _ in range(weight):
                table.add(CLASSES.index(example.label), token_ids, terms)
                attributes.add(example.attributes, CLASSES.index(example.label), sign=1)
            last_trained[token_ids] = position
            trained_at.append(position)
            trained += 1
        if expiry is not None and (position + 1) % expiry.every == 0:
            pairs = FAMILY_PREFIXES["word_pairs"]
            if expiry.pair_probation is not None and pairs not in prefixed:
                prefixed[pairs] = table.tokens.starting_with(pairs)
            expired += _expire(table, last_trained, made, expiry, trained_at, prefixed.get(pairs))
    stored = int((table.token_docs.sum(axis=0) > 0).sum()) if table.n_tokens else 0
    return ScoredStream(scores, verdicts, trained, classifier.vocabulary_size, stored, expired)


def _make_new(
    table: CountTable,
    made: IntArray,
    made_so_far: int,
    ids: dict[str, int],
    example: Example,
    trained_ids: IntArray,
) -> int:
    """Number the tokens of `example` about to be trained that hold no count yet (never
    trained, or deleted by expiry) in the order the message has them, after every token made
    before, as the service's writer gives new ids; return the count of tokens made so far."""
    in_order = np.fromiter(map(ids.__getitem__, example.tokens), np.int64, len(example.tokens))
    in_order = in_order[np.isin(in_order, trained_ids)]
    new = in_order[~(table.token_docs[:, in_order] > 0).any(axis=0)]
    made[new] = np.arange(made_so_far, made_so_far + new.size)
    return made_so_far + int(new.size)


def _expire(
    table: CountTable,
    last_trained: IntArray,
    made: IntArray,
    expiry: StreamExpiry,
    trained_at: Sequence[int],
    pairs: NDArray[np.bool_] | None,
) -> int:
    """Delete, as the service's expiry does, the tokens its rules choose: their counts go,
    their terms leave the class term totals, the class message counts stay. Return how many
    tokens with a count went (the stream's tokens are interned up front, so every token not
    trained yet is a "dead" one, with nothing to delete, and `pairs`, which are word pairs,
    is made once for the stream)."""
    docs, terms = table.token_docs, table.token_terms
    token_ids = np.arange(table.n_tokens, dtype=np.int64)
    chosen = [np.zeros(0, dtype=np.int64)]
    if expiry.max_tokens is not None:
        chosen.append(
            choose_expired(
                token_ids, docs, terms, last_trained, table.class_docs, expiry.max_tokens, made=made
            ).expired
        )
    if expiry.pair_probation is not None and len(trained_at) > expiry.pair_probation:
        # A token trained by one of the pair_probation newest trained messages is recent.
        recent = last_trained >= trained_at[-expiry.pair_probation]
        assert pairs is not None
        chosen.append(token_ids[on_probation(docs, pairs, recent)])
    return delete_tokens(table, np.unique(np.concatenate(chosen)))


def delete_tokens(table: CountTable, token_ids: IntArray) -> int:
    """Delete tokens of a table as expiry does: their counts go, their terms leave the class
    term totals, the class message counts stay. Return how many of them had a count."""
    docs, terms = table.token_docs, table.token_terms
    counted = token_ids[
        (docs[:, token_ids] > 0).any(axis=0) | (terms[:, token_ids] > 0).any(axis=0)
    ]
    if not counted.size:
        return 0
    n_classes = len(table.classes)
    lost_terms = terms[:, counted].sum(axis=1, dtype=np.int64)
    zeros = np.zeros(counted.size * n_classes, dtype=np.int64)
    table.set_counts(
        np.repeat(counted, n_classes), np.tile(np.arange(n_classes), counted.size), zeros, zeros
    )
    table.set_class_totals(table.class_docs, table.class_terms - lost_terms)
    return int(counted.size)


def _intern_all(table: CountTable, examples: Sequence[Example]) -> dict[str, int]:
    """Give every token of `examples` its id at once (counts stay zero until trained); return
    token -> id. Interning token by token as messages come costs an index update each."""
    tokens = list(dict.fromkeys(token for example in examples for token in example.tokens))
    return dict(zip(tokens, table.intern(tokens).tolist(), strict=True))


def _ids_and_terms(ids: dict[str, int], example: Example) -> tuple[IntArray, IntArray]:
    """Return the sorted token ids of an example and their counts."""
    n = len(example.tokens)
    token_ids = np.fromiter(map(ids.__getitem__, example.tokens), np.int64, n)
    terms = np.fromiter(example.tokens.values(), np.int64, n)
    order = np.argsort(token_ids)
    return token_ids[order], terms[order]


def learning_curve(
    scores: FloatArray,
    is_spam: NDArray[np.bool_],
    called_spam: NDArray[np.bool_],
    called_ham: NDArray[np.bool_],
    *,
    points: int = LEARNING_CURVE_POINTS,
) -> list[CurvePoint]:
    """Cut the stream into `points` consecutive stretches of (nearly) equal length."""
    curve = []
    bounds = np.linspace(0, len(scores), points + 1).astype(int)
    for first, end in pairwise(bounds):
        if end <= first:
            continue
        spam = is_spam[first:end]
        auc = roc_auc(scores[first:end], spam)
        curve.append(
            CurvePoint(
                first=int(first),
                messages=int(end - first),
                spam=int(spam.sum()),
                ham=int((~spam).sum()),
                false_positives=int((called_spam[first:end] & ~spam).sum()),
                false_negatives=int((called_ham[first:end] & spam).sum()),
                unsure=int((~called_spam[first:end] & ~called_ham[first:end]).sum()),
                one_minus_roca_percent=100 * (1 - auc),
            )
        )
    return curve


def _measure(
    event_model: str,
    labels: NDArray[np.int64],
    ids: Sequence[str],
    probabilities: FloatArray,
    ranking: FloatArray,
    verdicts: list[str],
    seconds: float,
) -> ScorerResult:
    is_spam = labels == 1
    called_spam = np.array([v == "spam" for v in verdicts], dtype=bool)
    called_ham = np.array([v == "ham" for v in verdicts], dtype=bool)
    true_positives = int((called_spam & is_spam).sum())
    precision = true_positives / max(int(called_spam.sum()), 1)
    recall = true_positives / max(int(is_spam.sum()), 1)
    measures = ranking_measures(ranking, is_spam, ids)
    return ScorerResult(
        event_model=event_model,
        accuracy=float((probabilities.argmax(axis=1) == labels).mean()),
        precision=precision,
        recall=recall,
        f1=2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        roc_auc=1 - measures.one_minus_roca_percent / 100,
        one_minus_roca_percent=measures.one_minus_roca_percent,
        false_positive_rate=int((called_spam & ~is_spam).sum()) / max(int((~is_spam).sum()), 1),
        false_negative_rate=int((called_ham & is_spam).sum()) / max(int(is_spam.sum()), 1),
        unsure=int((~called_spam & ~called_ham).sum()),
        fnr_at_max_fpr=measures.fnr_at_max_fpr,
        classify_seconds=seconds,
        classify_messages_per_second=len(labels) / seconds if seconds else 0.0,
        ranking=measures,
    )


def ranking_measures(
    scores: FloatArray,
    positive: NDArray[np.bool_],
    ids: Sequence[str],
    *,
    replicates: int = BOOTSTRAP_REPLICATES,
    seed: int = 0,
) -> RankingMeasures:
    """Measure a ranking (higher = more spam-like); intervals from `replicates` bootstrap
    resamples of the messages (percentile method, fixed seed)."""
    rng = np.random.default_rng(seed)
    roca, fnr1, fnr2 = [], [], []
    for _ in range(replicates if len(scores) else 0):
        sample = rng.integers(0, len(scores), len(scores))
        s, p = scores[sample], positive[sample]
        roca.append(100 * (1 - roc_auc(s, p)))
        fnr1.append(fnr_at_false_positives(s, p, 1))
        fnr2.append(fnr_at_false_positives(s, p, 2))
    return RankingMeasures(
        one_minus_roca_percent=100 * (1 - roc_auc(scores, positive)),
        one_minus_roca_percent_ci95=_interval(roca),
        fnr_at_max_fpr=fnr_at_fpr(scores, positive, max_fpr=MAX_FPR),
        fnr_at_1pct_fpr=fnr_at_fpr(scores, positive, max_fpr=LOOSE_FPR),
        fnr_at_0fp=fnr_at_false_positives(scores, positive, 0),
        fnr_at_1fp=fnr_at_false_positives(scores, positive, 1),
        fnr_at_1fp_ci95=_interval(fnr1),
        fnr_at_2fp=fnr_at_false_positives(scores, positive, 2),
        fnr_at_2fp_ci95=_interval(fnr2),
        top_errors=top_errors(scores, positive, ids),
    )


def _interval(values: list[float]) -> tuple[float, float]:
    finite = np.asarray([v for v in values if np.isfinite(v)])
    if not finite.size:
        return (float("nan"), float("nan"))
    low, high = np.percentile(finite, [2.5, 97.5])
    return (float(low), float(high))


def top_errors(
    scores: FloatArray, positive: NDArray[np.bool_], ids: Sequence[str], *, n: int = TOP_ERRORS
) -> list[RankedError]:
    """Return the `n` most spam-like ham, then the `n` most ham-like spam (ties by position)."""
    ham = np.flatnonzero(~positive)
    spam = np.flatnonzero(positive)
    worst_ham = ham[np.argsort(-scores[ham], kind="stable")[:n]]
    worst_spam = spam[np.argsort(scores[spam], kind="stable")[:n]]
    return [
        RankedError(
            id=ids[i], label="spam" if positive[i] else "ham", spam_log_odds=float(scores[i])
        )
        for i in (*worst_ham, *worst_spam)
    ]


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
    return fnr_at_false_positives(scores, positive, int(np.floor(max_fpr * int((~positive).sum()))))


def fnr_at_false_positives(scores: FloatArray, positive: NDArray[np.bool_], allowed: int) -> float:
    """Share of positives scored at or below the (allowed + 1)-th highest negative: FNR when
    at most `allowed` negatives may be called positive (ties count against the positive)."""
    negatives = np.sort(scores[~positive])[::-1]
    if allowed >= len(negatives):
        return 0.0
    threshold = negatives[allowed]  # spam must score strictly above this to be caught
    if not positive.any():
        return float("nan")
    return float((scores[positive] <= threshold).mean())
