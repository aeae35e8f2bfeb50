"""Bring the schema up to date with Alembic, under a database-wide lock.

Several processes may start at once (`spamsift serve --workers N`, several hosts): each takes
the lock (SQLite: the write lock of BEGIN IMMEDIATE; PostgreSQL: a transaction-scoped advisory
lock), and whoever comes second finds nothing left to do. DDL is transactional on both, so an
interrupted migration rolls back whole.
"""

from __future__ import annotations

from importlib.resources import files

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


def known_revisions() -> set[str]:
    """Every revision of this version's migration scripts."""
    scripts = ScriptDirectory.from_config(alembic_config())
    return {script.revision for script in scripts.walk_revisions()}
