"""The one place that knows SQLite and PostgreSQL spell upserts alike but import them apart."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite

_INSERTS = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}


def upsert(conn: Connection, table: Table) -> Any:
    """Return the dialect's `insert` with `on_conflict_do_*` for `table`."""
    return _INSERTS[_dialect(conn)](table)


def _dialect(conn: Connection) -> str:
    return "postgresql" if conn.dialect.name == "postgresql" else "sqlite"


class PrebuiltUpsert:
    """An upsert of `table` built once per dialect, for the statements every write runs:
    building a statement costs about ten times executing a small one (SQLAlchemy checks
    and keys it anew each time), and a "mark as spam" click runs a dozen.

    A row conflicting on `key` gets the values `updates(statement)` gives (the statement is
    the dialect's insert, whose `excluded` names the row that was to be inserted)."""

    def __init__(
        self, table: Table, key: Sequence[str], updates: Callable[[Any], dict[str, Any]]
    ) -> None:
        def build(insert: Any) -> Any:
            statement = insert(table)
            return statement.on_conflict_do_update(
                index_elements=list(key), set_=updates(statement)
            )

        self._statements = {name: build(insert) for name, insert in _INSERTS.items()}

    def __call__(self, conn: Connection) -> Any:
        """The statement for `conn`'s dialect."""
        return self._statements[_dialect(conn)]
