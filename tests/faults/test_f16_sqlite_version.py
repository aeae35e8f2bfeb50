"""F16: the SQLite library is checked at start. Versions 3.7.0-3.51.2 (but for the 3.44.6 and
3.50.7 backports) have the WAL-reset bug, and spamsift always runs WAL with several writing
connections, so such a library is named in a warning (this machine's 3.40.1 is one)."""

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


def test_f16_a_process_on_sqlite_warns_at_start_about_its_library(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/spamsift.db"
    done = subprocess.run(
        [sys.executable, "-m", "app.cli.main", "db", "upgrade"],
        env=server_env(url),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    warned = f"SQLite {sqlite3.sqlite_version} has the WAL-reset bug" in done.stderr
    assert warned is has_wal_reset_bug(sqlite3.sqlite_version), done.stderr
