"""Refusals made before a route runs (body limit, compressed body) answer like every other
error: the JSON error body, an X-Request-ID, a request log line and a count in /metrics."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.logging_setup import JsonFormatter
from app.main import create_app

LIMIT = 1000


@pytest.fixture
def limited(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings.model_copy(update={"max_request_bytes": LIMIT}))) as c:
        yield c


def chunks(total: int) -> Iterator[bytes]:
    for _ in range(total // 100):
        yield b"x" * 100


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        (b"x" * (LIMIT + 1), {"content-type": "application/json"}, 413, "request_too_large"),
        (chunks(LIMIT * 3), {"content-type": "application/json"}, 413, "request_too_large"),
        (b"{}", {"content-encoding": "gzip"}, 415, "unsupported_media_type"),
    ],
    ids=["content-length", "chunked", "compressed"],
)
def test_a_refusal_before_the_route_is_a_json_error_logged_and_counted(
    limited: TestClient,
    caplog: pytest.LogCaptureFixture,
    body: bytes | Iterator[bytes],
    headers: dict[str, str],
    status: int,
    code: str,
) -> None:
    caplog.set_level(logging.INFO, logger="spamsift.access")

    response = limited.post("/v1/models/default/train", content=body, headers=headers)

    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert response.headers["x-request-id"]
    lines = [
        json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "spamsift.access"
    ]
    assert lines[-1]["route"] == "/v1/models/{name}/train"
    assert (lines[-1]["status"], lines[-1]["error"]) == (status, code)
    assert lines[-1]["request_id"] == response.headers["x-request-id"]
    metrics = limited.get("/metrics").text
    assert (
        f'spamsift_http_requests_total{{method="POST",route="/v1/models/{{name}}/train",'
        f'status="{status}"}} 1.0'
    ) in metrics


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_body_at_the_limit_is_read(limited: TestClient) -> None:
    body = json.dumps({"label": "spam", "text": "word " * 10}).encode().ljust(LIMIT)

    response = limited.post(
        "/v1/models/default/train", content=body, headers={"content-type": "application/json"}
    )

    assert response.status_code != 413
