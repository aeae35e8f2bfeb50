"""Refusals a person can act on: a bad model name said in words (not a regular expression),
what came beside what was expected, and a Message-ID without its angle brackets found, or
named as the likely slip."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.test_message_id_flow import MESSAGE, RFC822
from tests.builders import train_examples


def test_a_bad_model_name_is_refused_in_words(client: TestClient) -> None:
    created = client.post("/v1/models", json={"name": "Bad Name"})
    in_path = client.post("/v1/models/Bad%20Name/classify", json={"text": "hello there"})
    in_query = client.post("/classify?model=UPPER", content=MESSAGE, headers=RFC822)

    for answer, given in ((created, "'Bad Name'"), (in_path, "'Bad Name'"), (in_query, "'UPPER'")):
        assert answer.status_code == 422, answer.text
        message = answer.json()["error"]["message"]
        assert "lowercase letters, digits" in message, message
        assert f"got {given}" in message, message
        assert "^[a-z0-9]" not in message  # no regular expression


def test_a_missing_field_says_required(client: TestClient) -> None:
    answer = client.post("/v1/models/default/feedback", json={"message_id": "<a@b>"})

    assert answer.status_code == 422
    assert answer.json()["error"]["message"] == "label: required"


def test_feedback_finds_a_message_id_given_without_its_angle_brackets(client: TestClient) -> None:
    train_examples(client, 3, 3)
    assert client.post("/classify", content=MESSAGE, headers=RFC822).status_code == 200

    reported = client.post(
        "/feedback", json={"message_id": "offer-42@deals.example", "label": "spam"}
    )

    assert reported.status_code == 200, reported.text
    assert reported.json()["message_id"] == "<offer-42@deals.example>"
    assert reported.json()["changed"] is True


def test_an_id_trained_without_brackets_is_found_as_given(client: TestClient) -> None:
    train_examples(client, 3, 3)
    bare = client.post(
        "/v1/models/default/train",
        json={
            "text": "weekly report attached, see figures",
            "message_id": "r-1@x.example",
            "label": "ham",
        },
    )
    assert bare.status_code == 200, bare.text

    reported = client.post("/feedback", json={"message_id": "r-1@x.example", "label": "spam"})

    assert reported.status_code == 200, reported.text
    assert reported.json()["message_id"] == "r-1@x.example"
    assert reported.json()["previous_label"] == "ham"


def test_an_unknown_id_without_brackets_gets_a_404_naming_them(client: TestClient) -> None:
    answer = client.post("/feedback", json={"message_id": "nowhere@x.example", "label": "spam"})

    assert answer.status_code == 404
    message = answer.json()["error"]["message"]
    assert "'<nowhere@x.example>'" in message, message
    assert "angle brackets" in message
