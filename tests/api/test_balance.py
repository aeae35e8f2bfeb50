"""Keep-alive connections spread over the workers: a worker serving two connections or more
beyond another answers with `Connection: close`, and the client reconnects.

The server here is uvicorn with spamsift's connection protocol, as `spamsift serve` runs it,
in this process; the test plays the other worker by holding the other slot."""

from __future__ import annotations

import functools
import signal
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import uvicorn

from app import balance
from app.balance import ACTIVE_SECONDS, LOAD_DIR_VARIABLE, SlotsTaken, WorkerLoads
from app.config import Settings
from app.connections import ConnectionLimits, LimitedHttpToolsProtocol
from app.main import create_app
from tests.ops.server import running_server, serve_env
from tests.servers import in_thread

HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"


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
    with pytest.raises(SlotsTaken, match="worker slots"):
        WorkerLoads(tmp_path, 2)

    first.saw("a")
    first.saw("a")  # the same connection again
    assert second.others() == [1]
    assert not first.busier_than_another()  # moving the one connection evens nothing out
    first.saw("b")
    assert second.others() == [2]
    assert first.busier_than_another()
    assert not second.busier_than_another()
    second.saw("c")
    assert not first.busier_than_another()
    first.ended("b")
    assert second.others() == [1]
    first.ended("b")  # its end told twice (closed after its answer, then gone)
    assert second.others() == [1]

    clock.now += ACTIVE_SECONDS + 1  # a connection quiet that long no longer counts
    first.saw("d")
    assert second.others() == [1]
    # nor does a worker whose connections all fell quiet, though it published no change
    assert first.others() == [0]
    second.saw("e")
    assert first.others() == [1]

    first.close()  # a worker gone: its slot is free, and its successor starts at 0
    successor = WorkerLoads(tmp_path, 2)
    assert successor.slot == first.slot
    assert second.others() == [0]
    successor.close()
    second.close()


@pytest.fixture
def serve_in_process(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[Path | None], tuple[str, int]]]:
    """Start uvicorn with spamsift's connection protocol, as one of two workers sharing
    a directory (or as the only worker, for None); return its address. A connection counts
    however long the test takes between its requests (a loaded machine's pause is no
    connection falling quiet)."""
    monkeypatch.setattr(balance, "ACTIVE_SECONDS", 3600.0)
    with ExitStack() as running:

        def start(load_dir: Path | None) -> tuple[str, int]:
            if load_dir is None:
                monkeypatch.delenv(LOAD_DIR_VARIABLE, raising=False)
            else:
                monkeypatch.setenv(LOAD_DIR_VARIABLE, f"{load_dir}:2")
            limits = ConnectionLimits.from_settings(settings, max_connections=100)
            config = uvicorn.Config(
                create_app(settings),
                host="127.0.0.1",
                port=0,
                log_level="warning",
                http=functools.partial(LimitedHttpToolsProtocol, limits=limits),  # type: ignore[arg-type]
                ws="none",
            )
            return running.enter_context(in_thread(config))

        yield start


def exchange(sock: socket.socket) -> dict[str, str]:
    """Send GET /healthz on `sock`; return the answer's headers, its whole body read."""
    sock.sendall(HEALTHZ)
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 200")
    headers = {
        name.strip().lower(): value.strip()
        for name, _, value in (line.partition(":") for line in lines[1:])
    }
    while len(body) < int(headers["content-length"]):
        body += sock.recv(65536)
    assert b'"ok"' in body  # the answer itself is whole
    return headers


