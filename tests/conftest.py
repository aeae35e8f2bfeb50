"""Shared fixtures: settings, a database (SQLite file | PostgreSQL), runtime, app, client.

Each test starts from an empty, migrated database holding only the `default` model:
SQLite copies a file migrated once per run; PostgreSQL gets a throw-away database per run (so
two runs never share tables), migrated once, whose tables are emptied after each test.
PostgreSQL tests run only where SPAMSIFT_TEST_POSTGRES_URL is set.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.config import Settings
from app.main import create_app
from app.service.runtime import Runtime
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from app.store.models import insert_model
from app.store.tables import metadata
from tests.postgres import POSTGRES_URL, throwaway_database

REPO = Path(__file__).resolve().parent.parent

# Most tests train a handful of messages and check the verdicts they get: they run with no
# min_learns floor (the default, 200 per class, answers "unsure" below it). The floor has its
# own tests (tests/api/test_min_learns.py), which set it. Server processes the tests start get
# the same value (TEST_ENVIRONMENT).
TEST_ENVIRONMENT = {"SPAMSIFT_MIN_LEARNS": "0"}
os.environ.update(TEST_ENVIRONMENT)


def corpora_dir() -> Path:
    return Path(os.environ.get("SPAMSIFT_CORPORA", REPO.parent / "shared" / "corpora"))


def corpus_path(name: str) -> Path:
    """Path of a shared corpus, or skip the test with the reason."""
    path = corpora_dir() / name / "messages.jsonl.gz"
    if not path.exists():
        pytest.skip(f"corpus {name} not found at {path} (set SPAMSIFT_CORPORA)")
    return path


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "migrated.db"
    db = Database(f"sqlite:///{path}")
    upgrade_schema(db)
    db.dispose()
    return path


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[Database]:
    if not POSTGRES_URL:
        pytest.skip(
            "PostgreSQL tests need SPAMSIFT_TEST_POSTGRES_URL (e.g. "
            "postgresql+psycopg://postgres@127.0.0.1:5432/test); .ci/run sets it"
        )
    with throwaway_database(POSTGRES_URL, "spamsift_test") as url:
        db = Database(url)
        upgrade_schema(db)
        yield db
        db.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A database with no table at all, for the migration tests; PostgreSQL: a throw-away
    database on the test server."""
    if request.param == "sqlite":
        database = Database(f"sqlite:///{tmp_path / 'empty.db'}")
        yield database
        database.dispose()
        return
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL tests need SPAMSIFT_TEST_POSTGRES_URL")
    with throwaway_database(POSTGRES_URL, "spamsift_migrations") as url:
        database = Database(url)
        yield database
        database.dispose()


def empty_postgres(db: Database) -> None:
    names = ", ".join(table.name for table in metadata.sorted_tables)
    with db.transaction() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
        insert_model(conn, name="default", classes=("ham", "spam"), config={})


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def database_url(
    request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path
) -> Iterator[str]:
    if request.param == "sqlite":
        path = tmp_path / "spamsift.db"
        shutil.copy(sqlite_template, path)
        yield f"sqlite:///{path}"
        return
    db: Database = request.getfixturevalue("postgres_database")
    empty_postgres(db)
    yield db.url
    empty_postgres(db)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, _env_file=None)  # type: ignore[call-arg]


@pytest.fixture
def patient_settings(database_url: str) -> Settings:
    """Settings whose time budgets never cut a message short, however busy the machine: for
    tests that compare two classifications of the same messages, or train a corpus."""
    return Settings(  # type: ignore[call-arg]
        database_url=database_url,
        classify_time_budget_seconds=600,
        train_time_budget_seconds=600,
        _env_file=None,
    )


@pytest.fixture
def runtime(settings: Settings) -> Iterator[Runtime]:
    rt = Runtime(settings)
    yield rt
    rt.close()


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


