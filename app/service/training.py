"""Use cases that change counts: train, train a batch, forget, and "mark as spam/ham" feedback.

Each runs as exactly one database transaction (SPEC §7): token counts, class totals, the
ledger and the activity counters commit together or not at all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

import numpy as np
from sqlalchemy import Connection

from app.bayes.counts import IntArray
from app.errors import InvalidMessage, MessageNotFound, ModelNotFound, UnknownLabel
from app.service.live import LiveModel
from app.service.messages import Message, PreparedMessage
from app.service.runtime import Runtime
from app.store.activity import add_activity
from app.store.counts import CountDelta, add_class_totals, add_token_counts, insert_tokens
from app.store.ledger import (
    StoredMessage,
    delete_trained,
    find_classification,
    find_trained,
    find_trained_by_message_id,
    insert_trained,
    relabel_trained,
)
from app.store.models import allocate_token_ids, lock_and_bump_generation
from app.store.tables import MAX_TOKEN_BYTES

T = TypeVar("T")


@dataclass(frozen=True)
class TrainResult:
    message_id: str
    label: str
    previous_label: str | None
    changed: bool
    tokens: int
    defects: tuple[str, ...] = ()


@dataclass(frozen=True)
class ForgetResult:
    message_id: str
    forgotten: int  # stored messages with that message_id (several when contents differ)
    labels: list[str]


@dataclass(frozen=True)
class _Item:
    """One message to train: either token texts (new mail) or token ids (from a ledger)."""

    message_id: str
    message_key: str
    class_index: int
    token_texts: list[str] | None
    token_ids: IntArray | None
    token_terms: IntArray
    defects: tuple[str, ...] = ()


@dataclass
class _Write:
    """What one transaction changed, kept to update this process's arrays after commit."""

    generation: int = 0
    new_token_ids: IntArray | None = None
    new_token_texts: list[str] | None = None
    delta: CountDelta | None = None
    class_docs: IntArray | None = None
    class_terms: IntArray | None = None


def train(rt: Runtime, *, model_name: str, message: Message, label: str) -> TrainResult:
    """Train one message as `label` (idempotent; a new label moves it)."""
    return train_batch(rt, model_name=model_name, items=[(message, label)])[0]


def train_batch(
    rt: Runtime, *, model_name: str, items: Sequence[tuple[Message, str]]
) -> list[TrainResult]:
    """Train several messages in one transaction; results in order."""
    return _on_current_model(rt, model_name, lambda live: _train_batch(rt, live, items))


def _train_batch(
    rt: Runtime, live: LiveModel, items: Sequence[tuple[Message, str]]
) -> list[TrainResult]:
    prepared = [(rt.prepare(message), _class_index(live, label)) for message, label in items]
    for message, _ in prepared:
        _require_tokens(message)
    work = [_item_from_prepared(message, class_index) for message, class_index in prepared]
    return _write(rt, live, work, events={"trained": 0})


def apply_feedback(
    rt: Runtime, *, model_name: str, label: str, message_id: str | None, message: Message | None
) -> TrainResult:
    """Mark a message as `label`: relabel it if trained, else train it (SPEC §7).

    Without the message itself, the message_id must be one trained before or classified within
    `retention_days`; the stored token ids of that classification are trained.
    """
    return _on_current_model(
        rt,
        model_name,
        lambda live: _apply_feedback(rt, live, label=label, message_id=message_id, message=message),
    )


def _apply_feedback(
    rt: Runtime, live: LiveModel, *, label: str, message_id: str | None, message: Message | None
) -> TrainResult:
    class_index = _class_index(live, label)
    if message is not None:
        prepared = rt.prepare(message if message_id is None else _with_id(message, message_id))
        _require_tokens(prepared)
        items = [_item_from_prepared(prepared, class_index)]
        verdict = _classified_verdict(rt, live, prepared.message_id, prepared.message_key)
    else:
        assert message_id is not None
        items, verdict = _items_for_message_id(rt, live, message_id, class_index)
    return _write(rt, live, items, events={"feedback": 1}, feedback_verdict=verdict)[0]


