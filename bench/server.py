"""A real `spamsift serve` subprocess, and a light HTTP/1.1 load generator for it.

The load generator runs in the benchmark's own process on asyncio, one keep-alive connection
per client, writing requests and reading Content-Length bodies by hand: it costs far less CPU
per request than a full client library, but it still shares the machine's cores with the
server, which the tables say.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import app
from app.text.core import CoreChoice
from bench.timing import process_cpu_seconds, summary

REPO = Path(app.__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    host: str
    port: int
    process: subprocess.Popen[bytes]

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def pids(self) -> list[int]:
        """The server's process and its worker processes."""
        found = [self.process.pid]
        index = 0
        while index < len(found):
            pid = found[index]
            index += 1
            for task in Path(f"/proc/{pid}/task").glob("*/children"):
                found.extend(int(child) for child in task.read_text().split())
        return found

    def cpu_seconds(self) -> float:
        """User + system CPU seconds used so far by the server's processes."""
        return sum(filter(None, map(process_cpu_seconds, self.pids())))

    def rss_bytes(self) -> dict[int, int]:
        """Resident set size of each process of the server (the supervisor included)."""
        result = {}
        for pid in self.pids():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except FileNotFoundError:
                continue
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    result[pid] = int(line.split()[1]) * 1024
        return result


@contextmanager
def serve(
    database_url: str,
    *,
    workers: int,
    folder: Path,
    tokenizer: CoreChoice | None = None,
    repo: Path = REPO,
) -> Iterator[Server]:
    """Run `spamsift serve --workers N` on a free port until the block ends.

    SPAMSIFT_LOG_LEVEL=warning: no access log line per request; time budgets of 600 s.
    `tokenizer` sets SPAMSIFT_TOKENIZER (None: whatever the environment says); `repo` is the
    checkout whose code the server runs (by default this one).
    """
    port = free_port()
    env = {
        **os.environ,
        "SPAMSIFT_DATABASE_URL": database_url,
        "SPAMSIFT_LOG_LEVEL": "warning",
        # Every message tokenized in full: a request's time budget would otherwise score late
        # messages of a big batch on part of their tokens (faster, but not the same work).
        "SPAMSIFT_CLASSIFY_TIME_BUDGET_SECONDS": "600",
        "SPAMSIFT_TRAIN_TIME_BUDGET_SECONDS": "600",
        # The server runs the same code as the benchmark (a checkout other than the installed
        # one, when comparing before and after).
        "PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
    }
    if tokenizer is not None:
        env["SPAMSIFT_TOKENIZER"] = tokenizer
    log = folder / f"server-{port}.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli.main",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                str(workers),
            ],
            cwd=folder,  # no stray .env is read
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    server = Server("127.0.0.1", port, process)
    try:
        _wait_until_ready(server, log, workers)
        yield server
    except Exception as error:
        # The folder is often a temporary one, gone once the failure is reported: keep what
        # the server said (a worker restarted, a connection refused) with the error.
        error.add_note(f"spamsift serve's log ({log}), last 4,000 characters:\n{_tail(log)}")
        raise
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _tail(log: Path, characters: int = 4000) -> str:
    try:
        return log.read_text(errors="replace")[-characters:]
    except OSError as error:
        return f"(unreadable: {error})"


def _wait_until_ready(server: Server, log: Path, workers: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"spamsift serve exited: {_tail(log, 2000)}")
        try:
            with urllib.request.urlopen(f"{server.base_url}/readyz", timeout=1) as answer:
                if answer.status == 200 and len(server.pids()) >= (
                    1 if workers == 1 else workers + 1
                ):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(
        "spamsift serve not ready in 120 s (uvicorn restarts a worker that takes over 5 s to "
        f"start, as on a very busy machine): {_tail(log, 2000)}"
    )


# --------------------------------------------------------------------- load generator


@dataclass(frozen=True)
class Request:
    path: str
    body: bytes
    content_type: str = "application/json"


def json_request(path: str, payload: Any) -> Request:
    return Request(path, json.dumps(payload).encode("utf-8"))


