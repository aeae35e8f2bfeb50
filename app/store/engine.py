"""The database handle: one engine per process, one transaction per use case.

SQLite: WAL, a busy timeout, and `BEGIN IMMEDIATE` for every write transaction, so two writers
queue on the database lock instead of failing half-way (pysqlite's own implicit BEGIN is turned
off; SQLAlchemy's documented recipe). The writers of one process first queue on a lock of the
process, so that SQLite's lock, which its busy handler polls unfairly, is contended by one writer
per process only (with 16 threads polling it, one waited past the 5 s budget in a 60 s F01 run);
the process queue and the busy wait share one budget, `lock_timeout_seconds`.

PostgreSQL: connections are checked on checkout (`pool_pre_ping`) and rebuilt after a fork;
deadlocks and serialization failures are retried a bounded number of times with jitter.

Anything that means "the database is not there" becomes `DatabaseUnavailable` here and nowhere
else; a full disk (SQLITE_FULL, PostgreSQL 53100) becomes `StorageFull`.

SQLite versions 3.7.0-3.51.2 (but for the 3.44.6 and 3.50.7 backports) carry the WAL-reset
bug: two connections writing or checkpointing the same WAL file at the same moment can corrupt
it. Within one process spamsift's SQLite writers take turns (and only writers checkpoint), so
the race needs several processes on the file: `spamsift serve --workers N` names such a
library in one warning at start (app/serving.py).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Literal, TypeVar

from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import ConnectionPoolEntry

from app.errors import DatabaseUnavailable, StorageFull

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRYABLE_PG_CODES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure
MAX_ATTEMPTS = 5
SQLITE_READONLY, SQLITE_FULL = 8, 13  # result codes (sqlite3.Error.sqlite_errorcode & 0xFF)
PG_DISK_FULL = "53100"

# The WAL-reset bug (sqlite.org/wal.html#walresetbug): introduced in 3.7.0, fixed in 3.51.3,
# backported to 3.44.6 and 3.50.7.
WAL_RESET_BUG_VERSIONS = ((3, 7, 0), (3, 51, 2))
WAL_RESET_BUG_BACKPORTS = (((3, 44, 6), (3, 45, 0)), ((3, 50, 7), (3, 51, 0)))
_warned_sqlite_versions: set[str] = set()
SQLITE_INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL
# Pages (4 KiB each by default) one step of `reclaim_space` frees: a few ms of write lock.
RECLAIM_PAGES_PER_STEP = 512
# PostgreSQL tables whose indexes `vacuum` rebuilds (keyed by ever-growing token ids).
REINDEXED_TABLES = ("tokens", "count_chunks")
# SQLite's page cache during a write transaction, in KiB (its default is 2 MiB). A training
# batch of 500 SpamAssassin messages adds ~150,000 tokens at random places of the
# (model_id, text) index; with 2 MiB, dirty pages spilled to the WAL mid-transaction and were
# read and written again: 15-25 % of the write path's CPU (docs/performance.md, "Training's
# SQL"). 16 MiB did as well as 64. Set back when the connection returns to the pool, which
# frees the pages, so a held model's server does not keep them.
SQLITE_WRITE_CACHE_KIB = 16_384


# "unavailable": unreachable, or its lock not had within the budget; "storage_full": a write
# refused for want of space (reads go on).
DatabaseCondition = Literal["ok", "unavailable", "storage_full"]


class Database:
    """A SQLAlchemy engine plus the transaction rules of spamsift."""

    def __init__(self, url: str, *, lock_timeout_seconds: float = 5.0) -> None:
        self.url = url
        self.lock_timeout_seconds = lock_timeout_seconds
        self.is_sqlite = url.startswith("sqlite")
        self.engine = self._create_engine()
        self._pid = os.getpid()
        self._sqlite_writers = threading.Lock()  # this process's SQLite writers queue here
        # What this process's last transaction met, and since when (epoch seconds): what
        # health answers say without querying a database that may not answer.
        self.condition: DatabaseCondition = "ok"

    def _create_engine(self) -> Engine:
        if self.is_sqlite:
            engine = create_engine(
                self.url,
                connect_args={"timeout": self.lock_timeout_seconds, "check_same_thread": False},
            )
            event.listen(engine, "connect", _configure_sqlite_connection)
            event.listen(engine, "begin", _begin_sqlite_transaction)
            event.listen(engine, "checkin", _restore_sqlite_cache)
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
                # synchronous_commit=on whatever the server's default: with off, a crash of
                # PostgreSQL loses trainings that were already acknowledged (ROBUSTNESS F07).
                # jit=off: every statement here is short, and where the planner's estimates
                # run high (no statistics yet) it compiled them first: a message's read of a
                # model not held took 60-220 ms, 40-240 ms of it compiling (EXPLAIN ANALYZE).
                "options": f"-c lock_timeout={timeout_ms} -c synchronous_commit=on -c jit=off",
            },
        )

    def _after_fork(self) -> None:
        # A pool inherited across fork() shares sockets with the parent: drop it, never close it.
        if os.getpid() != self._pid:
            self.engine.dispose(close=False)
            self._sqlite_writers = threading.Lock()  # maybe held by a parent thread at the fork
            self._pid = os.getpid()

    @contextmanager
    def _sqlite_write_turn(self) -> Iterator[float]:
        """Wait for this process's turn to write; yield the seconds of lock budget left."""
        started = time.monotonic()
        if not self._sqlite_writers.acquire(timeout=self.lock_timeout_seconds):
            raise DatabaseUnavailable(LOCKED)
        try:
            yield max(0.0, self.lock_timeout_seconds - (time.monotonic() - started))
        finally:
            self._sqlite_writers.release()

    @contextmanager
    def transaction(self, *, write: bool = True) -> Iterator[Connection]:
        """Yield a connection inside one transaction, committed when the block ends cleanly.

        A write transaction takes SQLite's write lock up front (BEGIN IMMEDIATE); a read one
        sees one consistent snapshot on both databases.
        """
        self._after_fork()
        with ExitStack() as turn:
            budget = self.lock_timeout_seconds
            if self.is_sqlite and write:
                budget = turn.enter_context(self._sqlite_write_turn())
            with self._transaction(write=write, budget_seconds=budget) as conn:
                yield conn

    @contextmanager
    def _transaction(self, *, write: bool, budget_seconds: float) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                if self.is_sqlite:
                    conn = conn.execution_options(
                        sqlite_begin="IMMEDIATE" if write else "",
                        sqlite_busy_ms=max(1, int(budget_seconds * 1000)),
                    )
                else:
                    conn = conn.execution_options(
                        isolation_level="READ COMMITTED" if write else "REPEATABLE READ"
                    )
                with conn.begin():
                    yield conn
        except (OperationalError, PoolTimeout) as error:
            if is_retryable(error):
                raise
            if is_storage_full(error):
                self._saw("storage_full")
                raise StorageFull(
                    "the database's storage is full; nothing of this request was written"
                ) from error
            self._saw("unavailable")
            raise DatabaseUnavailable(describe_unavailable(error)) from error
        except DBAPIError as error:
            if error.connection_invalidated:
                self._saw("unavailable")
                raise DatabaseUnavailable(describe_unavailable(error)) from error
            raise
        # A read says nothing of free space: only a commit clears "storage_full".
        if write or self.condition == "unavailable":
            self._saw("ok")

    def _saw(self, condition: DatabaseCondition) -> None:
        if condition != self.condition:
            self.condition = condition

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

    def data_bytes(self) -> int:
        """Return the bytes spamsift's own data takes: SQLite, the file's pages (as
        `size_bytes`); PostgreSQL, spamsift's tables with their indexes and TOAST, without the
        catalog, which is most of a small database's size and would hide its growth."""
        if self.is_sqlite:
            return int(self.size_bytes() or 0)
        with self.transaction(write=False) as conn:
            return int(
                conn.exec_driver_sql(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE c.relkind = 'r' AND n.nspname = current_schema()"
                ).scalar_one()
            )

    def reclaim_space(self, *, pages_per_step: int = RECLAIM_PAGES_PER_STEP) -> int:
        """SQLite: hand the pages that deletions freed back to the file system, at most
        `pages_per_step` per step, each step a short write of its own (a writer waits for one
        step at most); return the pages freed. Needs auto_vacuum=INCREMENTAL, which new files
        get and `vacuum` gives old ones. PostgreSQL: nothing (its autovacuum makes deleted
        rows' space reusable), 0."""
        if not self.is_sqlite:
            return 0
        self._after_fork()
        freed = 0
        while True:
            with self._sqlite_write_turn() as budget, self.engine.connect() as conn:
                raw = conn.connection.driver_connection
                assert raw is not None
                if raw.execute("PRAGMA auto_vacuum").fetchone()[0] != SQLITE_INCREMENTAL:
                    return freed
                before = int(raw.execute("PRAGMA freelist_count").fetchone()[0])
                if before == 0:
                    return freed
                raw.execute(f"PRAGMA busy_timeout = {max(1, int(budget * 1000))}")
                try:
                    # executescript steps the pragma to its end (execute frees one page).
                    raw.executescript(f"PRAGMA incremental_vacuum({int(pages_per_step)});")
                except sqlite3.OperationalError:  # locked past the budget: the next round
                    return freed
                after = int(raw.execute("PRAGMA freelist_count").fetchone()[0])
            freed += before - after
            if after == 0 or after >= before:
                return freed

    def vacuum(self) -> None:
        """Rebuild the database to its live rows.

        SQLite: VACUUM, switching the file to incremental auto-vacuum; it writes a copy of
        the whole file and holds the write lock meanwhile. PostgreSQL: VACUUM (ANALYZE), then
        the token tables' indexes rebuilt without blocking writers (REINDEX CONCURRENTLY):
        token ids only grow and expiry leaves a few survivors on most index pages, which
        PostgreSQL never merges, so those indexes grow with every token ever made.
        """
        self._after_fork()
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            if self.is_sqlite:
                conn.exec_driver_sql("PRAGMA auto_vacuum = INCREMENTAL")
                conn.exec_driver_sql("VACUUM")
                return
            conn.exec_driver_sql("VACUUM (ANALYZE)")
            for table in REINDEXED_TABLES:
                conn.exec_driver_sql(f"REINDEX TABLE CONCURRENTLY {table}")

    def dispose(self) -> None:
        self.engine.dispose()


