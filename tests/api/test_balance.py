"""Keep-alive connections spread over the workers: a worker busier than another by two
requests or more answers with `Connection: close`, and the client reconnects."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api.balance import LOAD_DIR_VARIABLE, WorkerLoads
from app.config import Settings
from app.main import create_app


def test_each_worker_holds_its_own_slot_and_reads_the_others(tmp_path: Path) -> None:
    first, second = WorkerLoads(tmp_path, 2), WorkerLoads(tmp_path, 2)
    assert {first.slot, second.slot} == {0, 1}
    with pytest.raises(RuntimeError, match="worker slots"):
        WorkerLoads(tmp_path, 2)

    first.started()
    assert second.others() == [1]
    assert not first.busier_than_another()  # one request: moving it evens nothing out
    first.started()
    assert first.busier_than_another()
    assert not second.busier_than_another()
    second.started()
    assert not first.busier_than_another()
    first.finished()
    assert first.others() == [1]
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
    other = WorkerLoads(tmp_path, 2)  # the other worker
    try:
        with TestClient(create_app(settings)) as client:
            loads: WorkerLoads = client.app.state.worker_loads  # type: ignore[attr-defined]
            assert loads.slot != other.slot

            calm = client.get("/healthz")
            assert calm.status_code == 200
            assert "connection" not in calm.headers
            assert loads.in_flight == 0  # counted back down

            loads.started()  # as if two more requests of this worker were in flight
            loads.started()
            busy = client.get("/healthz")
            assert busy.status_code == 200
            assert busy.json()["status"] == "ok"  # the answer itself is whole
            assert busy.headers["connection"] == "close"
            assert busy.headers["x-request-id"]

            for _ in range(3):  # the other worker as busy: nowhere better to go
                other.started()
            assert "connection" not in client.get("/healthz").headers
            loads.finished()
            loads.finished()
    finally:
        other.close()


def test_one_worker_balances_nothing(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOAD_DIR_VARIABLE, raising=False)
    with TestClient(create_app(settings)) as client:
        assert client.app.state.worker_loads is None  # type: ignore[attr-defined]
        assert "connection" not in client.get("/healthz").headers
