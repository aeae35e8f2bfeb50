"""Fresh databases for one benchmark: a SQLite file in a temporary folder, or a throw-away
PostgreSQL database beside the one a server URL names (dropped afterwards)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.store.engine import Database


def postgres_server_url(explicit: str | None = None) -> str | None:
    """The PostgreSQL server to make throw-away databases on, if any is configured."""
    return (
        explicit
        or os.environ.get("SPAMSIFT_BENCH_POSTGRES_URL")
        or os.environ.get("SPAMSIFT_TEST_POSTGRES_URL")
    )


@contextmanager
def fresh_database(kind: str, folder: Path, postgres_url: str | None) -> Iterator[str]:
    """Yield the URL of an empty database of `kind` ("sqlite" or "postgresql")."""
    if kind == "sqlite":
        path = folder / f"bench-{uuid.uuid4().hex[:8]}.db"
        yield f"sqlite:///{path}"
        return
    if postgres_url is None:
        raise RuntimeError("no PostgreSQL server configured")
    name = f"spamsift_bench_{uuid.uuid4().hex[:12]}"
    server = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    try:
        with server.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with server.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        server.dispose()


def database_bytes(url: str) -> int:
    """Bytes the database takes: the SQLite file (after a WAL checkpoint) or pg_database_size."""
    db = Database(url)
    try:
        if db.is_sqlite:
            with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(db.size_bytes() or 0)
    finally:
        db.dispose()
