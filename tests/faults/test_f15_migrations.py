"""F15: schema migration of a populated database from the previous revision to head.

- `kill -9` of `spamsift db upgrade` in the middle of the migration transaction: the database
  is left at the previous revision, as it was (DDL is transactional on both databases); the
  next run migrates it.
- Two `spamsift db upgrade` processes starting at once: exactly one runs the migration (the
  other waits on the migration lock and finds nothing to do). `spamsift serve` migrates through
  the same function before its workers start, and workers never migrate on import.
Token counts, class totals and trained messages are identical before and after.
"""

from __future__ import annotations

import os
import queue
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from app.config import Settings
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import forget, train
from app.store.engine import Database
from app.store.migrate import (
    MIGRATION_LOCK_ID,
    alembic_config,
    downgrade_schema,
)
from app.store.schema_version import current_revision
from tests.builders import StoredCounts, stored_counts
from tests.faults.load import message_text
from tests.faults.servers import server_env

HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()
PREVIOUS = "0001"
STEP = f"Running upgrade {PREVIOUS} -> 0002"
PAUSE_ON = "CREATE TABLE api_keys"  # a statement of migration 0002


class Runner:
    """`python -m tests.faults.migrate_runner` (spamsift db upgrade) with its output read."""

    count = 0

    def __init__(self, database_url: str, workdir: Path, *, pause_on: str | None = None) -> None:
        env = server_env(database_url, lock_timeout_seconds="30")
        if pause_on:
            env["FAULTS_PAUSE_ON"] = pause_on
        Runner.count += 1
        self.log = workdir / f"migrate-{Runner.count}.log"
        with self.log.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.faults.migrate_runner"],
                cwd=workdir,
                env=env,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,
            )
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read_stdout, daemon=True)
        self.reader.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:
            for line in self.process.stdout:
                self.lines.put(line.strip())

    def wait_for(self, marker: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.lines.get(timeout=0.1) == marker:
                    return
            except queue.Empty:
                if self.process.poll() is not None:
                    break
        raise AssertionError(f"no {marker}: {self.finish(timeout=5)[1]}")

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.finish()

    def finish(self, timeout: float = 120) -> tuple[int, str]:
        """Wait for the process; return its exit status and its log (stderr)."""
        self.process.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return self.process.returncode, self.log.read_text(errors="replace")


@pytest.fixture
def previous_revision(any_url: str) -> tuple[str, StoredCounts]:
    """A database trained (with relabels and a forget) and then taken back to 0001."""
    rt = Runtime(Settings(database_url=any_url, _env_file=None))  # type: ignore[call-arg]
    rng = random.Random(15)
    try:
        texts = [message_text(rng, f"f15u{i}q") for i in range(40)]
        for i, text_ in enumerate(texts):
            message = Message(text=text_, message_id=f"<f15-{i}@faults.test>")
            train(rt, model_name="default", message=message, label=("ham", "spam")[i % 2])
        for i in range(5):
            message = Message(text=texts[i], message_id=f"<f15-{i}@faults.test>")
            train(rt, model_name="default", message=message, label=("spam", "ham")[i % 2])
        forget(rt, model_name="default", message_id="<f15-7@faults.test>")
    finally:
        rt.close()
    db = Database(any_url)
    try:
        downgrade_schema(db, PREVIOUS)
        assert current_revision(db) == PREVIOUS
        snapshot = stored_counts(db)
    finally:
        db.dispose()
    assert len(snapshot.trained) == 39
    return any_url, snapshot


def state_of(database_url: str) -> tuple[str | None, bool, StoredCounts]:
    db = Database(database_url)
    try:
        with db.transaction(write=False) as conn:
            has_api_keys = "api_keys" in inspect(conn).get_table_names()
        return current_revision(db), has_api_keys, stored_counts(db)
    finally:
        db.dispose()


def assert_sqlite_intact(database_url: str) -> None:
    if database_url.startswith("sqlite"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_f15_kill_during_the_migration_rolls_back_and_the_next_run_migrates(
    previous_revision: tuple[str, StoredCounts], tmp_path: Path
) -> None:
    url, before = previous_revision
    runner = Runner(url, tmp_path, pause_on=PAUSE_ON)
    runner.wait_for("PAUSED")  # api_keys is created, the transaction still open
    runner.kill()

    revision, has_api_keys, after_kill = state_of(url)
    assert (revision, has_api_keys) == (PREVIOUS, False)
    assert after_kill == before
    assert_sqlite_intact(url)

    status, log = Runner(url, tmp_path).finish()
    assert status == 0, log
    assert STEP in log
    revision, has_api_keys, migrated = state_of(url)
    assert (revision, has_api_keys) == (HEAD, True)
    assert migrated == before
    assert_sqlite_intact(url)


@contextmanager
def migration_lock_held(database_url: str) -> Iterator[None]:
    """Hold the lock every migrating process takes first (SQLite's write lock, PostgreSQL's
    advisory lock) for the block."""
    if database_url.startswith("sqlite"):
        conn = sqlite3.connect(database_url.removeprefix("sqlite:///"))
        conn.isolation_level = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("ROLLBACK")
        finally:
            conn.close()
        return
    engine = create_engine(database_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:id)"), {"id": MIGRATION_LOCK_ID})
            yield
            conn.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": MIGRATION_LOCK_ID})
    finally:
        engine.dispose()


def test_f15_two_processes_upgrading_at_once_migrate_once(
    previous_revision: tuple[str, StoredCounts], tmp_path: Path
) -> None:
    url, before = previous_revision
    with migration_lock_held(url):  # both start, then wait on the lock together
        runners = [Runner(url, tmp_path) for _ in range(2)]
        for runner in runners:
            runner.wait_for("READY")
        time.sleep(1.0)
    outcomes = [runner.finish() for runner in runners]

    assert [status for status, _ in outcomes] == [0, 0], outcomes
    assert sum(log.count(STEP) for _, log in outcomes) == 1
    revision, has_api_keys, after = state_of(url)
    assert (revision, has_api_keys) == (HEAD, True)
    assert after == before
    assert_sqlite_intact(url)
