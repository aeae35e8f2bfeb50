"""Which schema a database is at, read without Alembic: every local command checks it before
it starts (a command never migrates), and importing Alembic and reading every migration script
cost such a command about a fifth of its CPU. The migration scripts are read only for a
database that is not at this version's schema, to tell behind from ahead.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import text

from app.store.engine import Database

# The newest migration (migrations/versions): the schema app/store/tables.py describes. A new
# migration changes it; tests/test_migrations.py checks that it is the scripts' head.
SCHEMA_REVISION = "0010"


def current_revision(db: Database) -> str | None:
    with db.transaction(write=False) as conn:
        if not conn.dialect.has_table(conn, "alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def schema_state(db: Database) -> Literal["current", "behind", "ahead"]:
    """Whether `db` is at this version's newest migration, behind it (or empty), or at one
    this version does not know (a later spamsift upgraded it). Reads only."""
    revision = current_revision(db)
    if revision == SCHEMA_REVISION:
        return "current"
    if revision is None:
        return "behind"
    from app.store.migrate import known_revisions  # Alembic: only off the common path

    return "behind" if revision in known_revisions() else "ahead"
