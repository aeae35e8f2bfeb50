"""The one place that knows SQLite and PostgreSQL spell upserts alike but import them apart."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite


def upsert(conn: Connection, table: Table) -> Any:
    """Return the dialect's `insert` with `on_conflict_do_*` for `table`."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)
