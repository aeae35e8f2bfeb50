"""Logs never hold mail (SPEC §8, issue 4): canary strings in message text, subject, From/To
addresses, a token-like word, the client's message ids and the API key go through every
endpoint of a real `spamsift serve` at log level debug, and no trace of them, raw, lower-cased
(tokens are), URL- or JSON-escaped, appears in anything the server wrote. The same run checks
that every line is one JSON object with the request fields, and that no terminal control
character from a path or header reaches a line (ROBUSTNESS I38)."""

from __future__ import annotations

import json
import re
import socket
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, unquote_plus, urlsplit

import httpx
import pytest

from tests.ops.server import running_server, serve_env

ADMIN_KEY = "ss_cnryadminkey4x" + "0" * 48  # long enough not to be warned about
MARKERS = {
    "subject": "cnrysubj4x",
    "body": "cnrybody4x",
    "from": "cnryfrom4x",
    "to": "cnryto4x",
    "token": "cnrytok4x",
    "message_id": "cnrymid4x",
    "header": "cnryhdr4x",
    "json_field": "cnryfield4x",
    "label": "cnrylabel4x",
    "bad_key": "cnrybadkey4x",
    "path": "cnrypath4x",
}
SPAM_WORDS = "viagra casino lottery winner prize bitcoin jackpot bonus offer urgent claim wire"
HAM_WORDS = "meeting agenda quarterly report lunch project deadline review invoice budget team"
MAX_MESSAGE_BYTES = 20_000
MAX_REQUEST_BYTES = 300_000


def canary_message(kind: str, n: int, *, words: str = "") -> str:
    """An RFC 822 message with a canary in every place a message has something private."""
    words = words or (SPAM_WORDS if kind == "spam" else HAM_WORDS)
    return (
        f'From: "Canary Sender" <{MARKERS["from"]}{n}@sender.example>\r\n'
        f"To: {MARKERS['to']}{n}@rcpt.example\r\n"
        f"Subject: {MARKERS['subject']} {kind} number {n}\r\n"
        f"Message-ID: <{MARKERS['message_id']}hdr{n}@mail.example>\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n\r\n"
        f"{MARKERS['body']} {words} {MARKERS['token']}{n} and {MARKERS['token'].upper()}\r\n"
    )


def canary_text(kind: str, n: int) -> str:
    words = SPAM_WORDS if kind == "spam" else HAM_WORDS
    return f"{MARKERS['body']} {words} {MARKERS['token']} text {n}"


def message_id(n: int | str) -> str:
    return f"<{MARKERS['message_id']}{n}@mail.example>"


@dataclass
class Run:
    """What one server run saw: its output, and the answers it gave."""

    output: str
    raw_output: bytes
    json_lines: bool
    answers: list[tuple[str, str, int, dict[str, str]]] = field(default_factory=list)


