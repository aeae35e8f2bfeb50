"""Hostile clients: what a client without a (fitting) key can make the server do.

A refusal must cost the server next to nothing: the key, its scope and its model are checked
from the request head, before a byte of the body is read; the redirect and error answers echo
nothing a client could aim at a browser; a failed key throttles guessers, never a valid key.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.api import auth
from app.config import Settings
from app.main import create_app
from app.service.runtime import Runtime
from app.store.engine import Database
from tests.api.test_auth import add_model, make_key
from tests.ops.server import running_server, serve_env

MESSAGE = {"text": "cheap watches and a casino prize for the winner, claim it today"}
TRAIN = {"label": "spam", **MESSAGE}

# Every route taking a body, with a body it accepts and the scope it needs.
BODY_ROUTES: list[tuple[str, str, dict[str, Any], str]] = [
    ("POST", "/v1/models", {"name": "created"}, "admin"),
    ("PATCH", "/v1/models/default", {"alpha": 0.5}, "admin"),
    ("POST", "/v1/models/default/train", TRAIN, "train"),
    ("POST", "/v1/models/default/train/batch", {"items": [TRAIN]}, "train"),
    ("POST", "/v1/models/default/feedback", TRAIN, "train"),
    ("POST", "/train", TRAIN, "train"),
    ("POST", "/feedback", TRAIN, "train"),
    ("POST", "/v1/models/default/classify", MESSAGE, "classify"),
    ("POST", "/v1/models/default/classify/batch", {"items": [MESSAGE]}, "classify"),
    ("POST", "/classify", MESSAGE, "classify"),
]
ROUTE_IDS = [f"{method} {path}" for method, path, _, _ in BODY_ROUTES]
OTHER_SCOPE = {"admin": "train", "train": "classify", "classify": "train"}


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.dispose()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class AsgiCall:
    """One request straight into the ASGI app, counting the body chunks the app asked for."""

    def __init__(self, body: bytes, *, chunk_bytes: int = 64 * 1024) -> None:
        self.chunks = [body[i : i + chunk_bytes] for i in range(0, len(body), chunk_bytes)]
        self.chunks_read = 0
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = b""

    async def receive(self) -> dict[str, Any]:
        if self.chunks_read < len(self.chunks):
            chunk = self.chunks[self.chunks_read]
            self.chunks_read += 1
            return {
                "type": "http.request",
                "body": chunk,
                "more_body": self.chunks_read < len(self.chunks),
            }
        await asyncio.sleep(3600)  # the client has sent all it will; it waits for the answer
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")


def call(
    app: Any, method: str, path: str, *, body: bytes, headers: dict[str, str] | None = None
) -> AsgiCall:
    all_headers = {
        "host": "testserver",
        "content-type": "application/json",
        "content-length": str(len(body)),
        **(headers or {}),
    }
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in all_headers.items()],
        "client": ("198.51.100.7", 50000),
        "server": ("testserver", 80),
        "state": {},
    }
    asgi_call = AsgiCall(body)
    asyncio.run(asyncio.wait_for(app(scope, asgi_call.receive, asgi_call.send), timeout=30))
    return asgi_call


def big_json_body(body: dict[str, Any], *, padding_bytes: int = 2 * 1024 * 1024) -> bytes:
    """`body` with a long extra field: many chunks, so reading any of it shows."""
    return json.dumps({**body, "padding": "x" * padding_bytes}).encode()


# --- authenticate before reading ------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body", "scope"), BODY_ROUTES, ids=ROUTE_IDS)
def test_a_request_without_a_fitting_key_is_refused_before_a_byte_of_its_body_is_read(
    settings: Settings, db: Database, method: str, path: str, body: dict[str, Any], scope: str
) -> None:
    add_model(db, "other")
    wrong_scope = make_key(db, OTHER_SCOPE[scope])
    other_model = make_key(db, "admin", models=["other"])
    app = create_app(settings)
    payload = big_json_body(body)

    with TestClient(app):
        without_key = call(app, method, path, body=payload)
        unknown_key = call(app, method, path, body=payload, headers=bearer("ss_guess"))
        without_scope = call(app, method, path, body=payload, headers=bearer(wrong_scope))
        elsewhere = call(app, method, path, body=payload, headers=bearer(other_model))

    assert (without_key.status, without_key.chunks_read) == (401, 0)
    assert (unknown_key.status, unknown_key.chunks_read) == (401, 0)
    assert (without_scope.status, without_scope.chunks_read) == (403, 0)
    assert (elsewhere.status, elsewhere.chunks_read) == (403, 0)


# --- keys limited to a model are bound to that model ---------------------------------------------


def test_deleting_a_model_ends_its_keys_and_a_new_model_of_that_name_is_not_theirs(
    settings: Settings, db: Database
) -> None:
    admin = make_key(db, "admin")
    add_model(db, "alice")
    add_model(db, "bob")
    alice_only = make_key(db, "train", models=["alice"])
    alice_and_bob = make_key(db, "train", models=["alice", "bob"])

    with TestClient(create_app(settings)) as client:
        deleted = client.delete("/v1/models/alice?confirm=alice", headers=bearer(admin))
        created = client.post("/v1/models", json={"name": "alice"}, headers=bearer(admin))
        old_key = client.post("/v1/models/alice/train", json=TRAIN, headers=bearer(alice_only))
        wider_key = client.post("/v1/models/alice/train", json=TRAIN, headers=bearer(alice_and_bob))
        wider_key_on_bob = client.post(
            "/v1/models/bob/train", json=TRAIN, headers=bearer(alice_and_bob)
        )

    assert deleted.status_code == 204
    assert deleted.headers["spamsift-ended-keys"] == alice_only.split("_")[1]
    assert created.status_code == 201
    assert old_key.status_code == 401  # revoked
    assert wider_key.status_code == 403  # bound to bob alone now
    assert wider_key_on_bob.status_code == 200


def test_another_server_sees_a_deleted_models_keys_end_within_a_second_or_two(
    settings: Settings, db: Database
) -> None:
    admin = make_key(db, "admin")
    add_model(db, "alice")
    alice_only = make_key(db, "train", models=["alice"])

    with (
        TestClient(create_app(settings)) as here,
        TestClient(create_app(settings)) as elsewhere,
    ):
        before = elsewhere.post("/v1/models/alice/train", json=TRAIN, headers=bearer(alice_only))
        assert (
            here.delete("/v1/models/alice?confirm=alice", headers=bearer(admin)).status_code == 204
        )
        assert here.post("/v1/models", json={"name": "alice"}, headers=bearer(admin)).is_success

        def refused() -> bool:
            answer = elsewhere.post(
                "/v1/models/alice/train", json=TRAIN, headers=bearer(alice_only)
            )
            return answer.status_code == 401

        wait_for(refused)

    assert before.status_code == 200


def wait_for(condition: Any, *, seconds: float = 3.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition did not hold in time"
        time.sleep(0.25)  # slower than the throttle of failed keys


# --- keys are checked in memory ---------------------------------------------------------------


def test_an_unknown_key_id_is_not_looked_up_in_the_database(
    settings: Settings, db: Database
) -> None:
    known = make_key(db, "classify")
    unknown = "ss_0123456789ab_" + "A" * 43
    statements: list[str] = []
    rt = Runtime(settings)

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    with TestClient(create_app(settings, runtime=rt)) as client:
        assert client.post("/classify", json=MESSAGE, headers=bearer(known)).status_code == 409
        event.listen(rt.db.engine, "before_cursor_execute", record)
        try:
            answers = [
                client.post("/classify", json=MESSAGE, headers=bearer(unknown)).status_code
                for _ in range(5)
            ]
        finally:
            event.remove(rt.db.engine, "before_cursor_execute", record)

    assert answers == [401] * 5
    assert not [s for s in statements if "api_keys.key_id" in s], statements


def test_a_key_made_by_another_process_works_here_within_a_second_or_two(
    settings: Settings, db: Database
) -> None:
    make_key(db, "admin")

    with TestClient(create_app(settings)) as client:
        assert client.get("/v1/models", headers=bearer("ss_0123456789ab_" + "A" * 43)).status_code
        key = make_key(db, "admin")
        wait_for(lambda: client.get("/v1/models", headers=bearer(key)).status_code == 200)


# --- the throttle of failed keys ----------------------------------------------------------------


def test_guessing_one_key_ids_secret_from_many_addresses_is_throttled_but_the_key_works(
    settings: Settings, db: Database
) -> None:
    key = make_key(db, "classify")
    key_id = key.split("_")[1]
    app = create_app(settings)

    def from_address(n: int) -> TestClient:
        return TestClient(app, client=(f"203.0.113.{n}", 40000))

    with TestClient(app) as client:
        guesses = [
            from_address(n)
            .post("/classify", json=MESSAGE, headers=bearer(f"ss_{key_id}_{'B' * 42}{n % 10}"))
            .status_code
            for n in range(auth.MAX_FAILURES + 1)
        ]
        other_key_id = from_address(99).post(
            "/classify", json=MESSAGE, headers=bearer("ss_0123456789ab_" + "C" * 43)
        )
        the_key = client.post("/classify", json=MESSAGE, headers=bearer(key))

    assert guesses == [401] * auth.MAX_FAILURES + [429]
    assert other_key_id.status_code == 401
    assert the_key.status_code == 409  # authorized: not_trained


def test_failed_keys_from_everywhere_are_throttled_per_process_but_valid_keys_are_not(
    settings: Settings, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "MAX_PROCESS_FAILURES", 20)
    key = make_key(db, "classify")
    app = create_app(settings)

    with TestClient(app) as client:
        answers = [
            TestClient(app, client=(f"198.51.100.{n}", 40000))
            .post("/classify", json=MESSAGE, headers=bearer(f"guess-{n}"))
            .status_code
            for n in range(25)
        ]
        the_key = client.post("/classify", json=MESSAGE, headers=bearer(key))

    assert answers == [401] * 20 + [429] * 5
    assert the_key.status_code == 409


def test_a_development_mode_server_warns_of_a_key_it_ignores_once_a_minute(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with TestClient(create_app(settings)) as client, caplog.at_level(logging.WARNING):
        caplog.clear()
        for _ in range(3):
            answer = client.get("/v1/models", headers=bearer("ss_0123456789ab_" + "A" * 43))
            assert answer.status_code == 200
        client.get("/v1/models")

    warnings = [r for r in caplog.records if "development mode" in r.getMessage()]
    assert len(warnings) == 1
    assert "ignored" in warnings[0].getMessage()


# --- answers a browser could be aimed at -------------------------------------------------------


def test_a_trailing_slash_is_not_redirected_to_the_host_the_client_named(
    settings: Settings,
) -> None:
    with TestClient(create_app(settings)) as client:
        answer = client.get("/v1/models/", headers={"Host": "evil.example"}, follow_redirects=False)

    assert "evil.example" not in answer.headers.get("location", "")
    assert answer.status_code == 404


def test_every_answer_says_nosniff(settings: Settings, db: Database) -> None:
    make_key(db, "admin")

    with TestClient(create_app(settings)) as client:
        answers = [
            client.get("/healthz"),
            client.get("/v1/models"),  # 401 from the key check
            client.get("/nowhere"),  # 404 from routing
            client.post("/classify", content=b"x" * 100, headers={"Content-Encoding": "gzip"}),
        ]

    assert [a.headers.get("x-content-type-options") for a in answers] == ["nosniff"] * 4


def test_error_messages_escape_what_a_browser_could_read_as_markup(settings: Settings) -> None:
    with TestClient(create_app(settings)) as client:
        answer = client.post("/train", json={**TRAIN, "label": "<script>alert(1)</script>"})

    assert answer.status_code == 422
    assert b"<" not in answer.content
    assert b">" not in answer.content
    assert "<script>" in answer.json()["error"]["message"]  # still the same text as JSON


@pytest.mark.parametrize(("method", "path", "body", "scope"), BODY_ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_body_that_is_not_declared_json_or_rfc822_is_415(
    settings: Settings,
    method: str,
    path: str,
    body: dict[str, Any],
    scope: str,
    content_type: str | None,
) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}

    with TestClient(create_app(settings)) as client:
        answer = client.request(method, path, content=json.dumps(body), headers=headers)

    assert answer.status_code == 415, answer.text
    assert answer.json()["error"]["code"] == "unsupported_media_type"


# --- what a key limited to a model may learn --------------------------------------------------


def test_a_key_limited_to_a_model_is_not_shown_the_size_of_the_whole_database(
    settings: Settings, db: Database
) -> None:
    admin = make_key(db, "admin")
    add_model(db, "alice")
    alice_admin = make_key(db, "admin", models=["alice"])

    with TestClient(create_app(settings)) as client:
        limited = client.get("/v1/models/alice/stats", headers=bearer(alice_admin))
        unlimited = client.get("/v1/models/alice/stats", headers=bearer(admin))

    assert limited.status_code == 200
    assert "database_bytes" not in limited.json()
    assert "activity" in limited.json()
    assert unlimited.json()["database_bytes"] > 0


# --- a real server: forwarded headers, and the memory a refused body costs ------------------------

ADMIN_KEY = "hostile-clients-test-admin-key-0123456789abcdef"
BIG_BODY_BYTES = 64 * 1024 * 1024 - 1024  # just under the default max_request_bytes


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for process {pid}")


@pytest.mark.slow
def test_forwarded_addresses_are_not_believed_unless_the_proxy_is_trusted(
    tmp_path: Path,
) -> None:
    env = serve_env(tmp_path, SPAMSIFT_ADMIN_KEY=ADMIN_KEY)

    with running_server(tmp_path, env) as server, httpx.Client(base_url=server.url) as client:
        answers = [
            client.get(
                "/v1/models",
                headers={"X-Forwarded-For": f"203.0.113.{n}", **bearer(f"guess-{n}")},
            ).status_code
            for n in range(auth.MAX_FAILURES + 1)
        ]
        valid = client.get("/v1/models", headers=bearer(ADMIN_KEY))
        log = server.output()

    assert answers == [401] * auth.MAX_FAILURES + [429]
    assert valid.status_code == 200  # never throttled
    assert "203.0.113." not in log  # the forged addresses are not logged as the client


@pytest.mark.slow
def test_a_trusted_proxys_forwarded_address_is_the_client(tmp_path: Path) -> None:
    env = serve_env(tmp_path, SPAMSIFT_ADMIN_KEY=ADMIN_KEY, SPAMSIFT_TRUSTED_PROXIES="127.0.0.1")

    with running_server(tmp_path, env) as server, httpx.Client(base_url=server.url) as client:
        answers = [
            client.get(
                "/v1/models",
                headers={"X-Forwarded-For": f"203.0.113.{n % 2}", **bearer(f"ss_{n:012x}_x")},
            ).status_code
            for n in range(auth.MAX_FAILURES + 2)
        ]
        log = server.output()

    assert answers == [401] * (auth.MAX_FAILURES + 2)  # two clients, 6 failures each
    assert '"client": "203.0.113.1"' in log or "203.0.113.1" in log


@pytest.mark.slow
def test_three_clients_without_keys_sending_64_mb_bodies_leave_the_servers_memory_as_it_was(
    tmp_path: Path,
) -> None:
    env = serve_env(tmp_path, SPAMSIFT_ADMIN_KEY=ADMIN_KEY)
    body = b'{"items": [' + b'{"text": "x", "label": "spam"},' * (BIG_BODY_BYTES // 31) + b"{}]}"
    routes = ["/v1/models/default/train/batch", "/v1/models/default/classify/batch", "/v1/models"]

    with running_server(tmp_path, env) as server:
        pid = server.process.pid
        with httpx.Client(base_url=server.url, timeout=120) as client:
            for path in routes:  # warm up every route the attack takes, with a small body
                client.post(path, json={"items": [MESSAGE]})
        idle_kib = rss_kib(pid)
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # peak RSS := current RSS

        def attack(path: str) -> int:
            with httpx.Client(base_url=server.url, timeout=120) as client:
                try:
                    answer = client.post(
                        path, content=body, headers={"Content-Type": "application/json"}
                    )
                except httpx.TransportError:  # the server may close before the upload ends
                    return 0
                return answer.status_code

        with ThreadPoolExecutor(len(routes)) as pool:
            statuses = list(pool.map(attack, routes))
        peak_kib = rss_kib(pid, "VmHWM")
        health = httpx.get(f"{server.url}/healthz", timeout=10)

    assert set(statuses) <= {401, 0}, statuses
    assert health.status_code == 200
    assert peak_kib - idle_kib < 8 * 1024, (idle_kib, peak_kib)


# --- bound before parsing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/v1/models/default/train/batch", "/v1/models/default/classify/batch"]
)
def test_a_batch_is_refused_as_its_items_are_counted_before_the_rest_is_parsed(
    settings: Settings, path: str
) -> None:
    limited = settings.model_copy(update={"max_batch_items": 3})
    items = b",".join([json.dumps(TRAIN).encode()] * 4)
    # The body breaks off after item 4: only a count that stops at item 4 answers 413; a
    # parser that reads the whole body first answers 422 for the broken JSON.
    broken_after_the_limit = b'{"items": [' + items + b', {"text": "never'

    with TestClient(create_app(limited)) as client:
        answer = client.post(
            path, content=broken_after_the_limit, headers={"Content-Type": "application/json"}
        )
        within = client.post(
            path,
            content=b'{"items": [' + b",".join([json.dumps(TRAIN).encode()] * 3) + b"]",
            headers={"Content-Type": "application/json"},
        )

    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "batch_too_large"
    assert within.status_code == 422  # within the limit, the broken JSON is pydantic's to name


# --- a browser aimed at a server on this machine --------------------------------------------------


@pytest.mark.slow
def test_a_development_server_refuses_a_host_name_other_than_this_machines(tmp_path: Path) -> None:
    # DNS rebinding: a page at rebind.example has its name resolve to 127.0.0.1; the browser
    # then sends its requests to this server, as the same origin, with that Host.
    env = serve_env(tmp_path)  # no key: development mode

    with running_server(tmp_path, env) as server, httpx.Client(base_url=server.url) as client:
        port = server.url.rpartition(":")[2]
        rebound = [
            client.get("/v1/models", headers={"Host": f"rebind.example:{port}"}),
            client.post("/classify", json=MESSAGE, headers={"Host": "rebind.example"}),
            client.get("/v1/models", headers={"Host": "127.0.0.1.rebind.example"}),
        ]
        named = [
            client.get("/v1/models", headers={"Host": host}).status_code
            for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "localhost")
        ]

    assert [answer.status_code for answer in rebound] == [403] * 3
    assert all(answer.json()["error"]["code"] == "forbidden" for answer in rebound)
    assert named == [200] * 4


@pytest.mark.slow
def test_a_server_with_keys_answers_any_host_name_with_a_valid_key(tmp_path: Path) -> None:
    env = serve_env(tmp_path, SPAMSIFT_ADMIN_KEY=ADMIN_KEY)

    with running_server(tmp_path, env) as server, httpx.Client(base_url=server.url) as client:
        answer = client.get("/v1/models", headers={"Host": "spamsift.example", **bearer(ADMIN_KEY)})

    assert answer.status_code == 200


@pytest.mark.parametrize("page", ["/docs", "/redoc", "/docs/oauth2-redirect"])
def test_the_api_documentation_pages_carry_a_policy_that_runs_only_their_own_scripts(
    settings: Settings, page: str
) -> None:
    with TestClient(create_app(settings)) as client:
        answer = client.get(page)

    policy = answer.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if " " in d.strip())
    assert answer.status_code == 200
    assert "'unsafe-inline'" not in directives["script-src"]
    assert "'unsafe-eval'" not in directives["script-src"]
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert answer.headers["x-frame-options"] == "DENY"
    for script in re.findall(r"<script>(.*?)</script>", answer.text, re.DOTALL):
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in directives["script-src"]  # its inline start-up script
