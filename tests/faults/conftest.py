"""Fixtures of the fault tests (ROBUSTNESS.md B.2, F01-F16): real uvicorn server processes, real
databases (a SQLite file, the test PostgreSQL server, a PostgreSQL cluster of the tests' own),
real HTTP clients in threads.

The length of every load phase is set here, in one place:

    SPAMSIFT_LOAD_SECONDS=60 pytest tests/faults     # the full run of issue 4
    pytest tests/faults                              # CI: 5 s per load phase

(SPAMSIFT_FULL_LOAD=1 means 60 s too.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from app.config import Settings
from app.service.models import update_model
from app.service.runtime import Runtime
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from tests.conftest import empty_postgres
from tests.faults.servers import PostgresCluster, Server

FULL_LOAD_SECONDS = 60.0
LOAD_SECONDS = float(
    os.environ.get(
        "SPAMSIFT_LOAD_SECONDS", FULL_LOAD_SECONDS if os.environ.get("SPAMSIFT_FULL_LOAD") else 5.0
    )
)

StartServer = Callable[..., Server]


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """Start a uvicorn server process on a database; every one is stopped after the test."""
    started: list[Server] = []

    def start(database_url: str, *, wait: bool = True, **options: object) -> Server:
        name = str(options.pop("name", f"server-{len(started)}"))
        server = Server(database_url, tmp_path, name=name, **options)  # type: ignore[arg-type]
        started.append(server)
        return server.start(wait=wait)

    yield start
    for server in started:
        server.stop()


def learn_every_token(database_url: str) -> None:
    """Give the model `default` every token of what it is trained with
    (`pairs_until_log_odds` 0): the fault tests compare its counts with their own tokenizing
    of every acknowledged message. What a model leaves out once it is sure of a message has
    its own tests (tests/api/test_pairs_when_unsure.py)."""
    rt = Runtime(Settings(database_url=database_url, _env_file=None))  # type: ignore[call-arg]
    try:
        update_model(rt, name="default", changes={"pairs_until_log_odds": 0})
    finally:
        rt.close()


@pytest.fixture
def sqlite_url(tmp_path: Path, sqlite_template: Path) -> str:
    """A migrated SQLite file with only the model `default`."""
    path = tmp_path / "spamsift.db"
    shutil.copy(sqlite_template, path)
    url = f"sqlite:///{path}"
    learn_every_token(url)
    return url


@pytest.fixture
def postgres_url(postgres_database: Database) -> Iterator[str]:
    """The run's throw-away database on the test PostgreSQL server, emptied, model `default`."""
    empty_postgres(postgres_database)
    learn_every_token(postgres_database.url)
    yield postgres_database.url
    empty_postgres(postgres_database)


@pytest.fixture(params=["sqlite", "postgresql"])
def any_url(request: pytest.FixtureRequest) -> str:
    """sqlite_url, then postgres_url."""
    name = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    return str(request.getfixturevalue(name))


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL cluster of the tests' own, which they may stop, kill and restart."""
    try:
        cluster = PostgresCluster()
    except FileNotFoundError as error:
        pytest.skip(f"a throw-away PostgreSQL cluster needs initdb and pg_ctl: {error}")
    try:
        cluster.init()
        cluster.start()
    except (subprocess.SubprocessError, OSError) as error:
        cluster.remove()
        pytest.skip(f"could not run a throw-away PostgreSQL cluster: {error}")
    yield cluster
    cluster.remove()


@pytest.fixture
def cluster_url(pg_cluster: PostgresCluster) -> Iterator[str]:
    """A fresh, migrated database (model `default`) in the tests' own cluster."""
    if not pg_cluster.is_running():
        pg_cluster.start()
    name = f"faults_{uuid.uuid4().hex[:10]}"
    cluster_admin(pg_cluster, f'CREATE DATABASE "{name}"')
    url = pg_cluster.url(name)
    db = Database(url)
    upgrade_schema(db)
    db.dispose()
    learn_every_token(url)
    yield url
    if not pg_cluster.is_running():
        pg_cluster.start()
    cluster_admin(pg_cluster, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def cluster_admin(pg_cluster: PostgresCluster, statement: str) -> None:
    """Run one statement outside a transaction on a fresh connection (the cluster restarts)."""
    admin = create_engine(pg_cluster.url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(statement))
    finally:
        admin.dispose()