@dataclass
class LoadResult:
    seconds: float
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    bodies: list[bytes] = field(default_factory=list)
    # CPU seconds of the server's processes and of the load generator (this process) while
    # the load ran: on a shared machine the generator's share is taken from the server.
    server_cpu_seconds: float = 0.0
    client_cpu_seconds: float = 0.0
    # Answers that closed their connection (`Connection: close`, e.g. the workers' balancing):
    # the client's next request opened a new one.
    closed_by_server: int = 0

    @property
    def requests(self) -> int:
        return len(self.latencies)

    @property
    def errors(self) -> int:
        return sum(count for status, count in self.statuses.items() if status >= 400)


class _Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.closed_by_server = 0

    async def send(self, request: Request) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        head = (
            f"POST {request.path} HTTP/1.1\r\nHost: {self.host}\r\n"
            f"Content-Type: {request.content_type}\r\nContent-Length: {len(request.body)}\r\n\r\n"
        ).encode("ascii")
        self.writer.write(head + request.body)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("server closed the connection")
        status = int(status_line.split()[1])
        length = 0
        close = False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
        body = await self.reader.readexactly(length)
        if close:
            self.closed_by_server += 1
            await self.close()
        return status, body

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with suppress(OSError):
                await self.writer.wait_closed()
        self.reader = self.writer = None


def run_load(
    server: Server,
    requests: Sequence[Request],
    *,
    clients: int,
    total: int | None = None,
    rate_per_s: float | None = None,
    keep_bodies: bool = False,
) -> LoadResult:
    """Send `total` requests (default: each of `requests` once, cycling) from `clients`
    concurrent keep-alive connections.

    Closed loop by default: each client sends its next request when the answer came. With
    `rate_per_s`, an open loop: requests are scheduled at that total rate and each latency
    is measured from its scheduled time, so a slow answer also counts the wait it caused.
    """
    server_cpu, client_cpu = server.cpu_seconds(), time.process_time()
    result = asyncio.run(
        _run_load(server, requests, clients, total or len(requests), rate_per_s, keep_bodies)
    )
    result.server_cpu_seconds = server.cpu_seconds() - server_cpu
    result.client_cpu_seconds = time.process_time() - client_cpu
    return result


async def _run_load(
    server: Server,
    requests: Sequence[Request],
    clients: int,
    total: int,
    rate_per_s: float | None,
    keep_bodies: bool,
) -> LoadResult:
    result = LoadResult(seconds=0.0)
    bodies: dict[int, bytes] = {}
    next_index = 0
    started = time.perf_counter()

    async def client() -> None:
        nonlocal next_index
        connection = _Connection(server.host, server.port)
        try:
            while next_index < total:
                index = next_index
                next_index += 1
                scheduled = time.perf_counter()
                if rate_per_s is not None:
                    scheduled = started + index / rate_per_s
                    delay = scheduled - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                status, body = await connection.send(requests[index % len(requests)])
                result.latencies.append(time.perf_counter() - scheduled)
                result.statuses[status] = result.statuses.get(status, 0) + 1
                if keep_bodies:
                    bodies[index] = body
        finally:
            result.closed_by_server += connection.closed_by_server
            await connection.close()

    await asyncio.gather(*(client() for _ in range(clients)))
    result.seconds = time.perf_counter() - started
    result.bodies = [bodies[i] for i in sorted(bodies)]
    return result


def percentiles_ms(latencies: Sequence[float]) -> dict[str, float]:
    ordered = sorted(latencies)

    def at(q: float) -> float:
        if not ordered:
            return float("nan")
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {"p50": at(0.50), "p95": at(0.95), "p99": at(0.99)}


def summarize_runs(results: Sequence[LoadResult], items_per_request: int = 1) -> dict[str, Any]:
    """Median and spread over runs of throughput (items/s) and latency percentiles (ms)."""
    throughput = [r.requests * items_per_request / r.seconds for r in results]
    per_run = [percentiles_ms(r.latencies) for r in results]
    return {
        "items_per_s": summary(throughput, digits=1),
        "p50_ms": summary([p["p50"] for p in per_run], digits=2),
        "p95_ms": summary([p["p95"] for p in per_run], digits=2),
        "p99_ms": summary([p["p99"] for p in per_run], digits=2),
        "server_cpu_ms_per_request": summary(
            [r.server_cpu_seconds * 1000 / max(r.requests, 1) for r in results], digits=3
        ),
        "client_cpu_ms_per_request": summary(
            [r.client_cpu_seconds * 1000 / max(r.requests, 1) for r in results], digits=3
        ),
        "requests": sum(r.requests for r in results),
        "errors": sum(r.errors for r in results),
    }
