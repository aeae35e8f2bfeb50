"""Use case: classify messages against a model's counts (read-only on the counts).

A held model scores a batch by the tokenizer's hashes (`CountTable.vectorize_hashed`): no
text is made per token. Texts are made only where rows are read by text: the partial read of
a model this process does not hold, and a blend that merges only the messages' rows.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from itertools import chain
from typing import Annotated, Any, Literal

import numpy as np
import scipy.sparse
from pydantic import ConfigDict, Field

from app.bayes.counts import FloatArray, IntArray
from app.bayes.naive_bayes import Clue, NaiveBayesConfig, verdict
from app.bayes.scorers import EventModel, scorer
from app.errors import InvalidConfig, NotTrained
from app.live.held import LiveModel
from app.live.scoring import NeedsDatabase as NeedsDatabase  # `classify`'s, for its callers
from app.live.scoring import held_view, scoring_view
from app.live.view import ScoringView
from app.service.messages import Message, PreparedMessage, prepare, with_features
from app.service.model_config import parse_config
from app.service.runtime import Runtime, with_time_budget
from app.store.activity import Event, verdict_event
from app.store.ledger import ClassificationRecord
from app.text import TokenizerLimits
from app.text.core import CoreChoice, resolve


@dataclass(frozen=True)
class Classification:
    """A classified message, as the API answers it."""

    # The answer always has every field: OpenAPI says so (required), defaults or not.
    __pydantic_config__ = ConfigDict(json_schema_serialization_defaults_required=True)

    message_id: str
    label: str
    verdict: str
    probabilities: dict[str, float]
    spam_probability: float | None
    scores: dict[str, float]
    event_model: str
    tokens: int
    clues: list[Clue] | None = None
    defects: tuple[str, ...] = ()
    warnings: Annotated[
        tuple[str, ...],
        Field(
            description="why the verdict is not to be trusted yet, e.g. a class with fewer "
            "trained messages than the model's min_learns (the verdict is then `unsure`)"
        ),
    ] = ()
    models: Annotated[
        tuple[str, ...],
        Field(
            description="the models whose counts scored the message: the model, then the "
            "model backing it (their counts summed)"
        ),
    ] = ()


def classify(
    rt: Runtime,
    *,
    model_name: str,
    message: Message,
    event_model: EventModel | None = None,
    explain: bool = False,
    record_as: str | None = None,
    memory_only: bool = False,
) -> Classification:
    """Score one message; return its verdict and class probabilities.

    With `memory_only`, only where that reads nothing from the database (the model held by
    this process, synced within the sync interval and backed by no other): NeedsDatabase,
    before any work, where it would (a load, a sync, a partial read, a backing model), for a
    caller that must not wait on the database to call again where it may."""
    if not memory_only:
        return classify_batch(
            rt,
            model_name=model_name,
            messages=[message],
            event_model=event_model,
            explain=explain,
            record_as=record_as,
        )[0]
    view = held_view(rt.models, model_name)
    prepared = prepare_messages(rt, [message], "classify")
    return _classify_prepared(
        rt, view, [message], prepared, event_model=event_model, explain=explain, record_as=record_as
    )[0]


def classify_batch(
    rt: Runtime,
    *,
    model_name: str,
    messages: Sequence[Message],
    event_model: EventModel | None = None,
    explain: bool = False,
    processes: int = 1,
    record_as: str | None = None,
) -> list[Classification]:
    """Score several messages in one pass over the model; results in order. `record_as`
    names the tenant's key whose quota of classification records they count against.

    With `processes` > 1 a big batch is tokenized in that many worker processes (a pool kept
    for the life of this process), then scored here: tokenizing is 80 % of the work and holds
    the GIL. The HTTP API does not use it (its parallelism is `--workers`).
    """
    # Each message has its time budget: past it, it is scored on what was tokenized in time and
    # carries the defect "time_budget".
    prepared = prepare_messages(rt, messages, "classify", processes=processes)
    view = _view_for(rt, model_name, prepared, event_model)
    return _classify_prepared(
        rt, view, messages, prepared, event_model=event_model, explain=explain, record_as=record_as
    )


def _classify_prepared(
    rt: Runtime,
    view: ScoringView,
    messages: Sequence[Message],
    prepared: list[PreparedMessage],
    *,
    event_model: EventModel | None,
    explain: bool,
    record_as: str | None,
) -> list[Classification]:
    """Score the tokenized `messages` on `view` and buffer their classification records."""
    if view.live.config.gaussian_attributes:
        max_scan_bytes = rt.limits.max_scan_bytes
        prepared = [
            with_features(one, message, max_scan_bytes=max_scan_bytes)
            for one, message in zip(prepared, messages, strict=True)
        ]
    results, records = _score(
        view,
        prepared,
        event_model=event_model,
        explain=explain,
        min_learns=min_learns_of(rt, view.live),
    )
    # Each model of the view keeps its own record of the classification (the tokens it knows,
    # by its ids), so feedback by message_id can train a personal model with the tokens only
    # its backing model knew; the activity counters are the classified model's alone.
    for index, part in enumerate(view.parts):
        events: Counter[str] = Counter()
        if part.model_id == view.live.id:
            events = Counter({Event.CLASSIFIED: len(results)}) + Counter(
                verdict_event(r.verdict) for r in results
            )
        rt.record_classifications(
            part.model_id,
            [view.record_in(index, record) for record in records],
            events,
            key_id=record_as,
        )
    return results


def label_margins(
    rt: Runtime, model_name: str, prepared: Sequence[PreparedMessage], labels: Sequence[str]
) -> list[float | None]:
    """How sure the model is now of each tokenized message's label, scored as classify
    scores it (nothing recorded): the label's score less the best other class's, the log odds
    of a ham/spam model; None where it cannot weigh the classes yet (a class untrained, or
    fewer trained messages than min_learns)."""
    view = _view_for(rt, model_name, prepared, None)
    try:
        assessed = _assess(
            view,
            list(prepared),
            event_model=None,
            explain=False,
            min_learns=min_learns_of(rt, view.live),
        )
    except NotTrained:
        return [None] * len(prepared)
    if assessed.warnings:
        return [None] * len(prepared)
    classes = view.live.classes
    return [
        _margin(dict(zip(classes, row, strict=True)), label)
        for row, label in zip(assessed.scores.tolist(), labels, strict=True)
    ]


def _view_for(
    rt: Runtime,
    model_name: str,
    prepared: Sequence[PreparedMessage],
    event_model: EventModel | None,
) -> ScoringView:
    """The counts that score `prepared` on the model (with its backing model's, if any); the
    messages' token texts are made only where rows must be read by text."""
    return scoring_view(
        rt.models,
        model_name,
        lambda: [text for message in prepared for text in message.token_counts],
        event_model=event_model,
        personal_weight=_personal_weight,
        messages=len(prepared),
    )


def _margin(scores: dict[str, float], label: str) -> float:
    return scores[label] - max(score for name, score in scores.items() if name != label)


def _personal_weight(options: dict[str, Any], classes: tuple[str, ...]) -> int:
    return parse_config(options, classes=classes).personal_weight


_MIN_CHUNK = 50  # fewer messages per worker cost more in pickling than they save
_pools: dict[int, ProcessPoolExecutor] = {}
_pools_lock = threading.Lock()


def prepare_messages(
    rt: Runtime,
    messages: Sequence[Message],
    budget: Literal["classify", "train"],
    *,
    processes: int = 1,
) -> list[PreparedMessage]:
    """Check and tokenize messages, in order; a big batch in `processes` worker processes."""
    if processes <= 1 or len(messages) < processes * _MIN_CHUNK:
        return [rt.prepare(message, budget) for message in messages]
    with _pools_lock:
        pool = _pools.get(processes)
        if pool is None:
            # spawn: never fork a process that may run threads (the server, the flusher).
            pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))
            _pools[processes] = pool
    size = -(-len(messages) // (processes * 2))  # two chunks per worker evens out their speed
    chunks = [list(messages[start : start + size]) for start in range(0, len(messages), size)]
    work = partial(
        _prepare_chunk,
        features=budget != "classify",  # as Runtime.prepare
        limits=rt.limits,
        budget_seconds=rt.budget_seconds(budget),
        max_message_bytes=rt.settings.max_message_bytes,
        token_core=rt.core.name,  # by name: the spawned worker resolves it
    )
    return list(chain.from_iterable(pool.map(work, chunks)))


def _prepare_chunk(
    messages: list[Message],
    *,
    limits: TokenizerLimits,
    budget_seconds: float,
    max_message_bytes: int,
    token_core: CoreChoice,
    features: bool,
) -> list[PreparedMessage]:
    core = resolve(token_core)
    return [
        prepare(
            message,
            limits=with_time_budget(limits, budget_seconds),
            max_message_bytes=max_message_bytes,
            core=core,
            features=features,
        )
        for message in messages
    ]


@dataclass(frozen=True)
class _Assessment:
    """A batch scored under the model's lock: what classify answers and records is built
    from it."""

    chosen: EventModel
    X: scipy.sparse.csr_array  # the messages' token counts by the view's token ids
    log_proba: FloatArray
    scores: FloatArray  # each class's score (joint log-likelihood), a row per message
    used: IntArray  # tokens of each message the model knows
    clues: list[list[Clue]] | None
    config: NaiveBayesConfig
    warnings: tuple[str, ...]


def _assess(
    view: ScoringView,
    prepared: list[PreparedMessage],
    *,
    event_model: EventModel | None,
    explain: bool,
    min_learns: int = 0,
) -> _Assessment:
    """Score `prepared` on the view's table, under the model's lock."""
    live = view.live
    chosen = event_model or live.config.event_model
    unfit = scorer(chosen).unfit_reason(live.classes)
    if unfit is not None:
        raise InvalidConfig("event_model", unfit)
    with live.lock:
        untrained = [
            c for c, n in zip(live.classes, live.table.class_docs.tolist(), strict=True) if n == 0
        ]
        if untrained:
            raise NotTrained(
                f"model {live.name!r} has no trained message of class {', '.join(untrained)}"
            )
        # By the tokenizer's hashes: no text per token, but for a hash two of the model's
        # tokens share (see TokenIndex.lookup_hashes).
        X = live.table.vectorize_hashed(
            [(message.tokens.hashes, message.tokens.counts) for message in prepared],
            lambda row: list(prepared[row].token_counts),
        )
        classifier = live.classifier
        attribute_values = [message.attributes for message in prepared]
        log_proba, scores, used = classifier.assess(
            X, event_model=chosen, attribute_values=attribute_values
        )
        clues = (
            [
                classifier.explain(
                    X[[row]], event_model=chosen, attribute_values=attribute_values[row]
                )
                for row in range(X.shape[0])
            ]
            if explain
            else None
        )
        class_messages = view.class_messages()
        counted = live.table.class_docs.tolist() if class_messages is None else class_messages
        warnings = training_warnings(live.classes, counted, min_learns)
    return _Assessment(chosen, X, log_proba, scores, used, clues, classifier.config, warnings)


def _score(
    view: ScoringView,
    prepared: list[PreparedMessage],
    *,
    event_model: EventModel | None,
    explain: bool,
    min_learns: int = 0,
) -> tuple[list[Classification], list[ClassificationRecord]]:
    """Score `prepared` on the view's table; the records name the table's token ids."""
    now = datetime.now(UTC)
    assessed = _assess(
        view, prepared, event_model=event_model, explain=explain, min_learns=min_learns
    )
    live = view.live
    X, log_proba, warnings = assessed.X, assessed.log_proba, assessed.warnings
    results: list[Classification] = []
    records: list[ClassificationRecord] = []
    spam_index = live.classes.index("spam") if "spam" in live.classes else None
    for row, message in enumerate(prepared):
        probabilities = np.exp(log_proba[row])
        decision = "unsure" if warnings else verdict(probabilities, live.classes, assessed.config)
        label = live.classes[int(np.argmax(log_proba[row]))]
        results.append(
            Classification(
                message_id=message.message_id,
                label=label,
                verdict=decision,
                probabilities=dict(zip(live.classes, probabilities.tolist(), strict=True)),
                spam_probability=None if spam_index is None else float(probabilities[spam_index]),
                scores=dict(zip(live.classes, assessed.scores[row].tolist(), strict=True)),
                event_model=assessed.chosen,
                tokens=int(assessed.used[row]),
                clues=None
                if assessed.clues is None
                else [
                    Clue(token=c.token, class_=c.class_, weight=c.weight)
                    for c in assessed.clues[row]
                ],
                defects=message.defects,
                warnings=warnings,
                models=view.names,
            )
        )
        start, end = X.indptr[row], X.indptr[row + 1]
        records.append(
            ClassificationRecord(
                message_key=message.message_key,
                message_id=message.message_id,
                token_ids=np.asarray(X.indices[start:end], dtype=np.int64),
                token_terms=np.asarray(X.data[start:end], dtype=np.int64),
                verdict=decision,
                classified_at=now,
                body_digest=message.body_digest,
            )
        )
    return results, records


def min_learns_of(rt: Runtime, live: LiveModel) -> int:
    """The model's floor of trained messages per class: its own option, else the server's."""
    configured = parse_config(live.options, classes=live.classes).min_learns
    return rt.settings.min_learns if configured is None else configured


def training_warnings(
    classes: Sequence[str], class_messages: Sequence[int], min_learns: int
) -> tuple[str, ...]:
    """Why verdicts are not to be trusted yet: a class with fewer than `min_learns` trained
    messages (SpamAssassin's bayes_min_ham_num/bayes_min_spam_num, rspamd's min_learns: 200).
    Below it every verdict is "unsure"; scores and probabilities are given as they are."""
    if all(count >= min_learns for count in class_messages):
        return ()
    counts = ", ".join(
        f"{count} {label}" for label, count in zip(classes, class_messages, strict=True)
    )
    return (
        f"model has {counts}; verdicts need {min_learns} of each "
        "(min_learns: train more, or lower the model's min_learns)",
    )
