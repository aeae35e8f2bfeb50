"""F06: `kill -9` the server while a 1 000-message batch is being written; restart; resend the
whole batch. The batch is one transaction, so after the kill nothing of it is stored (or, had
the commit come first, all of it); after the resend the counts equal those of a single clean
pass built in another fresh database.

"Mid-batch" is observed, not guessed: the kill comes once the server's write transaction is
open (SQLite: the write lock is held; PostgreSQL: its backend has written rows, backend_xid).
"""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from app.config import Settings
from app.service.messages import Message, prepare
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.text import TokenizerLimits
from tests.builders import StoredCounts, ham_message, spam_message, stored_counts
from tests.conftest import corpora_dir
from tests.cores import TOKEN_CORE
from tests.faults.conftest import StartServer

BATCH = 1000
MAX_MESSAGE_CHARS = 4000  # the smaller half of the corpus: the same test, in half the time
MIN_TRAIN_TOKENS = Settings.model_fields["min_train_tokens"].default


def batch_items() -> list[dict[str, str]]:
    """1 000 real messages of the spamassassin corpus, up to 4 000 characters each (synthetic
    ones where the corpus is absent)."""
    path = corpora_dir() / "spamassassin" / "messages.jsonl.gz"
    if path.exists():
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            records = ((r["id"], r["text"], r["label"]) for r in map(json.loads, lines))
            small = (r for r in records if len(r[1]) <= MAX_MESSAGE_CHARS)
            candidates = list(itertools.islice(small, 2 * BATCH))
    else:
        candidates = [
            (f"synthetic-{i}", spam_message(i), "spam")
            if i % 3
            else (f"synthetic-{i}", ham_message(i), "ham")
            for i in range(3 * BATCH)
        ]
    items = []
    for message_id, raw, label in candidates:
        prepared = prepare(
            Message(raw=raw, message_id=message_id),
            limits=TokenizerLimits(),
            max_message_bytes=10 * 1024 * 1024,
            core=TOKEN_CORE,
        )
        if len(prepared.token_counts) >= MIN_TRAIN_TOKENS:  # else the batch is refused whole
            items.append({"message_id": message_id, "raw": raw, "label": label})
        if len(items) == BATCH:
            return items
    raise AssertionError("not enough messages for the batch")


@pytest.fixture(scope="module")
def batch() -> list[dict[str, str]]:
    return batch_items()


@pytest.fixture(scope="module")
def reference(
    batch: list[dict[str, str]], sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory
) -> StoredCounts:
    """The counts of one clean pass of the batch, in a fresh database of its own."""
    path = tmp_path_factory.mktemp("reference") / "reference.db"
    shutil.copy(sqlite_template, path)
    rt = Runtime(Settings(database_url=f"sqlite:///{path}", _env_file=None))  # type: ignore[call-arg]
    try:
        items = [(Message(raw=i["raw"], message_id=i["message_id"]), i["label"]) for i in batch]
        train_batch(rt, model_name="default", items=items)
        return stored_counts(rt.db)
    finally:
        rt.close()


def wait_for_open_write(database_url: str, done: threading.Event) -> bool:
    """Wait until a write transaction of another connection is open; False if none came."""
    deadline = time.monotonic() + 120
    if database_url.startswith("sqlite"):
        probe = sqlite3.connect(database_url.removeprefix("sqlite:///"), timeout=0)
        probe.isolation_level = None
        try:
            while time.monotonic() < deadline and not done.is_set():
                try:
                    probe.execute("BEGIN IMMEDIATE")
                    probe.execute("ROLLBACK")
                except sqlite3.OperationalError:  # locked: the server's batch is being written
                    return True
                time.sleep(0.005)
            return False
        finally:
            probe.close()
    engine = create_engine(database_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            while time.monotonic() < deadline and not done.is_set():
                writing = conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL"
                    )
                ).scalar_one()
                if writing:
                    return True
                time.sleep(0.005)
        return False
    finally:
        engine.dispose()


def test_f06_kill_during_a_batch_then_resend_equals_one_clean_pass(
    any_url: str,
    start_server: StartServer,
    batch: list[dict[str, str]],
    reference: StoredCounts,
) -> None:
    server = start_server(any_url)
    answer: dict[str, Any] = {}
    done = threading.Event()

    def send() -> None:
        try:
            response = httpx.post(
                f"{server.url}/v1/models/default/train/batch", json={"items": batch}, timeout=300
            )
            answer["status"] = response.status_code
        except httpx.TransportError as error:
            answer["error"] = type(error).__name__
        finally:
            done.set()

    sender = threading.Thread(target=send)
    sender.start()
    writing = wait_for_open_write(any_url, done)
    server.kill()
    sender.join(timeout=30)
    assert writing, f"no write transaction was seen; answer {answer}"
    assert "status" not in answer, f"the batch was answered before the kill: {answer}"

    after_kill = stored_counts_of(any_url)
    assert len(after_kill.trained) in (0, BATCH)  # all or nothing, never part of it
    assert after_kill.nonzero_counts() == ({} if not after_kill.trained else reference.token_counts)
    if any_url.startswith("sqlite"):
        with sqlite3.connect(any_url.removeprefix("sqlite:///")) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]

    server.start()
    resent = httpx.post(
        f"{server.url}/v1/models/default/train/batch", json={"items": batch}, timeout=300
    )
    assert resent.status_code == 200, resent.text
    final = stored_counts_of(any_url)
    print(  # noqa: T201
        f"F06: killed with {len(after_kill.trained)} of {BATCH} messages stored; after the "
        f"resend {len(final.trained)} messages, {len(final.nonzero_counts())} counts"
    )
    assert final.nonzero_counts() == reference.nonzero_counts()
    assert final.class_totals == reference.class_totals
    assert final.trained == reference.trained


def stored_counts_of(database_url: str) -> StoredCounts:
    from app.store.engine import Database

    db = Database(database_url)
    try:
        return stored_counts(db)
    finally:
        db.dispose()
