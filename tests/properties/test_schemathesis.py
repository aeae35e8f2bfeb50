"""schemathesis against the app's own OpenAPI schema (ROBUSTNESS B.1, issue 4): every operation,
in development mode and with an API key, over ASGI (no network), on SQLite.

Checks: `not_a_server_error` (no 5xx at all), `status_code_conformance` (every status is one the
schema documents), `negative_data_rejection` (data that violates the schema is refused with a
4xx), and with a key, `ignored_auth` (an operation that declares the bearer scheme refuses the
request without a key or with a wrong one). `message/rfc822` bodies come from the bad-input
generators of tests/properties/strategies.py (catalogue rows I01-I32, and generated ones); a
second test sends only those, to every route that takes them, and checks the answer (classify
200, train 200 or 422 too_few_tokens, 413 past the limit). The last tests pin what the runs
found wrong.

Run longer: SPAMSIFT_SCHEMATHESIS_EXAMPLES=300 SPAMSIFT_SCHEMATHESIS_RAW_EXAMPLES=500 \
    pytest tests/properties/test_schemathesis.py
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    ignored_auth,
    negative_data_rejection,
    not_a_server_error,
    status_code_conformance,
)
from schemathesis.python import asgi

from app.api.auth import FailedKeys
from app.config import Settings
from app.main import create_app
from app.service.keys import create_key
from app.service.runtime import Runtime
from app.store.engine import Database
from tests.builders import train_examples
from tests.properties.strategies import raw_messages

EXAMPLES = int(os.environ.get("SPAMSIFT_SCHEMATHESIS_EXAMPLES", "20"))
RAW_EXAMPLES = int(os.environ.get("SPAMSIFT_SCHEMATHESIS_RAW_EXAMPLES", "40"))
# With SPAMSIFT_SCHEMATHESIS_STATS=<file>, each test appends the cases sent, by mode,
# operation, media type and status (a JSON line).
STATS_FILE = os.environ.get("SPAMSIFT_SCHEMATHESIS_STATS")
MAX_MESSAGE_BYTES = 512 * 1024  # small, so that a message past it (I02) is cheap to send

schemathesis.openapi.media_type("message/rfc822", raw_messages(max_message_bytes=MAX_MESSAGE_BYTES))


@pytest.fixture
def api_settings(tmp_path: Path, sqlite_template: Path) -> Settings:
    """An SQLite database with a trained `default` model (so classify answers 200)."""
    path = tmp_path / "spamsift.db"
    shutil.copy(sqlite_template, path)
    config = Settings(  # type: ignore[call-arg]
        database_url=f"sqlite:///{path}", max_message_bytes=MAX_MESSAGE_BYTES, _env_file=None
    )
    rt = Runtime(config)
    try:
        train_examples(rt, 4, 4)
    finally:
        rt.close()
    return config


@pytest.fixture
def admin_key(api_settings: Settings) -> str:
    db = Database(api_settings.database_url)
    try:
        key, _ = create_key(db, scopes=["admin"], models=None)
    finally:
        db.dispose()
    return key


@contextmanager
def serve(config: Settings) -> Iterator[FastAPI]:
    """The app, in-process: schemathesis's ASGI transport starts it on the first request."""
    app = create_app(config)
    # ignored_auth sends wrong keys on purpose; the throttle would turn the run into 429s.
    app.state.failed_keys = FailedKeys(max_failures=10**9, max_process_failures=10**9)
    try:
        yield app
    finally:
        asgi.shutdown_lifespans()  # stops the app's lifespan (its runtime) the transport started


@pytest.fixture
def open_app(api_settings: Settings) -> Iterator[FastAPI]:
    with serve(api_settings) as app:
        yield app


@pytest.fixture
def keyed_app(api_settings: Settings, admin_key: str) -> Iterator[FastAPI]:
    with serve(api_settings) as app:  # the key exists before the app starts
        yield app


def bind(case: Any, app: FastAPI) -> None:
    """Send this case, and the probes its checks send, to `app` over ASGI.

    (The schema is loaded once from the document, so it knows no app of its own:
    schemathesis.pytest.from_fixture, which would load it per test from the fixture's app,
    sets pytest's private Node._nodeid, gone in pytest 9.2.)
    """
    case.operation.app = app
    case.operation.schema.app = app


