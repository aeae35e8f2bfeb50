"""Hostile clients: what a client without a (fitting) key can make the server do.

A refusal must cost the server next to nothing: the key, its scope and its model are checked
from the request head, before a byte of the body is read; the redirect and error answers echo
nothing a client could aim at a browser; a failed key throttles guessers, never a valid key.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.service.keys import create_key
from app.store.engine import Database
from app.store.models import insert_model

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


def make_key(db: Database, *scopes: str, models: list[str] | None = None) -> str:
    key, _ = create_key(db, scopes=scopes, models=models)
    return key


def add_model(db: Database, name: str) -> None:
    db.run(lambda conn: insert_model(conn, name=name, classes=("ham", "spam"), config={}))


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
