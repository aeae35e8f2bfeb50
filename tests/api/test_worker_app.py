"""A server's worker freezes its start-up objects out of the garbage collector; an app made
in a process that makes many (this suite) does not, nor leaves anything frozen."""

from __future__ import annotations

import gc

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app, create_worker_app

# What the garbage collector holds does not depend on the database: SQLite alone.
pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def test_a_worker_app_freezes_its_start_up_objects_until_it_stops(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPAMSIFT_DATABASE_URL", database_url)
    assert gc.get_freeze_count() == 0
    with TestClient(create_worker_app()) as client:
        assert gc.get_freeze_count() > 10_000  # the interpreter's and libraries' objects
        assert client.get("/healthz").status_code == 200
    assert gc.get_freeze_count() == 0


def test_an_app_made_in_process_freezes_nothing(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        assert client.get("/healthz").status_code == 200
        assert gc.get_freeze_count() == 0
