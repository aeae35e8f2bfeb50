"""The batch classify answer is, byte for byte, what FastAPI itself sends for the route's
response model (`ClassifyBatchResponse`) holding the same classifications."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.api.schemas import ClassifyBatchItem, ClassifyBatchResponse
from app.config import Settings
from app.main import create_app
from app.service.classification import Classification, classify_batch
from tests.builders import ham_message, ham_text, spam_message, spam_text
from tests.conftest import corpus_path

MESSAGES = Path(__file__).resolve().parents[1] / "messages"


@pytest.fixture
def patient_client(patient_settings: Settings) -> Iterator[TestClient]:
    # No time budget cut on a busy machine: the answers are compared with a second
    # classification of the same messages.
    with TestClient(create_app(patient_settings)) as test_client:
        yield test_client


def fastapi_answer(results: list[Classification]) -> tuple[bytes, str]:
    """The body and Content-Type FastAPI sends for a route returning the response model."""
    app = FastAPI()

    @app.post("/answer")
    def answer() -> ClassifyBatchResponse:
        return ClassifyBatchResponse(results=results)

    with TestClient(app) as client:
        response = client.post("/answer")
    return response.content, response.headers["content-type"]


def assert_answers_as_fastapi_would(
    client: TestClient, items: list[dict[str, Any]], **options: Any
) -> None:
    response = client.post("/v1/models/default/classify/batch", json={"items": items, **options})
    assert response.status_code == 200, response.text

    results = classify_batch(
        client.app.state.runtime,  # type: ignore[attr-defined]
        model_name="default",
        messages=[ClassifyBatchItem.model_validate(item).to_message() for item in items],
        **options,
    )
    body, content_type = fastapi_answer(results)
    assert response.headers["content-type"] == content_type
    assert response.content == body


def train(client: TestClient, examples: list[tuple[dict[str, Any], str]]) -> None:
    items = [{**message, "label": label} for message, label in examples]
    response = client.post("/v1/models/default/train/batch", json={"items": items})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("explain", [False, True])
@pytest.mark.parametrize("event_model", [None, "multinomial", "bernoulli"])
def test_hand_written_messages_are_answered_as_fastapi_would(
    patient_client: TestClient, explain: bool, event_model: str | None
) -> None:
    train(
        patient_client,
        [({"raw": spam_message(i)}, "spam") for i in range(6)]
        + [({"text": ham_text(i)}, "ham") for i in range(6)],
    )
    items: list[dict[str, Any]] = [
        {"raw": path.read_bytes().decode("latin-1")} for path in sorted(MESSAGES.glob("*.eml"))
    ]
    items += [{"raw": spam_message(i)} for i in range(20, 25)]
    items += [{"raw": ham_message(i), "message_id": f"<{i}@example.org>"} for i in range(20, 25)]
    items += [{"text": spam_text(30)}, {"text": "zebra quokka"}, {"text": "naïve café 東京"}]

    assert_answers_as_fastapi_would(patient_client, items, explain=explain, event_model=event_model)


@pytest.mark.corpus
@pytest.mark.parametrize("explain", [False, True])
def test_spamassassin_messages_are_answered_as_fastapi_would(
    patient_client: TestClient, explain: bool
) -> None:
    with gzip.open(corpus_path("spamassassin"), "rt", encoding="utf-8") as lines:
        records = [json.loads(line) for line in islice(lines, 0, None, 12)]
    examples = [({"raw": record["text"]}, record["label"]) for record in records]
    train(patient_client, examples[::3])
    tested = [message for index, (message, _) in enumerate(examples) if index % 3]
    assert len(tested) >= 300

    for start in range(0, len(tested), 100):
        assert_answers_as_fastapi_would(
            patient_client, tested[start : start + 100], explain=explain
        )
