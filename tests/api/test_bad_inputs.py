"""ROBUSTNESS.md B.1 over HTTP: every bad message (I01, I06-I33) sent to classify and train, as
`message/rfc822` bytes and, where it is UTF-8 text, as JSON `raw`; the scenarios I34-I37;
strings clients choose (message ids, model names, labels); and I38 on a real uvicorn server.

Never a 5xx. Classify answers 200 with the defects the tokenizer finds (OK-D); train answers
200, or 422 `too_few_tokens` when the message has fewer than `min_train_tokens` distinct tokens
(the documented decision for I06 and every other row). Afterwards no text column of any table
holds a NUL or a string that cannot be encoded as UTF-8.

The time budgets are raised here: this module is about what the answer is, not how fast a
loaded CI machine gets there (tests/api/test_message_limits.py tests the budgets). Set
SPAMSIFT_BAD_INPUT_TALLY=path to get the number of requests and 5xx answers as JSON.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import JSON, String, select

from app.config import Settings
from app.main import create_app
from app.service.runtime import Runtime, tokenizer_limits
from app.store.tables import metadata
from app.text import evidence_count, hash_raw, tokenize_raw
from tests.api.test_request_limits import server as uvicorn_server  # noqa: F401 (the fixture)
from tests.api.test_request_limits import status_of
from tests.bad_inputs import BadInput, catalogue, line_ending_variants
from tests.builders import spam_message, spam_text, stored_counts, train_examples
from tests.cores import TOKEN_CORE

RFC822 = {"content-type": "message/rfc822"}
JSON_BODY = {"content-type": "application/json"}
CATALOGUE = catalogue()
TALLY: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def tally() -> Iterator[None]:
    yield
    path = os.environ.get("SPAMSIFT_BAD_INPUT_TALLY")
    if path:
        figures = {"5xx": 0, **TALLY}
        Path(path).write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")


def bad_input_settings(settings: Settings, **changes: Any) -> Settings:
    values = {
        **settings.model_dump(),
        "classify_time_budget_seconds": 120.0,
        "train_time_budget_seconds": 120.0,
        **changes,
    }
    return Settings.model_validate(values)


@contextmanager
def app_client(settings: Settings) -> Iterator[TestClient]:
    # Server errors come back as 500 answers, to be counted, not raised in the test.
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def send(client: TestClient, method: str, url: str, **kwargs: Any) -> Any:
    response = client.request(method, url, **kwargs)
    TALLY["requests"] += 1
    if response.status_code >= 500:
        TALLY["5xx"] += 1
    assert response.status_code < 500, f"{method} {url}: {response.status_code} {response.text}"
    return response


def post_json(client: TestClient, url: str, payload: dict[str, Any]) -> Any:
    """POST JSON as `json.dumps` writes it: lone surrogates as "\\ud800" escapes."""
    return send(client, "POST", url, content=json.dumps(payload).encode(), headers=JSON_BODY)


def error_code(response: Any) -> str:
    return str(response.json()["error"]["code"])


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def assert_database_clean(client: TestClient) -> int:
    """Every text (and JSON) column of every table: no NUL, valid UTF-8. Return values seen."""
    runtime: Runtime = client.app.state.runtime  # type: ignore[attr-defined]
    runtime.flush_classifications()
    seen = 0
    with runtime.db.transaction(write=False) as conn:
        for table in metadata.sorted_tables:
            columns = [c for c in table.columns if isinstance(c.type, String | JSON)]
            if not columns:
                continue
            for row in conn.execute(select(*columns)):
                for column, value in zip(columns, row, strict=True):
                    for text in _strings(value):
                        seen += 1
                        where = f"{table.name}.{column.name}"
                        assert "\x00" not in text, f"NUL in {where}: {text!r}"
                        text.encode("utf-8")  # raises on lone surrogates
    return seen


# -- every bad message, both endpoints, both forms ------------------------------------------


def forms(raw: bytes) -> list[tuple[str, bytes | str]]:
    """The message as bytes (message/rfc822) and, when it is UTF-8, as text (JSON raw)."""
    sent: list[tuple[str, bytes | str]] = [("rfc822", raw)]
    with suppress(UnicodeDecodeError):
        sent.append(("json", raw.decode("utf-8")))
    return sent


def classify(client: TestClient, form: str, message: bytes | str) -> Any:
    if form == "rfc822":
        return send(client, "POST", "/classify", content=message, headers=RFC822)
    return post_json(client, "/v1/models/default/classify", {"raw": message})


def train(client: TestClient, form: str, message: bytes | str) -> Any:
    if form == "rfc822":
        return send(client, "POST", "/train?label=spam", content=message, headers=RFC822)
    return post_json(client, "/v1/models/default/train", {"label": "spam", "raw": message})


@pytest.mark.slow  # the whole catalogue, each through four routes: ~60 s on 2 idle cores
@pytest.mark.parametrize("bad", CATALOGUE, ids=[bad.id for bad in CATALOGUE])
def test_a_bad_message_is_answered_as_documented_and_stored_safely(
    settings: Settings, bad: BadInput
) -> None:
    raw = bad.build()
    config = bad_input_settings(settings)
    limits = tokenizer_limits(config)
    TALLY["inputs"] += 1
    with app_client(config) as client:
        train_examples(client, 2, 2)
        for form, message in forms(raw):
            TALLY[f"sent:{form}"] += 1
            if message == b"":  # I01: an empty body is refused before anything else
                assert error_code(classify(client, form, message)) == "invalid_input"
                assert error_code(train(client, form, message)) == "invalid_input"
                for url in ("/v1/models/default/classify", "/v1/models/default/train"):
                    empty_json = send(client, "POST", url, content=b"", headers=JSON_BODY)
                    assert error_code(empty_json) == "invalid_input"
                continue
            expected = tokenize_raw(message, limits=limits, core=TOKEN_CORE)
            classified = classify(client, form, message)
            assert classified.status_code == 200, classified.text
            assert classified.json()["defects"] == list(expected.defects)
            assert bad.defects <= set(classified.json()["defects"])

            trained = train(client, form, message)
            if evidence_count(
                hash_raw(message, limits=limits, core=TOKEN_CORE), core=TOKEN_CORE
            ) >= (config.min_train_tokens):
                assert trained.status_code == 200, trained.text
                assert trained.json()["defects"] == list(expected.defects)
            else:
                assert trained.status_code == 422, trained.text
                assert error_code(trained) == "too_few_tokens"
        assert_database_clean(client)

    if (
        0
        < evidence_count(hash_raw(raw, limits=limits, core=TOKEN_CORE), core=TOKEN_CORE)
        < config.min_train_tokens
    ):
        # Refused for too few tokens above: where any token is enough, its tokens are stored.
        with app_client(bad_input_settings(settings, min_train_tokens=1)) as client:
            trained = train(client, "rfc822", raw)
            assert trained.status_code == 200, trained.text
            assert_database_clean(client)


def test_line_endings_do_not_change_the_tokens_or_the_score(client: TestClient) -> None:
    """I09: CRLF, LF, CR-only and mixed line endings give one token set and one score."""
    train_examples(client, 3, 3)
    # Every token stored, however sure the model is after the first variant: each train answer
    # then counts the message's own tokens.
    client.patch("/v1/models/default", json={"pairs_until_log_odds": 0})
    answers = [
        client.post("/classify?explain=true", content=raw, headers=RFC822).json()
        for raw in line_ending_variants().values()
    ]
    assert all(answer == {**answers[0], "message_id": answer["message_id"]} for answer in answers)
    trained = [
        client.post("/train?label=ham", content=raw, headers=RFC822).json()
        for raw in line_ending_variants().values()
    ]
    assert [t["tokens"] for t in trained] == [trained[0]["tokens"]] * 4


@pytest.mark.parametrize(
    "header",
    [
        b"Message-ID: <[ABCDEF====@microsoft.com]>",
        b'To: "',
        b"To: (c):",
        b"Cc: a@b,",
    ],
)
def test_headers_that_broke_the_email_package_still_train_once(
    client: TestClient, header: bytes
) -> None:
    """I19: such a message trains, and training it again changes nothing."""
    raw = header + b"\nSubject: " + spam_text(5).encode() + b"\n\nbody words here"
    first = client.post("/train?label=spam", content=raw, headers=RFC822)
    before = stored_counts(client)
    again = client.post("/train?label=spam", content=raw, headers=RFC822)

    assert first.status_code == again.status_code == 200, first.text
    assert (first.json()["changed"], again.json()["changed"]) == (True, False)
    assert stored_counts(client) == before


# -- I34-I37: the same message again, relabelled, forgotten, with a copied Message-ID ---------


def test_i34_training_the_same_message_twice_changes_nothing(client: TestClient) -> None:
    body = {"label": "spam", "raw": spam_message(1)}
    first = client.post("/v1/models/default/train", json=body)
    before = stored_counts(client)
    second = client.post("/v1/models/default/train", json=body)

    assert second.status_code == 200
    assert (first.json()["changed"], second.json()["changed"]) == (True, False)
    assert second.json()["previous_label"] == "spam"
    assert stored_counts(client) == before


def test_i35_mark_as_ham_after_spam_moves_the_counts_once(client: TestClient) -> None:
    raw = spam_message(2)
    trained = client.post("/v1/models/default/train", json={"label": "spam", "raw": raw})
    before = stored_counts(client)
    marked = client.post("/v1/models/default/feedback", json={"label": "ham", "raw": raw})
    again = client.post("/v1/models/default/feedback", json={"label": "ham", "raw": raw})
    after = stored_counts(client)

    assert trained.status_code == marked.status_code == again.status_code == 200
    assert (marked.json()["previous_label"], marked.json()["changed"]) == ("spam", True)
    assert again.json()["changed"] is False
    assert after.class_totals[1][0] == before.class_totals[1][0] - 1
    assert after.class_totals[0][0] == before.class_totals[0][0] + 1
    for (token, class_index), (docs, _) in after.nonzero_counts().items():
        assert class_index == 0, token  # everything moved to ham
        assert docs == before.token_counts[(token, 1)][0]


def test_i36_forget_or_mark_a_message_never_trained_is_404_and_changes_nothing(
    client: TestClient,
) -> None:
    """Decision: 404 message_not_found (nothing negative, nothing changed); forget twice is
    the second time such a 404. Mark as ham *with the message* trains it as ham (200)."""
    train_examples(client, 1, 1)
    before = stored_counts(client)
    never = client.delete("/v1/models/default/messages/<never@example.org>")
    marked = client.post(
        "/v1/models/default/feedback", json={"message_id": "<never@example.org>", "label": "ham"}
    )
    assert (never.status_code, marked.status_code) == (404, 404)
    assert error_code(never) == error_code(marked) == "message_not_found"
    assert stored_counts(client) == before

    body = {"label": "spam", "raw": spam_message(3), "message_id": "<twice@example.org>"}
    client.post("/v1/models/default/train", json=body)
    first = client.delete("/v1/models/default/messages/<twice@example.org>")
    second = client.delete("/v1/models/default/messages/<twice@example.org>")
    assert (first.status_code, second.status_code) == (200, 404)
    after = stored_counts(client)
    assert after.nonzero_counts() == before.nonzero_counts()
    assert all(docs >= 0 and terms >= 0 for docs, terms in after.token_counts.values())

    with_message = client.post(
        "/v1/models/default/feedback",
        json={"label": "ham", "raw": spam_message(9), "message_id": "<new@example.org>"},
    )
    assert with_message.status_code == 200, with_message.text
    assert (with_message.json()["previous_label"], with_message.json()["label"]) == (None, "ham")
    assert stored_counts(client).class_totals[0][0] == before.class_totals[0][0] + 1


def test_i37_a_copied_message_id_with_other_content_is_learned(client: TestClient) -> None:
    victim = {"label": "ham", "raw": spam_message(4), "message_id": "<victim@example.org>"}
    forged = {"label": "spam", "raw": spam_message(5), "message_id": "<victim@example.org>"}
    first = client.post("/v1/models/default/train", json=victim)
    second = client.post("/v1/models/default/train", json=forged)
    no_id = client.post("/train?label=spam", content=spam_message(6).encode(), headers=RFC822)

    assert first.status_code == second.status_code == no_id.status_code == 200
    assert second.json()["changed"] is True
    assert second.json()["previous_label"] is None
    assert no_id.json()["message_id"].startswith("sha256:")
    assert len(stored_counts(client).trained) == 3


# -- strings clients choose -----------------------------------------------------------------

LONG_ID = "x" * 100_000
ODD_IDS = ["a\x00b", "\ud800", "\udc80x", LONG_ID, "\x1b[31mred", "tab\there", "new\nline", ""]


@pytest.mark.parametrize("message_id", ODD_IDS, ids=range(len(ODD_IDS)))
def test_an_odd_message_id_is_refused_or_stored_safely(settings: Settings, message_id: str) -> None:
    with app_client(bad_input_settings(settings)) as client:
        train_examples(client, 1, 1)
        raw = spam_message(7)
        answers = [
            post_json(
                client,
                "/v1/models/default/train",
                {"label": "spam", "raw": raw, "message_id": message_id},
            ),
            post_json(
                client, "/v1/models/default/classify", {"raw": raw, "message_id": message_id}
            ),
            post_json(
                client, "/v1/models/default/feedback", {"label": "ham", "message_id": message_id}
            ),
            post_json(
                client,
                "/v1/models/default/feedback",
                {"label": "ham", "text": spam_text(8), "message_id": message_id},
            ),
        ]
        in_url = quoted_path(message_id[:20_000])  # httpx refuses URLs over 64 KiB
        quoted = f"label=spam&message_id={in_url}"
        for path in ("/train", "/classify", "/feedback"):
            answers.append(
                send(client, "POST", f"{path}?{quoted}", content=raw.encode(), headers=RFC822)
            )
        answers.append(send(client, "DELETE", f"/v1/models/default/messages/{in_url}"))
        TALLY["client strings"] += len(answers)
        assert_database_clean(client)
    for answer in answers:
        assert answer.status_code in (200, 404, 405, 422, 431), answer.text


def quoted_path(text: str) -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


@pytest.mark.parametrize("name", ["a\x00b", "caf\u00e9", "\ud800", "UPPER", "x" * 1000, ""])
def test_an_odd_model_name_is_refused(settings: Settings, name: str) -> None:
    with app_client(bad_input_settings(settings)) as client:
        created = post_json(client, "/v1/models", {"name": name})
        quoted = f"model={quoted_path(name)}"
        short = send(
            client, "POST", f"/classify?{quoted}", content=b"Subject: x\n\ny", headers=RFC822
        )
        in_path = send(
            client, "POST", f"/v1/models/{quoted_path(name)}/classify", json={"text": "hello"}
        )
        TALLY["client strings"] += 3
        assert_database_clean(client)
    assert created.status_code == 422
    assert short.status_code == 422
    assert in_path.status_code in (404, 405, 422)


@pytest.mark.parametrize("label", ["spam\x00", "\x00", "\ud800", "sp\u0430m", "x" * 1000])
def test_an_odd_label_is_refused(settings: Settings, label: str) -> None:
    with app_client(bad_input_settings(settings)) as client:
        answers = [
            post_json(client, "/v1/models/default/train", {"label": label, "text": spam_text(1)}),
            post_json(
                client, "/v1/models/default/feedback", {"label": label, "text": spam_text(2)}
            ),
            send(
                client,
                "POST",
                f"/train?label={quoted_path(label)}",
                content=spam_message(1).encode(),
                headers=RFC822,
            ),
            post_json(
                client,
                "/v1/models/default/train/batch",
                {"items": [{"label": "spam", "text": spam_text(3)}, {"label": label, "text": "x"}]},
            ),
        ]
        TALLY["client strings"] += len(answers)
        assert stored_counts(client).trained == {}
        assert_database_clean(client)
    for answer in answers:
        assert answer.status_code == 422, answer.text


# -- I38: the HTTP layer of a real uvicorn server -------------------------------------------


def exchange_until_closed(address: str, data: bytes, timeout: float = 3.0) -> bytes:
    host, port = address.split(":")
    received = b""
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(data)
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return received


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def http_server(request: pytest.FixtureRequest, database_url: str) -> str:
    """The real uvicorn server of tests/api/test_request_limits.py (imported above)."""
    return str(request.getfixturevalue("uvicorn_server"))


@pytest.fixture
def server_errors() -> Iterator[list[str]]:
    handler = Collect()
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    yield handler.messages
    logger.removeHandler(handler)


@pytest.mark.parametrize(
    "head",
    [
        b"X-Big: " + b"a" * 20_000 + b"\r\n",
        b"".join(b"X-H%d: %s\r\n" % (i, b"a" * 100) for i in range(200)),
    ],
    ids=["one-20k-field", "200-fields"],
)
def test_i38_a_request_head_over_16_kib_is_refused(http_server: str, head: bytes) -> None:
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + head + b"\r\n"
    response = exchange_until_closed(http_server, request)
    TALLY["http-level"] += 1
    assert status_of(response) in (400, 431)
    small = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-H: " + b"a" * 15_000 + b"\r\n"
    assert (
        status_of(exchange_until_closed(http_server, small + b"Connection: close\r\n\r\n")) == 200
    )


def test_i38_transfer_encoding_with_content_length_is_refused_and_nothing_is_smuggled(
    http_server: str,
) -> None:
    request = (
        b"POST /classify HTTP/1.1\r\nHost: x\r\nContent-Type: message/rfc822\r\n"
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    response = exchange_until_closed(http_server, request)
    TALLY["http-level"] += 1
    assert status_of(response) == 400
    assert response.count(b"HTTP/1.1 ") == 1  # the request after it was never served


def test_i38_a_bare_lf_in_a_chunk_extension_is_refused(
    http_server: str, server_errors: list[str]
) -> None:
    request = (
        b"POST /classify HTTP/1.1\r\nHost: x\r\nContent-Type: message/rfc822\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n5;ext\nabc\r\nhello\r\n0\r\n\r\n"
        b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    response = exchange_until_closed(http_server, request)
    TALLY["http-level"] += 1
    assert status_of(response) == 400
    assert response.count(b"HTTP/1.1 ") == 1
    assert httpx.get(f"http://{http_server}/healthz").status_code == 200
    assert not [m for m in server_errors if "Exception in ASGI application" in m]
