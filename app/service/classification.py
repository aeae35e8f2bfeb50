"""Use case: classify messages against a model's counts (read-only on the counts)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from app.bayes.naive_bayes import EventModel, verdict
from app.errors import InvalidConfig, NotTrained
from app.service.live import LiveModel
from app.service.messages import Message, PreparedMessage
from app.service.runtime import Runtime
from app.store.ledger import ClassificationRecord


@dataclass(frozen=True)
class Clue:
    token: str
    class_: str
    weight: float


@dataclass(frozen=True)
class Classification:
    message_id: str
    label: str
    verdict: str
    probabilities: dict[str, float]
    spam_probability: float | None
    scores: dict[str, float]
    event_model: str
    tokens: int
    clues: list[Clue] | None = None
    defects: tuple[str, ...] = field(default_factory=tuple)


def classify(
    rt: Runtime,
    *,
    model_name: str,
    message: Message,
    event_model: EventModel | None = None,
    explain: bool = False,
) -> Classification:
    """Score one message; return its verdict and class probabilities."""
    return classify_batch(
        rt, model_name=model_name, messages=[message], event_model=event_model, explain=explain
    )[0]


def classify_batch(
    rt: Runtime,
    *,
    model_name: str,
    messages: Sequence[Message],
    event_model: EventModel | None = None,
    explain: bool = False,
) -> list[Classification]:
    """Score several messages in one pass over the model; results in order."""
    live = rt.models.get(model_name)
    prepared = [rt.prepare(message) for message in messages]
    results, records = _score(live, prepared, event_model=event_model, explain=explain)
    rt.record_classifications(
        live.id,
        records,
        Counter({"classified": len(results)}) + Counter(f"verdict:{r.verdict}" for r in results),
    )
    return results


def _score(
    live: LiveModel,
    prepared: list[PreparedMessage],
    *,
    event_model: EventModel | None,
    explain: bool,
) -> tuple[list[Classification], list[ClassificationRecord]]:
    chosen = event_model or live.config.event_model
    if chosen == "robinson-fisher" and set(live.classes) != {"ham", "spam"}:
        raise InvalidConfig("event_model", "robinson-fisher needs exactly the classes ham and spam")
    now = datetime.now(UTC)
    with live.lock:
        untrained = [
            c for c, n in zip(live.classes, live.table.class_docs.tolist(), strict=True) if n == 0
        ]
        if untrained:
            raise NotTrained(
                f"model {live.name!r} has no trained message of class {', '.join(untrained)}"
            )
        X = live.table.vectorize([message.token_counts for message in prepared])
        classifier = live.classifier
        log_proba = classifier.predict_log_proba(X, event_model=chosen)
        scores = classifier.joint_log_likelihood(X, event_model=chosen)
        used = classifier.tokens_used(X)
        clues = (
            [classifier.explain(X[[row]], event_model=chosen) for row in range(X.shape[0])]
            if explain
            else None
        )
        config = classifier.config
    results: list[Classification] = []
    records: list[ClassificationRecord] = []
    spam_index = live.classes.index("spam") if "spam" in live.classes else None
    for row, message in enumerate(prepared):
        probabilities = np.exp(log_proba[row])
        decision = verdict(probabilities, live.classes, config)
        label = live.classes[int(np.argmax(log_proba[row]))]
        results.append(
            Classification(
                message_id=message.message_id,
                label=label,
                verdict=decision,
                probabilities=dict(zip(live.classes, probabilities.tolist(), strict=True)),
                spam_probability=None if spam_index is None else float(probabilities[spam_index]),
                scores=dict(zip(live.classes, scores[row].tolist(), strict=True)),
                event_model=chosen,
                tokens=int(used[row]),
                clues=None
                if clues is None
                else [Clue(token=c.token, class_=c.class_, weight=c.weight) for c in clues[row]],
                defects=message.defects,
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
            )
        )
    return results, records
