"""Migration 0010 (`tokens` without its generation index; on SQLite, WITHOUT ROWID) keeps every
token of every model, its text unique per model, and goes back, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from app.store.engine import Database
from app.store.migrate import downgrade_schema, upgrade_schema
from app.store.schema_version import current_revision

REVISION = "0010"
BEFORE = "0009"
INDEX = "ix_tokens_model_id_generation"

# (model, token id, text, generation): two models with the same ids and texts stay apart;
# texts the SQL must carry as they are; ids past 2**32.
TOKENS = [
    (1, 0, "plain", 1),
    (1, 1, "größe", 1),
    (1, 2, "日本語 ", 2),
    (1, 3, "x" * 200, 3),
    (1, 2**33, "far", 4),
    (2, 0, "plain", 1),
    (2, 1, "other", 2),
]


@pytest.fixture
def db(empty_database: Database) -> Database:
    """A database at 0009 holding TOKENS (inserted in no particular order)."""
    upgrade_schema(empty_database, BEFORE)
    with empty_database.transaction() as conn:
        conn.execute(
            text(
                "INSERT INTO tokens (model_id, token_id, text, generation) "
                "VALUES (:model_id, :token_id, :text, :generation)"
            ),
            [
                dict(zip(("model_id", "token_id", "text", "generation"), row, strict=True))
                for row in reversed(TOKENS)
            ],
        )
    return empty_database


def stored(db: Database) -> list[tuple[int, int, str, int]]:
    with db.transaction(write=False) as conn:
        rows = conn.execute(text("SELECT model_id, token_id, text, generation FROM tokens"))
        return sorted((int(m), int(t), str(x), int(g)) for m, t, x, g in rows)


def index_names(db: Database) -> set[str]:
    with db.engine.connect() as conn:
        return {index["name"] or "" for index in inspect(conn).get_indexes("tokens")}


def sqlite_definition(db: Database) -> str:
    with db.transaction(write=False) as conn:
        return str(
            conn.execute(text("SELECT sql FROM sqlite_master WHERE name = 'tokens'")).scalar_one()
        )


def test_upgrading_keeps_every_token_and_drops_the_generation_index(db: Database) -> None:
    assert INDEX in index_names(db)

    upgrade_schema(db, REVISION)

    assert current_revision(db) == REVISION
    assert stored(db) == sorted(TOKENS)
    assert INDEX not in index_names(db)
    if db.engine.dialect.name == "sqlite":
        assert "WITHOUT ROWID" in sqlite_definition(db)


def test_after_the_upgrade_a_text_is_still_unique_within_its_model(db: Database) -> None:
    upgrade_schema(db, REVISION)
    insert = text(
        "INSERT INTO tokens (model_id, token_id, text, generation) VALUES (1, 9, :text, 5)"
    )

    with pytest.raises(IntegrityError), db.transaction() as conn:
        conn.execute(insert, {"text": "plain"})
    with db.transaction() as conn:
        conn.execute(insert, {"text": "new"})
    assert (1, 9, "new", 5) in stored(db)


def test_downgrading_brings_the_index_back_with_every_token(db: Database) -> None:
    upgrade_schema(db, REVISION)

    downgrade_schema(db, BEFORE)

    assert current_revision(db) == BEFORE
    assert stored(db) == sorted(TOKENS)
    assert INDEX in index_names(db)
    if db.engine.dialect.name == "sqlite":
        assert "WITHOUT ROWID" not in sqlite_definition(db)
