"""rf_evidence_cap over HTTP: a long message's evidence counts as at most that many tokens."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.builders import ham_text, spam_text, train_examples


def classify(client: TestClient, text: str) -> dict[str, Any]:
    response = client.post("/v1/models/default/classify", json={"text": text, "explain": True})
    assert response.status_code == 200, response.text
    return dict(response.json())


def log_odds(answer: dict[str, Any]) -> float:
    return float(answer["scores"]["spam"] - answer["scores"]["ham"])


def with_cap(client: TestClient, cap: int, text: str) -> dict[str, Any]:
    response = client.patch("/v1/models/default", json={"rf_evidence_cap": cap})
    assert response.status_code == 200, response.text
    return classify(client, text)


def test_the_cap_bounds_a_long_message_and_leaves_a_short_one(client: TestClient) -> None:
    train_examples(client, 12, 12)
    long_spam = " ".join(spam_text(i) for i in range(12))  # its tokens: many, all trained
    short_ham = ham_text(3)

    free_long = with_cap(client, 1_000_000, long_spam)
    capped_long = with_cap(client, 4, long_spam)
    roomy_long = with_cap(client, free_long["tokens"], long_spam)
    free_short = with_cap(client, 1_000_000, short_ham)
    roomy_short = with_cap(client, free_short["tokens"], short_ham)

    m = free_long["tokens"]  # tokens that voted
    assert m > 4
    assert capped_long["tokens"] == m
    assert 0 < log_odds(capped_long) < log_odds(free_long)  # still spam, less sure
    assert capped_long["verdict"] == free_long["verdict"] == "spam"
    weights = {clue["token"]: clue["weight"] for clue in free_long["clues"]}
    for clue in capped_long["clues"]:  # each clue's weight shares the bound: times 4/m
        assert abs(clue["weight"] - weights[clue["token"]] * 4 / m) < 1e-9
    assert log_odds(roomy_long) == log_odds(free_long)  # a cap of m or more changes nothing
    assert log_odds(roomy_short) == log_odds(free_short)
    assert roomy_short["verdict"] == "ham"


def test_the_cap_is_checked_and_reset_like_any_option(client: TestClient) -> None:
    assert client.get("/v1/models/default").json()["config"]["rf_evidence_cap"] == 300
    response = client.patch("/v1/models/default", json={"rf_evidence_cap": 0})
    assert response.status_code == 422
    assert "rf_evidence_cap" in response.json()["error"]["message"]

    client.patch("/v1/models/default", json={"rf_evidence_cap": 50})
    assert client.get("/v1/models/default").json()["config"]["rf_evidence_cap"] == 50
    client.patch("/v1/models/default", json={"rf_evidence_cap": None})
    assert client.get("/v1/models/default").json()["config"]["rf_evidence_cap"] == 300
