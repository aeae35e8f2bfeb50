"""Alembic migrations: up to head, down to base and back on both databases; data survives;
the tables of app.store.tables are exactly what the migrations build."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text

from app.service.runtime import Runtime
from app.store.engine import Database
from app.store.migrate import alembic_config, downgrade_schema, upgrade_schema
from app.store.schema_version import SCHEMA_REVISION, current_revision, schema_state
from app.store.tables import metadata
from tests.builders import stored_counts, train_examples

HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


def table_names(db: Database) -> set[str]:
    with db.transaction(write=False) as conn:
        return set(inspect(conn).get_table_names())


def schema_differences(db: Database) -> list[object]:
    with db.transaction(write=False) as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return list(compare_metadata(context, metadata))


def test_an_empty_database_upgrades_to_head_downgrades_to_base_and_upgrades_again(
    empty_database: Database,
) -> None:
    db = empty_database
    assert current_revision(db) is None

    upgrade_schema(db)
    assert current_revision(db) == HEAD
    assert table_names(db) >= set(metadata.tables)

    downgrade_schema(db, "base")
    assert current_revision(db) is None
    assert table_names(db) <= {"alembic_version"}

    upgrade_schema(db)
    assert current_revision(db) == HEAD
    assert schema_differences(db) == []


def test_the_schema_this_version_checks_for_is_the_newest_migration() -> None:
    # Commands compare the database's revision with SCHEMA_REVISION, without reading the
    # scripts: a new migration must move it.
    assert SCHEMA_REVISION == HEAD


def test_a_database_is_current_behind_or_ahead_of_this_version(empty_database: Database) -> None:
    db = empty_database
    assert schema_state(db) == "behind"
    upgrade_schema(db, "0001")
    assert schema_state(db) == "behind"
    upgrade_schema(db)
    assert schema_state(db) == "current"
    with db.transaction(write=True) as conn:  # as a later spamsift's migration leaves it
        conn.execute(text("UPDATE alembic_version SET version_num = 'a-later-one'"))
    assert schema_state(db) == "ahead"


def test_upgrading_twice_is_harmless(empty_database: Database) -> None:
    upgrade_schema(empty_database)
    upgrade_schema(empty_database)

    assert current_revision(empty_database) == HEAD
    with empty_database.transaction(write=False) as conn:
        assert conn.execute(text("SELECT name FROM models")).scalars().all() == ["default"]


def test_the_tables_match_the_migrations(empty_database: Database) -> None:
    upgrade_schema(empty_database)

    assert schema_differences(empty_database) == []


def test_trained_data_survives_upgrade_schema_with_every_count_equal(runtime: Runtime) -> None:
    train_examples(runtime, 5, 5)
    runtime.flush_classifications()
    before = stored_counts(runtime)

    upgrade_schema(runtime.db)

    assert current_revision(runtime.db) == HEAD
    assert stored_counts(runtime) == before
