"""F10: the disk fills up under the database during /train. The write is rolled back whole and
answered 507 `storage_full`; /classify keeps working; once there is room again the same request
trains; SQLite's `PRAGMA integrity_check` says ok.

The full disk is real: a small tmpfs mounted for the test (root only; skipped elsewhere) and
filled with a file. SQLite keeps the database file there; PostgreSQL (the tests' own cluster)
the spamsift tables and indexes, moved to a tablespace on it.
"""

from __future__ import annotations

import contextlib
import errno
import random
import shutil
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.faults.conftest import StartServer, learn_every_token
from tests.faults.load import compare_with_ledger, message_text
from tests.faults.servers import PostgresCluster

SPAMSIFT_TABLES = (
    "tokens",
    "count_chunks",
    "count_journal",
    "trained_messages",
    "class_totals",
    "classifications",
)


@contextlib.contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of `size` at `path` for the block, or skip the test where one cannot."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk refuses more; return it (delete it to make room)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as output:
        for chunk in (1 << 20, 1 << 16, 1 << 12, 1 << 9):
            try:
                while True:
                    output.write(b"\0" * chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
    return filler


def batch(rng: random.Random, start: int, n: int) -> list[dict[str, str]]:
    """n messages, each with a hundred words of its own, so training must allocate pages."""
    items = []
    for i in range(start, start + n):
        own = " ".join(f"disk{i}w{k}" for k in range(100))
        label = ("ham", "spam")[i % 2]
        text_ = f"{message_text(rng, f'f10u{i}q')} {own}"
        items.append({"message_id": f"<f10-{i}@faults.test>", "text": text_, "label": label})
    return items


def train_until_full(server_url: str, database_url: str, filler_of: Path) -> None:
    """Train, fill the disk, train again (507, nothing applied), make room, train (200)."""
    rng = random.Random(10)
    ledger: dict[str, tuple[str, str]] = {}
    with httpx.Client(base_url=server_url, timeout=60) as client:
        first = batch(rng, 0, 10)
        assert client.post("/v1/models/default/train/batch", json={"items": first}).is_success
        ledger.update({i["message_id"]: (i["text"], i["label"]) for i in first})
        if database_url.startswith("sqlite"):  # empty the WAL, so any write needs new room
            with sqlite3.connect(database_url.removeprefix("sqlite:///")) as conn:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                assert busy == 0
        filler = fill(filler_of)

        second = batch(rng, 10, 20)
        refused = client.post("/v1/models/default/train/batch", json={"items": second})
        single = client.post("/v1/models/default/train", json=second[0])
        classified = client.post("/v1/models/default/classify", json={"text": second[1]["text"]})
        ready = client.get("/readyz")
        on_full_disk = compare_with_ledger(database_url, ledger)

        filler.unlink()
        trained = client.post("/v1/models/default/train/batch", json={"items": second})
        ledger.update({i["message_id"]: (i["text"], i["label"]) for i in second})
    after = compare_with_ledger(database_url, ledger)

    backend = database_url.split(":")[0].split("+")[0]
    print(  # noqa: T201
        f"F10 {backend}: on a full disk /train/batch {refused.status_code} "
        f"{refused.json()['error']['code']}, /train {single.status_code}, /classify "
        f"{classified.status_code}, /readyz {ready.status_code}; after making room "
        f"{trained.status_code}"
    )
    assert refused.status_code == 507, refused.text
    assert refused.json()["error"]["code"] == "storage_full"
    assert single.status_code == 507, single.text
    assert classified.status_code == 200, classified.text
    assert ready.status_code == 200
    assert on_full_disk.problems == []  # nothing half-written
    assert trained.status_code == 200, trained.text
    assert after.problems == []


def test_f10_sqlite_disk_full_during_train(
    tmp_path: Path, sqlite_template: Path, start_server: StartServer
) -> None:
    with small_disk(tmp_path / "disk", "4m") as disk:
        path = disk / "spamsift.db"
        shutil.copy(sqlite_template, path)
        url = f"sqlite:///{path}"
        learn_every_token(url)
        server = start_server(url)
        train_until_full(server.url, url, disk)
        server.stop()
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_f10_postgres_tablespace_full_during_train(
    pg_cluster: PostgresCluster, cluster_url: str, start_server: StartServer
) -> None:
    name = f"small_{uuid.uuid4().hex[:8]}"
    # Inside the cluster's directory: the postgres user must reach the mount point.
    with small_disk(pg_cluster.root / name, "4m") as disk:
        location = disk / "tablespace"
        location.mkdir()
        if pg_cluster.as_user:
            shutil.chown(location, user="postgres")
        engine = create_engine(cluster_url, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(text(f"CREATE TABLESPACE {name} LOCATION '{location}'"))
        try:
            with engine.connect() as conn:
                for table in SPAMSIFT_TABLES:
                    conn.execute(text(f"ALTER TABLE {table} SET TABLESPACE {name}"))
                conn.execute(
                    text(f"ALTER INDEX ALL IN TABLESPACE pg_default SET TABLESPACE {name}")
                )
            server = start_server(cluster_url)
            train_until_full(server.url, cluster_url, disk)
            server.stop()
        finally:
            with engine.connect() as conn:  # the tablespace must be empty to be dropped
                for table in SPAMSIFT_TABLES:
                    conn.execute(text(f"ALTER TABLE {table} SET TABLESPACE pg_default"))
                conn.execute(
                    text(f"ALTER INDEX ALL IN TABLESPACE {name} SET TABLESPACE pg_default")
                )
                conn.execute(text(f"DROP TABLESPACE {name}"))
            engine.dispose()
