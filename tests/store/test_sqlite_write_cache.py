"""SQLite write transactions get a larger page cache, which the connection gives back (and
frees) when it returns to the pool; reads keep the connection's own."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import Connection

from app.store import engine
from app.store.engine import SQLITE_WRITE_CACHE_KIB, Database


def cache_size(conn: Connection) -> int:
    return int(conn.exec_driver_sql("PRAGMA cache_size").scalar_one())


def test_a_write_transaction_has_the_larger_cache_and_the_connection_gets_its_own_back(
    tmp_path: Path,
) -> None:
    db = Database(f"sqlite:///{tmp_path / 'cache.db'}")
    try:
        with db.transaction(write=False) as conn:
            own = cache_size(conn)
        with db.transaction() as conn:
            assert cache_size(conn) == -SQLITE_WRITE_CACHE_KIB
        with db.transaction(write=False) as conn:
            assert cache_size(conn) == own
        try:
            with db.transaction() as conn:
                raise RuntimeError("a failed write")
        except RuntimeError:
            pass
        with db.transaction(write=False) as conn:
            assert cache_size(conn) == own
    finally:
        db.dispose()


def test_the_heap_is_trimmed_after_a_write_at_most_every_trim_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "_trimmed_at", -float("inf"))
    monkeypatch.setattr(engine, "TRIM_INTERVAL_SECONDS", 3600.0)  # no second trim by chance
    db = Database(f"sqlite:///{tmp_path / 'trim.db'}")
    try:
        with db.transaction(write=False):
            pass
        assert engine._trimmed_at == -float("inf")  # a read frees no write cache
        with db.transaction():
            pass
        first = engine._trimmed_at
        assert first > -float("inf")
        with db.transaction():
            pass
        assert engine._trimmed_at == first  # within the interval: not again
        monkeypatch.setattr(engine, "TRIM_INTERVAL_SECONDS", 0.0)
        with db.transaction():
            pass
        assert engine._trimmed_at > first
    finally:
        db.dispose()


def busy_timeout(conn: Connection) -> int:
    return int(conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one())


def test_each_transaction_waits_for_sqlites_lock_as_long_as_its_own_budget_allows(
    tmp_path: Path,
) -> None:
    """The busy timeout is set only when it changes, yet every transaction has its own: a
    write that queued in the process has less left, and the read after it the whole budget."""
    db = Database(f"sqlite:///{tmp_path / 'busy.db'}", lock_timeout_seconds=10.0)
    try:
        with db.transaction(write=False) as conn:
            assert busy_timeout(conn) == 10_000
        with db.transaction(write=False) as conn:
            assert busy_timeout(conn) == 10_000
        db._sqlite_writers.acquire()  # another writer of this process holds the queue...
        threading.Timer(0.5, db._sqlite_writers.release).start()  # ...for half a second
        with db.transaction() as conn:
            assert 0 < busy_timeout(conn) <= 9_500
        with db.transaction(write=False) as conn:
            assert busy_timeout(conn) == 10_000
    finally:
        db.dispose()
