"""The one place that knows SQLite and PostgreSQL spell upserts alike but import them apart."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from sqlalchemy import Connection, Table


@cache
def _insert(dialect: str) -> Callable[[Table], Any]:
    """The dialect's `insert`, its module imported on first use: a process on SQLite never
    loads SQLAlchemy's PostgreSQL dialect (a tenth of a command's start), nor the reverse."""
    insert: Callable[[Table], Any] = importlib.import_module(
        f"sqlalchemy.dialects.{dialect}"
    ).insert
    return insert


def upsert(conn: Connection, table: Table) -> Any:
    """Return the dialect's `insert` with `on_conflict_do_*` for `table`."""
    return _insert(_dialect(conn))(table)


def driver_sql(conn: Connection, statement: str) -> str:
    """`statement`, written with `?` placeholders, in the paramstyle of `conn`'s driver
    (psycopg's `%s` on PostgreSQL), for `exec_driver_sql`."""
    return statement.replace("?", "%s") if conn.dialect.name == "postgresql" else statement


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
        self._table, self._key, self._updates = table, list(key), updates
        self._statements: dict[str, Any] = {}

    def __call__(self, conn: Connection) -> Any:
        """The statement for `conn`'s dialect (built on its first use; building it twice in
        two threads at once gives the same statement)."""
        dialect = _dialect(conn)
        statement = self._statements.get(dialect)
        if statement is None:
            insert = _insert(dialect)(self._table)
            statement = insert.on_conflict_do_update(
                index_elements=self._key, set_=self._updates(insert)
            )
            self._statements[dialect] = statement
        return statement
