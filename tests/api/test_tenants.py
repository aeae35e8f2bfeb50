"""Tenants cannot read each other: a key limited to some models reaches only those, including
through `backed_by`, and no answer tells it whether a model outside its reach exists, nor
that model's classes. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.service.runtime import Runtime
from app.store.engine import Database
from tests.api.test_auth import make_key
from tests.builders import database_of, ham_text, spam_text


@pytest.fixture
def tenants(settings: Settings) -> Iterator[tuple[TestClient, dict[str, dict[str, str]]]]:
    """alice, bob (same classes as alice) and carol (other classes); admin keys for all,
    for alice alone (her tenant's key), for bob alone and for both alice and bob."""
    with TestClient(create_app(settings)) as setup:
        for name, classes in (
            ("alice", ["ham", "spam"]),
            ("bob", ["ham", "spam"]),
            ("carol", ["personal", "bulk"]),
        ):
            created = setup.post("/v1/models", json={"name": name, "classes": classes})
            assert created.status_code == 201, created.text
        trained = setup.post("/v1/models/bob/train", json={"label": "spam", "text": spam_text(1)})
        assert trained.status_code == 200, trained.text
        db: Database = database_of(setup)
        keys = {
            "admin": make_key(db, "admin"),
            "alice": make_key(db, "admin", models=["alice"]),
            "bob": make_key(db, "admin", models=["bob"]),
            "both": make_key(db, "admin", models=["alice", "bob"]),
        }
    with TestClient(create_app(settings)) as client:
        yield client, {who: {"Authorization": f"Bearer {key}"} for who, key in keys.items()}


def test_a_key_limited_to_its_model_cannot_back_it_by_another_tenants_model(
    tenants: tuple[TestClient, dict[str, dict[str, str]]],
) -> None:
    client, as_ = tenants

    patched = client.patch("/v1/models/alice", json={"backed_by": "bob"}, headers=as_["alice"])
    still = client.get("/v1/models/alice", headers=as_["admin"]).json()

    assert patched.status_code == 422, patched.text
    assert patched.json()["error"]["code"] == "invalid_backing"
    assert still["backed_by"] is None
    # Nothing of bob can be read through alice: the blend never formed.
    stats = client.get("/v1/models/alice/stats", headers=as_["alice"]).json()
    assert stats["classes"]["spam"]["messages"] == 0


def test_a_model_out_of_reach_is_refused_exactly_as_one_that_does_not_exist(
    tenants: tuple[TestClient, dict[str, dict[str, str]]],
) -> None:
    client, as_ = tenants

    def refusal(response_name: str, create: bool) -> tuple[int, dict[str, str]]:
        if create:
            response = client.post(
                "/v1/models",
                json={"name": "alice2", "backed_by": response_name},
                headers=as_["alice"],
            )
        else:
            response = client.patch(
                "/v1/models/alice", json={"backed_by": response_name}, headers=as_["alice"]
            )
        error = response.json()["error"]
        return response.status_code, {
            "code": error["code"],
            "message": error["message"].replace(repr(response_name), "NAME"),
        }

    for create in (False, True):
        missing = refusal("nobody", create)
        # bob: same classes; carol: other classes, whose labels must not leak either.
        assert refusal("bob", create) == missing
        assert refusal("carol", create) == missing
    assert "personal" not in str(refusal("carol", False))


def test_a_key_for_both_models_may_back_one_by_the_other(
    tenants: tuple[TestClient, dict[str, dict[str, str]]],
) -> None:
    client, as_ = tenants

    patched = client.patch("/v1/models/alice", json={"backed_by": "bob"}, headers=as_["both"])

    assert patched.status_code == 200, patched.text
    assert patched.json()["backed_by"] == "bob"


def test_the_backing_tenant_is_never_told_the_names_of_the_models_it_backs(
    tenants: tuple[TestClient, dict[str, dict[str, str]]],
) -> None:
    client, as_ = tenants
    backed = client.patch("/v1/models/alice", json={"backed_by": "bob"}, headers=as_["admin"])
    assert backed.status_code == 200, backed.text

    deleted = client.delete("/v1/models/bob", params={"confirm": "bob"}, headers=as_["bob"])
    read = client.get("/v1/models/bob", headers=as_["bob"]).json()
    stats = client.get("/v1/models/bob/stats", headers=as_["bob"]).json()
    admin_deleted = client.delete("/v1/models/bob", params={"confirm": "bob"}, headers=as_["admin"])

    assert deleted.status_code == 409
    assert "alice" not in deleted.json()["error"]["message"]
    assert "1 model this API key may not read" in deleted.json()["error"]["message"]
    assert read["backs"] == []
    assert stats["backs"] == []
    assert "alice" in admin_deleted.json()["error"]["message"]  # the operator sees all


# --- cost: a per-request event model on a blend ---------------------------------------------


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli"])
def test_a_blend_sums_the_merged_vocabulary_once_per_generation_not_per_message(
    client: TestClient, event_model: str
) -> None:
    """Multinomial and Bernoulli need sums over the whole merged vocabulary: they are kept per
    pair of the models' generations, so a tenant asking for them on every message costs its
    message's rows, not the backing model's size, and scores exactly as one merged model."""
    for name, fields in (("global", {}), ("alice", {"backed_by": "global"}), ("both", {})):
        assert client.post("/v1/models", json={"name": name, **fields}).status_code == 201
    for i in range(6):
        for model in ("global", "both"):
            for label, text in (("spam", spam_text(i)), ("ham", ham_text(i))):
                trained = client.post(
                    f"/v1/models/{model}/train", json={"label": label, "text": text}
                )
                assert trained.status_code == 200, trained.text
    for model in ("alice", "both"):
        client.post(f"/v1/models/{model}/train", json={"label": "ham", "text": ham_text(40)})
    runtime: Runtime = client.app.state.runtime  # type: ignore[attr-defined]
    before = runtime.models.figures().totals_reads

    answers = [
        client.post(
            "/v1/models/alice/classify",
            json={"text": spam_text(i + 20), "event_model": event_model},
        ).json()
        for i in range(5)
    ]
    summed = runtime.models.figures().totals_reads - before
    client.post("/v1/models/global/train", json={"label": "spam", "text": spam_text(30)})
    client.post("/v1/models/both/train", json={"label": "spam", "text": spam_text(30)})
    after_training = client.post(
        "/v1/models/alice/classify", json={"text": spam_text(20), "event_model": event_model}
    ).json()
    expected = client.post(
        "/v1/models/both/classify", json={"text": spam_text(20), "event_model": event_model}
    ).json()

    assert summed == 1  # one sum for five messages at the same generations
    assert runtime.models.figures().totals_reads - before == 2  # a new generation: summed anew
    assert [answer["models"] for answer in answers] == [["alice", "global"]] * 5
    assert after_training["event_model"] == event_model
    assert after_training["probabilities"] == pytest.approx(expected["probabilities"], abs=1e-9)
