"""Real server processes in tests: a free port, and waiting until one is ready to serve."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable

import httpx

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
