"""A model trained on too few messages says so: below min_learns trained messages of each
class (200, as SpamAssassin's bayes_min_ham_num and rspamd's min_learns) every verdict is
`unsure` and the answer says why; scores and probabilities stay as they are."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.builders import spam_text, train_examples


@pytest.fixture
def floor_client(settings: Settings) -> Iterator[TestClient]:
    """The server's default floor (the test suite otherwise runs without one)."""
    default = Settings.model_fields["min_learns"].default
    assert default == 200
    with TestClient(create_app(settings.model_copy(update={"min_learns": default}))) as client:
        yield client


def test_a_model_under_its_floor_answers_unsure_and_says_why(floor_client: TestClient) -> None:
    train_examples(floor_client, 3, 12)
    below = floor_client.post("/v1/models/default/classify", json={"text": spam_text(1)})
    stats = floor_client.get("/v1/models/default/stats").json()

    floor_client.patch("/v1/models/default", json={"min_learns": 3})
    met = floor_client.post("/v1/models/default/classify", json={"text": spam_text(1)})

    assert below.status_code == 200, below.text
    assert below.json()["verdict"] == "unsure"
    assert below.json()["warnings"] == [
        "model has 12 ham, 3 spam; verdicts need 200 of each "
        "(min_learns: train more, or lower the model's min_learns)"
    ]
    assert stats["min_learns"] == 200
    assert stats["warnings"] == below.json()["warnings"]
    # The scores are the model's own either way: only the verdict waits for the floor.
    assert below.json()["probabilities"] == met.json()["probabilities"]
    assert met.json()["verdict"] == "spam"
    assert met.json()["warnings"] == []


def test_min_learns_is_a_model_option_checked_and_documented(floor_client: TestClient) -> None:
    refused = floor_client.post("/v1/models", json={"name": "x", "min_learns": -1})
    created = floor_client.post("/v1/models", json={"name": "y", "min_learns": 0})
    schema = floor_client.get("/openapi.json").json()["components"]["schemas"]

    assert refused.status_code == 422
    assert "min_learns" in refused.text
    assert created.json()["config"]["min_learns"] == 0
    assert "unsure" in schema["CreateModelRequest"]["properties"]["min_learns"]["description"]
    assert "min_learns" in schema["Classification"]["properties"]["warnings"]["description"]
