"""SQLite gives the space of deleted rows back: new files are incremental auto-vacuum,
`reclaim_space` frees pages in short steps, `vacuum` converts an older file."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import delete

from app.store.engine import Database
from app.store.migrate import upgrade_schema
from app.store.tables import classifications


def fill(db: Database, rows: int) -> None:
    with db.transaction() as conn:
        model_id = int(conn.exec_driver_sql("SELECT min(id) FROM models").scalar_one())
        conn.execute(
            classifications.insert(),
            [
                {
                    "model_id": model_id,
                    "message_key": f"{i:064d}",
                    "message_id": f"<{i}@x>",
                    "token_ids": b"\0" * 2000,
                    "token_terms": b"\0" * 2000,
                    "verdict": "ham",
                    "classified_at": datetime(2026, 1, 1, tzinfo=UTC),
                }
                for i in range(rows)
            ],
        )


def pages(db: Database) -> tuple[int, int]:
    with db.transaction(write=False) as conn:
        count = int(conn.exec_driver_sql("PRAGMA page_count").scalar_one())
        free = int(conn.exec_driver_sql("PRAGMA freelist_count").scalar_one())
        return count, free


def test_a_new_sqlite_file_gives_deleted_rows_space_back_in_steps(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'new.db'}")
    try:
        upgrade_schema(db)
        fill(db, 2000)
        full, _ = pages(db)
        with db.transaction() as conn:
            conn.execute(delete(classifications))
        _, free = pages(db)
        assert free > 1000

        freed = db.reclaim_space(pages_per_step=100)  # many short steps

        count, left = pages(db)
        assert freed == free
        assert left == 0
        assert count < full / 3
        assert db.reclaim_space() == 0
    finally:
        db.dispose()


def test_an_older_file_is_converted_by_vacuum(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as old:  # a file made before incremental auto-vacuum
        old.execute("CREATE TABLE placeholder (x)")
    db = Database(f"sqlite:///{path}")
    try:
        upgrade_schema(db)
        fill(db, 1000)
        with db.transaction() as conn:
            conn.execute(delete(classifications))
        assert db.reclaim_space() == 0  # not incremental: nothing it can do
        assert pages(db)[1] > 0

        db.vacuum()

        assert pages(db)[1] == 0
        with db.transaction(write=False) as conn:
            assert conn.exec_driver_sql("PRAGMA auto_vacuum").scalar_one() == 2
    finally:
        db.dispose()


def test_vacuum_and_reclaim_run_on_either_database(database_url: str) -> None:
    db = Database(database_url)
    try:
        db.vacuum()  # VACUUM (ANALYZE) on PostgreSQL, outside any transaction
        assert db.reclaim_space() == 0  # nothing deleted (PostgreSQL: nothing to do ever)
    finally:
        db.dispose()