def is_retryable(error: BaseException) -> bool:
    """Tell whether the whole transaction may simply be run again."""
    orig = getattr(error, "orig", None)
    return getattr(orig, "sqlstate", None) in RETRYABLE_PG_CODES


def is_storage_full(error: BaseException) -> bool:
    """Tell whether the database refused to grow: disk, file system or quota full."""
    orig = getattr(error, "orig", None)
    if isinstance(orig, sqlite3.Error):
        return (getattr(orig, "sqlite_errorcode", 0) & 0xFF) == SQLITE_FULL
    return getattr(orig, "sqlstate", None) == PG_DISK_FULL


LOCKED = "the database stayed locked by other writers beyond the lock timeout; retry"


def describe_unavailable(error: BaseException) -> str:
    orig = getattr(error, "orig", None)
    if isinstance(orig, sqlite3.OperationalError) and "locked" in str(orig):
        return LOCKED
    if isinstance(orig, sqlite3.Error) and (
        getattr(orig, "sqlite_errorcode", 0) & 0xFF == SQLITE_READONLY
    ):
        return "the database file is read-only for this process; nothing was written"
    return "the database is unreachable or refused the operation; retry later"


def has_wal_reset_bug(version: str) -> bool:
    """Tell whether SQLite `version` ("3.40.1") has the WAL-reset corruption bug."""
    parts = tuple(int(part) for part in version.split(".")[:3])
    number = parts + (0,) * (3 - len(parts))
    first, last = WAL_RESET_BUG_VERSIONS
    if not first <= number <= last:
        return False
    return not any(low <= number < high for low, high in WAL_RESET_BUG_BACKPORTS)