def forget(rt: Runtime, *, model_name: str, message_id: str) -> ForgetResult:
    """Untrain every stored message with `message_id`; MessageNotFound if there is none."""
    return _on_current_model(rt, model_name, lambda live: _forget(rt, live, message_id))


def _forget(rt: Runtime, live: LiveModel, message_id: str) -> ForgetResult:
    write = _Write()

    def work(conn: Connection) -> ForgetResult:
        generation = lock_and_bump_generation(conn, live.id, created_at=live.created_at)
        live.catch_up(conn, generation - 1)
        stored = find_trained_by_message_id(conn, live.id, message_id)
        if not stored:
            raise MessageNotFound(f"no trained message with message_id {message_id!r}")
        cells: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
        class_docs = np.zeros(len(live.classes), dtype=np.int64)
        class_terms = np.zeros(len(live.classes), dtype=np.int64)
        for message in stored:
            _accumulate(
                cells,
                class_docs,
                class_terms,
                message.token_ids,
                message.token_terms,
                message.class_index,
                sign=-1,
            )
        write.delta = _store_cells(conn, live, cells, class_docs, class_terms, generation)
        delete_trained(conn, live.id, [message.message_key for message in stored])
        add_activity(conn, live.id, hour=_this_hour(), events={"forgotten": len(stored)})
        write.generation = generation
        write.class_docs, write.class_terms = class_docs, class_terms
        return ForgetResult(
            message_id=message_id,
            forgotten=len(stored),
            labels=[live.classes[message.class_index] for message in stored],
        )

    result = rt.db.run(work)
    _apply_after_commit(rt, live, write)
    return result


def _on_current_model(rt: Runtime, model_name: str, use: Callable[[LiveModel], T]) -> T:
    """Run `use` on the process's live model, once more on a fresh load if that copy is stale.

    A model deleted (and maybe re-created under the same id) by another process makes the
    write's model lock raise ModelNotFound; the copy is dropped and the use case runs again,
    which raises ModelNotFound once more only if the model is really gone.
    """
    try:
        return use(rt.models.get(model_name))
    except ModelNotFound:
        rt.models.forget(model_name)
        return use(rt.models.get(model_name))


def _write(
    rt: Runtime,
    live: LiveModel,
    items: list[_Item],
    *,
    events: dict[str, int],
    feedback_verdict: str | None = None,
) -> list[TrainResult]:
    """Train `items` in one transaction and update this process's arrays after the commit.

    For feedback, `feedback_verdict` is the verdict the message got when classified; a label
    that differs from it, or from the label the message was trained with, is a correction.
    """
    write = _Write()

    def work(conn: Connection) -> list[TrainResult]:
        generation = lock_and_bump_generation(conn, live.id, created_at=live.created_at)
        live.catch_up(conn, generation - 1)  # now the in-memory token ids are exact
        new_ids, new_texts = _intern_new_tokens(conn, live, items, generation)
        known = find_trained(conn, live.id, sorted({item.message_key for item in items}))
        labels: dict[str, int] = {key: stored.class_index for key, stored in known.items()}
        token_sets: dict[str, tuple[IntArray, IntArray]] = {
            key: (stored.token_ids, stored.token_terms) for key, stored in known.items()
        }
        cells: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
        class_docs = np.zeros(len(live.classes), dtype=np.int64)
        class_terms = np.zeros(len(live.classes), dtype=np.int64)
        inserted: dict[str, StoredMessage] = {}
        relabelled: dict[str, int] = {}
        results: list[TrainResult] = []
        for item in items:
            token_ids, token_terms = _item_tokens(live, item, new_ids)
            previous = labels.get(item.message_key)
            if previous is None:
                token_sets[item.message_key] = (token_ids, token_terms)
                _accumulate(
                    cells, class_docs, class_terms, token_ids, token_terms, item.class_index, sign=1
                )
                inserted[item.message_key] = StoredMessage(
                    item.message_key, item.message_id, item.class_index, token_ids, token_terms
                )
            elif previous != item.class_index:
                stored_ids, stored_terms = token_sets[item.message_key]
                _accumulate(
                    cells, class_docs, class_terms, stored_ids, stored_terms, previous, sign=-1
                )
                _accumulate(
                    cells,
                    class_docs,
                    class_terms,
                    stored_ids,
                    stored_terms,
                    item.class_index,
                    sign=1,
                )
                if item.message_key in inserted:
                    old = inserted[item.message_key]
                    inserted[item.message_key] = StoredMessage(
                        old.message_key,
                        old.message_id,
                        item.class_index,
                        old.token_ids,
                        old.token_terms,
                    )
                else:
                    relabelled[item.message_key] = item.class_index
            labels[item.message_key] = item.class_index
            results.append(
                TrainResult(
                    message_id=item.message_id,
                    label=live.classes[item.class_index],
                    previous_label=None if previous is None else live.classes[previous],
                    changed=previous != item.class_index,
                    tokens=len(token_ids),
                    defects=item.defects,
                )
            )
        write.delta = _store_cells(conn, live, cells, class_docs, class_terms, generation)
        now = datetime.now(UTC)
        insert_trained(conn, live.id, list(inserted.values()), trained_at=now)
        for key, class_index in sorted(relabelled.items()):
            relabel_trained(conn, live.id, key, class_index, trained_at=now)
        counted = dict(events)
        counted["trained"] = counted.get("trained", 0) + sum(r.changed for r in results)
        if "feedback" in events:
            label = results[0].label
            counted["corrections"] = int(
                any(r.previous_label not in (None, r.label) for r in results)
                or feedback_verdict not in (None, "unsure", label)
            )
        add_activity(conn, live.id, hour=_this_hour(), events=counted)
        write.generation = generation
        write.new_token_ids, write.new_token_texts = new_ids_array(new_ids), new_texts
        write.class_docs, write.class_terms = class_docs, class_terms
        return results

    results = rt.db.run(work)
    _apply_after_commit(rt, live, write)
    return results


