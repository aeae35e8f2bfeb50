"""Migrations of the API keys upgrade and downgrade on SQLite and PostgreSQL, keeping all else:
0002 (api_keys), and the one binding keys limited to models to the models' ids."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, inspect, select

from app.service.keys import create_key, list_keys
from app.store.engine import Database
from app.store.migrate import downgrade_schema, upgrade_schema
from app.store.models import insert_model
from app.store.schema_version import current_revision
from app.store.tables import api_keys, models


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    upgrade_schema(database)  # whatever happened, leave the schema as the next test expects it
    database.dispose()


def table_names(db: Database) -> set[str]:
    with db.engine.connect() as conn:
        return set(inspect(conn).get_table_names())


def model_names(db: Database) -> list[str]:
    return db.run(
        lambda conn: list(conn.execute(select(models.c.name).order_by(models.c.name)).scalars()),
        write=False,
    )


def test_0002_creates_api_keys_with_its_columns(db: Database) -> None:
    assert current_revision(db) is not None
    with db.engine.connect() as conn:
        columns = {column["name"] for column in inspect(conn).get_columns("api_keys")}
        unique = inspect(conn).get_unique_constraints("api_keys")

    assert columns == {column.name for column in api_keys.columns}
    assert [constraint["column_names"] for constraint in unique] == [["key_id"]]


def test_downgrading_0002_drops_only_the_keys_and_upgrading_again_restores_the_table(
    db: Database,
) -> None:
    db.run(lambda conn: insert_model(conn, name="example.org", classes=("ham", "spam"), config={}))
    create_key(db, scopes=["admin"])

    downgrade_schema(db, "0001")

    assert current_revision(db) == "0001"
    assert "api_keys" not in table_names(db)
    assert model_names(db) == ["default", "example.org"]

    upgrade_schema(db, "0002")

    assert current_revision(db) == "0002"
    assert "api_keys" in table_names(db)
    assert db.run(lambda conn: conn.execute(select(api_keys)).all(), write=False) == []
    assert model_names(db) == ["default", "example.org"]
    upgrade_schema(db)  # the later revisions the keys need
    assert list_keys(db) == []
    create_key(db, scopes=["classify"])
    assert len(list_keys(db)) == 1


def test_upgrading_binds_limited_keys_to_the_models_of_their_names_and_revokes_orphans(
    db: Database,
) -> None:
    db.run(lambda conn: insert_model(conn, name="alice", classes=("ham", "spam"), config={}))
    downgrade_schema(db, "0002")
    now = datetime.now(UTC)
    rows = [
        ("a00000000001", ["alice", "gone"], None),  # one model left: bound to it
        ("a00000000002", ["gone"], None),  # no model left: revoked
        ("a00000000003", None, None),  # every model
        ("a00000000004", ["alice"], now),  # revoked before: stays so
    ]
    db.run(
        lambda conn: conn.execute(
            insert(api_keys),
            [
                {
                    "key_id": key_id,
                    "key_hash": "0" * 64,
                    "name": "",
                    "scopes": ["train"],
                    "models": names,
                    "created_at": now,
                    "revoked_at": revoked_at,
                }
                for key_id, names, revoked_at in rows
            ],
        )
    )

    upgrade_schema(db)

    keys = {key.key_id: key for key in list_keys(db)}
    assert keys["a00000000001"].models == ("alice",)
    assert keys["a00000000001"].revoked_at is None
    assert keys["a00000000002"].models == ()
    assert keys["a00000000002"].revoked_at is not None
    assert keys["a00000000003"].models is None
    assert keys["a00000000003"].revoked_at is None
    assert keys["a00000000004"].revoked_at is not None
    downgrade_schema(db, "0002")  # and back down, keeping the keys
    assert db.run(lambda conn: len(conn.execute(select(api_keys)).all()), write=False) == 4
