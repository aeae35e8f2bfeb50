"""Real servers in tests: a free port, waiting until a server process is ready to serve, and
uvicorn run in a thread of the test's own process."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import uvicorn

START_SECONDS = 120.0  # two cores shared with other test runs: starting can be slow


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_ready(
    url: str,
    process: subprocess.Popen[bytes],
    output: Callable[[], str],
    *,
    seconds: float = START_SECONDS,
    name: str = "server",
) -> None:
    """Return once `url`/readyz answers 200; fail with the server's output if it exits or
    stays unready for `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{name} exited: {output()}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{name} not ready in {seconds:g} s: {output()}")


@contextmanager
def in_thread(config: uvicorn.Config) -> Iterator[tuple[str, int]]:
    """Run uvicorn with `config` (port 0: any free one) in a thread of this process until the
    block ends; yield the (host, port) it listens on."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_SECONDS
        while not server.started:
            assert thread.is_alive(), "the server stopped before it started"
            assert time.monotonic() < deadline, f"the server did not start in {START_SECONDS:g} s"
            time.sleep(0.01)
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        yield str(host), int(port)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
