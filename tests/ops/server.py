"""A real `spamsift serve` in a subprocess (the console script), its output kept in files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests import servers
from tests.conftest import TEST_ENVIRONMENT
from tests.servers import free_port

SPAMSIFT = Path(sys.executable).with_name("spamsift")


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    def output(self) -> str:
        """Everything the server wrote to stdout and stderr so far."""
        return self.stdout.read_text(errors="replace") + self.stderr.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def serve_env(tmp_path: Path, **settings: str) -> dict[str, str]:
    """The environment of a server on its own SQLite file, without inherited SPAMSIFT_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPAMSIFT_")}
    env.update(TEST_ENVIRONMENT)  # no min_learns floor: see tests/conftest.py
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env["SPAMSIFT_DATABASE_URL"] = f"sqlite:///{tmp_path / 'spamsift.db'}"
    env.update(settings)
    return env


@contextmanager
def running_server(
    tmp_path: Path, env: dict[str, str], *args: str, name: str = "server"
) -> Iterator[Server]:
    """Start `spamsift serve` on a free port in `tmp_path` (so no stray .env is read)."""
    port = free_port()
    stdout, stderr = tmp_path / f"{name}.stdout", tmp_path / f"{name}.stderr"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [str(SPAMSIFT), "serve", "--host", "127.0.0.1", "--port", str(port), *args],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=err,
        )
    server = Server(f"http://127.0.0.1:{port}", process, stdout, stderr)
    try:
        wait_until_ready(server)
        yield server
    finally:
        server.stop()


def wait_until_ready(server: Server) -> None:
    servers.wait_until_ready(server.url, server.process, server.output)
