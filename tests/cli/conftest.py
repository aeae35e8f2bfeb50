"""The `spamsift` console script as a user runs it: a subprocess, against the local database of
SPAMSIFT_DATABASE_URL (SQLite file or PostgreSQL, from the `database_url` fixture) or, with
`--url`, against a real `spamsift serve` subprocess on that database."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import TEST_ENVIRONMENT
from tests.servers import free_port, wait_until_ready

# The console script installed beside this interpreter, as an operator runs it.
SPAMSIFT = str(Path(sys.executable).with_name("spamsift"))
BIN = str(Path(sys.executable).parent)


def clean_environment(database_url: str) -> dict[str, str]:
    """This process's environment without SPAMSIFT_* but the database, and the venv on PATH."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("SPAMSIFT_")}
    env.update(TEST_ENVIRONMENT)  # no min_learns floor: see tests/conftest.py
    env["SPAMSIFT_DATABASE_URL"] = database_url
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


@dataclass
class Cli:
    """Runs `spamsift …` on one database, from a scratch folder (so no stray .env is read)."""

    database_url: str
    cwd: Path

    def __call__(
        self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [SPAMSIFT, *args],
            input=input,
            env={**clean_environment(self.database_url), **(env or {})},
            cwd=self.cwd,
            capture_output=True,
            timeout=300,
        )

    def ok(self, *args: str, input: bytes | None = None) -> str:
        """Run, expect status 0, return stdout as text."""
        completed = self(*args, input=input)
        assert completed.returncode == 0, completed.stderr.decode()
        return completed.stdout.decode()


def run_on_terminal(cli: Cli, *args: str) -> tuple[subprocess.CompletedProcess[bytes], bytes]:
    """Run `spamsift …` with stderr on a pseudo-terminal, as an operator sees it; the run
    (stdout captured) and what the terminal showed."""
    leader, follower = pty.openpty()
    seen = bytearray()

    def read_terminal() -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: everything has been read
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=read_terminal)
    reader.start()
    try:
        completed = subprocess.run(
            [SPAMSIFT, *args],
            env=clean_environment(cli.database_url),
            cwd=cli.cwd,
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=120,
        )
    finally:
        os.close(follower)
        reader.join(timeout=10)
        os.close(leader)
    return completed, bytes(seen)


@pytest.fixture
def cli(database_url: str, tmp_path: Path) -> Cli:
    work = tmp_path / "cwd"
    work.mkdir()
    return Cli(database_url, work)


@contextmanager
def running_server(
    database_url: str, folder: Path, *options: str, env: dict[str, str] | None = None
) -> Iterator[str]:
    """Start `spamsift serve` on a free port; yield its URL once /readyz answers; stop it."""
    port = free_port()
    log = folder / f"server-{port}.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [SPAMSIFT, "serve", "--port", str(port), *options],
            env={**clean_environment(database_url), "SPAMSIFT_LOG_LEVEL": "warning", **(env or {})},
            cwd=folder,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, process, log.read_text, name="spamsift serve")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[str]:
    """A real `spamsift serve` subprocess on the test's database; its base URL."""
    folder = tmp_path / "server"
    folder.mkdir()
    with running_server(database_url, folder) as url:
        yield url
