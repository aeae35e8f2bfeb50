"""F11: backups taken while trainers write.

SQLite: copies made through SQLite itself while 8 trainers write through a server (the online
backup API, and `spamsift backup PATH`, which uses VACUUM INTO) each pass `integrity_check`,
hold counts that equal the counts recomputed from their own trained messages (one consistent
snapshot) and every training acknowledged before they began, and serve again when a server is
started on them (restore = put the copy in place). Copying the database file alone is
unsupported (sqlite.org/howtocorrupt.html §1.2-1.4): acknowledged trainings live in the -wal
file until a checkpoint, so such a copy misses them (the test prints how many), and copying
the file and its -wal one after the other while writes go on can tear a transaction.
PostgreSQL: `pg_dump` during the load, restored with `pg_restore` into a fresh database, is
consistent in the same way (one REPEATABLE READ snapshot); `spamsift backup` points to it.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from app.store.engine import Database
from tests.builders import counts_from_ledger, stored_cells, stored_counts
from tests.faults.conftest import LOAD_SECONDS, StartServer, cluster_admin
from tests.faults.load import Load, compare_with_ledger, message_text
from tests.faults.servers import PostgresCluster, server_env

ROUNDS = 3


def consistent(database_url: str) -> tuple[int, bool]:
    """(trained messages, whether every count equals what the trained messages add up to)."""
    db = Database(database_url)
    try:
        return len(stored_counts(db).trained), stored_cells(db) == counts_from_ledger(db)
    finally:
        db.dispose()


def trained_ids(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT message_id FROM trained_messages")}


def spamsift_backup(database_url: str, path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "backup", str(path)],
        env=server_env(database_url),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_f11_sqlite_backups_while_training_are_consistent_and_restore(
    sqlite_url: str, start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(sqlite_url)
    source = Path(sqlite_url.removeprefix("sqlite:///"))
    rng = random.Random(11)
    before: dict[str, tuple[str, str]] = {}
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for i in range(20):
            message_id, label = f"<f11-{i}@x>", ("ham", "spam")[i % 2]
            text = message_text(rng, f"f11u{i}q")
            body = {"message_id": message_id, "text": text, "label": label}
            response = client.post("/train", json=body)
            assert response.status_code == 200, response.text
            before[message_id] = (text, label)
    acknowledged = set(before)
    shutil.copy(source, tmp_path / "file-copy.db")  # the file alone: unsupported
    in_file_copy = len(trained_ids(tmp_path / "file-copy.db") & acknowledged)

    load = Load([server.url], trainers=8, classifiers=1, tag="f11").start()
    copies: list[Path] = []
    for round_ in range(ROUNDS):
        time.sleep(LOAD_SECONDS / ROUNDS)
        with sqlite3.connect(source) as live, sqlite3.connect(tmp_path / f"b{round_}.db") as out:
            live.backup(out, pages=64)  # stepwise: restarts if a writer changes the source
        copies.append(tmp_path / f"b{round_}.db")
        if round_ == 1:
            spamsift_backup(sqlite_url, tmp_path / "spamsift-backup.db")  # VACUUM INTO
            copies.append(tmp_path / "spamsift-backup.db")
    result = load.finish()
    assert result.server_errors() == {}
    assert compare_with_ledger(sqlite_url, result.ledger | before).problems == []

    checked = []
    for copy in copies:
        with sqlite3.connect(copy) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)], copy.name
        trained, agrees = consistent(f"sqlite:///{copy}")
        assert agrees, f"{copy.name}: counts differ from its own trained messages"
        assert trained_ids(copy) >= acknowledged, f"{copy.name} lost acknowledged trainings"
        checked.append(trained)
    print(  # noqa: T201
        f"F11 sqlite: copies through SQLite with {checked} trained messages, all consistent "
        f"and holding every training acknowledged before; a copy of the database file alone "
        f"held {in_file_copy} of {len(acknowledged)} acknowledged trainings (the rest were in "
        f"the -wal file)"
    )
    assert checked[-1] > checked[0]  # taken while training went on

    restored = tmp_path / "restored.db"
    shutil.copy(tmp_path / "spamsift-backup.db", restored)
    server.stop()
    again = start_server(f"sqlite:///{restored}")
    with httpx.Client(base_url=again.url, timeout=30) as client:
        text = message_text(rng, "f11restoredq")
        assert client.post("/classify", json={"text": text}).status_code == 200
        trained = client.post("/train", json={"text": text, "label": "spam"})
        assert trained.status_code == 200, trained.text


def test_f11_postgres_dump_while_training_restores_consistent(
    pg_cluster: PostgresCluster, cluster_url: str, start_server: StartServer, tmp_path: Path
) -> None:
    pg_dump, pg_restore = shutil.which("pg_dump"), shutil.which("pg_restore")
    if pg_dump is None or pg_restore is None:
        pytest.skip("pg_dump / pg_restore not installed")
    server = start_server(cluster_url)
    load = Load([server.url], trainers=8, classifiers=1, tag="f11").start()
    time.sleep(LOAD_SECONDS / 2)
    dump = tmp_path / "spamsift.dump"
    libpq_url = make_url(cluster_url).set(drivername="postgresql").render_as_string(False)
    subprocess.run([pg_dump, "-Fc", "-f", str(dump), libpq_url], check=True, timeout=120)
    result = load.finish()
    assert compare_with_ledger(cluster_url, result.ledger).problems == []

    name = f"restored_{uuid.uuid4().hex[:8]}"
    cluster_admin(pg_cluster, f'CREATE DATABASE "{name}"')
    try:
        restored = make_url(libpq_url).set(database=name).render_as_string(False)
        subprocess.run(
            [pg_restore, "--no-owner", "-d", restored, str(dump)], check=True, timeout=120
        )
        trained, agrees = consistent(pg_cluster.url(name))
        print(f"F11 postgresql: dump with {trained} trained messages")  # noqa: T201
        assert agrees
        assert trained > 0
    finally:
        cluster_admin(pg_cluster, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
