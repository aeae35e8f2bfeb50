"""Word pairs and shape tokens are model options: off, not stored and not scored; a message
stays the same message whatever they are."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.service.model_config import ModelConfig
from app.text import tokenize_text
from app.text.families import DERIVED_PREFIXES, FAMILIES, FAMILY_PREFIXES
from tests.builders import ham_text, spam_text
from tests.cores import TOKEN_CORE

FAMILIES_OFF = {"word_pairs": False, "shape_tokens": False}


def test_the_families_are_options_on_by_default_and_checked(client: TestClient) -> None:
    created = client.post("/v1/models", json={"name": "m"})
    refused = client.post("/v1/models", json={"name": "x", "word_pairs": "sometimes"})
    changed = client.patch("/v1/models/m", json={"shape_tokens": False})

    assert created.json()["config"]["word_pairs"] is True
    assert created.json()["config"]["shape_tokens"] is True
    assert refused.status_code == 422
    assert "word_pairs" in refused.text
    assert changed.json()["config"]["shape_tokens"] is False


def test_a_family_that_is_off_is_not_stored(client: TestClient) -> None:
    client.post("/v1/models", json={"name": "m", **FAMILIES_OFF})
    text = spam_text(1)
    every = tokenize_text(text, core=TOKEN_CORE).token_counts

    trained = client.post("/v1/models/m/train", json={"label": "spam", "text": text}).json()
    stats = client.get("/v1/models/m/stats").json()

    words = [token for token in every if not token.startswith(DERIVED_PREFIXES)]
    assert len(words) < len(every)  # the text has pairs and shape tokens
    assert trained["tokens"] == len(words)
    assert stats["vocabulary"]["tokens"] == len(words)


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli", "robinson-fisher"])
def test_turning_the_families_off_scores_as_a_model_that_never_had_them(
    client: TestClient, event_model: str
) -> None:
    client.post("/v1/models", json={"name": "on", "event_model": event_model})
    client.post("/v1/models", json={"name": "never", "event_model": event_model, **FAMILIES_OFF})
    examples = [("spam", spam_text(i)) for i in range(6)] + [("ham", ham_text(i)) for i in range(6)]
    for name in ("on", "never"):
        for label, text in examples:
            response = client.post(f"/v1/models/{name}/train", json={"label": label, "text": text})
            assert response.status_code == 200, response.text
    client.patch("/v1/models/on", json=FAMILIES_OFF)

    for text in (spam_text(40), ham_text(41)):
        on = client.post("/v1/models/on/classify", json={"text": text}).json()
        never = client.post("/v1/models/never/classify", json={"text": text}).json()
        assert on["tokens"] == never["tokens"]
        for label in ("ham", "spam"):
            assert on["probabilities"][label] == pytest.approx(
                never["probabilities"][label], rel=1e-9
            )
    on_stats = client.get("/v1/models/on/stats").json()["vocabulary"]
    never_stats = client.get("/v1/models/never/stats").json()["vocabulary"]
    assert on_stats["effective"] == never_stats["effective"]
    assert on_stats["tokens"] > never_stats["tokens"]  # stored while on, kept for turning back


def test_a_message_is_the_same_message_whatever_the_options(client: TestClient) -> None:
    message = {"text": spam_text(3), "message_id": "<one@example.org>"}
    first = client.post("/train", json={"label": "spam", **message}).json()
    client.patch("/v1/models/default", json=FAMILIES_OFF)

    again = client.post("/train", json={"label": "spam", **message}).json()
    moved = client.post("/train", json={"label": "ham", **message}).json()
    forgotten = client.delete("/v1/models/default/messages/%3Cone@example.org%3E")
    stats = client.get("/v1/models/default/stats").json()

    assert first["changed"] is True
    assert again["changed"] is False
    assert (moved["previous_label"], moved["changed"]) == ("spam", True)
    assert forgotten.status_code == 200, forgotten.text
    assert forgotten.json()["forgotten"] == 1
    assert stats["classes"]["ham"]["messages"] == stats["classes"]["spam"]["messages"] == 0


def test_every_derived_family_is_a_boolean_model_option_of_its_name() -> None:
    for family in FAMILIES:
        assert ModelConfig.model_fields[family].annotation is bool
    config = ModelConfig(word_pairs=False)
    assert config.token_families() == frozenset({"shape_tokens"})
    assert config.to_engine().excluded_prefixes == FAMILY_PREFIXES["word_pairs"]
    assert ModelConfig().to_engine().excluded_prefixes == ()


def test_feedback_by_message_id_alone_stores_no_token_of_a_family_that_is_off(
    client: TestClient,
) -> None:
    # The record kept for feedback holds the ids of every token the model knew, pairs it
    # stored while they were on included; feedback after they were turned off skips them.
    text = spam_text(5)
    client.post("/train", json={"label": "spam", "text": text, "message_id": "<a@x>"})
    client.post("/train", json={"label": "ham", "text": ham_text(5), "message_id": "<b@x>"})
    client.patch("/v1/models/default", json=FAMILIES_OFF)
    client.post("/classify", json={"text": text, "message_id": "<c@x>"})

    reported = client.post("/feedback", json={"message_id": "<c@x>", "label": "spam"})

    words = [
        token
        for token in tokenize_text(text, core=TOKEN_CORE).token_counts
        if not token.startswith(DERIVED_PREFIXES)
    ]
    assert reported.status_code == 200, reported.text
    assert reported.json()["tokens"] == len(words)
