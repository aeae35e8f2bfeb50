"""The database handle: one engine per process, one transaction per use case.

SQLite: WAL, a busy timeout, and `BEGIN IMMEDIATE` for every write transaction, so two writers
queue on the database lock instead of failing half-way (pysqlite's own implicit BEGIN is turned
off; SQLAlchemy's documented recipe). PostgreSQL: connections are checked on checkout
(`pool_pre_ping`) and rebuilt after a fork; deadlocks and serialization failures are retried a
bounded number of times with jitter. Anything that means "the database is not there" becomes
`DatabaseUnavailable` here and nowhere else.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import ConnectionPoolEntry

from app.errors import DatabaseUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRYABLE_PG_CODES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure
MAX_ATTEMPTS = 5


class Database:
    """A SQLAlchemy engine plus the transaction rules of spamsift."""

    def __init__(self, url: str, *, lock_timeout_seconds: float = 5.0) -> None:
        self.url = url
        self.lock_timeout_seconds = lock_timeout_seconds
        self.is_sqlite = url.startswith("sqlite")
        self.engine = self._create_engine()
        self._pid = os.getpid()

    def _create_engine(self) -> Engine:
        if self.is_sqlite:
            engine = create_engine(
                self.url,
                connect_args={"timeout": self.lock_timeout_seconds, "check_same_thread": False},
            )
            event.listen(engine, "connect", _configure_sqlite_connection)
            event.listen(engine, "begin", _begin_sqlite_transaction)
            return engine
        timeout_ms = int(self.lock_timeout_seconds * 1000)
        return create_engine(
            self.url,
            pool_pre_ping=True,
            pool_size=10,
            max_overflow=20,
            pool_timeout=self.lock_timeout_seconds,
            connect_args={
                "connect_timeout": max(1, int(self.lock_timeout_seconds)),
                "options": f"-c lock_timeout={timeout_ms}",
            },
        )

    def _after_fork(self) -> None:
        # A pool inherited across fork() shares sockets with the parent: drop it, never close it.
        if os.getpid() != self._pid:
            self.engine.dispose(close=False)
            self._pid = os.getpid()

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[Connection]:
        """Yield a connection inside one transaction, committed when the block ends cleanly.

        A write transaction takes SQLite's write lock up front (BEGIN IMMEDIATE); a read one
        sees one consistent snapshot on both databases.
        """
        self._after_fork()
        try:
            with self.engine.connect() as conn:
                if self.is_sqlite:
                    conn = conn.execution_options(sqlite_begin="IMMEDIATE" if write else "")
                else:
                    conn = conn.execution_options(
                        isolation_level="READ COMMITTED" if write else "REPEATABLE READ"
                    )
                with conn.begin():
                    yield conn
        except (OperationalError, PoolTimeout) as error:
            if is_retryable(error):
                raise
            raise DatabaseUnavailable(describe_unavailable(error)) from error
        except DBAPIError as error:
            if error.connection_invalidated:
                raise DatabaseUnavailable(describe_unavailable(error)) from error
            raise

    def run(self, work: Callable[[Connection], T], *, write: bool = True) -> T:
        """Run `work` in one transaction, retrying deadlocks and serialization failures."""
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                with self.transaction(write=write) as conn:
                    return work(conn)
            except OperationalError as error:
                if not is_retryable(error) or attempt == MAX_ATTEMPTS:
                    raise DatabaseUnavailable(describe_unavailable(error)) from error
                time.sleep(random.uniform(0, 0.01 * 2**attempt))
        raise AssertionError("unreachable")

    def ping(self) -> bool:
        """Tell whether the database answers a trivial query."""
        try:
            with self.transaction(write=False) as conn:
                conn.exec_driver_sql("SELECT 1")
        except DatabaseUnavailable:
            return False
        return True

    def size_bytes(self) -> int | None:
        """Return the database's size on disk, where the database can tell."""
        with self.transaction(write=False) as conn:
            if self.is_sqlite:
                page_count = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
                page_size = conn.exec_driver_sql("PRAGMA page_size").scalar_one()
                return int(page_count) * int(page_size)
            return int(
                conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar_one()
            )

    def dispose(self) -> None:
        self.engine.dispose()


def is_retryable(error: BaseException) -> bool:
    """Tell whether the whole transaction may simply be run again."""
    orig = getattr(error, "orig", None)
    return getattr(orig, "sqlstate", None) in RETRYABLE_PG_CODES


def describe_unavailable(error: BaseException) -> str:
    orig = getattr(error, "orig", None)
    if isinstance(orig, sqlite3.OperationalError) and "locked" in str(orig):
        return "the database stayed locked by other writers beyond the lock timeout; retry"
    return "the database is unreachable or refused the operation; retry later"


def _configure_sqlite_connection(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself, see below
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    # FULL: an acknowledged training survives power loss too, not only a crash (NORMAL would not).
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _begin_sqlite_transaction(conn: Connection) -> None:
    options = conn.get_execution_options()
    if options.get("isolation_level") == "AUTOCOMMIT":  # VACUUM, checkpoints: no transaction
        return
    conn.exec_driver_sql(f"BEGIN {options.get('sqlite_begin', '')}".strip())
