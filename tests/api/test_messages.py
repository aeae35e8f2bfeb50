"""Training, classification, feedback and forgetting over HTTP (SPEC §6, §6.1, §7)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.builders import (
    ham_message,
    ham_text,
    spam_message,
    spam_text,
    stored_counts,
    train_examples,
)
from tests.cores import TOKEN_CORE

RFC822 = {"content-type": "message/rfc822"}


def error_code(response: Any) -> str:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    return str(body["error"]["code"])


@pytest.fixture
def small_client(settings: Settings) -> Iterator[TestClient]:
    """A server with small limits: 3 messages per batch, 2 KiB per message."""
    limited = settings.model_copy(update={"max_batch_items": 3, "max_message_bytes": 2048})
    with TestClient(create_app(limited)) as test_client:
        yield test_client


def test_training_answers_with_message_id_label_previous_label_and_changed(
    client: TestClient,
) -> None:
    body = {"label": "spam", "raw": spam_message(1), "message_id": "<one@example.org>"}

    first = client.post("/v1/models/default/train", json=body)
    again = client.post("/v1/models/default/train", json=body)
    moved = client.post("/v1/models/default/train", json={**body, "label": "ham"})

    assert first.status_code == again.status_code == moved.status_code == 200
    assert first.json()["message_id"] == "<one@example.org>"
    assert (first.json()["changed"], first.json()["previous_label"]) == (True, None)
    assert (again.json()["changed"], again.json()["previous_label"]) == (False, "spam")
    assert (moved.json()["changed"], moved.json()["previous_label"]) == (True, "spam")
    assert moved.json()["label"] == "ham"
    assert first.json()["tokens"] > 5


def test_a_raw_message_can_be_posted_as_message_rfc822(client: TestClient) -> None:
    raw = spam_message(2).encode()

    trained = client.post("/v1/models/default/train?label=spam", content=raw, headers=RFC822)
    as_json = client.post("/v1/models/default/train", json={"label": "spam", "raw": raw.decode()})

    assert trained.status_code == 200, trained.text
    assert trained.json()["message_id"].startswith("sha256:")
    # The same bytes sent as JSON are the same message: nothing changes the second time.
    assert as_json.json()["message_id"] == trained.json()["message_id"]
    assert as_json.json()["changed"] is False
    client.post("/v1/models/default/train", json={"label": "ham", "text": ham_text(1)})
    classified = client.post(
        "/v1/models/default/classify?explain=true&event_model=multinomial",
        content=raw,
        headers=RFC822,
    )
    assert classified.status_code == 200, classified.text
    assert classified.json()["event_model"] == "multinomial"
    assert classified.json()["clues"]


def test_a_message_rfc822_train_without_label_is_422(client: TestClient) -> None:
    response = client.post(
        "/v1/models/default/train", content=b"Subject: x\r\n\r\nhi", headers=RFC822
    )

    assert response.status_code == 422
    error_code(response)


def test_an_unsupported_media_type_is_415(client: TestClient) -> None:
    response = client.post(
        "/v1/models/default/classify", content=b"hello", headers={"content-type": "text/csv"}
    )

    assert response.status_code == 415
    assert error_code(response) == "unsupported_media_type"


@pytest.mark.parametrize(
    "body",
    [
        {"label": "spam"},
        {"label": "spam", "raw": "Subject: x\r\n\r\nhi", "text": "hi"},
        {"label": "spam", "text": "hi", "surprise": 1},
        {"text": "no label"},
        {"label": "", "text": "empty label"},
    ],
)
def test_a_train_request_without_exactly_one_message_or_label_is_422(
    client: TestClient, body: dict[str, Any]
) -> None:
    response = client.post("/v1/models/default/train", json=body)

    assert response.status_code == 422
    error_code(response)


def test_malformed_json_is_422_not_500(client: TestClient) -> None:
    response = client.post(
        "/v1/models/default/train",
        content=b'{"label": "spam", "text": ',
        headers={"content-type": "application/json"},
    )

    assert response.status_code == 422
    error_code(response)


def test_classifying_an_untrained_model_is_409_not_trained(client: TestClient) -> None:
    client.post("/v1/models/default/train", json={"label": "spam", "text": spam_text(1)})

    response = client.post("/v1/models/default/classify", json={"text": spam_text(1)})

    assert response.status_code == 409
    assert error_code(response) == "not_trained"
    assert "ham" in response.json()["error"]["message"]


def test_classification_answers_the_fields_of_spec_6_1(client: TestClient) -> None:
    train_examples(client, 5, 5)

    response = client.post(
        "/v1/models/default/classify",
        json={"raw": spam_message(3), "message_id": "<c@example.org>", "explain": True},
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["message_id"] == "<c@example.org>"
    assert body["verdict"] in ("spam", "ham", "unsure")
    assert set(body["probabilities"]) == set(body["scores"]) == {"ham", "spam"}
    assert sum(body["probabilities"].values()) == pytest.approx(1.0)
    assert body["spam_probability"] == body["probabilities"]["spam"]
    assert body["tokens"] > 0
    clues = body["clues"]
    assert clues
    assert all(set(clue) == {"token", "class", "weight"} for clue in clues)
    weights = [abs(clue["weight"]) for clue in clues]
    assert weights == sorted(weights, reverse=True)
    plain = client.post("/v1/models/default/classify", json={"raw": spam_message(3)}).json()
    assert plain["clues"] is None


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli", "robinson-fisher"])
def test_spam_and_ham_get_their_verdicts_with_every_event_model(
    client: TestClient, event_model: str
) -> None:
    train_examples(client, 12, 12)

    spam = client.post(
        "/v1/models/default/classify", json={"raw": spam_message(40), "event_model": event_model}
    ).json()
    ham = client.post(
        "/v1/models/default/classify", json={"raw": ham_message(40), "event_model": event_model}
    ).json()

    assert spam["event_model"] == ham["event_model"] == event_model
    assert spam["spam_probability"] > 0.5 > ham["spam_probability"]


def test_batch_classification_answers_in_order(client: TestClient) -> None:
    train_examples(client, 6, 6)
    items = [{"text": spam_text(30)}, {"text": ham_text(30)}, {"raw": spam_message(31)}]

    response = client.post("/v1/models/default/classify/batch", json={"items": items})

    assert response.status_code == 200, response.text
    results = response.json()["results"]
    singles = [
        client.post("/v1/models/default/classify", json=item).json()["probabilities"]
        for item in items
    ]
    assert [result["probabilities"] for result in results] == singles


def test_batch_training_is_one_transaction(client: TestClient) -> None:
    train_examples(client, 1, 1)
    before = stored_counts(client)
    items = [
        {"label": "spam", "text": spam_text(20)},
        {"label": "ham", "text": ham_text(20)},
        {"label": "eggs", "text": ham_text(21)},
    ]

    failed = client.post("/v1/models/default/train/batch", json={"items": items})

    assert failed.status_code == 422
    assert error_code(failed) == "unknown_label"
    assert stored_counts(client) == before
    items[2]["label"] = "ham"
    done = client.post("/v1/models/default/train/batch", json={"items": items})
    assert done.status_code == 200, done.text
    assert [r["label"] for r in done.json()["results"]] == ["spam", "ham", "ham"]
    after = stored_counts(client).class_totals
    assert after[1][0] == before.class_totals[1][0] + 1
    assert after[0][0] == before.class_totals[0][0] + 2


def test_a_batch_with_one_oversized_message_applies_nothing(small_client: TestClient) -> None:
    before = stored_counts(small_client)
    items = [
        {"label": "spam", "text": spam_text(1)},
        {"label": "ham", "text": "word " * 1000},
    ]

    response = small_client.post("/v1/models/default/train/batch", json={"items": items})

    assert response.status_code == 413
    assert error_code(response) == "message_too_large"
    assert stored_counts(small_client) == before


def test_a_batch_over_max_batch_items_is_413(small_client: TestClient) -> None:
    items = [{"label": "spam", "text": spam_text(i)} for i in range(4)]

    trained = small_client.post("/v1/models/default/train/batch", json={"items": items})
    classified = small_client.post(
        "/v1/models/default/classify/batch", json={"items": [{"text": "x"}] * 4}
    )

    assert trained.status_code == classified.status_code == 413
    assert error_code(trained) == error_code(classified) == "batch_too_large"
    assert stored_counts(small_client).class_totals[1] == (0, 0)


def test_a_message_over_max_message_bytes_is_413(small_client: TestClient) -> None:
    big = make_big_message(3000)

    as_json = small_client.post("/v1/models/default/train", json={"label": "spam", "raw": big})
    as_rfc822 = small_client.post(
        "/v1/models/default/classify", content=big.encode(), headers=RFC822
    )

    assert as_json.status_code == as_rfc822.status_code == 413
    assert error_code(as_json) == "message_too_large"


def make_big_message(size: int) -> str:
    return "Subject: big\r\n\r\n" + "lorem ipsum " * (size // 12 + 1)


def test_forgetting_over_http_restores_the_counts(client: TestClient) -> None:
    train_examples(client, 2, 2)
    before = stored_counts(client)
    client.post(
        "/v1/models/default/train",
        json={"label": "spam", "text": spam_text(9), "message_id": "<f@example.org>"},
    )

    forgotten = client.delete("/v1/models/default/messages/<f@example.org>")
    again = client.delete("/v1/models/default/messages/<f@example.org>")

    assert forgotten.status_code == 200, forgotten.text
    assert forgotten.json() == {"message_id": "<f@example.org>", "forgotten": 1, "labels": ["spam"]}
    assert again.status_code == 404
    assert error_code(again) == "message_not_found"
    assert stored_counts(client).nonzero_counts() == before.nonzero_counts()
    assert stored_counts(client).class_totals == before.class_totals


def test_feedback_by_message_id_after_classify_over_http(client: TestClient) -> None:
    train_examples(client, 6, 6)
    classified = client.post(
        "/v1/models/default/classify", json={"raw": spam_message(70), "message_id": "<fb@x>"}
    ).json()
    assert classified["verdict"] == "spam"

    response = client.post(
        "/v1/models/default/feedback", json={"message_id": "<fb@x>", "label": "ham"}
    )

    assert response.status_code == 200, response.text
    assert response.json()["label"] == "ham"
    stats = client.get("/v1/models/default/stats").json()
    assert stats["activity"]["all"]["corrections"] == 1
    assert stats["activity"]["24h"]["verdicts"]["spam"] >= 1


def test_feedback_on_an_unknown_message_id_is_404(client: TestClient) -> None:
    train_examples(client, 1, 1)
    before = stored_counts(client)

    response = client.post(
        "/v1/models/default/feedback", json={"message_id": "<no>", "label": "ham"}
    )

    assert response.status_code == 404
    assert error_code(response) == "message_not_found"
    assert stored_counts(client) == before


def test_feedback_with_the_message_as_message_rfc822(client: TestClient) -> None:
    response = client.post(
        "/v1/models/default/feedback?label=spam&message_id=%3Cr%40x%3E",
        content=spam_message(71).encode(),
        headers=RFC822,
    )

    assert response.status_code == 200, response.text
    assert response.json()["message_id"] == "<r@x>"
    assert stored_counts(client).class_totals[1][0] == 1


def test_the_short_forms_act_on_the_model_named_by_the_query(client: TestClient) -> None:
    client.post("/v1/models", json={"name": "example.org"})
    for i in range(3):
        client.post("/train?model=example.org", json={"label": "spam", "text": spam_text(i)})
        client.post(
            "/train?model=example.org&label=ham", content=ham_message(i).encode(), headers=RFC822
        )

    classified = client.post(
        "/classify?model=example.org", json={"text": spam_text(1), "message_id": "s1"}
    )
    feedback = client.post("/feedback?model=example.org", json={"message_id": "s1", "label": "ham"})

    assert classified.status_code == 200, classified.text
    assert feedback.status_code == 200, feedback.text
    assert feedback.json()["previous_label"] is None  # "s1" was classified, never trained
    assert stored_counts(client, "example.org").class_totals[0][0] == 4
    assert stored_counts(client, "default").class_totals == {0: (0, 0), 1: (0, 0)}
    default = client.post("/train", json={"label": "spam", "text": spam_text(5)})
    assert default.status_code == 200
    assert stored_counts(client, "default").class_totals[1][0] == 1
    unknown = client.post("/classify?model=nope", json={"text": "x"})
    assert unknown.status_code == 404
    assert error_code(unknown) == "model_not_found"
    bad = client.post("/classify?model=NOPE", json={"text": "x"})
    assert bad.status_code == 422
    error_code(bad)


def test_stats_follow_spec_6_2(client: TestClient) -> None:
    trained = train_examples(client, 4, 3)
    client.post("/v1/models/default/classify", json={"text": spam_text(1)})
    client.delete(f"/v1/models/default/messages/{trained[0].message_id}")

    response = client.get("/v1/models/default/stats")

    assert response.status_code == 200
    stats = response.json()
    assert stats["model"] == "default"
    assert stats["generation"] > 0
    assert stats["classes"]["spam"]["messages"] == 3
    assert stats["classes"]["ham"]["messages"] == 3
    assert stats["classes"]["spam"]["terms"] > 0
    assert stats["vocabulary"]["tokens"] >= stats["vocabulary"]["effective"] > 0
    assert set(stats["top_tokens"]) == {"ham", "spam"}
    assert set(stats["activity"]) == {"24h", "7d", "all"}
    day = stats["activity"]["24h"]
    assert (day["trained"], day["forgotten"], day["classified"]) == (7, 1, 1)
    assert set(day["verdicts"]) == {"ham", "spam", "unsure"}
    assert stats["database_bytes"] > 0


def test_unknown_paths_and_methods_answer_the_error_body(client: TestClient) -> None:
    missing = client.get("/v1/nothing")
    wrong_method = client.put("/v1/models/default")

    assert missing.status_code == 404
    assert error_code(missing) == "not_found"
    assert wrong_method.status_code == 405
    assert error_code(wrong_method) == "method_not_allowed"


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {
        "status": "ok",
        "token_core": TOKEN_CORE.name,
        "database": "ok",
    }
    assert client.get("/readyz").status_code == 200


def test_readiness_is_503_when_the_database_is_unreachable(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/missing-dir/none.db"
    settings = Settings(database_url=url, _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(settings)) as test_client:
        ready = test_client.get("/readyz")
        train = test_client.post("/train", json={"label": "spam", "text": "x y"})

    assert ready.status_code == 503
    assert train.status_code == 503
    assert error_code(train) == "database_unavailable"
    assert train.headers["retry-after"] == "1"


def test_metrics_are_served_in_the_prometheus_format(client: TestClient) -> None:
    client.get("/healthz")

    response = client.get("/metrics")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert "spamsift_http_requests_total" in response.text


def test_openapi_lists_the_error_responses_of_every_route(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()

    for path, operations in schema["paths"].items():
        if path in ("/healthz", "/readyz", "/metrics"):
            continue
        for method, operation in operations.items():
            errors = {s: r for s, r in operation["responses"].items() if s.startswith(("4", "5"))}
            assert "503" in errors, (method, path)
            for status, response in errors.items():
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref == "#/components/schemas/ErrorBody", (method, path, status)
    paths = set(schema["paths"])
    assert {
        "/v1/models",
        "/v1/models/{name}",
        "/v1/models/{name}/train",
        "/v1/models/{name}/train/batch",
        "/v1/models/{name}/classify",
        "/v1/models/{name}/classify/batch",
        "/v1/models/{name}/feedback",
        "/v1/models/{name}/messages/{message_id}",
        "/v1/models/{name}/stats",
        "/train",
        "/classify",
        "/feedback",
        "/healthz",
        "/readyz",
        "/metrics",
    } <= paths
    train = schema["paths"]["/v1/models/{name}/train"]["post"]
    assert set(train["requestBody"]["content"]) == {"application/json", "message/rfc822"}
