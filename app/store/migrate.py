"""Bring the schema up to date with Alembic, under a database-wide lock.

Several processes may start at once (`spamsift serve --workers N`, several hosts): each takes
the lock (SQLite: the write lock of BEGIN IMMEDIATE; PostgreSQL: a transaction-scoped advisory
lock), and whoever comes second finds nothing left to do. DDL is transactional on both, so an
interrupted migration rolls back whole.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Literal

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from app.store.engine import Database

MIGRATION_LOCK_ID = 0x5A_5A_51F7  # arbitrary, fixed: the advisory lock all spamsift processes share


def alembic_config(conn: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("app.migrations")))
    config.set_main_option("file_template", "%%(year)d-%%(month).2d-%%(day).2d_%%(slug)s")
    config.attributes["connection"] = conn
    return config


def upgrade_schema(db: Database, revision: str = "head") -> None:
    """Upgrade the database to `revision` (default: the newest)."""
    with db.transaction(write=True) as conn:
        if not db.is_sqlite:
            conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": MIGRATION_LOCK_ID})
        command.upgrade(alembic_config(conn), revision)


def downgrade_schema(db: Database, revision: str) -> None:
    with db.transaction(write=True) as conn:
        if not db.is_sqlite:
            conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": MIGRATION_LOCK_ID})
        command.downgrade(alembic_config(conn), revision)


def current_revision(db: Database) -> str | None:
    with db.transaction(write=False) as conn:
        if not conn.dialect.has_table(conn, "alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def schema_state(db: Database) -> Literal["current", "behind", "ahead"]:
    """Whether `db` is at this version's newest migration, behind it (or empty), or at one
    this version does not know (a later spamsift upgraded it). Reads only."""
    revision = current_revision(db)
    scripts = ScriptDirectory.from_config(alembic_config())
    if revision == scripts.get_current_head():
        return "current"
    known = {script.revision for script in scripts.walk_revisions()}
    return "behind" if revision is None or revision in known else "ahead"
