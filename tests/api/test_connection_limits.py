"""What a client without a key can do to `spamsift serve` with connections alone: hold them
idle, trickle a head, send a huge one, or keep sending after an early answer.

Each test runs the real server (the console script, app/connections.py as its protocol)
and speaks raw sockets or Python's http.client, the way such clients do.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import resource
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.exceptions import RequestValidationError
from starlette.requests import Request

from app.api import deps
from app.api.schemas import TrainBatchRequest
from app.config import Settings
from app.main import create_app
from tests.api.test_hostile_clients import ADMIN_KEY, rss_kib
from tests.ops.server import Server, running_server, serve_env

SYSTEMD_DEFAULT_SOFT_LIMIT = 1024  # descriptors of a service without LimitNOFILE
MIB = 1024 * 1024
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"


@contextmanager
def soft_descriptor_limit(limit: int) -> Iterator[None]:
    """Lower this process's soft descriptor limit while a server started here inherits it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def address(server: Server) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


def connect(server: Server, *, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(address(server), timeout=60, source_address=(source, 0))
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or resets it)."""
    received = b""
    try:
        while data := sock.recv(65536):
            received += data
    except ConnectionResetError:
        pass
    return received


def read_answer(sock: socket.socket) -> bytes:
    """One whole answer (head and its Content-Length of body) from a kept-alive connection."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def healthz_from(server: Server, source: str) -> int:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=30) as client:
        return client.get(f"{server.url}/healthz").status_code


def idle_rss(server: Server) -> int:
    """The server's resident memory now, its peak reset to it (VmHWM counts from here)."""
    pid = server.process.pid
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return rss_kib(pid)


# --- idle and slow connections --------------------------------------------------------------------


@pytest.mark.slow
def test_two_thousand_idle_connections_from_one_address_leave_a_new_client_served(
    tmp_path: Path,
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2_200:
        pytest.skip(f"2,000 sockets need more descriptors than the hard limit {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2_200), hard))
    env = serve_env(tmp_path, SPAMSIFT_HEADER_TIMEOUT_SECONDS="60")
    with ExitStack() as stack:
        with soft_descriptor_limit(SYSTEMD_DEFAULT_SOFT_LIMIT):
            server = stack.enter_context(running_server(tmp_path, env))
        idle = [stack.enter_context(connect(server)) for _ in range(2_000)]

        other_client = healthz_from(server, "127.0.0.2")
        same_address_refused = read_until_closed(idle[-1])

    assert other_client == 200
    assert same_address_refused.startswith(b"HTTP/1.1 503 "), same_address_refused[:200]
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.slow
def test_a_connection_that_sends_nothing_is_closed_at_the_header_timeout(tmp_path: Path) -> None:
    env = serve_env(tmp_path, SPAMSIFT_HEADER_TIMEOUT_SECONDS="1")

    with running_server(tmp_path, env) as server, connect(server) as sock:
        assert read_until_closed(sock) == b""  # closed, nothing said (it asked nothing)


@pytest.mark.slow
def test_a_head_that_trickles_is_cut_off_at_the_header_timeout(tmp_path: Path) -> None:
    env = serve_env(tmp_path, SPAMSIFT_HEADER_TIMEOUT_SECONDS="1")

    with running_server(tmp_path, env) as server, connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        sock.settimeout(0.5)
        received = b""
        cut_off = False
        for _ in range(120):  # a minute of one byte every half second, unless cut off
            try:
                data = sock.recv(65536)
            except TimeoutError:
                data = None
            except ConnectionResetError:
                cut_off = True
                break
            if data is not None:
                received += data
                cut_off = not data or b"408" in received
                if cut_off:
                    break
            try:
                sock.sendall(b"a")
            except (BrokenPipeError, ConnectionResetError):
                cut_off = True
                break

    assert cut_off
    assert received in (b"",) or received.startswith(b"HTTP/1.1 408 "), received[:200]


@pytest.mark.slow
def test_a_kept_alive_connection_is_served_again_and_closed_once_idle(tmp_path: Path) -> None:
    env = serve_env(tmp_path, SPAMSIFT_KEEP_ALIVE_TIMEOUT_SECONDS="1")

    with running_server(tmp_path, env) as server, connect(server) as sock:
        answers = []
        for _ in range(3):
            sock.sendall(HEALTHZ)
            answers.append(read_answer(sock))
        after_idle = read_until_closed(sock)

    assert all(answer.startswith(b"HTTP/1.1 200 ") for answer in answers), answers
    assert after_idle == b""


# --- huge heads ------------------------------------------------------------------------------


def test_a_32_mb_header_is_refused_with_431_without_being_held_in_memory(tmp_path: Path) -> None:
    env = serve_env(tmp_path)

    with running_server(tmp_path, env) as server:
        idle_kib = idle_rss(server)
        with connect(server) as sock:
            sock.sendall(
                b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: "
                + b"a" * (32 * MIB)
                + b"\r\n\r\n"
            )
            answer = read_until_closed(sock)
        peak_kib = rss_kib(server.process.pid, "VmHWM")
        other_client = healthz_from(server, "127.0.0.1")

    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b"request_header_fields_too_large" in answer
    assert other_client == 200
    assert peak_kib - idle_kib < 8 * 1024, (idle_kib, peak_kib)


@pytest.mark.slow
def test_ten_unfinished_30_mb_heads_are_refused_closed_and_not_held(tmp_path: Path) -> None:
    env = serve_env(tmp_path, SPAMSIFT_LINGERING_CLOSE_SECONDS="2")

    def unfinished_head(server: Server) -> bytes:
        with connect(server) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * (30 * MIB))
            return read_until_closed(sock)  # the client says no more, and waits

    with running_server(tmp_path, env) as server:
        idle_kib = idle_rss(server)
        with ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(unfinished_head, [server] * 10))
        peak_kib = rss_kib(server.process.pid, "VmHWM")

    assert all(answer.startswith(b"HTTP/1.1 431 ") for answer in answers), answers
    assert peak_kib - idle_kib < 16 * 1024, (idle_kib, peak_kib)


