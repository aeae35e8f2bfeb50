"""Log lines: one JSON object (or escaped text), request ids, route templates, no input."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from fastapi.testclient import TestClient

from app.logging_setup import JsonFormatter, TextFormatter, logging_config, request_id_var
from tests.builders import train_examples

HOSTILE = "red \x1b[31mALERT\x1b[0m bell\x07 del\x7f csi\x9b rtl\u202eevil zw\u200bj nul\x00 nl\n"


def record(message: str, *args: object, **fields: object) -> logging.LogRecord:
    entry = logging.LogRecord("app.test", logging.WARNING, __file__, 1, message, args, None)
    if fields:
        entry.fields = fields
    return entry


def test_a_json_line_is_printable_ascii_and_gives_back_the_text() -> None:
    line = JsonFormatter().format(record("event %s", HOSTILE, route=HOSTILE))

    assert line.isascii()
    assert all(0x20 <= ord(char) < 0x7F for char in line)
    parsed = json.loads(line)
    assert parsed["event"] == f"event {HOSTILE}"
    assert parsed["route"] == HOSTILE
    assert {"ts", "level", "logger", "event"} <= set(parsed)


def test_a_text_line_escapes_every_control_and_format_character() -> None:
    line = TextFormatter().format(record("event %s", HOSTILE, route=HOSTILE))

    assert "\n" not in line
    assert not any(ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F for char in line)
    assert "\u202e" not in line
    assert "\u200b" not in line
    assert "\\x1b[31mALERT" in line
    assert "\\u202e" in line


def test_an_exception_adds_its_type_and_frames_but_never_its_message() -> None:
    try:
        raise ValueError("message id <private@example.org> in the text")
    except ValueError:
        entry = logging.LogRecord(
            "app.test", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )

    for formatter in (JsonFormatter(), TextFormatter()):
        line = formatter.format(entry)
        assert "builtins.ValueError" in line
        assert "test_logging.py" in line
        assert "private@example.org" not in line


def test_a_line_logged_during_a_request_carries_its_request_id() -> None:
    token = request_id_var.set("req-7")
    try:
        line = json.loads(JsonFormatter().format(record("inside")))
    finally:
        request_id_var.reset(token)

    assert line["request_id"] == "req-7"
    assert "request_id" not in json.loads(JsonFormatter().format(record("outside")))


def test_libraries_stay_at_warning_when_spamsift_logs_at_debug() -> None:
    config = logging_config(level="debug", log_format="json")

    assert config["root"]["level"] == "WARNING"
    assert config["loggers"]["sqlalchemy"]["level"] == "WARNING"  # it would log parameters
    assert config["loggers"]["app"]["level"] == "DEBUG"
    assert config["loggers"]["uvicorn.access"]["handlers"] == []


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [
        json.loads(JsonFormatter().format(entry))
        for entry in caplog.records
        if entry.name == "spamsift.access"
    ]


# Logging does not depend on the database: these run on SQLite only.
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ("3f2a-9c1b.0d4e:7", True),
        ("a" * 128, True),
        ("a" * 129, False),
        ("has space", False),
        ("\x1b[31m", False),
        ("-leading-dash", False),
        ("", False),
    ],
)
def test_a_sane_request_id_is_kept_and_any_other_replaced(
    client: TestClient, caplog: pytest.LogCaptureFixture, sent: str, kept: bool
) -> None:
    caplog.set_level(logging.DEBUG, logger="spamsift.access")

    response = client.get("/healthz", headers={"X-Request-ID": sent})

    answered = response.headers["x-request-id"]
    if kept:
        assert answered == sent
    else:
        assert answered != sent
        assert len(answered) == 32
        int(answered, 16)
    assert access_lines(caplog)[-1]["request_id"] == answered


@SQLITE_ONLY
def test_the_request_line_names_the_route_template_model_and_verdict(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    train_examples(client, 4, 4)
    caplog.set_level(logging.INFO, logger="spamsift.access")
    private_id = "<secret-id-123@mail.example>"

    classified = client.post(
        "/v1/models/default/classify",
        json={"text": "claim your prize now winner", "message_id": private_id},
    )
    client.delete(f"/v1/models/default/messages/{private_id}")
    client.post("/classify?model=default", json={"text": "meeting agenda tomorrow"})

    lines = access_lines(caplog)
    assert [line["route"] for line in lines] == [
        "/v1/models/{name}/classify",
        "/v1/models/{name}/messages/{message_id}",
        "/classify",
    ]
    assert lines[0]["verdict"] == classified.json()["verdict"]
    assert lines[0]["model"] == lines[2]["model"] == "default"
    assert (lines[1]["status"], lines[1]["error"]) == (404, "message_not_found")
    assert isinstance(lines[0]["duration_ms"], float)
    assert "secret-id" not in json.dumps(lines)
