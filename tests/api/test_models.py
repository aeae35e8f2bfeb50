"""Models over HTTP: create, list, read, change, delete; K-class models; isolation (SPEC §6, §8)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.builders import ham_text, spam_text, stored_counts, train_examples


def error_code(response: Any) -> str:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    return str(body["error"]["code"])


def test_a_fresh_database_has_the_default_ham_spam_model(client: TestClient) -> None:
    response = client.get("/v1/models")

    assert response.status_code == 200
    (model,) = response.json()["models"]
    assert model["name"] == "default"
    assert model["classes"] == ["ham", "spam"]
    assert model["messages"] == {"ham": 0, "spam": 0}


def test_creating_a_model_answers_201_with_its_config(client: TestClient) -> None:
    response = client.post(
        "/v1/models", json={"name": "example.org", "alpha": 0.5, "event_model": "bernoulli"}
    )

    assert response.status_code == 201, response.text
    body = response.json()
    assert body["name"] == "example.org"
    assert body["classes"] == ["ham", "spam"]
    assert body["config"]["alpha"] == 0.5
    assert body["config"]["event_model"] == "bernoulli"
    assert client.get("/v1/models/example.org").json()["config"]["alpha"] == 0.5
    names = [model["name"] for model in client.get("/v1/models").json()["models"]]
    assert names == ["default", "example.org"]


def test_creating_a_model_that_exists_is_409(client: TestClient) -> None:
    assert client.post("/v1/models", json={"name": "dup"}).status_code == 201

    response = client.post("/v1/models", json={"name": "dup"})

    assert response.status_code == 409
    assert error_code(response) == "model_exists"


@pytest.mark.parametrize("name", ["Upper", "-dash", "", "a" * 65, "sp ace", "ü"])
def test_a_bad_model_name_is_422(client: TestClient, name: str) -> None:
    response = client.post("/v1/models", json={"name": name})

    assert response.status_code == 422
    error_code(response)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"alpha": -1}, "alpha"),
        ({"alpha": 0}, "alpha"),
        ({"event_model": "svm"}, "event_model"),
        ({"prior": "guess"}, "prior"),
        ({"min_df": 0}, "min_df"),
        ({"max_vocab": 0}, "max_vocab"),
        ({"min_train_tokens": 0}, "min_train_tokens"),
        ({"min_train_tokens": 10_001}, "min_train_tokens"),
        ({"spam_threshold": 1.5}, "spam_threshold"),
        ({"ham_threshold": 0.95, "spam_threshold": 0.9}, "ham_threshold"),
        ({"classes": ["only"]}, "classes"),
        ({"classes": ["a", "a"]}, "classes"),
        ({"unknown_option": 1}, "unknown_option"),
    ],
)
def test_a_bad_config_value_is_422_naming_the_field(
    client: TestClient, options: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/models", json={"name": "bad", **options})

    assert response.status_code == 422, response.text
    assert field in response.json()["error"]["message"]
    assert client.get("/v1/models/bad").status_code == 404


def test_patch_changes_the_config_without_retraining(client: TestClient) -> None:
    train_examples(client, 3, 3)
    before = stored_counts(client)
    classified = client.post("/v1/models/default/classify", json={"text": spam_text(1)}).json()

    response = client.patch("/v1/models/default", json={"event_model": "bernoulli", "alpha": 0.25})

    assert response.status_code == 200, response.text
    assert response.json()["config"]["event_model"] == "bernoulli"
    assert response.json()["config"]["alpha"] == 0.25
    assert response.json()["messages"] == {"ham": 3, "spam": 3}
    assert stored_counts(client) == before
    after = client.post("/v1/models/default/classify", json={"text": spam_text(1)}).json()
    assert after["event_model"] == "bernoulli"
    assert after["scores"] != classified["scores"]


def test_patch_with_null_resets_an_option_to_its_default(client: TestClient) -> None:
    default_alpha = client.get("/v1/models/default").json()["config"]["alpha"]
    client.patch("/v1/models/default", json={"alpha": 3.0})

    response = client.patch("/v1/models/default", json={"alpha": None})

    assert response.status_code == 200
    assert response.json()["config"]["alpha"] == default_alpha


def test_patch_with_a_bad_value_is_422_and_keeps_the_old_config(client: TestClient) -> None:
    client.patch("/v1/models/default", json={"alpha": 2.0})

    response = client.patch("/v1/models/default", json={"alpha": -2.0})

    assert response.status_code == 422
    assert "alpha" in response.json()["error"]["message"]
    assert client.get("/v1/models/default").json()["config"]["alpha"] == 2.0


def test_a_model_may_train_shorter_messages_than_the_server_default(
    client: TestClient,
) -> None:
    # Raw mail without headers: 6 distinct tokens with digits:4, under the server's floor of 11.
    sms = {"label": "spam", "raw": "\nWIN cash now txt 8007"}
    created = client.post("/v1/models", json={"name": "sms", "min_train_tokens": 3})
    assert created.status_code == 201, created.text
    assert created.json()["config"]["min_train_tokens"] == 3
    assert client.get("/v1/models/default").json()["config"]["min_train_tokens"] is None

    assert client.post("/v1/models/sms/train", json=sms).status_code == 200
    refused = client.post("/v1/models/default/train", json=sms)
    assert refused.status_code == 422
    assert error_code(refused) == "too_few_tokens"
    assert "at least 11" in refused.json()["error"]["message"]

    # The model's option overrides the plain-text rule (any token) as well as the mail floor.
    client.patch("/v1/models/sms", json={"min_train_tokens": 7})
    raised = client.post("/v1/models/sms/train", json={**sms, "raw": "\nfree entry txt WIN 80082"})
    raised_text = client.post(
        "/v1/models/sms/train", json={"label": "spam", "text": "free entry txt WIN 80082"}
    )
    assert raised.status_code == raised_text.status_code == 422
    assert "at least 7" in raised.json()["error"]["message"]
    assert "at least 7" in raised_text.json()["error"]["message"]
    client.patch("/v1/models/sms", json={"min_train_tokens": None})  # back to the server's 11
    assert (
        "at least 11"
        in client.post(
            "/v1/models/sms/train", json={**sms, "raw": "\nclaim your free prize now"}
        ).json()["error"]["message"]
    )
    assert client.get("/v1/models/sms").json()["messages"] == {"ham": 0, "spam": 1}


def test_deleting_a_model_answers_204_then_404(client: TestClient) -> None:
    client.post("/v1/models", json={"name": "short-lived"})
    train_examples(client, 2, 2, model="short-lived")

    assert client.delete("/v1/models/short-lived?confirm=short-lived").status_code == 204

    for response in (
        client.get("/v1/models/short-lived"),
        client.delete("/v1/models/short-lived?confirm=short-lived"),
        client.patch("/v1/models/short-lived", json={"alpha": 2}),
        client.post("/v1/models/short-lived/classify", json={"text": "hello"}),
        client.post("/v1/models/short-lived/train", json={"text": "hello", "label": "ham"}),
    ):
        assert response.status_code == 404, response.text
        assert error_code(response) == "model_not_found"


def test_deleting_a_model_needs_its_name_confirmed(client: TestClient) -> None:
    client.post("/v1/models", json={"name": "precious"})
    train_examples(client, 2, 2, model="precious")

    for query in ("", "?confirm=", "?confirm=default", "?confirm=PRECIOUS"):
        refused = client.delete(f"/v1/models/precious{query}")
        assert refused.status_code == 422, query
        assert error_code(refused) == "confirmation_required"
        assert "?confirm=precious" in refused.json()["error"]["message"]

    assert client.get("/v1/models/precious").json()["messages"] == {"ham": 2, "spam": 2}
    assert client.delete("/v1/models/precious?confirm=precious").status_code == 204


def test_a_deleted_and_recreated_model_starts_empty(client: TestClient) -> None:
    client.post("/v1/models", json={"name": "again"})
    train_examples(client, 2, 2, model="again")
    client.delete("/v1/models/again?confirm=again")

    client.post("/v1/models", json={"name": "again"})

    assert client.get("/v1/models/again").json()["messages"] == {"ham": 0, "spam": 0}
    response = client.post("/v1/models/again/classify", json={"text": spam_text(0)})
    assert response.status_code == 409
    assert error_code(response) == "not_trained"


def test_training_in_one_model_never_changes_another(client: TestClient) -> None:
    client.post("/v1/models", json={"name": "a.example"})
    client.post("/v1/models", json={"name": "b.example"})
    train_examples(client, 3, 3, model="b.example")
    b_before = stored_counts(client, "b.example")
    default_before = stored_counts(client, "default")

    trained = train_examples(client, 4, 4, model="a.example")
    client.post("/v1/models/a.example/train", json={"text": spam_text(0), "label": "ham"})
    client.delete(f"/v1/models/a.example/messages/{trained[1].message_id}")
    client.post("/v1/models/a.example/feedback", json={"text": ham_text(9), "label": "spam"})

    assert stored_counts(client, "b.example") == b_before
    assert stored_counts(client, "default") == default_before
    # The same message trained in b is untouched by forgetting it in a.
    response = client.delete(f"/v1/models/b.example/messages/{trained[1].message_id}")
    assert response.status_code == 200
    assert client.delete("/v1/models/a.example?confirm=a.example").status_code == 204
    assert stored_counts(client, "default") == default_before


def test_a_three_class_model_trains_and_classifies_by_argmax(client: TestClient) -> None:
    response = client.post(
        "/v1/models", json={"name": "topics", "classes": ["work", "family", "promo"]}
    )
    assert response.status_code == 201, response.text
    assert response.json()["config"]["event_model"] in ("multinomial", "bernoulli")
    texts = {
        "work": ["quarterly report deadline budget", "project meeting agenda budget"],
        "family": ["dinner birthday grandma weekend", "holiday weekend kids dinner"],
        "promo": ["discount offer limited sale", "bonus sale coupon discount"],
    }
    for label, examples in texts.items():
        for text in examples:
            # The same 11 words in every text: enough tokens to train (min_train_tokens).
            padded = f"{text} {' '.join(f'shared{i}' for i in range(11))}"
            trained = client.post("/v1/models/topics/train", json={"text": padded, "label": label})
            assert trained.status_code == 200, trained.text

    response = client.post("/v1/models/topics/classify", json={"text": "birthday dinner"})

    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body["probabilities"]) == {"work", "family", "promo"}
    assert body["label"] == body["verdict"] == "family"
    assert body["verdict"] == max(body["probabilities"], key=body["probabilities"].get)
    assert sum(body["probabilities"].values()) == pytest.approx(1.0, abs=1e-12)
    assert body["spam_probability"] is None
    wrong = client.post("/v1/models/topics/train", json={"text": "x y", "label": "spam"})
    assert wrong.status_code == 422
    assert error_code(wrong) == "unknown_label"


def test_robinson_fisher_on_a_three_class_model_is_422(client: TestClient) -> None:
    create = client.post(
        "/v1/models",
        json={"name": "k3", "classes": ["a", "b", "c"], "event_model": "robinson-fisher"},
    )
    assert create.status_code == 422
    assert "event_model" in create.json()["error"]["message"]

    client.post("/v1/models", json={"name": "k3", "classes": ["a", "b", "c"]})
    for label, text in (("a", "alpha apple"), ("b", "bravo banana"), ("c", "charlie cherry")):
        client.post("/v1/models/k3/train", json={"text": text, "label": label})
    patch = client.patch("/v1/models/k3", json={"event_model": "robinson-fisher"})
    classify = client.post(
        "/v1/models/k3/classify", json={"text": "apple", "event_model": "robinson-fisher"}
    )

    assert patch.status_code == 422
    assert "event_model" in patch.json()["error"]["message"]
    assert classify.status_code == 422
    assert error_code(classify) == "invalid_config"
