"""Keep-alive connections spread over the workers: a worker serving two connections or more
beyond another answers with `Connection: close`, and the client reconnects."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api.balance import ACTIVE_SECONDS, LOAD_DIR_VARIABLE, WorkerLoads
from app.config import Settings
from app.main import create_app


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_each_worker_holds_its_own_slot_and_reads_the_others(tmp_path: Path) -> None:
    clock = Clock()
    first = WorkerLoads(tmp_path, 2, clock=clock)
    second = WorkerLoads(tmp_path, 2, clock=clock)
    assert {first.slot, second.slot} == {0, 1}
    with pytest.raises(RuntimeError, match="worker slots"):
        WorkerLoads(tmp_path, 2)

    first.saw(("10.0.0.1", 1000))
    first.saw(("10.0.0.1", 1000))  # the same connection again
    assert second.others() == [1]
    assert not first.busier_than_another()  # moving the one connection evens nothing out
    first.saw(("10.0.0.1", 1001))
    assert second.others() == [2]
    assert first.busier_than_another()
    assert not second.busier_than_another()
    second.saw(("10.0.0.2", 2000))
    assert not first.busier_than_another()
    first.closing(("10.0.0.1", 1001))
    assert second.others() == [1]

    clock.now += ACTIVE_SECONDS + 1  # a connection quiet that long no longer counts
    first.saw(("10.0.0.1", 1002))
    assert second.others() == [1]

    first.close()  # a worker gone: its slot is free, and its successor starts at 0
    successor = WorkerLoads(tmp_path, 2)
    assert successor.slot == first.slot
    assert second.others() == [0]
    successor.close()
    second.close()


def test_a_busier_worker_closes_the_connection_after_a_complete_answer(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOAD_DIR_VARIABLE, f"{tmp_path}:2")
    other = WorkerLoads(tmp_path, 2)  # the other worker, serving no connection
    try:
        with TestClient(create_app(settings)) as client:
            loads: WorkerLoads = client.app.state.worker_loads  # type: ignore[attr-defined]
            assert loads.slot != other.slot

            calm = client.get("/healthz")
            assert calm.status_code == 200
            assert "connection" not in calm.headers
            assert loads.connections == 1

            loads.saw(("10.0.0.9", 1))  # two more connections of this worker
            loads.saw(("10.0.0.9", 2))
            busy = client.get("/healthz")
            assert busy.status_code == 200
            assert busy.json()["status"] == "ok"  # the answer itself is whole
            assert busy.headers["connection"] == "close"
            assert busy.headers["x-request-id"]
            assert loads.connections == 2  # the closed one no longer counts

            other.saw(("10.0.0.8", 1))  # the other worker as busy: nowhere better to go
            other.saw(("10.0.0.8", 2))
            assert "connection" not in client.get("/healthz").headers
    finally:
        other.close()


def test_one_worker_balances_nothing(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOAD_DIR_VARIABLE, raising=False)
    with TestClient(create_app(settings)) as client:
        assert client.app.state.worker_loads is None  # type: ignore[attr-defined]
        assert "connection" not in client.get("/healthz").headers