# --- answers before the body: lingering close -----------------------------------------------------


def post_with_http_client(server: Server, path: str, body: bytes) -> int | str:
    """POST `body` as Python's http.client does (all of it, then read); the status, or the
    error that came instead."""
    host, port = address(server)
    connection = http.client.HTTPConnection(host, port, timeout=120)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        return connection.getresponse().status
    except OSError as error:
        return type(error).__name__
    finally:
        connection.close()


@pytest.mark.slow
def test_keyless_60_mb_bodies_each_read_their_401_from_a_server_with_two_workers(
    tmp_path: Path,
) -> None:
    # With two workers, one that serves more connections answers with `Connection: close`
    # (app/balance.py): without lingering close those clients got a reset.
    env = serve_env(tmp_path, SPAMSIFT_ADMIN_KEY=ADMIN_KEY)
    body = b'{"items": [' + b'{"text": "x", "label": "spam"},' * (60_000_000 // 31) + b"{}]}"
    paths = ["/v1/models/default/train/batch", "/v1/models/default/classify/batch", "/v1/models"]

    with running_server(tmp_path, env, "--workers", "2") as server:
        statuses = []
        for _ in range(4):
            with ThreadPoolExecutor(len(paths)) as pool:
                statuses += pool.map(lambda path: post_with_http_client(server, path, body), paths)
        health = healthz_from(server, "127.0.0.1")

    assert statuses == [401] * len(statuses)
    assert health == 200


@pytest.mark.slow
def test_a_body_over_the_limit_reads_its_413_and_costs_no_memory(tmp_path: Path) -> None:
    env = serve_env(tmp_path, SPAMSIFT_ADMIN_KEY=ADMIN_KEY)
    body = b"x" * (100 * MIB)  # refused by Content-Length, which closes the connection

    with running_server(tmp_path, env) as server:
        idle_kib = idle_rss(server)
        statuses = [post_with_http_client(server, "/classify", body) for _ in range(3)]
        peak_kib = rss_kib(server.process.pid, "VmHWM")

    assert statuses == [413] * 3
    assert peak_kib - idle_kib < 64 * 1024, (idle_kib, peak_kib)


# --- large bodies are parsed off the event loop ------------------------------------------------

BATCH_TEXT = ('Dear friend,\n\tcheap watches \u00e9t\u00e9 "now" ' * 500)[:20_000]


def parse_batch_body(settings: Settings, body: bytes) -> tuple[Any, int]:
    """Run the batch route's body dependency on an event loop with a ticker beside it; return
    what it parsed (or the exception it raised) and how often the ticker ran meanwhile."""
    app = create_app(settings)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/models/default/train/batch",
        "headers": [(b"content-type", b"application/json")],
        "app": app,
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def run() -> tuple[Any, int]:
        ticks = 0
        stopped = False

        async def ticker() -> None:
            nonlocal ticks
            while not stopped:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        before = ticks
        try:
            parsed: Any = await deps.train_batch_input(Request(scope, receive))
        except RequestValidationError as error:
            parsed = error
        meanwhile = ticks - before
        stopped = True
        await task
        return parsed, meanwhile

    return asyncio.run(run())


def test_a_large_batch_is_parsed_while_the_event_loop_goes_on_serving(settings: Settings) -> None:
    body = json.dumps({"items": [{"raw": BATCH_TEXT, "label": "spam"}] * 1000}).encode()

    parsed, loop_ran_meanwhile = parse_batch_body(settings, body)

    assert loop_ran_meanwhile > 0  # parsed elsewhere: before, the loop ran nothing else
    assert parsed == TrainBatchRequest.model_validate_json(body)  # as parsing it whole


def test_a_large_batch_with_a_bad_item_names_it_as_parsing_it_whole_would(
    settings: Settings,
) -> None:
    items = [{"raw": BATCH_TEXT, "label": "spam"}] * 1000
    items[3] = {"raw": BATCH_TEXT, "label": 7}
    body = json.dumps({"items": items}).encode()

    parsed, _ = parse_batch_body(settings, body)

    assert isinstance(parsed, RequestValidationError)
    assert [error["loc"] for error in parsed.errors()] == [("items", 3, "label")]
