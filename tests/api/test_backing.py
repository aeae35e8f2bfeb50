"""A model backed by another: a personal model classifies on its counts summed with its
backing model's (exactly as one model trained on both), feedback trains the personal model
(and the backing one only when the relation says so and the key may), relations are checked,
and a model that backs others is not deleted. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.api.test_auth import make_key
from tests.builders import database_of, ham_text, spam_text

PERSONAL_SPAM = [f"crypto airdrop wallet seed phrase bonus {i} claim token{i}" for i in range(4)]
PERSONAL_HAM = [f"climbing crag rope belay weekend trip {i} route grade{i}" for i in range(4)]


def create(client: TestClient, name: str, **fields: object) -> dict[str, object]:
    response = client.post("/v1/models", json={"name": name, **fields})
    assert response.status_code == 201, response.text
    return dict(response.json())


def train(client: TestClient, model: str, label: str, text: str) -> None:
    response = client.post(f"/v1/models/{model}/train", json={"label": label, "text": text})
    assert response.status_code == 200, response.text


def train_global(client: TestClient, model: str = "global", n: int = 8) -> None:
    for i in range(n):
        train(client, model, "spam", spam_text(i))
        train(client, model, "ham", ham_text(i))


def train_personal(client: TestClient, model: str) -> None:
    for spam, ham in zip(PERSONAL_SPAM, PERSONAL_HAM, strict=True):
        train(client, model, "spam", spam)
        train(client, model, "ham", ham)


def classify(client: TestClient, model: str, text: str, **fields: object) -> dict[str, object]:
    response = client.post(f"/v1/models/{model}/classify", json={"text": text, **fields})
    assert response.status_code == 200, response.text
    return dict(response.json())


def trained_messages(client: TestClient, model: str) -> int:
    return int(client.get(f"/v1/models/{model}").json()["trained_messages"])


MESSAGES = [
    spam_text(3),
    ham_text(5),
    PERSONAL_SPAM[0] + " offer",
    "crypto wallet rope ticket number 4",
    "climbing weekend offer code2x",
]


@pytest.mark.parametrize("event_model", ["robinson-fisher", "multinomial", "bernoulli"])
def test_a_personal_model_classifies_as_one_model_trained_on_both(
    client: TestClient, event_model: str
) -> None:
    create(client, "global", event_model=event_model)
    create(client, "alice", backed_by="global", event_model=event_model)
    create(client, "both", event_model=event_model)
    train_global(client)
    train_global(client, "both")
    train_personal(client, "alice")
    train_personal(client, "both")

    for text in MESSAGES:
        blended = classify(client, "alice", text)
        expected = classify(client, "both", text)
        assert blended["models"] == ["alice", "global"]
        assert expected["models"] == ["both"]
        assert blended["probabilities"] == pytest.approx(expected["probabilities"], abs=1e-9)
        assert blended["verdict"] == expected["verdict"]


def test_a_new_personal_model_classifies_as_its_backing_model_and_its_floor_is_the_blends(
    client: TestClient,
) -> None:
    create(client, "global")
    create(client, "alice", backed_by="global", min_learns=5)
    train_global(client)

    for text in MESSAGES:
        mine = classify(client, "alice", text)
        theirs = classify(client, "global", text)
        assert mine["probabilities"] == pytest.approx(theirs["probabilities"], abs=1e-12)
        # 8 trained messages of each class in the blend: above alice's floor of 5, although
        # alice itself has none.
        assert mine["warnings"] == []
    assert classify(client, "alice", spam_text(1))["verdict"] == "spam"
    assert classify(client, "alice", ham_text(1))["verdict"] == "ham"


def test_a_cold_personal_model_and_a_cold_backing_model_classify_from_their_rows(
    settings: Settings,
) -> None:
    with TestClient(create_app(settings)) as writer:
        create(writer, "global")
        create(writer, "alice", backed_by="global")
        create(writer, "both")
        train_global(writer)
        train_global(writer, "both")
        train_personal(writer, "alice")
        train_personal(writer, "both")
    with TestClient(create_app(settings)) as fresh:  # holds no model
        for text in MESSAGES:
            blended = classify(fresh, "alice", text)
            expected = classify(fresh, "both", text)
            assert blended["probabilities"] == pytest.approx(expected["probabilities"], abs=1e-9)
        figures = fresh.get("/metrics").text
    assert "spamsift" in figures


def test_the_relation_is_shown_set_changed_and_cleared(client: TestClient) -> None:
    create(client, "global")
    created = create(client, "alice", backed_by="global")
    listed = client.get("/v1/models").json()["models"]
    backing = client.get("/v1/models/global").json()
    changed = client.patch("/v1/models/alice", json={"feedback_trains_backing": True})
    cleared = client.patch("/v1/models/alice", json={"backed_by": None})

    assert created["backed_by"] == "global"
    assert created["feedback_trains_backing"] is False
    assert {m["name"]: m["backed_by"] for m in listed} == {
        "alice": "global",
        "default": None,
        "global": None,
    }
    assert backing["backs"] == ["alice"]
    assert changed.json()["backed_by"] == "global"
    assert changed.json()["feedback_trains_backing"] is True
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["backed_by"] is None
    assert cleared.json()["feedback_trains_backing"] is False
    assert "backed_by" not in cleared.json()["config"]  # a relation, not a scoring option


@pytest.mark.parametrize(
    ("name", "fields", "says"),
    [
        ("global", {"backed_by": "global"}, "itself"),
        ("bob", {"backed_by": "alice"}, "one level"),  # alice is backed: no chain
        ("global", {"backed_by": "alice"}, "one level"),  # global backs alice: no cycle
        ("triple", {"backed_by": "nobody"}, "no model named 'nobody'"),
        ("default", {"feedback_trains_backing": True}, "needs backed_by"),
    ],
)
def test_impossible_relations_are_refused_with_their_reason(
    client: TestClient, name: str, fields: dict[str, object], says: str
) -> None:
    create(client, "global")
    create(client, "alice", backed_by="global")
    if name in ("bob", "triple"):
        response = client.post("/v1/models", json={"name": name, **fields})
    else:
        response = client.patch(f"/v1/models/{name}", json=fields)

    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_backing"
    assert says in response.json()["error"]["message"]
    assert client.get("/v1/models/bob").status_code == 404  # nothing half made
    assert client.get("/v1/models/global").json()["backed_by"] is None


def test_a_backing_model_needs_the_same_classes(client: TestClient) -> None:
    create(client, "topics", classes=["work", "family", "bulk"])
    refused = client.post("/v1/models", json={"name": "alice", "backed_by": "topics"})

    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "invalid_backing"
    assert "same classes" in refused.json()["error"]["message"]


def test_a_model_that_backs_others_is_not_deleted(client: TestClient) -> None:
    create(client, "global")
    create(client, "alice", backed_by="global")
    create(client, "bob", backed_by="global")
    refused = client.delete("/v1/models/global", params={"confirm": "global"})
    client.patch("/v1/models/alice", json={"backed_by": None})
    client.delete("/v1/models/bob", params={"confirm": "bob"})
    deleted = client.delete("/v1/models/global", params={"confirm": "global"})

    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "model_backs_others"
    assert "alice, bob" in refused.json()["error"]["message"]
    assert deleted.status_code == 204


def test_feedback_trains_the_personal_model_and_the_backing_one_only_when_asked(
    client: TestClient,
) -> None:
    create(client, "global")
    create(client, "alice", backed_by="global")
    train_global(client)
    before = trained_messages(client, "global")

    alone = client.post("/v1/models/alice/feedback", json={"label": "spam", "text": spam_text(40)})
    client.patch("/v1/models/alice", json={"feedback_trains_backing": True})
    both = client.post("/v1/models/alice/feedback", json={"label": "spam", "text": spam_text(41)})

    assert alone.json()["models"] == ["alice"]
    assert both.status_code == 200, both.text
    assert both.json()["models"] == ["alice", "global"]
    assert trained_messages(client, "alice") == 2
    assert trained_messages(client, "global") == before + 1


def test_feedback_by_message_id_trains_the_tokens_only_the_backing_model_knew(
    client: TestClient,
) -> None:
    create(client, "global")
    create(client, "alice", backed_by="global")
    train_global(client)
    text = spam_text(2)  # every word of it known to global, none to alice
    classified = classify(client, "alice", text, message_id="m-1")

    feedback = client.post("/v1/models/alice/feedback", json={"label": "ham", "message_id": "m-1"})

    assert classified["tokens"] > 5
    assert feedback.status_code == 200, feedback.text
    assert feedback.json()["models"] == ["alice"]
    assert feedback.json()["tokens"] >= classified["tokens"]
    assert client.get("/v1/models/alice").json()["messages"] == {"ham": 1, "spam": 0}


def test_a_key_limited_to_the_personal_model_reads_the_backing_counts_but_never_writes_them(
    settings: Settings,
) -> None:
    with TestClient(create_app(settings)) as admin_client:
        create(admin_client, "global")
        create(admin_client, "alice", backed_by="global", feedback_trains_backing=True)
        train_global(admin_client)
    db = database_of(admin_client)
    admin = make_key(db, "admin")
    alice_key = make_key(db, "classify", "train", models=["alice"])
    both_key = make_key(db, "train", models=["alice", "global"])
    with TestClient(create_app(settings)) as client:
        as_admin = {"Authorization": f"Bearer {admin}"}
        before = client.get("/v1/models/global", headers=as_admin).json()["trained_messages"]
        read = client.post(
            "/v1/models/alice/classify",
            json={"text": spam_text(1)},
            headers={"Authorization": f"Bearer {alice_key}"},
        )
        limited = client.post(
            "/v1/models/alice/feedback",
            json={"label": "spam", "text": spam_text(50)},
            headers={"Authorization": f"Bearer {alice_key}"},
        )
        allowed = client.post(
            "/v1/models/alice/feedback",
            json={"label": "spam", "text": spam_text(51)},
            headers={"Authorization": f"Bearer {both_key}"},
        )
        after = client.get("/v1/models/global", headers=as_admin).json()["trained_messages"]
        direct = client.post(
            "/v1/models/global/classify",
            json={"text": spam_text(1)},
            headers={"Authorization": f"Bearer {alice_key}"},
        )

    assert read.status_code == 200, read.text
    assert read.json()["models"] == ["alice", "global"]
    assert read.json()["verdict"] == "spam"
    assert limited.json()["models"] == ["alice"]
    assert allowed.json()["models"] == ["alice", "global"]
    assert after == before + 1
    assert direct.status_code == 403


def test_stats_show_the_relation_and_the_floor_of_the_blend(client: TestClient) -> None:
    create(client, "global")
    create(client, "alice", backed_by="global", min_learns=5)
    train_global(client)
    train(client, "alice", "spam", PERSONAL_SPAM[0])

    mine = client.get("/v1/models/alice/stats").json()
    theirs = client.get("/v1/models/global/stats").json()

    assert mine["backed_by"] == "global"
    assert mine["backs"] == []
    assert mine["blend"] == {"models": ["alice", "global"], "messages": {"ham": 8, "spam": 9}}
    assert mine["classes"]["spam"]["messages"] == 1
    assert mine["warnings"] == []  # alice alone is under its floor of 5; the blend is not
    assert theirs["backed_by"] is None
    assert theirs["backs"] == ["alice"]
    assert theirs["blend"] is None


def test_a_personal_weight_counts_each_personal_message_that_many_times_but_once_for_the_floor(
    client: TestClient,
) -> None:
    create(client, "global")
    create(client, "alice", backed_by="global", personal_weight=3, min_learns=13)
    create(client, "both", min_learns=13)
    train_global(client)
    train_global(client, "both")
    train_personal(client, "alice")
    for copy in range(3):  # other message ids: each copy is trained as one more message
        for spam, ham in zip(PERSONAL_SPAM, PERSONAL_HAM, strict=True):
            for label, text in (("spam", spam), ("ham", ham)):
                response = client.post(
                    "/v1/models/both/train",
                    json={"label": label, "text": text, "message_id": f"{copy}-{text}"},
                )
                assert response.status_code == 200, response.text

    for text in MESSAGES:
        blended = classify(client, "alice", text)
        expected = classify(client, "both", text)
        assert blended["probabilities"] == pytest.approx(expected["probabilities"], abs=1e-9)
        # 8 + 4 = 12 messages of each class, under the floor of 13, whatever the weight
        assert blended["verdict"] == "unsure"
        assert "12 ham, 12 spam" in blended["warnings"][0]
        assert expected["warnings"] == []  # 8 + 3 x 4 = 20 trained messages of each class
