"""The endpoints the dashboard page uses: activity as a time series, correction rates, API keys
over HTTP, and the page's own files with their security headers."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.errors import LastAdminKey
from app.main import create_app
from app.service.keys import create_key, revoke_key
from app.store.engine import Database
from tests.builders import ham_message, spam_message, train_examples


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def classify_then_correct(client: TestClient, raw: str, message_id: str, label: str) -> str:
    verdict = client.post(
        "/v1/models/default/classify", json={"raw": raw, "message_id": message_id}
    ).json()["verdict"]
    response = client.post(
        "/v1/models/default/feedback", json={"message_id": message_id, "label": label}
    )
    assert response.status_code == 200, response.text
    return str(verdict)


def test_activity_splits_corrections_into_false_positives_and_negatives(
    client: TestClient,
) -> None:
    train_examples(client, 6, 6)
    assert classify_then_correct(client, spam_message(70), "<fp@x>", "ham") == "spam"
    assert classify_then_correct(client, ham_message(71), "<fn@x>", "spam") == "ham"
    assert classify_then_correct(client, spam_message(72), "<ok@x>", "spam") == "spam"
    client.post("/v1/models/default/classify", json={"raw": ham_message(73)})

    week = client.get("/v1/models/default/activity", params={"range": "7d"}).json()
    stats = client.get("/v1/models/default/stats").json()

    totals = week["totals"]
    assert (totals["classified"], totals["corrections"], totals["feedback"]) == (4, 2, 3)
    assert (totals["false_positives"], totals["false_negatives"]) == (1, 1)
    assert totals["corrected_to"] == {"ham": 1, "spam": 1}
    assert week["rates"] == {"corrections": 0.5, "false_positives": 0.25, "false_negatives": 0.25}
    assert (week["bucket"], len(week["buckets"])) == ("day", 7)
    assert week["buckets"][-1]["classified"] == 4  # today is the last bucket
    # 12 examples, and the 3 classified messages feedback trained
    assert sum(bucket["trained"] for bucket in week["buckets"]) == totals["trained"] == 15
    assert stats["activity"]["all"]["false_positives"] == 1
    assert stats["activity"]["24h"]["corrected_to"] == {"ham": 1, "spam": 1}
    assert stats["last_trained_hour"] is not None


def test_activity_by_hour_and_day_and_its_refusals(client: TestClient) -> None:
    day = client.get("/v1/models/default/activity", params={"range": "24h"}).json()
    month = client.get("/v1/models/default/activity", params={"range": "30d"}).json()
    bad_range = client.get("/v1/models/default/activity", params={"range": "1y"})
    unknown = client.get("/v1/models/nothing/activity")

    assert (day["bucket"], len(day["buckets"])) == ("hour", 24)
    assert (month["bucket"], len(month["buckets"])) == ("day", 30)
    starts = [bucket["start"] for bucket in day["buckets"]]
    assert starts == sorted(starts)
    assert day["rates"] == {"corrections": None, "false_positives": None, "false_negatives": None}
    assert bad_range.status_code == 422
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"


def test_a_model_of_other_classes_has_no_false_positive_rate(client: TestClient) -> None:
    client.post("/v1/models", json={"name": "lang", "classes": ["en", "fr", "de"]})

    answer = client.get("/v1/models/lang/activity").json()

    assert set(answer["rates"]) == {"corrections"}
    assert answer["totals"]["corrected_to"] == {"en": 0, "fr": 0, "de": 0}
    assert "false_positives" not in answer["totals"]


@pytest.fixture
def db(database_url: str):
    database = Database(database_url)
    yield database
    database.dispose()


def test_keys_are_created_listed_and_revoked_over_http(settings: Settings, db: Database) -> None:
    admin, _ = create_key(db, scopes=["admin"], name="operator")
    with TestClient(create_app(settings)) as client:
        made = client.post(
            "/v1/keys",
            json={"scopes": ["classify"], "models": ["default"], "name": "<b>relay</b>"},
            headers=bearer(admin),
        )
        assert made.status_code == 201, made.text
        secret = made.json()["key"]
        listed = client.get("/v1/keys", headers=bearer(admin)).json()["keys"]
        me = client.get("/v1/keys/me", headers=bearer(secret)).json()
        revoked = client.delete(f"/v1/keys/{made.json()['key_id']}", headers=bearer(admin))
        time.sleep(1.1)  # keys checked lately are trusted for up to a second
        after = client.get("/v1/keys/me", headers=bearer(secret))
        unknown = client.delete("/v1/keys/0123456789ab", headers=bearer(admin))
        bad_scope = client.post("/v1/keys", json={"scopes": ["root"]}, headers=bearer(admin))
        bad_model = client.post(
            "/v1/keys", json={"scopes": ["train"], "models": ["nope"]}, headers=bearer(admin)
        )
        limited = client.get("/v1/keys", headers=bearer(secret))
        bad_name = client.post(
            "/v1/keys", json={"scopes": ["train"], "name": "a\x00b"}, headers=bearer(admin)
        )

    assert made.json()["scopes"] == ["classify"]
    assert made.json()["models"] == ["default"]
    assert {key["name"] for key in listed} == {"operator", "<b>relay</b>"}
    assert all("key" not in key and "key_hash" not in key for key in listed)
    assert me["development_mode"] is False
    assert me["key"]["key_id"] == made.json()["key_id"]
    assert "key" not in me["key"]
    assert me["key"]["models"] == ["default"]
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    assert after.status_code == 401
    assert unknown.status_code == 404
    assert bad_scope.status_code == 422
    assert bad_model.status_code == 404
    assert limited.status_code == 401  # revoked by then
    assert bad_name.status_code == 422


def test_the_last_admin_key_is_not_revoked_over_http(settings: Settings, db: Database) -> None:
    admin, admin_key = create_key(db, scopes=["admin"], name="operator")
    _, relay_key = create_key(db, scopes=["classify"], name="relay")
    create_key(db, scopes=["admin"], models=["default"], name="tenant admin")  # not for every model
    with TestClient(create_app(settings)) as client:
        with_others = client.delete(f"/v1/keys/{admin_key.key_id}", headers=bearer(admin))
        second, second_key = create_key(db, scopes=["admin"], name="second operator")
        client.app.state.key_guard.invalidate()  # type: ignore[attr-defined]
        first_goes = client.delete(f"/v1/keys/{admin_key.key_id}", headers=bearer(second))
        client.delete(f"/v1/keys/{relay_key.key_id}", headers=bearer(second))
        for key in client.get("/v1/keys", headers=bearer(second)).json()["keys"]:
            if key["name"] == "tenant admin":
                client.delete(f"/v1/keys/{key['key_id']}", headers=bearer(second))
        alone = client.delete(f"/v1/keys/{second_key.key_id}", headers=bearer(second))
        still_in = client.get("/v1/keys", headers=bearer(second))

    assert with_others.status_code == 409
    assert with_others.json()["error"]["code"] == "last_admin_key"
    assert "make another admin key first" in with_others.json()["error"]["message"]
    assert first_goes.status_code == 200
    assert alone.status_code == 409  # the request's own key, the last one: a lock-out
    assert "lock everyone out" in alone.json()["error"]["message"]
    assert still_in.status_code == 200


def test_revoking_the_last_admin_key_leaving_other_keys_is_refused_everywhere(
    db: Database,
) -> None:
    _, admin_key = create_key(db, scopes=["admin"])
    _, relay_key = create_key(db, scopes=["classify"])

    with pytest.raises(LastAdminKey):
        revoke_key(db, key=admin_key.key_id)
    assert revoke_key(db, key=relay_key.key_id).revoked_at is not None
    # Alone, the command line may still revoke it (a leaked key): that closes the service.
    assert revoke_key(db, key=admin_key.key_id).revoked_at is not None


def test_in_development_mode_the_first_key_made_over_http_is_an_admin_key(
    client: TestClient,
) -> None:
    classify_first = client.post("/v1/keys", json={"scopes": ["classify"]})
    limited_first = client.post("/v1/keys", json={"scopes": ["admin"], "models": ["default"]})
    still_open = client.get("/v1/keys/me").json()["development_mode"]
    admin_first = client.post("/v1/keys", json={"scopes": ["admin"]})
    admin = admin_first.json()["key"]
    then_classify = client.post("/v1/keys", json={"scopes": ["classify"]}, headers=bearer(admin))

    assert classify_first.status_code == 409
    assert classify_first.json()["error"]["code"] == "last_admin_key"
    assert limited_first.status_code == 409
    assert still_open is True
    assert admin_first.status_code == 201
    assert then_classify.status_code == 201


def test_whoami_in_development_mode(client: TestClient) -> None:
    assert client.get("/v1/keys/me").json() == {"development_mode": True, "key": None}


def test_root_redirects_to_the_page_relatively(client: TestClient) -> None:
    root = client.get("/", follow_redirects=False)
    bare = client.get("/ui", follow_redirects=False)

    assert root.status_code == 307
    assert root.headers["location"] == "ui/"
    assert bare.headers["location"] == "ui/"


def test_the_page_and_its_files_carry_a_strict_policy(client: TestClient) -> None:
    page = client.get("/ui/")
    script = client.get("/ui/app.js")
    style = client.get("/ui/style.css")

    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert script.headers["content-type"].startswith("text/javascript")
    assert style.headers["content-type"].startswith("text/css")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert "frame-ancestors 'none'" in policy
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert " style=" not in page.text
    assert "<script>" not in page.text  # no inline script


@pytest.mark.parametrize("name", ["nothing.js", "..%2Fmain.py", "__init__.py", ".hidden.js"])
def test_only_the_page_files_are_served(client: TestClient, name: str) -> None:
    assert client.get(f"/ui/{name}").status_code == 404


def test_a_model_read_alone_gives_every_options_default(
    client: TestClient, settings: Settings
) -> None:
    client.patch("/v1/models/default", json={"alpha": 0.5, "min_learns": 3})
    model = client.get("/v1/models/default").json()
    listed = client.get("/v1/models").json()["models"][0]

    assert set(model["defaults"]) == set(model["config"])
    assert model["config"]["alpha"] == 0.5
    assert model["defaults"]["alpha"] == 1.0
    assert model["defaults"]["min_learns"] == settings.min_learns
    assert model["defaults"]["min_train_tokens"] == settings.min_train_tokens
    assert listed["defaults"] is None  # a list gives the options alone
