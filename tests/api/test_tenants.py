"""Tenants cannot read each other: a key limited to some models reaches only those, including
through `backed_by`, and no answer tells it whether a model outside its reach exists, nor
that model's classes. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.service.runtime import Runtime
from app.store.engine import Database
from app.store.models import find_model
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


# --- cost: requests in progress per key -------------------------------------------------------


def keyed_client(settings: Settings, **changes: object) -> tuple[TestClient, dict[str, str]]:
    """A client of an app with `changes` to its settings, and keys: admin, a tenant's key
    (classify and train, limited to alice) and a classify key for every model."""
    tuned = settings.model_copy(update=changes)
    with TestClient(create_app(tuned)) as setup:
        assert setup.post("/v1/models", json={"name": "alice"}).status_code == 201
        for label, text in (("spam", spam_text(100)), ("ham", ham_text(100))):
            trained = setup.post("/v1/models/alice/train", json={"label": label, "text": text})
            assert trained.status_code == 200, trained.text
        db = database_of(setup)
        keys = {
            "admin": make_key(db, "admin"),
            "alice": make_key(db, "classify", "train", models=["alice"]),
            "mta": make_key(db, "classify", "train"),
        }
    return TestClient(create_app(tuned)), keys


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_a_key_with_as_many_requests_in_progress_as_it_may_gets_429_and_retry_after(
    settings: Settings,
) -> None:
    client, keys = keyed_client(settings, max_requests_per_key=2)
    alice_id, mta_id = keys["alice"].split("_")[1], keys["mta"].split("_")[1]
    with client:
        requests = client.app.state.key_requests  # type: ignore[attr-defined]
        held = [requests.enter(alice_id), requests.enter(alice_id)]  # two in progress
        held += [requests.enter(mta_id), requests.enter(mta_id)]
        refused = client.post(
            "/v1/models/alice/classify", json={"text": "hello"}, headers=bearer(keys["alice"])
        )
        other = client.post(
            "/v1/models/alice/classify", json={"text": "hello"}, headers=bearer(keys["mta"])
        )
        admin = client.get("/v1/models/alice", headers=bearer(keys["admin"]))
        requests.leave(alice_id)
        served = client.post(
            "/v1/models/alice/train",
            json={"label": "spam", "text": spam_text(1)},
            headers=bearer(keys["alice"]),
        )
        after = requests.enter(alice_id) and requests.enter(alice_id)

    assert held == [True, True, True, True]
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    assert refused.json()["error"]["code"] == "too_many_requests"
    assert "SPAMSIFT_MAX_REQUESTS_PER_KEY" in refused.json()["error"]["message"]
    assert other.status_code == 200  # a key for every model (a mail server's) is not limited
    assert admin.status_code == 200
    assert served.status_code == 200, served.text
    assert not after  # the served request gave its place back: one left, then none


# --- storage: classification records per key ----------------------------------------------------


def test_a_tenants_key_has_at_most_its_quota_of_classification_records_kept(
    settings: Settings,
) -> None:
    client, keys = keyed_client(settings, max_records_per_key=3)
    with client:
        for i in range(5):
            for who in ("alice", "mta"):
                answered = client.post(
                    "/v1/models/alice/classify",
                    json={"text": spam_text(i), "message_id": f"{who}-{i}"},
                    headers=bearer(keys[who]),
                )
                assert answered.status_code == 200, answered.text
        runtime: Runtime = client.app.state.runtime  # type: ignore[attr-defined]
        runtime.flush_classifications()
        feedback = {
            f"{who}-{i}": client.post(
                "/v1/models/alice/feedback",
                json={"label": "ham", "message_id": f"{who}-{i}"},
                headers=bearer(keys["admin"]),
            ).status_code
            for who in ("alice", "mta")
            for i in range(5)
        }

    assert [feedback[f"alice-{i}"] for i in range(5)] == [200, 200, 200, 404, 404]
    assert [feedback[f"mta-{i}"] for i in range(5)] == [200] * 5  # a key for every model
    assert runtime.log.over_quota == 2


# --- vocabulary flood: new tokens per request and per model -------------------------------------


def vocabulary(client: TestClient, model: str = "alice") -> int:
    runtime: Runtime = client.app.state.runtime  # type: ignore[attr-defined]
    return runtime.db.run(lambda conn: find_model(conn, model).vocabulary, write=False)


def random_words(count: int, seed: int) -> str:
    """`count` words no other message has: 2 * count + 1 tokens or so (words, word pairs,
    the message's shape)."""
    return " ".join(f"w{seed}x{i}q" for i in range(count))


def train_new_words(client: TestClient, key: str, *, messages: int) -> list[httpx.Response]:
    """Train alice `messages` messages of 30 words no other message has (about 61 new
    tokens each), one request each; the answers."""
    return [
        client.post(
            "/v1/models/alice/train",
            json={"label": "spam", "text": random_words(30, seed)},
            headers=bearer(key),
        )
        for seed in range(messages)
    ]


def test_a_request_adding_more_new_tokens_than_allowed_is_refused_whole(
    settings: Settings,
) -> None:
    client, keys = keyed_client(settings, max_new_tokens_per_request=100)
    with client:
        fits = client.post(
            "/v1/models/alice/train",
            json={"label": "spam", "text": random_words(24, 1)},
            headers=bearer(keys["alice"]),
        )
        before = vocabulary(client)
        flood = client.post(
            "/v1/models/alice/train/batch",
            json={"items": [{"label": "spam", "text": random_words(30, seed)} for seed in (3, 4)]},
            headers=bearer(keys["alice"]),
        )
        one = client.post(
            "/v1/models/alice/train",
            json={"label": "ham", "text": random_words(51, 5)},
            headers=bearer(keys["alice"]),
        )
        read = client.get("/v1/models/alice", headers=bearer(keys["admin"])).json()

    assert fits.status_code == 200, fits.text
    assert flood.status_code == 413
    assert flood.json()["error"]["code"] == "too_many_new_tokens"
    assert "more than the 100 one request may add" in flood.json()["error"]["message"]
    assert one.status_code == 413
    assert vocabulary(client) == before  # nothing written
    assert read["trained_messages"] == 3


@pytest.mark.parametrize(
    ("server_maximum", "own_maximum", "refused_past"),
    [(0, 100, 200), (100, 1000, None)],
    ids=["own-maximum-without-the-servers", "own-maximum-over-the-servers"],
)
def test_a_models_own_token_maximum_bounds_its_growth_instead_of_the_servers(
    settings: Settings, server_maximum: int, own_maximum: int, refused_past: int | None
) -> None:
    client, keys = keyed_client(
        settings, max_tokens_per_model=server_maximum, max_new_tokens_per_request=90
    )
    with client:
        changed = client.patch(
            "/v1/models/alice", json={"max_tokens": own_maximum}, headers=bearer(keys["admin"])
        )
        answers = train_new_words(client, keys["alice"], messages=5)
        end = vocabulary(client)

    assert changed.status_code == 200, changed.text
    assert changed.json()["config"]["max_tokens"] == own_maximum
    refused = [answer for answer in answers if answer.status_code == 413]
    if refused_past is None:
        assert not refused  # the server's 100 (plus as much again) does not bound this model
        assert end > 2 * server_maximum
    else:
        assert refused
        assert all(
            f"the {refused_past} it may hold" in answer.json()["error"]["message"]
            for answer in refused
        )
        assert end <= refused_past


def test_a_model_grows_no_further_than_its_token_maximum_and_as_much_again(
    settings: Settings,
) -> None:
    # (The server's token expiry may run meanwhile and make room: only the bound is asserted.)
    client, keys = keyed_client(settings, max_tokens_per_model=100, max_new_tokens_per_request=90)
    with client:
        start = vocabulary(client)
        answers = train_new_words(client, keys["alice"], messages=5)
        known = client.post(  # tokens it holds already: no growth, still trained
            "/v1/models/alice/train",
            json={"label": "ham", "text": random_words(30, 0)},
            headers=bearer(keys["alice"]),
        )
        end = vocabulary(client)

    refused = [answer for answer in answers if answer.status_code == 413]
    assert start < 200 < start + 4 * 61
    assert answers[0].status_code == 200
    assert refused
    assert all("the 200 it may hold" in answer.json()["error"]["message"] for answer in refused)
    assert known.status_code == 200, known.text
    assert end <= 200
