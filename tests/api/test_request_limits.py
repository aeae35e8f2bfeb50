"""Wire-level limits (ROBUSTNESS I01-I05, I26): a real uvicorn server, raw sockets where the
client has to misbehave in ways httpx will not."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from app.config import Settings
from app.main import create_app
from tests.servers import in_thread

MAX_MESSAGE_BYTES = 64 * 1024
MAX_REQUEST_BYTES = 256 * 1024


@pytest.fixture
def server(database_url: str) -> Iterator[str]:
    settings = Settings(
        database_url=database_url,
        max_message_bytes=MAX_MESSAGE_BYTES,
        max_request_bytes=MAX_REQUEST_BYTES,
        receive_timeout_seconds=1.0,
        _env_file=None,  # type: ignore[call-arg]
    )
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=0, log_level="warning")
    with in_thread(config) as (host, port):
        yield f"{host}:{port}"


def raw_exchange(
    address: str,
    head: bytes,
    body_parts: list[bytes],
    *,
    pause: float = 0.0,
    read_timeout: float = 5.0,
) -> bytes:
    """Send a request head and body parts (pausing between them); return what came back."""
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=read_timeout) as sock:
        sock.sendall(head)
        for part in body_parts:
            if pause:
                time.sleep(pause)
            try:
                sock.sendall(part)
            except (BrokenPipeError, ConnectionResetError):
                break
        received = b""
        try:
            while not _complete(received):
                data = sock.recv(65536)
                if not data:
                    break
                received += data
        except (TimeoutError, ConnectionResetError):
            pass
        return received


def _complete(response: bytes) -> bool:
    head, separator, body = response.partition(b"\r\n\r\n")
    if not separator:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def test_an_empty_body_is_refused_with_422(server):
    response = httpx.post(
        f"http://{server}/classify", content=b"", headers={"content-type": "message/rfc822"}
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_input"


def test_a_message_over_the_limit_is_refused_by_content_length_before_its_body_is_sent(server):
    head = (
        b"POST /classify HTTP/1.1\r\nHost: localhost\r\nContent-Type: message/rfc822\r\n"
        b"Content-Length: %d\r\n\r\n" % (MAX_MESSAGE_BYTES + 1)
    )
    started = time.monotonic()
    response = raw_exchange(server, head, [], read_timeout=3)  # the body is never sent
    assert status_of(response) == 413
    assert b"message_too_large" in response
    assert time.monotonic() - started < 2


def test_a_message_at_the_limit_is_accepted(server):
    body = b"Subject: hello from a message exactly at the size limit\n\n" + b"word " * (
        MAX_MESSAGE_BYTES // 5
    )
    body = body[:MAX_MESSAGE_BYTES]
    response = httpx.post(
        f"http://{server}/train?label=ham", content=body, headers={"content-type": "message/rfc822"}
    )
    assert response.status_code == 200


def test_a_chunked_message_is_cut_off_once_it_passes_the_limit(server):
    head = (
        b"POST /classify HTTP/1.1\r\nHost: localhost\r\nContent-Type: message/rfc822\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"x" * 16384
    parts = [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 8 + [b"0\r\n\r\n"]
    response = raw_exchange(server, head, parts)
    assert status_of(response) == 413


def test_a_json_request_over_the_request_limit_is_refused_before_it_is_read(server):
    head = (
        b"POST /v1/models/default/train/batch HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (MAX_REQUEST_BYTES + 1)
    )
    response = raw_exchange(server, head, [], read_timeout=3)
    assert status_of(response) == 413


def test_a_compressed_request_body_is_refused_with_415(server):
    response = httpx.post(
        f"http://{server}/classify",
        content=b"\x1f\x8b\x08\x00",
        headers={"content-type": "message/rfc822", "content-encoding": "gzip"},
    )
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_a_body_that_trickles_is_dropped_at_the_receive_deadline(server):
    head = (
        b"POST /classify HTTP/1.1\r\nHost: localhost\r\nContent-Type: message/rfc822\r\n"
        b"Content-Length: 1000\r\n\r\n"
    )
    started = time.monotonic()
    response = raw_exchange(
        server, head, [b"Subject: x\n\n"] + [b"a"] * 5, pause=0.4, read_timeout=5
    )
    assert status_of(response) == 408
    assert time.monotonic() - started < 4


def test_other_clients_are_served_while_one_trickles(server):
    """While one client trickles its body (held until the 1 s receive deadline), another is
    answered: a causal check, not a time limit, so a busy CI machine cannot fail it."""
    head = (
        b"POST /classify HTTP/1.1\r\nHost: localhost\r\nContent-Type: message/rfc822\r\n"
        b"Content-Length: 1000\r\n\r\n"
    )
    answers: list[bytes] = []
    ended: list[float] = []

    def trickle() -> None:
        answers.append(raw_exchange(server, head, [b"a"] * 8, pause=0.3))
        ended.append(time.monotonic())

    slow = threading.Thread(target=trickle)
    slow.start()
    try:
        time.sleep(0.1)  # the trickling request is in
        response = httpx.get(f"http://{server}/healthz")
        answered = time.monotonic()
        assert response.status_code == 200
    finally:
        slow.join()
    assert status_of(answers[0]) == 408  # dropped at the receive deadline
    assert answered < ended[0]


def test_a_query_parameter_the_operation_does_not_take_is_refused_with_422(server):
    """A misspelt parameter (`?lable=spam`) must not look as if it worked."""
    misspelt = httpx.post(
        f"http://{server}/train?lable=spam",
        content=b"Subject: hi\n\nhello",
        headers={"content-type": "message/rfc822"},
    )
    listed = httpx.get(f"http://{server}/v1/models?limit=1&sort=name")
    taken = httpx.get(f"http://{server}/v1/models?limit=1")
    assert misspelt.status_code == listed.status_code == 422
    assert misspelt.json()["error"]["code"] == "invalid_input"
    assert "'lable'" in misspelt.json()["error"]["message"]
    assert "'sort'" in listed.json()["error"]["message"]
    assert taken.status_code == 200
