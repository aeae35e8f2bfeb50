"""F16: the SQLite library is checked at start. Versions 3.7.0-3.51.2 (but for the 3.44.6 and
3.50.7 backports) have the WAL-reset bug: several processes writing one WAL file can corrupt
it, so `serve --workers N` on SQLite names such a library once (this machine's 3.40.1 is one)."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys

import pytest

from app.store.engine import has_wal_reset_bug, warn_if_wal_reset_bug
from tests.faults.servers import server_env


@pytest.mark.parametrize(
    ("version", "affected"),
    [
        ("3.6.23", False),
        ("3.7.0", True),
        ("3.7.17", True),
        ("3.40.1", True),
        ("3.44.5", True),
        ("3.44.6", False),  # backport
        ("3.44.9", False),
        ("3.45.0", True),
        ("3.50.6", True),
        ("3.50.7", False),  # backport
        ("3.51.0", True),
        ("3.51.2", True),
        ("3.51.3", False),  # the fix
        ("3.52.0", False),
        ("4.0", False),
    ],
)
def test_f16_versions_with_the_wal_reset_bug(version: str, affected: bool) -> None:
    assert has_wal_reset_bug(version) is affected


def test_f16_the_warning_names_the_version_once_per_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="app.store.engine"):
        assert warn_if_wal_reset_bug("3.39.99") is True
        assert warn_if_wal_reset_bug("3.39.99") is True
        assert warn_if_wal_reset_bug("3.51.3") is False
    warnings = [r.getMessage() for r in caplog.records if "WAL-reset" in r.getMessage()]
    assert len(warnings) == 1
    assert "SQLite 3.39.99" in warnings[0]


def test_f16_one_process_on_sqlite_does_not_warn(tmp_path: object) -> None:
    """One process's writers take turns: the race needs several processes, so `db upgrade`
    (and one server worker) say nothing of it."""
    url = f"sqlite:///{tmp_path}/spamsift.db"
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "db", "upgrade"],
        env=server_env(url),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "WAL-reset" not in done.stderr, done.stderr


@pytest.mark.parametrize("workers", [1, 2])
def test_f16_several_workers_on_one_sqlite_file_warn_once_with_what_to_do(
    caplog: pytest.LogCaptureFixture, tmp_path: object, workers: int
) -> None:
    from app.config import Settings
    from app.serving import warn_about_shared_sqlite
    from app.store import engine

    engine._warned_sqlite_versions.clear()
    sqlite = Settings(database_url=f"sqlite:///{tmp_path}/x.db", _env_file=None)  # type: ignore[call-arg]
    postgres = Settings(database_url="postgresql+psycopg://u@h/db", _env_file=None)  # type: ignore[call-arg]
    with caplog.at_level(logging.WARNING, logger="app.store.engine"):
        for settings in (sqlite, sqlite, postgres):
            warn_about_shared_sqlite(settings, workers=workers)
    warnings = [r.getMessage() for r in caplog.records if "WAL-reset" in r.getMessage()]
    expected = workers > 1 and has_wal_reset_bug(sqlite3.sqlite_version)
    assert len(warnings) == (1 if expected else 0)
    if warnings:
        assert "--workers 1" in warnings[0]
        assert "PostgreSQL" in warnings[0]