def warn_if_wal_reset_bug(version: str) -> bool:
    """Log, once per process and version, that the SQLite library has the WAL-reset bug."""
    if not has_wal_reset_bug(version):
        return False
    if version not in _warned_sqlite_versions:
        _warned_sqlite_versions.add(version)
        log.warning(
            "SQLite %s has the WAL-reset bug (3.7.0-3.51.2; fixed in 3.51.3, 3.50.7, 3.44.6): "
            "with several processes writing one SQLite file (--workers, other servers) a rare "
            "race can corrupt it. Run several processes on PostgreSQL, or serve this file "
            "with --workers 1.",
            version,
        )
    return True


def _configure_sqlite_connection(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN itself, see below
    cursor = dbapi_connection.cursor()
    record.info[_CACHE_SIZE] = cursor.execute("PRAGMA cache_size").fetchone()[0]
    # A new file (no page yet) is made incremental auto-vacuum, so that deleted rows' pages
    # can go back to the file system (`Database.reclaim_space`); an existing file is left as
    # it is (setting it writes, and fails on a full disk) until `spamsift db vacuum`.
    if cursor.execute("PRAGMA page_count").fetchone()[0] == 0:
        cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
    cursor.execute("PRAGMA journal_mode=WAL")
    # FULL: an acknowledged training survives power loss too, not only a crash (NORMAL would not).
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _begin_sqlite_transaction(conn: Connection) -> None:
    options = conn.get_execution_options()
    if options.get("isolation_level") == "AUTOCOMMIT":  # VACUUM, checkpoints: no transaction
        return
    busy_ms = options.get("sqlite_busy_ms")  # the lock budget left after the process queue
    if busy_ms is not None and conn.connection.info.get(_BUSY_MS) != busy_ms:
        # A statement of its own: set only when it changes (a read's budget never does).
        conn.exec_driver_sql(f"PRAGMA busy_timeout = {int(busy_ms)}")
        conn.connection.info[_BUSY_MS] = busy_ms
    if options.get("sqlite_begin") == "IMMEDIATE":
        conn.exec_driver_sql(f"PRAGMA cache_size = -{SQLITE_WRITE_CACHE_KIB}")
        conn.connection.info[_WRITE_CACHE] = True
    conn.exec_driver_sql(f"BEGIN {options.get('sqlite_begin', '')}".strip())


_BUSY_MS = "spamsift_sqlite_busy_ms"  # the busy timeout the connection has now
_CACHE_SIZE = "spamsift_sqlite_cache_size"  # the connection's own, read when it was made
_WRITE_CACHE = "spamsift_sqlite_write_cache"  # set while it has the write transaction's


def _restore_sqlite_cache(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    """Give a connection back its own page cache size (freeing the write transaction's pages)
    as it returns to the pool."""
    if record.info.pop(_WRITE_CACHE, False) and dbapi_connection is not None:
        dbapi_connection.execute(f"PRAGMA cache_size = {int(record.info[_CACHE_SIZE])}")
        # The pages freed stay resident in the allocator's free lists otherwise: ~5 MB after
        # one message trained into a million-token model.
        trim_heap_now_and_then()


# A trim walks the whole heap: 0.6-4 ms of CPU in a process holding a 600,000-token model, as
# much as the rest of a small write. So at most ten times a second: what a write frees
# meanwhile is handed back by the next write after that (the classification records' writer
# writes about once a second while a server classifies). Once a second left a million-token
# model's server 5 bytes a token bigger (`python -m bench.memory`: 61.3 against 55.3).
TRIM_INTERVAL_SECONDS = 0.1
_trimmed_at = -float("inf")


def trim_heap_now_and_then() -> bool:
    """Hand the allocator's free pages back to the system (glibc `malloc_trim`) unless that
    was done less than TRIM_INTERVAL_SECONDS ago; tell whether it was done now."""
    global _trimmed_at
    now = time.monotonic()
    if now - _trimmed_at < TRIM_INTERVAL_SECONDS:
        return False
    _trimmed_at = now  # a race between two threads costs one extra trim at worst
    trim_heap()
    return True


def trim_heap() -> None:
    """Give the heap pages freed since the last trim back to the operating system.

    glibc keeps freed pages for reuse: the temporaries of a million-token model's load stayed
    resident (server RSS 375 MB -> 300 MB with a trim after it). Nothing to do where there is
    no glibc.
    """
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


@functools.cache
def _libc() -> Any:
    """glibc, loaded once (each load makes a few objects that only the cyclic garbage
    collector frees); None where there is none, or no malloc_trim."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None
