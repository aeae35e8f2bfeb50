"""The mail flow of the README, over HTTP: the MTA classifies raw mail, the user's "mark as
spam" click sends only the Message-ID, and the service finds the message by it."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.builders import ham_text, spam_text, train_examples

RFC822 = {"content-type": "message/rfc822"}
MESSAGE = (
    b"From: shop@deals.example\r\nTo: ann@example.org\r\n"
    b"Message-ID: <offer-42@deals.example>\r\nSubject: your cheap watches\r\n\r\n"
    b"Cheap watches, free shipping, buy now at http://deals.example/watches today only.\r\n"
)


def test_classify_answers_the_message_id_header_as_the_message_id(client: TestClient) -> None:
    train_examples(client, 3, 3)

    as_body = client.post("/classify", content=MESSAGE, headers=RFC822)
    as_json = client.post("/v1/models/default/classify", json={"raw": MESSAGE.decode()})
    given = client.post(
        "/v1/models/default/classify", json={"raw": MESSAGE.decode(), "message_id": "mine"}
    )
    plain = client.post("/v1/models/default/classify", json={"text": spam_text(0)})

    assert as_body.json()["message_id"] == "<offer-42@deals.example>"
    assert as_json.json()["message_id"] == "<offer-42@deals.example>"
    assert given.json()["message_id"] == "mine"  # the client's id comes first
    assert plain.json()["message_id"].startswith("sha256:")


def test_feedback_by_message_id_alone_finds_what_the_mta_classified(client: TestClient) -> None:
    train_examples(client, 3, 3)
    classified = client.post("/classify", content=MESSAGE, headers=RFC822)
    assert classified.status_code == 200, classified.text

    reported = client.post(
        "/feedback", json={"message_id": "<offer-42@deals.example>", "label": "spam"}
    )
    again = client.post(
        "/feedback", json={"message_id": "<offer-42@deals.example>", "label": "spam"}
    )
    corrected = client.post(
        "/feedback", json={"message_id": "<offer-42@deals.example>", "label": "ham"}
    )

    assert reported.status_code == 200, reported.text
    assert reported.json()["changed"] is True
    assert again.json()["changed"] is False
    assert corrected.json()["previous_label"] == "spam"
    assert client.get("/v1/models/default").json()["messages"] == {"ham": 4, "spam": 3}


def test_a_reused_message_id_with_other_content_is_another_message(client: TestClient) -> None:
    train_examples(client, 3, 3)
    other = MESSAGE.replace(b"Cheap watches", b"Meeting notes " + ham_text(1).encode())

    first = client.post("/train?label=spam", content=MESSAGE, headers=RFC822)
    second = client.post("/train?label=ham", content=other, headers=RFC822)

    assert first.json()["message_id"] == second.json()["message_id"]
    assert second.json()["previous_label"] is None  # not moved: the token digest differs
    assert client.get("/v1/models/default").json()["messages"] == {"ham": 4, "spam": 4}