def drive_every_endpoint(base_url: str) -> list[tuple[str, str, int, dict[str, str]]]:
    """Send canaries through every endpoint; return (method, path, status, headers) of each."""
    answers: list[tuple[str, str, int, dict[str, str]]] = []
    auth = {"Authorization": f"Bearer {ADMIN_KEY}"}
    rfc822 = {**auth, "content-type": "message/rfc822"}
    with httpx.Client(base_url=base_url, timeout=30, headers=auth) as client:

        def send(method: str, url: str, **kwargs: Any) -> httpx.Response:
            response = client.request(method, url, **kwargs)
            assert response.status_code < 500, (method, url, response.text)
            answers.append((method, url, response.status_code, dict(response.headers)))
            return response

        def expect(status: int, response: httpx.Response) -> None:
            assert response.status_code == status, response.text

        # Training: JSON raw and text, message/rfc822 with ?message_id=, batch.
        for n in range(3):
            expect(
                200,
                send(
                    "POST",
                    "/v1/models/default/train",
                    json={
                        "label": "spam",
                        "raw": canary_message("spam", n),
                        "message_id": message_id(n),
                    },
                ),
            )
            expect(
                200,
                send(
                    "POST",
                    "/v1/models/default/train",
                    json={
                        "label": "ham",
                        "text": canary_text("ham", n),
                        "message_id": message_id(f"h{n}"),
                    },
                ),
            )
        expect(
            200,
            send(
                "POST",
                f"/v1/models/default/train?label=ham&message_id={quote(message_id('q'))}",
                content=canary_message("ham", 7).encode(),
                headers=rfc822,
            ),
        )
        expect(
            200,
            send(
                "POST",
                "/v1/models/default/train/batch",
                json={
                    "items": [
                        {
                            "label": "spam",
                            "raw": canary_message("spam", 8),
                            "message_id": message_id("b1"),
                        },
                        {"label": "ham", "text": canary_text("ham", 9)},
                    ]
                },
            ),
        )
        # Classification: JSON with explain (the answer holds tokens), rfc822, batch.
        classified = send(
            "POST",
            "/v1/models/default/classify",
            json={
                "raw": canary_message("spam", 10),
                "message_id": message_id("c"),
                "explain": True,
            },
        )
        expect(200, classified)
        expect(
            200,
            send(
                "POST",
                f"/v1/models/default/classify?explain=true&message_id={quote(message_id('cq'))}",
                content=canary_message("ham", 11).encode(),
                headers=rfc822,
            ),
        )
        expect(
            200,
            send(
                "POST",
                "/v1/models/default/classify/batch",
                json={
                    "items": [
                        {"raw": canary_message("spam", 12)},
                        {"text": canary_text("ham", 13), "message_id": message_id("cb")},
                    ],
                    "explain": True,
                },
            ),
        )
        # Feedback: by message_id alone, with the message, as rfc822.
        expect(
            200,
            send(
                "POST",
                "/v1/models/default/feedback",
                json={"message_id": message_id("c"), "label": "ham"},
            ),
        )
        expect(
            200,
            send(
                "POST",
                "/v1/models/default/feedback",
                json={
                    "label": "spam",
                    "raw": canary_message("spam", 14),
                    "message_id": message_id("f"),
                },
            ),
        )
        expect(
            200,
            send(
                "POST",
                f"/v1/models/default/feedback?label=spam&message_id={quote(message_id('fq'))}",
                content=canary_message("spam", 15).encode(),
                headers=rfc822,
            ),
        )
        # Forget, twice (the second is 404 naming the id in its answer only).
        forget = f"/v1/models/default/messages/{quote(message_id(0), safe='')}"
        expect(200, send("DELETE", forget))
        expect(404, send("DELETE", forget))
        expect(200, send("DELETE", f"/v1/models/default/messages/{message_id('b1')}"))
        # The short forms.
        expect(
            200,
            send(
                "POST",
                "/train?model=default",
                json={
                    "label": "spam",
                    "raw": canary_message("spam", 16),
                    "message_id": message_id("s"),
                },
            ),
        )
        expect(
            200,
            send(
                "POST",
                "/train?label=ham",
                content=canary_message("ham", 17).encode(),
                headers=rfc822,
            ),
        )
        expect(
            200,
            send(
                "POST",
                f"/classify?model=default&message_id={quote(message_id('sc'))}",
                content=canary_message("spam", 18).encode(),
                headers=rfc822,
            ),
        )
        expect(
            200, send("POST", "/feedback", json={"message_id": message_id("sc"), "label": "ham"})
        )
        # Stats and metrics (answers with top tokens; nothing of them in the logs).
        expect(200, send("GET", "/v1/models/default/stats"))
        expect(200, send("GET", "/metrics"))
        # Refusals, each carrying canaries.
        big = canary_message("spam", 20, words=SPAM_WORDS + " filler" * (MAX_MESSAGE_BYTES // 7))
        expect(413, send("POST", "/v1/models/default/train", json={"label": "spam", "raw": big}))
        expect(413, send("POST", "/classify", content=big.encode(), headers=rfc822))
        huge = {"label": "spam", "text": canary_text("spam", 21) + " x" * MAX_REQUEST_BYTES}
        expect(413, send("POST", "/v1/models/default/train", json=huge))
        expect(
            422,
            send(
                "POST",
                "/v1/models/default/train",
                content=('{"label": "spam", "text": "' + canary_text("spam", 22)).encode(),
                headers={"content-type": "application/json"},
            ),
        )
        expect(
            422,
            send(
                "POST",
                "/v1/models/default/train",
                json={"label": MARKERS["label"], "raw": canary_message("spam", 23)},
            ),
        )
        expect(
            422,
            send(
                "POST",
                "/v1/models/default/classify",
                json={"raw": canary_message("spam", 24), MARKERS["json_field"]: 1},
            ),
        )
        expect(
            422,
            send(
                "POST",
                "/v1/models/default/train",
                content=canary_message("spam", 25).encode(),
                headers=rfc822,
            ),
        )  # no ?label=
        expect(
            404,
            send(
                "POST",
                "/v1/models/default/feedback",
                json={"message_id": message_id("unknown"), "label": "spam"},
            ),
        )
        expect(
            415,
            send(
                "POST",
                "/v1/models/default/classify",
                content=canary_text("spam", 26).encode(),
                headers={"content-type": f"text/{MARKERS['header']}"},
            ),
        )
        expect(
            415,
            send(
                "POST",
                "/v1/models/default/classify",
                content=canary_text("spam", 27).encode(),
                headers={"content-encoding": "gzip"},
            ),
        )
        expect(404, send("GET", f"/v1/{MARKERS['path']}/{quote(message_id('p'))}"))
        expect(
            404, send("POST", "/classify?model=nosuchmodel", json={"text": canary_text("spam", 28)})
        )
        expect(
            422,
            send(
                "POST",
                f"/v1/models/{MARKERS['path'].upper()}/classify",
                json={"text": canary_text("spam", 29)},
            ),
        )
        expect(
            401,
            send(
                "POST",
                "/classify",
                json={"text": canary_text("spam", 30)},
                headers={"Authorization": f"Bearer {MARKERS['bad_key']}"},
            ),
        )
        expect(
            200,
            send(
                "GET",
                "/healthz",
                headers={
                    "User-Agent": f"{MARKERS['header']}-agent",
                    "Referer": f"http://{MARKERS['header']}.example/{MARKERS['path']}",
                    "X-Request-ID": f"{MARKERS['header']} not a sane id",
                    "Cookie": f"session={MARKERS['header']}",
                },
            ),
        )
        sane = send("GET", "/healthz", headers={"X-Request-ID": "ops-test-42"})
        assert sane.headers["x-request-id"] == "ops-test-42"
    return answers


# Requests at the HTTP level with terminal control sequences in paths and headers (I38).
CONTROL_REQUESTS = [
    b"GET /%1b[31mred%1b[0m HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /v1/models/%1b[31m/stats HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /classify?model=%1b%5b31m HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /\x1b[31mraw HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-ID: \x1b[31mred\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-ID: %1b[31mred\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nUser-Agent: \x1b]0;title\x07\x9b31m\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"\x1b[31m" * 4000 + b"\r\n\r\n",
]


def send_raw(base_url: str, request: bytes) -> bytes:
    parts = urlsplit(base_url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as conn:
        conn.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    return answer


@pytest.fixture(scope="module", params=["json", "text"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    log_format = str(request.param)
    tmp_path: Path = tmp_path_factory.mktemp(f"canaries-{log_format}")
    env = serve_env(
        tmp_path,
        SPAMSIFT_LOG_LEVEL="debug",
        SPAMSIFT_LOG_FORMAT=log_format,
        SPAMSIFT_ADMIN_KEY=ADMIN_KEY,
        SPAMSIFT_MAX_MESSAGE_BYTES=str(MAX_MESSAGE_BYTES),
        SPAMSIFT_MAX_REQUEST_BYTES=str(MAX_REQUEST_BYTES),
    )
    with running_server(tmp_path, env) as server:
        answers = drive_every_endpoint(server.url)
        for raw in CONTROL_REQUESTS:
            assert send_raw(server.url, raw).startswith(b"HTTP/1.1 ")
    # The server has stopped: its output is complete.
    raw_output = server.stdout.read_bytes() + server.stderr.read_bytes()
    return Run(raw_output.decode(errors="replace"), raw_output, log_format == "json", answers)


def traces(text: str) -> list[str]:
    """The log text in every form a canary could hide in: as is, URL- and JSON-unescaped."""
    forms = [text, unquote(text), unquote_plus(text)]
    forms.append(text.encode("ascii", "backslashreplace").decode("unicode_escape", "replace"))
    return [form.lower() for form in forms]


@pytest.mark.slow
def test_no_canary_reaches_the_logs(run: Run) -> None:
    assert len(run.answers) >= 39
    forms = traces(run.output)
    for place, marker in MARKERS.items():
        for form in forms:
            assert marker not in form, f"the {place} canary {marker!r} is in the logs"
    assert ADMIN_KEY.lower() not in forms[0]
    assert "cnry" not in forms[0]  # nothing of any canary, nor a prefix of one


def test_no_control_character_reaches_a_log_line(run: Run) -> None:
    text = run.raw_output.decode("utf-8")  # strict: no stray byte either
    unexpected = {
        char for char in text if char != "\n" and unicodedata.category(char) in ("Cc", "Cf")
    }
    assert not unexpected, f"characters {sorted(map(ord, unexpected))} in the logs"
    if run.json_lines:
        assert run.raw_output.isascii()
    escaped = text.replace("\\x1b[31m", "").replace("\\u001b[31m", "")
    assert "[31m" not in escaped


def test_every_line_is_a_json_object_with_the_request_fields(run: Run) -> None:
    if not run.json_lines:
        lines = run.output.splitlines()
        assert all(
            re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 \w+ ", line) for line in lines
        ), lines
        return
    lines = [json.loads(line) for line in run.output.splitlines()]
    assert all({"ts", "level", "logger", "event"} <= set(line) for line in lines)
    loggers = {line["logger"] for line in lines}
    assert {"spamsift.access", "uvicorn.error"} <= loggers
    requests = [line for line in lines if line["logger"] == "spamsift.access"]
    assert all(line["status"] < 500 for line in requests), "a request failed"
    assert sum(line["status"] == 413 for line in requests) == 3
    assert len(requests) >= len(run.answers)
    for line in requests:
        assert {"request_id", "method", "route", "status", "duration_ms"} <= set(line), line
        assert line["route"] == "unmatched" or line["route"].startswith("/"), line
    by_route: dict[str, list[dict[str, Any]]] = {}
    for line in requests:
        by_route.setdefault(line["route"], []).append(line)
    classify = by_route["/v1/models/{name}/classify"]
    assert any(line.get("verdict") in ("spam", "ham", "unsure") for line in classify)
    assert all(line["model"] == "default" for line in classify if line["status"] == 200)
    batch = by_route["/v1/models/{name}/classify/batch"]
    assert sum(batch[0]["verdicts"].values()) == 2
    assert any(line.get("verdict") for line in by_route["/classify"])
    forget = by_route["/v1/models/{name}/messages/{message_id}"]
    assert [line["status"] for line in forget] == [200, 404, 200]
    assert forget[1]["error"] == "message_not_found"
    statuses = {(line["status"], line.get("error")) for line in requests}
    assert {
        (413, "message_too_large"),
        (415, "unsupported_media_type"),
        (401, "unauthorized"),
        (404, "not_found"),
    } <= statuses
    assert any(line.get("key_id") for line in requests)
    # The sane X-Request-ID is the line's id; the one with spaces was replaced by a new one.
    assert any(line["request_id"] == "ops-test-42" for line in requests)
    answered_ids = [headers["x-request-id"] for _, _, _, headers in run.answers]
    assert len(set(answered_ids)) == len(answered_ids)  # every request got its own id
    assert set(answered_ids) <= {line["request_id"] for line in requests}
