"""Use cases that change counts: train, train a batch, forget, and "mark as spam/ham" feedback.

Each runs as exactly one database transaction (SPEC §7): token counts, class totals, the
ledger and the activity counters commit together or not at all.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Annotated

import numpy as np
from pydantic import ConfigDict, Field

from app.bayes.counts import IntArray
from app.errors import (
    MessageNotFound,
    TimeBudgetExceeded,
    TooFewTokens,
    UnknownLabel,
)
from app.live.held import LiveModel
from app.live.scoring import find_backing
from app.live.write import ModelWrite, write_model, write_models
from app.service.classification import label_margins, prepare_messages
from app.service.messages import Message, PreparedMessage, check_message_id
from app.service.model_config import parse_config
from app.service.runtime import Runtime
from app.store import Connection
from app.store.activity import Event, add_activity, correction_event
from app.store.counts import read_token_texts
from app.store.ledger import (
    StoredMessage,
    delete_trained,
    find_classification,
    find_trained,
    find_trained_by_body,
    find_trained_by_message_id,
    insert_trained,
    relabel_trained,
)
from app.store.models import ModelRow
from app.store.tables import MAX_TOKEN_BYTES
from app.text import evidence_count
from app.text.defects import TIME_BUDGET
from app.token_texts import HashedTexts

# Beside the HTTP request lines: a report's line says what it did (trained, relabelled,
# already known, not found) to which message. Logs hold nothing from mail, Message-IDs
# included (they can name a sender or a host), so the line names the message by a digest of
# its id: `printf '%s' '<id@host>' | sha256sum | cut -c1-16` finds it.
report_log = logging.getLogger("spamsift.report")


@dataclass(frozen=True)
class TrainResult:
    # The answer always has every field: OpenAPI says so (required), defaults or not.
    __pydantic_config__ = ConfigDict(json_schema_serialization_defaults_required=True)

    message_id: str
    label: str
    previous_label: str | None
    changed: bool
    tokens: int
    defects: tuple[str, ...] = ()
    models: Annotated[
        tuple[str, ...],
        Field(
            description="the models trained: the model, and for feedback its backing model "
            "when the relation and the API key allow"
        ),
    ] = ()


@dataclass(frozen=True)
class ForgetResult:
    message_id: str
    forgotten: int  # stored messages with that message_id (several when contents differ)
    labels: list[str]


@dataclass(frozen=True)
class _Item:
    """One message to train: either its distinct tokens as UTF-8 with their hashes (new
    mail) or token ids (from a ledger)."""

    message_id: str
    message_key: str
    class_index: int
    tokens: HashedTexts | None
    token_ids: IntArray | None
    token_terms: IntArray
    defects: tuple[str, ...] = ()
    body_digest: str | None = None
    attributes: Mapping[str, float] = field(default_factory=dict)  # numeric, name -> value
    # How sure the model was of its label just before it is trained, in log odds (None: not
    # known): what the model learns of it depends on it (`NaiveBayesConfig.not_learned`).
    margin: float | None = None


def train(rt: Runtime, *, model_name: str, message: Message, label: str) -> TrainResult:
    """Train one message as `label` (idempotent; a new label moves it)."""
    items = [(message, label)]
    return rt.models.use(model_name, lambda live: _train_batch(rt, live, items, name_items=False))[
        0
    ]


def train_batch(
    rt: Runtime, *, model_name: str, items: Sequence[tuple[Message, str]], processes: int = 1
) -> list[TrainResult]:
    """Train several messages in one transaction; results in order.

    All or nothing: an item refused (too few tokens, time budget) refuses the whole batch, and
    the error names it as `items[i]`. With `processes` > 1 a big batch is tokenized in that
    many worker processes (see `classify_batch`); its labels are then checked first.
    """
    return rt.models.use(
        model_name,
        lambda live: _train_batch(rt, live, items, name_items=True, processes=processes),
    )


def train_prepared(
    rt: Runtime, *, model_name: str, items: Sequence[tuple[PreparedMessage, str]]
) -> list[TrainResult]:
    """`train_batch` for messages tokenized already (`rt.prepare(message, "train")`): the
    write path alone, which bench/train_path.py times."""

    def work(live: LiveModel) -> list[TrainResult]:
        prepared = [(message, _class_index(live, label)) for message, label in items]
        return _write_prepared(rt, live, prepared, name_items=True)

    return rt.models.use(model_name, work)


def _train_batch(
    rt: Runtime,
    live: LiveModel,
    items: Sequence[tuple[Message, str]],
    *,
    name_items: bool,
    processes: int = 1,
) -> list[TrainResult]:
    if processes > 1:
        class_indices = [_class_index(live, label) for _, label in items]
        messages = prepare_messages(rt, [m for m, _ in items], "train", processes=processes)
        prepared = list(zip(messages, class_indices, strict=True))
    else:
        prepared = [
            (rt.prepare(message, "train"), _class_index(live, label)) for message, label in items
        ]
    return _write_prepared(rt, live, prepared, name_items=name_items)


def _write_prepared(
    rt: Runtime,
    live: LiveModel,
    prepared: Sequence[tuple[PreparedMessage, int]],
    *,
    name_items: bool,
) -> list[TrainResult]:
    """Check each tokenized message (with its class index) has enough tokens, then write them."""
    for index, (message, _) in enumerate(prepared):
        _require_tokens(rt, live, message, f"items[{index}]: " if name_items else "")
    margins = _margins_now(rt, live, prepared)
    work = [
        replace(_item_from_prepared(message, class_index), margin=margin)
        for (message, class_index), margin in zip(prepared, margins, strict=True)
    ]
    return _write(rt, live, work, events={Event.TRAINED: 0})


def _margins_now(
    rt: Runtime, live: LiveModel, prepared: Sequence[tuple[PreparedMessage, int]]
) -> list[float | None]:
    """How sure the model is now of each message's label, where what it learns of them
    depends on it (`pairs_until_log_odds`); else None, and nothing is scored."""
    if live.config.sure_log_odds is None or not live.config.sure_left_out:
        return [None] * len(prepared)
    messages = [message for message, _ in prepared]
    labels = [live.classes[class_index] for _, class_index in prepared]
    return label_margins(rt, live.name, messages, labels)


def apply_feedback(
    rt: Runtime,
    *,
    model_name: str,
    label: str,
    message_id: str | None,
    message: Message | None,
    may_train: Callable[[str], bool] | None = None,
) -> TrainResult:
    """Mark a message as `label`: relabel it if trained, else train it (SPEC §7).

    Without the message itself, the message_id must be one trained before or classified within
    `retention_days`; the stored token ids of that classification are trained.

    A model backed by another is trained alone, unless its relation says feedback trains the
    backing model too and `may_train` (the caller's key) allows writing to that model: then
    both are trained in one transaction.
    """
    if message_id is not None:
        check_message_id(message_id)  # a NUL would reach the SQL driver (PostgreSQL raises)
    try:
        result = rt.models.use(
            model_name,
            lambda live: _apply_feedback(
                rt,
                live,
                label=label,
                message_id=message_id,
                message=message,
                may_train=may_train or (lambda _: True),
            ),
        )
    except MessageNotFound:
        _log_report(model_name, label, message_id or "", "not found")
        raise
    if not result.changed:
        outcome = "already known"
    else:
        outcome = "trained" if result.previous_label is None else "relabelled"
    _log_report(model_name, label, result.message_id, outcome, result.previous_label)
    return result


def _log_report(
    model_name: str,
    label: str,
    message_id: str,
    outcome: str,
    previous_label: str | None = None,
) -> None:
    """One log line per report: what it did to which message (never its text or its id)."""
    fields = {
        "model": model_name,
        "message_id_sha256": message_id_digest(message_id),
        "label": label,
        "outcome": outcome,
    }
    if previous_label is not None:
        fields["previous_label"] = previous_label
    report_log.info("report", extra={"fields": fields})


def message_id_digest(message_id: str) -> str:
    """The first 16 hex digits of the SHA-256 of a Message-ID: names it in a log line."""
    return hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _apply_feedback(
    rt: Runtime,
    live: LiveModel,
    *,
    label: str,
    message_id: str | None,
    message: Message | None,
    may_train: Callable[[str], bool],
) -> TrainResult:
    class_index = _class_index(live, label)
    backing = _backing_of(rt, live)
    if message is not None:
        prepared = rt.prepare(
            message if message_id is None else _with_id(message, message_id), "train"
        )
        _require_tokens(rt, live, prepared)
        key, verdict = _known_as(rt, live, prepared)
        (margin,) = _margins_now(rt, live, [(prepared, class_index)])
        items = [
            replace(_item_from_prepared(prepared, class_index), message_key=key, margin=margin)
        ]
    else:
        # Only the token ids the model knew are at hand, and every one of them is learned.
        assert message_id is not None
        items, verdict = _items_for_message_id(rt, live, message_id, class_index, backing)
    events: dict[str, int] = {Event.FEEDBACK: 1}
    if backing is None or not live.feedback_trains_backing or not may_train(backing.name):
        result = _write(rt, live, items, events=events, feedback_verdict=verdict)[0]
        return replace(result, models=(live.name,))
    backing_live = rt.models.get(backing.name)
    backing_items = [_as_texts(live, item) for item in items]
    personal_work = _training(live, _learned(live, items), events=events, feedback_verdict=verdict)
    backing_work = _training(
        backing_live, _learned(backing_live, backing_items), events={Event.TRAINED: 0}
    )

    def work(writes: list[ModelWrite]) -> TrainResult:
        result = personal_work(writes[0])[0]
        backing_work(writes[1])
        return replace(result, models=(live.name, backing_live.name))

    return write_models(rt.db, rt.models, [live, backing_live], work, limits=rt.token_limits)


def _backing_of(rt: Runtime, live: LiveModel) -> ModelRow | None:
    """The model backing `live`, or None (none, or it is gone)."""
    backing_id = live.backed_by
    if backing_id is None:
        return None
    backing = rt.db.run(lambda conn: find_backing(conn, backing_id), write=False)
    return backing if backing is not None and backing.classes == live.classes else None


def _as_texts(live: LiveModel, item: _Item) -> _Item:
    """The item with token texts instead of `live`'s token ids (to train another model)."""
    if item.tokens is not None or item.token_ids is None:
        return item
    with live.lock:
        tokens = live.table.tokens
        texts = [tokens[i] if i < len(tokens) else "" for i in item.token_ids.tolist()]
    known = np.array([bool(text) for text in texts], dtype=np.bool_)
    return replace(
        item,
        tokens=HashedTexts.from_strings([text for text in texts if text]),
        token_ids=None,
        token_terms=item.token_terms[known] if texts else item.token_terms,
    )


def forget(rt: Runtime, *, model_name: str, message_id: str) -> ForgetResult:
    """Untrain every stored message with `message_id`; MessageNotFound if there is none."""
    check_message_id(message_id)  # no trained message has another id; a NUL would reach SQL
    return rt.models.use(model_name, lambda live: _forget(rt, live, message_id))


def _forget(rt: Runtime, live: LiveModel, message_id: str) -> ForgetResult:
    def work(write: ModelWrite) -> ForgetResult:
        stored = find_trained_by_message_id(write.conn, live.id, message_id)
        if not stored:
            raise MessageNotFound(f"no trained message with message_id {message_id!r}")
        for message in stored:
            write.add(
                message.token_ids,
                message.token_terms,
                message.class_index,
                sign=-1,
                attributes=message.attributes,
            )
        write.store()
        delete_trained(write.conn, live.id, [message.message_key for message in stored])
        add_activity(write.conn, live.id, hour=_this_hour(), events={Event.FORGOTTEN: len(stored)})
        return ForgetResult(
            message_id=message_id,
            forgotten=len(stored),
            labels=[live.classes[message.class_index] for message in stored],
        )

    return write_model(rt.db, rt.models, live, work)


def _write(
    rt: Runtime,
    live: LiveModel,
    items: list[_Item],
    *,
    events: dict[str, int],
    feedback_verdict: str | None = None,
) -> list[TrainResult]:
    """Train `items` in one write to the model (one transaction, shared with the other
    writes to it that queued meanwhile: `GroupCommit`).

    For feedback, `feedback_verdict` is the verdict the message got when classified; a label
    that differs from it, or from the label the message was trained with, is a correction.
    """
    items = _learned(live, items)
    rt.token_limits.check_before(live, [item.tokens for item in items if item.tokens is not None])
    work = _training(live, items, events=events, feedback_verdict=feedback_verdict)
    return rt.group_commit.write(live, work)


def _training(
    live: LiveModel,
    items: list[_Item],
    *,
    events: dict[str, int],
    feedback_verdict: str | None = None,
) -> Callable[[ModelWrite], list[TrainResult]]:
    """What one write to `live` does to train `items`, each holding only the tokens the
    model learns of it (`_learned`; see `_write`)."""

    def work(write: ModelWrite) -> list[TrainResult]:
        conn = write.conn
        item_tokens = _token_ids(write, items)
        known = find_trained(conn, live.id, sorted({item.message_key for item in items}))
        labels: dict[str, int] = {key: stored.class_index for key, stored in known.items()}
        token_sets: dict[str, tuple[IntArray, IntArray, Mapping[str, float]]] = {
            key: (stored.token_ids, stored.token_terms, stored.attributes)
            for key, stored in known.items()
        }
        inserted: dict[str, StoredMessage] = {}
        relabelled: dict[str, int] = {}
        results: list[TrainResult] = []
        for item, (token_ids, token_terms) in zip(items, item_tokens, strict=True):
            previous = labels.get(item.message_key)
            if previous is None:
                token_sets[item.message_key] = (token_ids, token_terms, item.attributes)
                write.add(
                    token_ids, token_terms, item.class_index, sign=1, attributes=item.attributes
                )
                inserted[item.message_key] = StoredMessage(
                    item.message_key,
                    item.message_id,
                    item.class_index,
                    token_ids,
                    token_terms,
                    item.body_digest,
                    item.attributes,
                )
            elif previous != item.class_index:
                # Exactly what the message was trained with moves: its tokens and attributes.
                stored_ids, stored_terms, stored_attributes = token_sets[item.message_key]
                write.add(stored_ids, stored_terms, previous, sign=-1, attributes=stored_attributes)
                write.add(
                    stored_ids,
                    stored_terms,
                    item.class_index,
                    sign=1,
                    attributes=stored_attributes,
                )
                if item.message_key in inserted:
                    old = inserted[item.message_key]
                    inserted[item.message_key] = replace(old, class_index=item.class_index)
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
        now = datetime.now(UTC)  # the counts are stored after every request of the write
        insert_trained(conn, live.id, list(inserted.values()), trained_at=now)
        for key, class_index in sorted(relabelled.items()):
            relabel_trained(conn, live.id, key, class_index, trained_at=now)
        counted = dict(events)
        counted[Event.TRAINED] = counted.get(Event.TRAINED, 0) + sum(r.changed for r in results)
        if Event.FEEDBACK in events:
            label = results[0].label
            # A report repeated with the same label (a second click, another copy of the
            # message) changes nothing, and counts nothing: not a second correction.
            counted[Event.FEEDBACK] = int(any(r.changed for r in results))
            first = all(r.previous_label is None for r in results)
            counted[Event.CORRECTIONS] = int(
                any(r.previous_label not in (None, r.label) for r in results)
                or (first and feedback_verdict not in (None, "unsure", label))
            )
            # By the label users gave: on a ham/spam model a correction to ham is a false
            # positive, one to spam a false negative (the dashboard's two rates).
            counted[correction_event(label)] = counted[Event.CORRECTIONS]
        add_activity(conn, live.id, hour=_this_hour(), events=counted)
        return results

    return work


def _learned(live: LiveModel, items: list[_Item]) -> list[_Item]:
    """The items with only the tokens `live` learns of them: not those of the derived
    families that are off (its options `word_pairs`, `shape_tokens`), nor, with
    `pairs_until_log_odds`, the word pairs of a message it was sure of already
    (`NaiveBayesConfig.not_learned`).

    A message is tokenized with every family whatever the model's options, so that its key
    (the digest of its tokens) does not change with them: a message trained before an option
    changed is still the same message after.
    """
    config = live.config
    learned = []
    for item in items:
        prefixes = config.not_learned(item.margin)
        learned.append(_item_without(live, item, prefixes) if prefixes else item)
    return learned


def _item_without(live: LiveModel, item: _Item, prefixes: tuple[str, ...]) -> _Item:
    if item.tokens is not None:
        kept = np.flatnonzero(~item.tokens.texts.starting_with(prefixes))
        return replace(item, tokens=item.tokens.take(kept), token_terms=item.token_terms[kept])
    assert item.token_ids is not None
    with live.lock:
        tokens = live.table.tokens
        texts = [tokens[i] if i < len(tokens) else "" for i in item.token_ids.tolist()]
    known = np.array([not text.startswith(prefixes) for text in texts], dtype=np.bool_)
    return replace(item, token_ids=item.token_ids[known], token_terms=item.token_terms[known])


def _token_ids(write: ModelWrite, items: list[_Item]) -> list[tuple[IntArray, IntArray]]:
    """Return each item's token ids (ascending) with their counts.

    All items' tokens are looked up at once; new tokens get consecutive ids in the order they
    first appear.
    """
    ids = write.token_ids(
        HashedTexts.concatenate([item.tokens for item in items if item.tokens is not None])
    )
    item_tokens: list[tuple[IntArray, IntArray]] = []
    start = 0
    for item in items:
        if item.tokens is None:
            assert item.token_ids is not None
            item_tokens.append((item.token_ids, item.token_terms))
            continue
        end = start + len(item.tokens)
        order = np.argsort(ids[start:end], kind="stable")
        item_tokens.append((ids[start:end][order], item.token_terms[order]))
        start = end
    return item_tokens


def _items_for_message_id(
    rt: Runtime,
    live: LiveModel,
    message_id: str,
    class_index: int,
    backing: ModelRow | None = None,
) -> tuple[list[_Item], str | None]:
    """Find what to relabel or train for feedback that names only a message_id.

    A message classified on a model backed by another has a record in each (the tokens each
    knew): the item trained is their union, by text, so the tokens only the backing model
    knew are learned too.
    """
    rt.flush_classifications(live.id)  # this model's records only: others wait for the flusher
    if backing is not None:
        rt.flush_classifications(backing.id)
    since = rt.retention_start()

    def look(
        conn: Connection, message_id: str
    ) -> tuple[list[StoredMessage], str | None, _Item | None]:
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
            if backing is not None and since is not None and not stored:
                item = _with_backing_record(conn, live, item, backing, since)
        return stored, None if record is None else record.verdict, item

    for candidate in message_id_forms(message_id):
        stored, verdict, classified = rt.db.run(partial(look, message_id=candidate), write=False)
        if stored or classified is not None:
            break
    if stored:
        items = [
            _Item(
                message.message_id,
                message.message_key,
                class_index,
                None,
                message.token_ids,
                message.token_terms,
                attributes=message.attributes,
            )
            for message in stored
        ]
        return items, verdict
    if classified is not None:
        return [classified], verdict
    tried = message_id_forms(message_id)
    also = f" (nor {tried[1]!r}: a Message-ID keeps its angle brackets)" if len(tried) > 1 else ""
    raise MessageNotFound(
        f"message_id {message_id!r} was neither trained nor classified within the retention "
        f"period{also}; send the message with the feedback"
    )


def message_id_forms(message_id: str) -> list[str]:
    """The ids feedback looks for, in turn: `message_id` as given, then, for an address
    without its angle brackets (`abc@example.org`, as some IMAP hooks pass a Message-ID), the
    header's own form `<abc@example.org>`. The second is tried only when the first names
    nothing, so an id trained without brackets is still found as given; a message trained
    under both forms is found as given, never guessed."""
    forms = [message_id]
    if "@" in message_id and not message_id.startswith("<") and not message_id.endswith(">"):
        forms.append(f"<{message_id.strip()}>")
    return forms


def _with_backing_record(
    conn: Connection, live: LiveModel, item: _Item, backing: ModelRow, since: datetime
) -> _Item:
    """`item` (from `live`'s classification record) joined by text with the backing model's
    record of the same message."""
    record = find_classification(conn, backing.id, item.message_id, since=since)
    if record is None or record.message_key != item.message_key or not record.token_ids.size:
        return item
    own = _as_texts(live, item)
    assert own.tokens is not None
    terms = dict(zip(own.tokens.strings(), own.token_terms.tolist(), strict=True))
    texts = read_token_texts(conn, backing.id, record.token_ids.tolist())
    for token_id, count in zip(record.token_ids.tolist(), record.token_terms.tolist(), strict=True):
        text = texts.get(token_id)
        if text:
            terms.setdefault(text, count)
    return replace(
        own,
        tokens=HashedTexts.from_strings(list(terms)),
        token_terms=np.fromiter(terms.values(), dtype=np.int64, count=len(terms)),
    )


def _known_as(rt: Runtime, live: LiveModel, prepared: PreparedMessage) -> tuple[str, str | None]:
    """The key under which a reported message is known to `live`, and its verdict when it was
    classified within the retention period.

    The message's own key, unless it is new under that key but the model trained or classified
    another copy of it: the same message_id with the same body, which a mail server delivered
    with more header fields than it had when classified (see `body_digest`). Feedback then
    relabels that message instead of training the copy as another one.
    """
    since = rt.retention_start()
    if since is not None:
        rt.flush_classifications(live.id)
    message_id, body = prepared.message_id, prepared.body_digest

    def look(conn: Connection) -> tuple[str, str | None]:
        key: str | None = None
        if find_trained(conn, live.id, [prepared.message_key]):
            key = prepared.message_key
        elif body is not None:
            copy = find_trained_by_body(conn, live.id, message_id, body)
            key = None if copy is None else copy.message_key
        record = (
            None
            if since is None
            else find_classification(
                conn,
                live.id,
                message_id,
                since=since,
                message_key=key or prepared.message_key,
                body_digest=body,
            )
        )
        if key is None:
            key = prepared.message_key if record is None else record.message_key
        return key, None if record is None else record.verdict

    return rt.db.run(look, write=False)


def _item_from_prepared(message: PreparedMessage, class_index: int) -> _Item:
    tokens, terms = message.tokens.hashed_texts(), message.tokens.counts
    too_long = tokens.texts.lengths > MAX_TOKEN_BYTES  # not storable: left out
    if too_long.any():
        kept = np.flatnonzero(~too_long)
        tokens, terms = tokens.take(kept), terms[kept]
    return _Item(
        message_id=message.message_id,
        message_key=message.message_key,
        class_index=class_index,
        tokens=tokens,
        token_ids=None,
        token_terms=terms,
        defects=message.defects,
        body_digest=message.body_digest,
        attributes=message.attributes,
    )


def _require_tokens(
    rt: Runtime, live: LiveModel, message: PreparedMessage, where: str = ""
) -> None:
    """Refuse to train a message cut by the time budget or with fewer tokens than the model's
    min_train_tokens (else the server's for raw mail, one for plain text).

    A batch is all-or-nothing: one refused item refuses the batch, and `where` names it.
    """
    if TIME_BUDGET in message.defects:
        raise TimeBudgetExceeded(
            f"{where}tokenizing the message took longer than the time budget of "
            f"{rt.settings.train_time_budget_seconds:g} s; nothing was trained, retry later"
        )
    found = evidence_count(message.tokens, core=rt.core)  # no word pairs nor shape tokens
    options = parse_config(live.options, classes=live.classes)
    needed = options.min_train_tokens or (1 if message.from_text else rt.settings.min_train_tokens)
    if found < needed:
        raise TooFewTokens(
            f"{where}the message has {found} distinct tokens (word pairs and shape tokens not "
            f"counted); training needs at least {needed}"
        )


def _class_index(live: LiveModel, label: str) -> int:
    try:
        return live.classes.index(label)
    except ValueError:
        raise UnknownLabel(
            f"label must be one of {', '.join(live.classes)}; got {label!r}"
        ) from None


def _with_id(message: Message, message_id: str) -> Message:
    return replace(message, message_id=message_id)


def _this_hour() -> datetime:
    return datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
