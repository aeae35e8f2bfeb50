"""Ledger retention: a model's ledger keeps its newest trained messages; older entries go in
chunks, counts untouched; a message whose entry went can no longer be forgotten (404)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update

from app.errors import MessageNotFound
from app.service.classification import classify
from app.service.expiry import prune_ledger, prune_ledgers
from app.service.messages import Message
from app.service.models import create_model
from app.service.runtime import Runtime
from app.service.scheduler import periodic_work
from app.service.training import forget
from app.store.engine import Database
from app.store.models import find_model
from app.store.tables import trained_messages
from tests.builders import train_examples
from tests.service.test_expiry import table_figures


def ledger(db: Database, model: str = "default") -> set[str]:
    with db.transaction(write=False) as conn:
        model_id = find_model(conn, model).id
        rows = conn.execute(
            select(trained_messages.c.message_id).where(trained_messages.c.model_id == model_id)
        )
        return {message_id for (message_id,) in rows}


def age_ledger(db: Database, message_ids: list[str], days: int) -> None:
    """Make these entries older (training in one test happens within the same second)."""
    with db.transaction() as conn:
        conn.execute(
            update(trained_messages)
            .where(trained_messages.c.message_id.in_(message_ids))
            .values(trained_at=datetime.now(UTC) - timedelta(days=days))
        )


@pytest.mark.parametrize("chunk_rows", [500, 3])
def test_pruning_keeps_the_newest_entries_of_each_model_and_every_count(
    runtime: Runtime, chunk_rows: int
) -> None:
    trained = train_examples(runtime, 6, 6)
    create_model(runtime, name="other", classes=None, config={})
    other = train_examples(runtime, 3, 3, model="other")
    oldest = [t.message_id for t in trained[:8]]
    age_ledger(runtime.db, oldest, days=30)
    before = table_figures(runtime.db)
    message = Message(text="offer ticket")
    scores = classify(runtime, model_name="default", message=message).probabilities

    result = prune_ledger(runtime, model_name="default", keep=4, chunk_rows=chunk_rows)

    assert result.removed == 8
    assert ledger(runtime.db) == {t.message_id for t in trained[8:]}
    assert ledger(runtime.db, "other") == {t.message_id for t in other}  # another model's stay
    assert table_figures(runtime.db) == before  # the messages stay trained
    fresh = Runtime(runtime.settings)
    try:
        again = classify(fresh, model_name="default", message=message)
    finally:
        fresh.close()
    assert again.probabilities == pytest.approx(scores)
    assert prune_ledger(runtime, model_name="default", keep=4).removed == 0  # nothing more


def test_a_message_whose_entry_went_cannot_be_forgotten_and_the_others_still_are_exactly(
    runtime: Runtime,
) -> None:
    trained = train_examples(runtime, 4, 4)
    age_ledger(runtime.db, [trained[0].message_id], days=30)
    empty = table_figures(runtime.db)

    prune_ledgers(runtime, keep=7)

    with pytest.raises(MessageNotFound):
        forget(runtime, model_name="default", message_id=trained[0].message_id)
    for message in trained[1:]:
        forget(runtime, model_name="default", message_id=message.message_id)
    left = table_figures(runtime.db)
    assert left["negative"] == 0
    assert left["class_docs"] == 1  # only the message that left the ledger stays counted
    assert empty["class_docs"] == 8


def test_the_server_prunes_ledgers_periodically_when_a_maximum_is_set(runtime: Runtime) -> None:
    keeping = Runtime(runtime.settings.model_copy(update={"max_ledger_messages_per_model": 3}))
    try:
        train_examples(keeping, 3, 3)
        for work in periodic_work(keeping):
            work()
        assert len(ledger(keeping.db)) == 3
    finally:
        keeping.close()
    # Without a maximum no pruning is scheduled.
    train_examples(runtime, 2, 2, model="default")
    before = len(ledger(runtime.db))
    for work in periodic_work(runtime):
        work()
    assert len(ledger(runtime.db)) == before
