"""Store level: classification records written through the driver are the rows SQLAlchemy's own
insert writes, are found by time as before, and a repeat replaces the older record."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import insert, select

from app.store.engine import Database
from app.store.ledger import (
    ClassificationRecord,
    find_classification,
    insert_classifications,
    pack,
)
from app.store.models import insert_model
from app.store.tables import classifications


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.dispose()


def record(
    key: str, at: datetime, *, verdict: str = "spam", digest: str | None = "d"
) -> ClassificationRecord:
    return ClassificationRecord(
        message_key=key,
        message_id=f"<{key}@example.org>",
        token_ids=np.array([3, 7, 4_000_000_000], dtype=np.int64),
        token_terms=np.array([1, 2, 5], dtype=np.int64),
        verdict=verdict,
        classified_at=at,
        body_digest=digest,
    )


def stored_rows(db: Database, model_id: int) -> list[tuple[object, ...]]:
    """The model's rows as the driver gives them back (the time in its stored form)."""
    columns = [c for c in classifications.c if c.name != "model_id"]
    names = ", ".join(c.name for c in columns)
    with db.transaction(write=False) as conn:
        rows = conn.exec_driver_sql(
            f"SELECT {names} FROM classifications WHERE model_id = {int(model_id)}"
            " ORDER BY message_key"
        ).all()
    return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows]


def test_records_are_stored_as_sqlalchemys_insert_stores_them(db: Database) -> None:
    at = datetime(2026, 11, 30, 16, 51, 2, 123456, tzinfo=UTC)
    records = [
        record("a", at),
        record("b", at + timedelta(microseconds=1), digest=None),
        record("c", at - timedelta(days=3), verdict="unsure"),
    ]
    with db.transaction() as conn:
        ours = insert_model(conn, name="ours", classes=("ham", "spam"), config={}).id
        theirs = insert_model(conn, name="theirs", classes=("ham", "spam"), config={}).id
        insert_classifications(conn, ours, records)
        conn.execute(
            insert(classifications),
            [
                {
                    "model_id": theirs,
                    "message_key": r.message_key,
                    "message_id": r.message_id,
                    "token_ids": pack(r.token_ids),
                    "token_terms": pack(r.token_terms),
                    "verdict": r.verdict,
                    "classified_at": r.classified_at,
                    "body_digest": r.body_digest,
                }
                for r in records
            ],
        )

    assert stored_rows(db, ours) == stored_rows(db, theirs)
    assert len(stored_rows(db, ours)) == 3


def test_a_record_is_found_from_its_own_time_and_a_repeat_replaces_it(db: Database) -> None:
    at = datetime(2026, 11, 30, 16, 51, 2, 123456, tzinfo=UTC)
    with db.transaction() as conn:
        model_id = insert_model(conn, name="m", classes=("ham", "spam"), config={}).id
        insert_classifications(conn, model_id, [record("a", at)])
    with db.transaction(write=False) as conn:
        found = find_classification(conn, model_id, "<a@example.org>", since=at)
        late = find_classification(
            conn, model_id, "<a@example.org>", since=at + timedelta(microseconds=1)
        )
    assert found is not None
    assert late is None
    assert (found.classified_at, found.verdict, found.body_digest) == (at, "spam", "d")
    assert found.token_ids.tolist() == [3, 7, 4_000_000_000]
    assert found.token_terms.tolist() == [1, 2, 5]

    later = at + timedelta(hours=1)
    with db.transaction() as conn:
        insert_classifications(conn, model_id, [record("a", later, verdict="ham")])
    with db.transaction(write=False) as conn:
        found = find_classification(conn, model_id, "<a@example.org>", since=at)
        rows = conn.execute(select(classifications.c.message_key)).all()
    assert found is not None
    assert (found.classified_at, found.verdict) == (later, "ham")
    assert len(rows) == 1
