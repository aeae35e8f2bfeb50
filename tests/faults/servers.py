"""Real processes for the fault tests: uvicorn servers and a throw-away PostgreSQL cluster.

Servers run in their own session (process group), so `kill -9` reaches every worker and
nothing outlives the test. The cluster is the test's own (`initdb` + `pg_ctl` on a free port,
trust auth, as the `postgres` user when run as root), so stopping it disturbs no one else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tests.conftest import TEST_ENVIRONMENT
from tests.servers import free_port, wait_until_ready

REPO = Path(__file__).resolve().parents[2]
PG_BIN_DIRS = ("/usr/local/bin", "/usr/lib/postgresql/15/bin")


def server_env(database_url: str, **settings: str) -> dict[str, str]:
    """The environment of a server process: the test's own database and SPAMSIFT_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPAMSIFT_")}
    env.update(TEST_ENVIRONMENT)  # no min_learns floor: see tests/conftest.py
    env.update({"SPAMSIFT_DATABASE_URL": database_url, "PYTHONPATH": str(REPO)})
    env.update({f"SPAMSIFT_{key.upper()}": value for key, value in settings.items()})
    return env


class Server:
    """One `uvicorn app.main:create_worker_app --factory` (or `spamsift serve`) process, with its
    workers, on a free port."""

    def __init__(
        self,
        database_url: str,
        workdir: Path,
        *,
        name: str = "server",
        workers: int = 1,
        uvicorn_args: Sequence[str] = (),
        settings: dict[str, str] | None = None,
        cli: bool = False,
    ) -> None:
        self.database_url = database_url
        self.workdir = workdir
        self.name = name
        self.workers = workers
        self.uvicorn_args = list(uvicorn_args)
        self.settings = settings or {}
        self.cli = cli  # `spamsift serve …` (migrates first) instead of uvicorn itself
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def command(self) -> list[str]:
        if self.cli:
            return [
                *(sys.executable, "-m", "app.cli.main", "serve", "--host", "127.0.0.1"),
                *("--port", str(self.port), "--workers", str(self.workers), *self.uvicorn_args),
            ]
        command = [sys.executable, "-m", "uvicorn", "app.main:create_worker_app", "--factory"]
        command += ["--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"]
        if self.workers > 1:
            command += ["--workers", str(self.workers)]
        return command + self.uvicorn_args

    def start(self, *, wait: bool = True) -> Server:
        self.starts += 1
        with self.log.open("ab") as output:
            output.write(f"--- start {self.starts}: {' '.join(self.command())}\n".encode())
            output.flush()
            self.process = subprocess.Popen(
                self.command(),
                cwd=self.workdir,  # no stray .env is read
                env=server_env(self.database_url, **self.settings),
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        assert self.process is not None
        wait_until_ready(self.url, self.process, self.log_text, seconds=timeout, name=self.name)

    def kill(self) -> None:
        """kill -9 the server and every worker of it (its whole process group)."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        """Stop gracefully (SIGTERM), or kill after 15 s."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError):  # orphaned workers, if any
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self.process = None

    def rss_bytes(self) -> int:
        """Resident memory of the server process (the one uvicorn worker when --workers 1)."""
        assert self.process is not None
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


def pg_binary(name: str) -> str | None:
    for directory in PG_BIN_DIRS:
        path = Path(directory) / name
        if path.exists():
            return str(path)
    return shutil.which(name)


class PostgresCluster:
    """A PostgreSQL cluster of the test's own, in a temporary directory, on a free port."""

    def __init__(self) -> None:
        initdb, pg_ctl = pg_binary("initdb"), pg_binary("pg_ctl")
        if initdb is None or pg_ctl is None:
            raise FileNotFoundError("initdb / pg_ctl not found")
        self.initdb, self.pg_ctl = initdb, pg_ctl
        self.root = Path(tempfile.mkdtemp(prefix="spamsift-pg-"))
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: run the cluster as the postgres user
            shutil.chown(self.root, user="postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.data = self.root / "data"
        self.port = free_port()
        self.log = self.root / "postgres.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.as_user, *command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
            cwd=self.root,
        )

    def init(self) -> None:
        self._run(self.initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def start(self) -> None:
        # synchronous_commit=on (the default): an acknowledged commit is on disk (ROBUSTNESS F07).
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c synchronous_commit=on -c max_connections=100"
        )
        self._run(
            self.pg_ctl, "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        self._run(self.pg_ctl, "-D", str(self.data), "-m", mode, "-w", "stop")

    def is_running(self) -> bool:
        result = subprocess.run(
            [*self.as_user, self.pg_ctl, "-D", str(self.data), "status"],
            capture_output=True,
            check=False,
        )
        return result.returncode == 0

    def remove(self) -> None:
        if self.is_running():
            with contextlib.suppress(subprocess.SubprocessError):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