def openapi_document() -> dict[str, Any]:
    """The app's schema (building the app opens no database connection), with each optional
    query parameter's `anyOf: [X, {"type": "null"}]` written as X.

    A query parameter cannot be null on the wire (left out, it is absent), so the two say the
    same. schemathesis 4.32 negates the null branch alone, e.g. into an object that the query
    string serializes as "k,v": a valid string, then reported as "schema-violating request
    accepted". It skips type changes of plain string query parameters for that reason.
    """
    config = Settings(database_url="sqlite:///schema-only.db", _env_file=None)  # type: ignore[call-arg]
    document = copy.deepcopy(create_app(config).openapi())
    for operations in document["paths"].values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                schema = parameter["schema"]
                branches = schema.get("anyOf", [])
                if parameter["in"] == "query" and {"type": "null"} in branches:
                    (kept,) = [branch for branch in branches if branch != {"type": "null"}]
                    extras = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
                    parameter["schema"] = {**kept, **extras}
    return document


DOCUMENT = openapi_document()
# Random model names and labels are almost never the trained model `default` or one of its
# classes; these dictionaries make most cases reach a model (so raw bodies get tokenized,
# trained and classified), the rest stay random (404, 422).
CONFIG: dict[str, Any] = {
    "dictionaries": {"models": {"values": ["default"]}, "labels": {"values": ["spam", "ham"]}},
    "parameters": {
        "path.name": {"dictionary": "models", "probability": 0.7},
        "query.model": {"dictionary": "models", "probability": 0.7},
        "query.label": {"dictionary": "labels", "probability": 0.7},
        "body.label": {"dictionary": "labels", "probability": 0.7},
    },
}
with_key = schemathesis.openapi.from_dict(DOCUMENT, config=schemathesis.Config.from_dict(CONFIG))
# In development mode every endpoint is open by design (README "Security"): a request without
# the declared bearer key is not invalid there, so no case is made by leaving it out, and
# ignored_auth does not apply.
development = schemathesis.openapi.from_dict(DOCUMENT, config=schemathesis.Config.from_dict(CONFIG))
development.config.generation.update(with_security_parameters=False)
for loaded in (development, with_key):
    # A body over the size limit is refused with 413 before anything else is looked at; that
    # is a rejection too, whatever else is wrong with the request.
    rejection = loaded.config.checks.negative_data_rejection
    rejection.expected_statuses = [*rejection.expected_statuses, "413"]

CHECKS = [not_a_server_error, status_code_conformance, negative_data_rejection]
RUN = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


@development.parametrize()
@RUN
def test_development_mode_conforms_to_the_schema(case: Any, open_app: FastAPI) -> None:
    bind(case, open_app)
    response = case.call_and_validate(checks=CHECKS)
    record("development", case, response.status_code)


@with_key.parametrize()
@RUN
def test_with_an_api_key_conforms_to_the_schema(
    case: Any, keyed_app: FastAPI, admin_key: str
) -> None:
    bind(case, keyed_app)
    headers = {"Authorization": f"Bearer {admin_key}"}
    response = case.call_and_validate(headers=headers, checks=[*CHECKS, ignored_auth])
    record("api-key", case, response.status_code)


def record(mode: str, case: Any, status: int) -> None:
    if STATS_FILE:
        entry = [mode, case.operation.label, case.media_type, status]
        with open(STATS_FILE, "a") as out:
            out.write(json.dumps(entry) + "\n")


# --- raw messages: every bad-input body on every route that takes message/rfc822 ------------

RFC822 = "message/rfc822"
RAW_ROUTES = [
    (path, method.upper())
    for path, operations in DOCUMENT["paths"].items()
    for method, operation in operations.items()
    if RFC822 in operation.get("requestBody", {}).get("content", {})
]


