"""Training is idempotent by message, relabels move counts, forget restores them (SPEC §7)."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import Connection, text

from app.errors import InvalidMessage, MessageNotFound, UnknownLabel
from app.live.write import ModelWrite, write_model
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import forget, train, train_batch
from app.store.chunks import NegativeCount
from app.store.counts import CountDelta, fold_journal
from app.store.models import find_model, lock_model_row
from tests.builders import (
    counts_from_ledger,
    ham_message,
    ham_text,
    spam_message,
    spam_text,
    stored_cells,
    stored_counts,
    train_examples,
)

SPAM, HAM = 1, 0


def test_training_the_same_message_twice_changes_nothing(runtime: Runtime) -> None:
    train_examples(runtime, 3, 3)
    message = Message(raw=spam_message(7))
    first = train(runtime, model_name="default", message=message, label="spam")
    before = stored_counts(runtime)

    second = train(runtime, model_name="default", message=message, label="spam")

    assert first.changed
    assert not second.changed
    assert second.previous_label == "spam"
    assert second.message_id == first.message_id
    assert stored_counts(runtime) == before


def test_relabelling_moves_the_message_between_classes(runtime: Runtime) -> None:
    train_examples(runtime, 2, 2)
    message = Message(raw=spam_message(9), message_id="<relabel@example.org>")
    train(runtime, model_name="default", message=message, label="spam")
    before = stored_counts(runtime)

    result = train(runtime, model_name="default", message=message, label="ham")

    after = stored_counts(runtime)
    assert result.changed
    assert result.previous_label == "spam"
    assert result.label == "ham"
    (key,) = [k for k, (mid, _) in after.trained.items() if mid == "<relabel@example.org>"]
    assert after.trained[key] == ("<relabel@example.org>", HAM)
    assert after.class_totals[SPAM][0] == before.class_totals[SPAM][0] - 1
    assert after.class_totals[HAM][0] == before.class_totals[HAM][0] + 1
    moved_terms = before.class_totals[SPAM][1] - after.class_totals[SPAM][1]
    assert after.class_totals[HAM][1] == before.class_totals[HAM][1] + moved_terms
    # Every token of the message left spam by exactly what it joined ham with, and only those.
    tokens = {token for token, _ in before.token_counts} | {
        token for token, _ in after.token_counts
    }
    moved = 0
    for token in tokens:
        spam_then = before.token_counts.get((token, SPAM), (0, 0))
        spam_now = after.token_counts.get((token, SPAM), (0, 0))
        ham_then = before.token_counts.get((token, HAM), (0, 0))
        ham_now = after.token_counts.get((token, HAM), (0, 0))
        left = (spam_then[0] - spam_now[0], spam_then[1] - spam_now[1])
        joined = (ham_now[0] - ham_then[0], ham_now[1] - ham_then[1])
        assert left == joined
        moved += left != (0, 0)
    assert moved > 5
    assert counts_from_ledger(runtime) == stored_cells(runtime)


def test_relabelling_back_restores_the_original_counts(runtime: Runtime) -> None:
    train_examples(runtime, 2, 2)
    message = Message(text=spam_text(40))
    train(runtime, model_name="default", message=message, label="spam")
    before = stored_counts(runtime)

    train(runtime, model_name="default", message=message, label="ham")
    back = train(runtime, model_name="default", message=message, label="spam")

    assert back.previous_label == "ham"
    assert stored_counts(runtime).nonzero_counts() == before.nonzero_counts()
    assert stored_counts(runtime).class_totals == before.class_totals


def test_forgetting_restores_the_counts_exactly(runtime: Runtime) -> None:
    train_examples(runtime, 4, 4)
    before = stored_counts(runtime)
    message = Message(raw=spam_message(11), message_id="<forget-me@example.org>")
    train(runtime, model_name="default", message=message, label="spam")
    assert stored_counts(runtime) != before

    result = forget(runtime, model_name="default", message_id="<forget-me@example.org>")

    assert result.forgotten == 1
    assert result.labels == ["spam"]
    after = stored_counts(runtime)
    assert after.nonzero_counts() == before.nonzero_counts()
    assert after.class_totals == before.class_totals
    assert after.trained == before.trained


def test_forgetting_twice_is_not_found_and_changes_nothing(runtime: Runtime) -> None:
    train_examples(runtime, 2, 2)
    message = Message(text=ham_text(30), message_id="twice")
    train(runtime, model_name="default", message=message, label="ham")
    forget(runtime, model_name="default", message_id="twice")
    before = stored_counts(runtime)

    with pytest.raises(MessageNotFound):
        forget(runtime, model_name="default", message_id="twice")

    assert stored_counts(runtime) == before


def test_forgetting_an_unknown_message_id_is_not_found(runtime: Runtime) -> None:
    train_examples(runtime, 1, 1)
    before = stored_counts(runtime)

    with pytest.raises(MessageNotFound):
        forget(runtime, model_name="default", message_id="<never@example.org>")

    assert stored_counts(runtime) == before


def test_training_then_forgetting_everything_leaves_no_negative_and_no_positive_count(
    runtime: Runtime,
) -> None:
    trained = train_examples(runtime, 5, 5)
    train(runtime, model_name="default", message=Message(text=spam_text(0)), label="ham")

    for example in trained:
        forget(runtime, model_name="default", message_id=example.message_id)

    after = stored_counts(runtime)
    assert all(docs == 0 and terms == 0 for docs, terms in after.token_counts.values())
    assert set(after.class_totals.values()) == {(0, 0)}
    assert after.trained == {}


def test_a_write_that_would_drive_a_count_below_zero_is_refused(runtime: Runtime) -> None:
    """Taking away a message that was never added (a bug: forget and relabel take only what
    the ledger says was added) fails the write before anything is stored, whether it would
    go to the journal or be folded into the chunks."""
    train_examples(runtime, 1, 1)
    before = stored_cells(runtime)
    live = runtime.models.get("default")
    trained = stored_counts(runtime).token_counts
    assert trained
    known = np.array(sorted({live.table.lookup([text])[0] for text, _ in trained}), np.int64)

    def take_away_twice(write: ModelWrite) -> None:
        for _ in range(2):
            write.add(known, np.ones(known.size, np.int64), SPAM, sign=-1)

    with pytest.raises(NegativeCount):
        write_model(runtime.db, runtime.models, live, take_away_twice)

    def fold_a_negative_delta(conn: Connection) -> None:  # the store's fold checks too
        model = find_model(conn, "default")
        row = lock_model_row(conn, model.id, created_at=model.created_at)
        classes = np.full(known.size, SPAM, np.int64)
        minus = -np.full(known.size, 1_000, np.int64)
        delta = CountDelta(known, classes, minus, minus)
        fold_journal(conn, model.id, n_classes=2, extra=delta, generation=row.generation)

    with pytest.raises(NegativeCount), runtime.db.transaction() as conn:
        fold_a_negative_delta(conn)

    assert stored_cells(runtime) == before


def test_a_reused_message_id_with_other_content_is_another_message(runtime: Runtime) -> None:
    train_examples(runtime, 1, 1)
    victim = Message(raw=ham_message(1, message_id="<victim@example.org>"), message_id="<v@x>")
    forged = Message(raw=spam_message(1, message_id="<victim@example.org>"), message_id="<v@x>")
    train(runtime, model_name="default", message=victim, label="ham")
    before = stored_counts(runtime)

    result = train(runtime, model_name="default", message=forged, label="spam")

    assert result.changed
    assert result.previous_label is None
    after = stored_counts(runtime)
    assert sorted(label for mid, label in after.trained.values() if mid == "<v@x>") == [HAM, SPAM]
    assert after.class_totals[SPAM][0] == before.class_totals[SPAM][0] + 1
    assert after.class_totals[HAM] == before.class_totals[HAM]


def test_forgetting_a_reused_message_id_forgets_every_message_with_it(runtime: Runtime) -> None:
    before = stored_counts(runtime)
    train(
        runtime,
        model_name="default",
        message=Message(text=ham_text(1), message_id="x"),
        label="ham",
    )
    train(
        runtime,
        model_name="default",
        message=Message(text=spam_text(1), message_id="x"),
        label="spam",
    )

    result = forget(runtime, model_name="default", message_id="x")

    assert result.forgotten == 2
    assert sorted(result.labels) == ["ham", "spam"]
    assert stored_counts(runtime).nonzero_counts() == before.nonzero_counts()


def test_a_message_without_message_id_gets_its_sha256(runtime: Runtime) -> None:
    result = train(
        runtime,
        model_name="default",
        message=Message(
            text="hello there friend, this text is long enough for spamsift to learn from"
        ),
        label="ham",
    )

    assert result.message_id.startswith("sha256:")
    assert len(result.message_id) == len("sha256:") + 64


def test_a_batch_is_all_or_nothing(runtime: Runtime) -> None:
    train_examples(runtime, 1, 1)
    before = stored_counts(runtime)

    with pytest.raises(UnknownLabel):
        train_batch(
            runtime,
            model_name="default",
            items=[(Message(text=spam_text(5)), "spam"), (Message(text=ham_text(5)), "eggs")],
        )
    with pytest.raises(InvalidMessage):
        train_batch(
            runtime,
            model_name="default",
            items=[(Message(text=spam_text(6)), "spam"), (Message(text="  ... "), "ham")],
        )

    assert stored_counts(runtime) == before


def test_a_batch_with_the_same_message_twice_counts_it_once_with_the_last_label(
    runtime: Runtime,
) -> None:
    message = Message(text=spam_text(3))
    results = train_batch(
        runtime, model_name="default", items=[(message, "spam"), (message, "ham"), (message, "ham")]
    )

    assert [(r.changed, r.previous_label) for r in results] == [
        (True, None),
        (True, "spam"),
        (False, "ham"),
    ]
    counts = stored_counts(runtime)
    assert counts.class_totals[HAM][0] == 1
    assert counts.class_totals[SPAM] == (0, 0)
    assert counts_from_ledger(runtime) == stored_cells(runtime)


def test_training_is_visible_to_the_same_process_at_once(runtime: Runtime) -> None:
    train_examples(runtime, 3, 3)

    live = runtime.models.get("default")

    assert live.table.class_docs.tolist() == [3, 3]
    with runtime.db.transaction(write=False) as conn:
        generation = conn.execute(
            text("SELECT generation FROM models WHERE name='default'")
        ).scalar()
    assert live.synced_generation == generation