def eventually(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + 10
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_busier_worker_closes_a_connection_after_a_complete_answer(
    serve_in_process: Callable[[Path | None], tuple[str, int]], tmp_path: Path
) -> None:
    other = WorkerLoads(tmp_path, 2)  # the other worker, serving no connection
    address = serve_in_process(tmp_path)
    with ExitStack() as opened:
        opened.callback(other.close)

        def connect() -> socket.socket:
            return opened.enter_context(socket.create_connection(address, timeout=30))

        first = connect()
        assert "connection" not in exchange(first)
        assert other.others() == [1]

        second = connect()
        assert exchange(second)["connection"] == "close"  # two here, none there
        assert second.recv(1) == b""  # and closed after it
        second.close()
        assert other.others() == [1]

        other.saw("x")  # the other worker as busy: nowhere better to go
        other.saw("y")
        third = connect()
        assert "connection" not in exchange(third)
        assert "connection" not in exchange(first)
        assert other.others() == [2]
        other.ended("y")  # the other worker serves one

        # A connection its client closed stops counting at once, not after ACTIVE_SECONDS
        # (nor at this worker's next request): with it gone, a new one here makes two
        # against one, no reason to move.
        third.close()
        assert eventually(lambda: other.others() == [1])
        fourth = connect()
        assert "connection" not in exchange(fourth)
        assert other.others() == [2]
        first.close()
        fourth.close()
        assert eventually(lambda: other.others() == [0])


def test_a_worker_without_a_free_slot_serves_and_claims_one_when_it_is_freed(
    serve_in_process: Callable[[Path | None], tuple[str, int]], tmp_path: Path
) -> None:
    # As when uvicorn starts a worker's replacement before it stops the worker (SIGHUP).
    held = [WorkerLoads(tmp_path, 2), WorkerLoads(tmp_path, 2)]
    address = serve_in_process(tmp_path)
    with ExitStack() as opened:
        opened.callback(lambda: [loads.close() for loads in held])
        first, second = (
            opened.enter_context(socket.create_connection(address, timeout=30)) for _ in range(2)
        )
        for connection in (first, second):
            assert "connection" not in exchange(connection)  # served, nothing to balance by

        replaced = held.pop()  # the worker it replaces stops
        replaced.close()
        remaining = held[0]
        third = opened.enter_context(socket.create_connection(address, timeout=30))
        assert "connection" not in exchange(third)  # its first connection claims the slot
        assert remaining.others() == [1]
        # Connections from before the claim are not counted; those since are.
        fourth = opened.enter_context(socket.create_connection(address, timeout=30))
        assert exchange(fourth)["connection"] == "close"  # two here, none there


def test_a_worker_whose_directory_is_gone_serves_without_balancing(
    serve_in_process: Callable[[Path | None], tuple[str, int]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    address = serve_in_process(tmp_path / "emptied by a cleaner")
    with ExitStack() as opened:
        connections = [
            opened.enter_context(socket.create_connection(address, timeout=30)) for _ in range(3)
        ]
        for connection in connections:
            assert "connection" not in exchange(connection)
    said = [r.getMessage() for r in caplog.records if "does not balance" in r.getMessage()]
    assert len(said) == 1, said


def test_one_worker_balances_nothing(
    serve_in_process: Callable[[Path | None], tuple[str, int]],
) -> None:
    address = serve_in_process(None)
    with ExitStack() as opened:
        connections = [
            opened.enter_context(socket.create_connection(address, timeout=30)) for _ in range(3)
        ]
        for _ in range(2):
            for connection in connections:
                assert "connection" not in exchange(connection)


@pytest.mark.slow
def test_sighup_replaces_each_worker_of_a_server_with_two(tmp_path: Path) -> None:
    # uvicorn's supervisor starts each replacement before it stops the worker it replaces:
    # the replacement must serve while both of the old workers' slots are still held.
    with running_server(tmp_path, serve_env(tmp_path), "--workers", "2") as server:
        server.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 120
        while server.output().count("Terminated child process") < 2:
            output = server.output()
            assert "aborting the restart" not in output, output
            assert server.process.poll() is None, output
            assert time.monotonic() < deadline, output
            time.sleep(0.2)
        assert server.output().count("Started server process") == 4
        assert httpx.get(f"{server.url}/healthz", timeout=30).status_code == 200
        assert "Traceback" not in server.output()
