"""`spamsift serve --limit-concurrency N`: beyond N connections and requests in flight, uvicorn
answers 503 at once instead of queueing (ROBUSTNESS F13)."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.cli.conftest import running_server


def status_while_another_connection_is_open(url: str) -> int:
    """GET /healthz while a second client holds a connection open, as a slow client does."""
    address = urlsplit(url)
    with socket.create_connection((address.hostname, address.port)) as idle:
        idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # the request never ends
        return httpx.get(f"{url}/healthz", timeout=10).status_code


def test_serve_with_limit_concurrency_answers_503_beyond_the_limit(
    database_url: str, tmp_path: Path
) -> None:
    with running_server(database_url, tmp_path, "--limit-concurrency", "2") as url:
        assert status_while_another_connection_is_open(url) == 503
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200  # and recovers


def test_serve_without_a_limit_queues_nobody_out(server: str) -> None:
    assert status_while_another_connection_is_open(server) == 200