# The quick run: plain `pytest` (no paths, no -m) leaves out the tests with these markers, so
# that a newcomer's first run ends in minutes on two cores; `pytest --full` (CI) runs them.
LEFT_OUT_OF_QUICK_RUN = {
    "corpus": "corpus",
    "slow": "slow load, fault and property",
    "browser": "browser",
    "mailserver": "mail-server",
    "postgresql": "PostgreSQL",
}
# Whole folders of one kind, marked here rather than in each file.
# tests/mail: contrib's mail scripts run as the mail programs run them, against a real
# server, and the mail system itself (several processes a test).
FOLDER_MARKERS = {"ui": "browser", "faults": "slow", "properties": "slow", "mail": "mailserver"}
LEFT_OUT = pytest.StashKey[dict[str, int]]()
IGNORED = pytest.StashKey[set[str]]()  # markers of the folders a quick run did not collect


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full",
        action="store_true",
        help="run every test, also those plain `pytest` leaves out: marked "
        + ", ".join(LEFT_OUT_OF_QUICK_RUN)
        + " (CI runs this; docs/development.md)",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """On a quick run, the folders it leaves out whole are not even collected: importing and
    parametrising them (schemathesis builds its cases per operation as it collects) cost each
    worker about 4 s of CPU."""
    if collection_path.parent.name == "tests" and collection_path.name in FOLDER_MARKERS:
        marker = FOLDER_MARKERS[collection_path.name]
        if marker in LEFT_OUT_OF_QUICK_RUN and is_quick_run(config):
            config.stash.setdefault(IGNORED, set()).add(marker)
            return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark whole folders, name schemathesis' tests apart, and, on a quick run, leave out the
    tests marked slow, corpus, browser, mailserver or postgresql."""
    for item in items:
        folder = item.path.parent.name if item.path.parent.parent.name == "tests" else None
        if folder in FOLDER_MARKERS:
            item.add_marker(FOLDER_MARKERS[folder])
        # schemathesis 4.32 names each item `test[GET /path]` but sets the id through the
        # `_nodeid` attribute pytest 9.2 no longer reads, so every operation kept the
        # function's id; pytest-xdist then ran one operation of each test and dropped the rest
        # as duplicates.
        if item.parent is not None and not item.nodeid.endswith(item.name):
            item._id = item.parent.id.child(item.name)  # type: ignore[attr-defined]
    if not is_quick_run(config):
        return
    kept, left_out = [], dict.fromkeys(LEFT_OUT_OF_QUICK_RUN, 0)
    for item in items:
        marker = next((m for m in LEFT_OUT_OF_QUICK_RUN if item.get_closest_marker(m)), None)
        if marker is None:
            kept.append(item)
        else:
            left_out[marker] += 1
    if len(kept) < len(items):
        kept_ids = {id(item) for item in kept}
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept_ids])
        items[:] = kept
    config.stash[LEFT_OUT] = left_out


def is_quick_run(config: pytest.Config) -> bool:
    """Plain `pytest`: no --full, no -m, no paths or test ids (naming a test runs it)."""
    return (
        not config.getoption("--full")
        and not config.getoption("markexpr")
        and config.args_source == pytest.Config.ArgsSource.TESTPATHS
    )


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if not is_quick_run(config):
        return
    counts = config.stash.get(LEFT_OUT, None)  # None under xdist: its workers collected
    ignored = config.stash.get(IGNORED, set())  # folders not collected: not counted
    kinds = [
        f"{counts[marker]} {name}" if counts is not None and marker not in ignored else name
        for marker, name in LEFT_OUT_OF_QUICK_RUN.items()
        if counts is None or counts[marker] or marker in ignored
    ]
    terminalreporter.write_sep("-", "quick run")
    terminalreporter.write_line(
        f"Left out: the {', '.join(kinds)} tests. `pytest --full` runs every test, as CI "
        "does; the PostgreSQL ones need SPAMSIFT_TEST_POSTGRES_URL."
    )
