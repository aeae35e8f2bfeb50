"""Migration 0006 (the token tables without a foreign key) upgrades a database with trained
models and downgrades again, keeping every row as it was, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from app.service.runtime import Runtime
from app.store.migrate import downgrade_schema, upgrade_schema
from app.store.schema_version import current_revision
from tests.builders import train_examples

REVISION = "0006"
BEFORE = "0005"
# The newest revision with `token_counts` (0009 packs the counts into chunks): the rows are
# compared there.
COUNT_ROWS = "0008"
TOKEN_TABLES = ("tokens", "token_counts")


@pytest.fixture
def rt(runtime: Runtime) -> Iterator[Runtime]:
    yield runtime
    upgrade_schema(runtime.db)  # whatever happened, leave the schema as the next test expects


def foreign_keys(rt: Runtime) -> dict[str, list[str]]:
    with rt.db.engine.connect() as conn:
        inspector = inspect(conn)
        return {
            table: [key["referred_table"] for key in inspector.get_foreign_keys(table)]
            for table in TOKEN_TABLES
        }


def token_rows(rt: Runtime) -> dict[str, list[tuple[Any, ...]]]:
    with rt.db.transaction(write=False) as conn:
        return {
            "tokens": [
                tuple(row)
                for row in conn.execute(
                    text("SELECT model_id, token_id, text, generation FROM tokens ORDER BY 1, 2")
                )
            ],
            "token_counts": [
                tuple(row)
                for row in conn.execute(
                    text(
                        "SELECT model_id, token_id, class_index, docs, terms, generation "
                        "FROM token_counts ORDER BY 1, 2, 3"
                    )
                )
            ],
        }


def test_upgrading_to_0006_drops_the_token_tables_keys_and_downgrading_restores_them(
    rt: Runtime,
) -> None:
    train_examples(rt, 5, 5)  # at the newest revision; the downgrade writes the count rows
    downgrade_schema(rt.db, BEFORE)
    assert foreign_keys(rt) == {"tokens": ["models"], "token_counts": ["models"]}
    before = token_rows(rt)
    assert before["tokens"]
    assert before["token_counts"]

    upgrade_schema(rt.db, REVISION)

    assert current_revision(rt.db) == REVISION
    assert foreign_keys(rt) == {"tokens": [], "token_counts": []}
    assert token_rows(rt) == before
    with pytest.raises(IntegrityError), rt.db.transaction() as conn:  # the check stays
        conn.execute(text("UPDATE token_counts SET docs = -1"))
    with pytest.raises(IntegrityError), rt.db.transaction() as conn:  # so do the keys
        conn.execute(
            text("INSERT INTO tokens SELECT model_id, token_id + 1000, text, 0 FROM tokens")
        )
    # Training works on the new tables (at the newest revision: today's code writes the
    # columns later revisions added to other tables, and the counts' chunks).
    upgrade_schema(rt.db)
    train_examples(rt, 2, 2)
    downgrade_schema(rt.db, COUNT_ROWS)
    after_training = token_rows(rt)

    downgrade_schema(rt.db, BEFORE)

    assert foreign_keys(rt) == {"tokens": ["models"], "token_counts": ["models"]}
    assert token_rows(rt) == after_training
    upgrade_schema(rt.db, COUNT_ROWS)
    assert token_rows(rt) == after_training