def _intern_new_tokens(
    conn: Connection, live: LiveModel, items: list[_Item], generation: int
) -> tuple[dict[str, int], list[str]]:
    """Give ids to the tokens the model has never seen; return {text: id} for them."""
    new_texts: list[str] = []
    seen: set[str] = set()
    for item in items:
        for text in item.token_texts or ():
            if text not in seen:
                seen.add(text)
                new_texts.append(text)
    if not new_texts:
        return {}, []
    known = live.table.lookup(new_texts)
    new_texts = [
        text for text, token_id in zip(new_texts, known.tolist(), strict=True) if token_id < 0
    ]
    if not new_texts:
        return {}, []
    first_id = allocate_token_ids(conn, live.id, len(new_texts))
    insert_tokens(conn, live.id, first_id=first_id, texts=new_texts, generation=generation)
    return {text: first_id + offset for offset, text in enumerate(new_texts)}, new_texts


def _item_tokens(
    live: LiveModel, item: _Item, new_ids: dict[str, int]
) -> tuple[IntArray, IntArray]:
    """Return the item's token ids (ascending) with their counts."""
    if item.token_texts is None:
        assert item.token_ids is not None
        return item.token_ids, item.token_terms
    ids = live.table.lookup(item.token_texts)
    for position, token_id in enumerate(ids.tolist()):
        if token_id < 0:
            ids[position] = new_ids[item.token_texts[position]]
    order = np.argsort(ids, kind="stable")
    return ids[order], item.token_terms[order]


def _accumulate(
    cells: dict[tuple[int, int], list[int]],
    class_docs: IntArray,
    class_terms: IntArray,
    token_ids: IntArray,
    token_terms: IntArray,
    class_index: int,
    *,
    sign: int,
) -> None:
    for token_id, terms in zip(token_ids.tolist(), token_terms.tolist(), strict=True):
        cell = cells[(token_id, class_index)]
        cell[0] += sign
        cell[1] += sign * terms
    class_docs[class_index] += sign
    class_terms[class_index] += sign * int(token_terms.sum())


