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
from app.text.core import use_core
from tests.postgres import POSTGRES_URL, throwaway_database

REPO = Path(__file__).resolve().parent.parent

# Most tests train a handful of messages and check the verdicts they get: they run with no
# min_learns floor (the default, 200 per class, answers "unsure" below it). The floor has its
# own tests (tests/api/test_min_learns.py), which set it. Server processes the tests start get
# the same value (TEST_ENVIRONMENT).
TEST_ENVIRONMENT = {"SPAMSIFT_MIN_LEARNS": "0"}
os.environ.update(TEST_ENVIRONMENT)

# The token core the tests run in this process: SPAMSIFT_TOKENIZER=python (a second CI run of
# the tokenizer's tests) forces the pure-Python reference where the compiled core is built.
use_core(Settings().tokenizer)


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


def empty_postgres(db: Database) -> None:
    names = ", ".join(table.name for table in metadata.sorted_tables)
    with db.transaction() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
        insert_model(conn, name="default", classes=("ham", "spam"), config={})


@pytest.fixture(params=["sqlite", "postgresql"])
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
def runtime(settings: Settings) -> Iterator[Runtime]:
    rt = Runtime(settings)
    yield rt
    rt.close()


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give schemathesis' per-operation tests their own node ids.

    schemathesis 4.32 names each item `test[GET /path]` but sets the id through the
    `_nodeid` attribute pytest 9.2 no longer reads, so every operation kept the function's id;
    pytest-xdist then ran one operation of each test and dropped the rest as duplicates.
    """
    for item in items:
        if item.parent is not None and not item.nodeid.endswith(item.name):
            item._id = item.parent.id.child(item.name)  # type: ignore[attr-defined]