@pytest.mark.parametrize(("path", "method"), RAW_ROUTES, ids=[f"{m} {p}" for p, m in RAW_ROUTES])
@settings(
    max_examples=RAW_EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(data=st.data())
def test_bad_raw_messages_are_handled_on_every_message_route(
    path: str, method: str, open_app: FastAPI, data: st.DataObject
) -> None:
    """ROBUSTNESS B.1 bodies (I01-I32 and generated ones) sent as message/rfc822 to the model
    `default`: classify answers 200 (OK-D), train and feedback 200 or 422 for too few tokens;
    413 past the size limit, 422 when empty; never a 5xx nor an undocumented status."""
    raw = data.draw(raw_messages(max_message_bytes=MAX_MESSAGE_BYTES), label="body")
    classifying = "classify" in path
    query: dict[str, Any] = {} if "{name}" in path else {"model": "default"}
    if classifying:
        query["explain"] = data.draw(st.booleans(), label="explain")
    else:
        query["label"] = data.draw(st.sampled_from(["spam", "ham"]), label="label")
    operation = development[path][method.lower()]
    case = data.draw(
        operation.as_strategy(
            body=raw,
            media_type=RFC822,
            path_parameters={"name": "default"} if "{name}" in path else None,
            query=query,
        ),
        label="case",
    )
    # Random ids are mostly not printable (422 invalid_message, covered by the run above).
    message_id = data.draw(st.sampled_from([None, "<a@example.org>", "x/y"]), label="id")
    case.query = {k: v for k, v in (case.query or {}).items() if k != "message_id"}
    if message_id is not None:
        case.query["message_id"] = message_id
    bind(case, open_app)
    response = case.call_and_validate(checks=[not_a_server_error, status_code_conformance])
    record("raw", case, response.status_code)
    if len(raw) > MAX_MESSAGE_BYTES:
        assert response.status_code == 413
    elif not raw:
        assert response.status_code == 422
    elif classifying:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code in (200, 422), response.text
        if response.status_code == 422:
            assert response.json()["error"]["code"] in ("too_few_tokens", "invalid_message")


# --- what schemathesis found ------------------------------------------------------------------

UNDECODABLE_JSON = [b"\xff\xfe{", b"\xc0\x80", b"[" * 100_000, b'{"a":' * 50_000]
JSON_ROUTES = [
    ("POST", "/v1/models"),
    ("PATCH", "/v1/models/default"),
    ("POST", "/v1/models/default/train"),
    ("POST", "/v1/models/default/train/batch"),
    ("POST", "/v1/models/default/classify"),
    ("POST", "/v1/models/default/classify/batch"),
    ("POST", "/v1/models/default/feedback"),
    ("POST", "/train"),
    ("POST", "/classify"),
    ("POST", "/feedback"),
]


@pytest.mark.parametrize(
    "body", UNDECODABLE_JSON, ids=["utf16-bom", "overlong", "deep", "deep-obj"]
)
def test_a_json_body_that_cannot_be_decoded_is_422_on_every_route(
    api_settings: Settings, body: bytes
) -> None:
    """Not UTF-8, or nested past the parser's recursion limit: 422 invalid_request everywhere,
    as any other malformed JSON (it was an undocumented 400 where FastAPI parses the body)."""
    with TestClient(create_app(api_settings)) as http:
        for method, path in JSON_ROUTES:
            response = http.request(
                method, path, content=body, headers={"content-type": "application/json"}
            )
            assert response.status_code == 422, (method, path, response.text)
            assert response.json()["error"]["code"] == "invalid_request"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/models", {"name": "m1", "min_df": True}),
        ("POST", "/v1/models", {"name": "m2", "alpha": "0.5"}),
        ("PATCH", "/v1/models/default", {"max_vocab": 10.0}),
        ("PATCH", "/v1/models/default", {"spam_threshold": "0.9"}),
        ("POST", "/classify", {"text": "cheap watches", "explain": "yes"}),
        ("POST", "/v1/models/default/classify/batch", {"items": [{"text": "x"}], "explain": 1}),
    ],
    ids=[
        "bool-for-int",
        "string-for-float",
        "float-for-int",
        "string-threshold",
        "string-bool",
        "int-bool",
    ],
)
def test_a_value_of_another_json_type_is_refused_not_coerced(
    api_settings: Settings, method: str, path: str, body: dict[str, Any]
) -> None:
    """The schema says integer, number or boolean: other JSON types are 422 (they were
    silently coerced: "min_df": true became 1)."""
    with TestClient(create_app(api_settings)) as http:
        response = http.request(method, path, json=body)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "invalid_request"
        # an integer is still a number
        assert http.patch("/v1/models/default", json={"alpha": 1}).status_code == 200