def _store_cells(
    conn: Connection,
    live: LiveModel,
    cells: dict[tuple[int, int], list[int]],
    class_docs: IntArray,
    class_terms: IntArray,
    generation: int,
) -> CountDelta:
    """Write the accumulated changes; return them as the sorted delta that was stored."""
    keys = sorted(key for key, (docs, terms) in cells.items() if docs or terms)
    delta = CountDelta(
        token_ids=np.array([key[0] for key in keys], dtype=np.int64),
        class_indices=np.array([key[1] for key in keys], dtype=np.int64),
        docs=np.array([cells[key][0] for key in keys], dtype=np.int64),
        terms=np.array([cells[key][1] for key in keys], dtype=np.int64),
    )
    add_token_counts(conn, live.id, delta, generation=generation)
    add_class_totals(
        conn, live.id, class_docs=class_docs.tolist(), class_terms=class_terms.tolist()
    )
    return delta


def _apply_after_commit(rt: Runtime, live: LiveModel, write: _Write) -> None:
    assert write.delta is not None
    assert write.class_docs is not None
    assert write.class_terms is not None
    applied = live.apply_own_write(
        write.generation,
        new_token_ids=write.new_token_ids if write.new_token_ids is not None else new_ids_array({}),
        new_token_texts=write.new_token_texts or [],
        delta=write.delta,
        class_docs=write.class_docs,
        class_terms=write.class_terms,
    )
    if not applied:
        rt.models.sync(live)


def _items_for_message_id(
    rt: Runtime, live: LiveModel, message_id: str, class_index: int
) -> tuple[list[_Item], str | None]:
    """Find what to relabel or train for feedback that names only a message_id."""
    rt.flush_classifications()
    since = rt.retention_start()

    def look(conn: Connection) -> tuple[list[StoredMessage], str | None, _Item | None]:
        stored = find_trained_by_message_id(conn, live.id, message_id)
        record = (
            find_classification(conn, live.id, message_id, since=since)
            if since is not None
            else None
        )
        item = None
        if record is not None:
            item = _Item(
                record.message_id,
                record.message_key,
                class_index,
                None,
                record.token_ids,
                record.token_terms,
            )
        return stored, None if record is None else record.verdict, item

    stored, verdict, classified = rt.db.run(look, write=False)
    if stored:
        items = [
            _Item(
                message.message_id,
                message.message_key,
                class_index,
                None,
                message.token_ids,
                message.token_terms,
            )
            for message in stored
        ]
        return items, verdict
    if classified is not None:
        return [classified], verdict
    raise MessageNotFound(
        f"message_id {message_id!r} was neither trained nor classified within the retention "
        "period; send the message with the feedback"
    )


def _classified_verdict(
    rt: Runtime, live: LiveModel, message_id: str, message_key: str
) -> str | None:
    since = rt.retention_start()
    if since is None:
        return None
    rt.flush_classifications()

    def look(conn: Connection) -> str | None:
        record = find_classification(conn, live.id, message_id, since=since)
        return record.verdict if record is not None and record.message_key == message_key else None

    return rt.db.run(look, write=False)


def _item_from_prepared(message: PreparedMessage, class_index: int) -> _Item:
    texts = [text for text in message.token_counts if len(text.encode("utf-8")) <= MAX_TOKEN_BYTES]
    return _Item(
        message_id=message.message_id,
        message_key=message.message_key,
        class_index=class_index,
        token_texts=texts,
        token_ids=None,
        token_terms=np.array([message.token_counts[text] for text in texts], dtype=np.int64),
        defects=message.defects,
    )


def _require_tokens(message: PreparedMessage) -> None:
    if not message.token_counts:
        raise InvalidMessage("the message has no tokens to learn from")


def _class_index(live: LiveModel, label: str) -> int:
    try:
        return live.classes.index(label)
    except ValueError:
        raise UnknownLabel(
            f"label must be one of {', '.join(live.classes)}; got {label!r}"
        ) from None


def _with_id(message: Message, message_id: str) -> Message:
    return Message(raw=message.raw, text=message.text, message_id=message_id)


def _this_hour() -> datetime:
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def new_ids_array(new_ids: dict[str, int]) -> IntArray:
    return np.array(list(new_ids.values()), dtype=np.int64)
