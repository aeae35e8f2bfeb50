"""API keys and scopes over HTTP (SPEC §8): development mode, 401/403, the scope of every route,
keys limited to models, SPAMSIFT_ADMIN_KEY, and the throttle of failed keys."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.api import auth
from app.api.auth import FailureThrottle
from app.config import Settings
from app.errors import Conflict, InvalidInput, ModelNotFound, NotFound
from app.main import create_app
from app.service.keys import (
    DEVELOPMENT_MODE_WARNING,
    KEY_PATTERN,
    SCOPES,
    KeyGuard,
    create_key,
    list_keys,
    revoke_key,
    seed_admin_key,
)
from app.store.engine import Database
from app.store.models import insert_model
from app.store.tables import api_keys

ADMIN_KEY = "d0c5-admin-key-from-the-environment-4f1b9e0a7c3d5e8f"
MESSAGE = {"text": "cheap watches and a casino prize for the winner, claim it today"}
TRAIN = {"label": "spam", **MESSAGE}

# Every route but the health checks, with a body it accepts and the scope it needs.
ROUTES: list[tuple[str, str, dict[str, Any] | None, str]] = [
    ("GET", "/v1/models", None, "admin"),
    ("POST", "/v1/models", {"name": "created"}, "admin"),
    ("GET", "/v1/models/default", None, "admin"),
    ("PATCH", "/v1/models/default", {"alpha": 0.5}, "admin"),
    ("DELETE", "/v1/models/default", None, "admin"),
    ("GET", "/v1/models/default/stats", None, "admin"),
    ("GET", "/v1/models/default/activity", None, "admin"),
    ("GET", "/v1/keys", None, "admin"),
    ("DELETE", "/v1/keys/0123456789ab", None, "admin"),
    ("GET", "/v1/keys/me", None, "any"),  # any valid key may ask which key it is
    ("GET", "/metrics", None, "admin"),
    ("POST", "/v1/models/default/train", TRAIN, "train"),
    ("POST", "/v1/models/default/train/batch", {"items": [TRAIN]}, "train"),
    ("POST", "/v1/models/default/feedback", TRAIN, "train"),
    ("DELETE", "/v1/models/default/messages/some-id", None, "train"),
    ("POST", "/train", TRAIN, "train"),
    ("POST", "/feedback", TRAIN, "train"),
    ("POST", "/v1/models/default/classify", MESSAGE, "classify"),
    ("POST", "/v1/models/default/classify/batch", {"items": [MESSAGE]}, "classify"),
    ("POST", "/classify", MESSAGE, "classify"),
    # Last: in development mode the key it makes closes development mode.
    ("POST", "/v1/keys", {"scopes": ["classify"]}, "admin"),
]
OPEN_PATHS = {"/healthz", "/readyz"}
ROUTE_IDS = [f"{method} {path}" for method, path, _, _ in ROUTES]


def error_code(response: Any) -> str:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    return str(body["error"]["code"])


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def send(client: TestClient, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
    return client.request(method, path, json=body, **kwargs)


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.dispose()


def make_key(db: Database, *scopes: str, models: list[str] | None = None) -> str:
    key, _ = create_key(db, scopes=scopes, models=models)
    return key


def add_model(db: Database, name: str) -> None:
    db.run(lambda conn: insert_model(conn, name=name, classes=("ham", "spam"), config={}))


@contextmanager
def serve(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        yield client


def wait_for(condition: Any, *, seconds: float = 3.0) -> float:
    """Poll `condition` until it holds; return how long that took."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < seconds, "condition did not hold in time"
        time.sleep(0.05)
    return time.monotonic() - start


# --- development mode -------------------------------------------------------------------------


def test_without_any_key_every_endpoint_is_open_and_the_start_warns_loudly(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="app.service.keys"), serve(settings) as client:
        responses = [send(client, m, p, body) for m, p, body, _ in ROUTES]

    assert [r.status_code for r in responses if r.status_code in (401, 403, 429)] == []
    assert DEVELOPMENT_MODE_WARNING in caplog.messages
    assert "every endpoint is open" in DEVELOPMENT_MODE_WARNING


def test_a_server_with_keys_does_not_warn_of_development_mode(
    settings: Settings, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    make_key(db, "classify")

    with caplog.at_level(logging.WARNING, logger="app.service.keys"), serve(settings):
        pass

    assert DEVELOPMENT_MODE_WARNING not in caplog.messages


def test_a_key_made_while_serving_closes_development_mode_within_a_second_or_two(
    settings: Settings, db: Database
) -> None:
    with serve(settings) as client:
        assert client.get("/v1/models").status_code == 200
        key = make_key(db, "admin")  # as `spamsift keys create` in another process

        took = wait_for(lambda: client.get("/v1/models").status_code == 401)

        assert took < 2.0
        assert client.get("/v1/models", headers=bearer(key)).status_code == 200


# --- 401 ---------------------------------------------------------------------------------------


def test_once_a_key_exists_a_request_without_one_is_401_with_www_authenticate(
    settings: Settings, db: Database
) -> None:
    make_key(db, "admin")

    with serve(settings) as client:
        response = client.post("/classify", json=MESSAGE)

    assert response.status_code == 401
    assert error_code(response) == "unauthorized"
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer not-a-key",
        "Bearer ss_000000000000_" + "A" * 43,
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "ss_000000000000_" + "A" * 43,
    ],
    ids=["malformed", "unknown", "empty", "basic", "no-scheme"],
)
def test_a_malformed_or_unknown_key_is_401(
    settings: Settings, db: Database, authorization: str
) -> None:
    make_key(db, "admin")

    with serve(settings) as client:
        response = client.post("/classify", json=MESSAGE, headers={"Authorization": authorization})

    assert response.status_code == 401
    assert error_code(response) == "unauthorized"


def test_a_key_with_a_changed_secret_is_401(settings: Settings, db: Database) -> None:
    key = make_key(db, "admin")
    forged = key[:-1] + ("B" if key[-1] != "B" else "C")  # same key id, other secret

    with serve(settings) as client:
        assert client.get("/v1/models", headers=bearer(key)).status_code == 200
        response = client.get("/v1/models", headers=bearer(forged))

    assert response.status_code == 401


def test_a_revoked_key_is_401_within_a_second_or_two(settings: Settings, db: Database) -> None:
    key = make_key(db, "classify")
    make_key(db, "admin")

    with serve(settings) as client:
        assert client.post("/classify", json=MESSAGE, headers=bearer(key)).status_code == 409
        revoke_key(db, key=KEY_PATTERN.fullmatch(key)["key_id"])  # type: ignore[index]

        took = wait_for(
            lambda: client.post("/classify", json=MESSAGE, headers=bearer(key)).status_code == 401
        )

    assert took < 2.0


def test_revoking_the_last_key_closes_the_service_rather_than_opening_it(
    settings: Settings, db: Database
) -> None:
    key = make_key(db, "admin")
    revoke_key(db, key=key)

    with serve(settings) as client:
        assert client.get("/v1/models").status_code == 401
        assert client.get("/v1/models", headers=bearer(key)).status_code == 401


def test_the_key_is_checked_before_the_body(settings: Settings, db: Database) -> None:
    make_key(db, "admin")

    with serve(settings) as client:
        response = client.post("/train", content=b"{not json")

    assert response.status_code == 401


def served_routes(app: Any) -> set[tuple[str, str]]:
    """(method, path template) of every route the app documents, health checks left out."""
    return {
        (method.upper(), path)
        for path, operations in app.openapi()["paths"].items()
        if path not in OPEN_PATHS
        for method in operations
    }


def test_every_route_but_the_health_checks_needs_a_key(settings: Settings, db: Database) -> None:
    make_key(db, "admin")
    app = create_app(settings)

    with TestClient(app) as client:
        for method, template in served_routes(app):
            path = template.replace("{name}", "default").replace("{message_id}", "x")
            response = client.request(method, path)
            assert response.status_code == 401, (method, template, response.text)
        for path in OPEN_PATHS:
            assert client.get(path).status_code == 200, path


def test_the_scope_table_names_every_route(settings: Settings) -> None:
    listed = {
        (
            method,
            path.replace("default", "{name}")
            .replace("some-id", "{message_id}")
            .replace("0123456789ab", "{key_id}"),
        )
        for method, path, _, _ in ROUTES
    }

    assert served_routes(create_app(settings)) == listed


# --- 403: scopes --------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body", "needed"), ROUTES, ids=ROUTE_IDS)
def test_each_route_needs_its_scope_and_admin_implies_every_scope(
    settings: Settings, db: Database, method: str, path: str, body: Any, needed: str
) -> None:
    keys = {scope: make_key(db, scope) for scope in SCOPES}

    with serve(settings) as client:
        statuses = {
            scope: send(client, method, path, body, headers=bearer(key)).status_code
            for scope, key in keys.items()
        }
        denied = send(client, method, path, body, headers=bearer(keys["classify"]))

    for scope, status in statuses.items():
        if scope in (needed, "admin") or needed == "any":
            assert status not in (401, 403, 429), (scope, status)
        else:
            assert status == 403, (scope, status)
    if needed not in ("classify", "any"):
        assert error_code(denied) == "forbidden"
        assert needed in denied.json()["error"]["message"]


def test_a_key_with_two_scopes_has_both(settings: Settings, db: Database) -> None:
    key = make_key(db, "classify", "train")

    with serve(settings) as client:
        trained = client.post("/train", json=TRAIN, headers=bearer(key))
        classified = client.post("/classify", json=MESSAGE, headers=bearer(key))
        stats = client.get("/v1/models/default/stats", headers=bearer(key))

    assert trained.status_code == 200
    assert classified.status_code == 409  # not_trained: ham has no message yet
    assert stats.status_code == 403


# --- 403: keys limited to models ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/models/other/classify", MESSAGE),
        ("POST", "/v1/models/other/classify/batch", {"items": [MESSAGE]}),
        ("POST", "/v1/models/other/train", TRAIN),
        ("POST", "/v1/models/other/train/batch", {"items": [TRAIN]}),
        ("POST", "/v1/models/other/feedback", TRAIN),
        ("DELETE", "/v1/models/other/messages/some-id", None),
        ("POST", "/classify?model=other", MESSAGE),
        ("POST", "/train?model=other", TRAIN),
        ("POST", "/feedback?model=other", TRAIN),
        ("POST", "/classify?model=default&model=other", MESSAGE),  # the route reads the last
    ],
)
def test_a_key_limited_to_one_model_cannot_touch_another(
    settings: Settings, db: Database, method: str, path: str, body: Any
) -> None:
    add_model(db, "other")
    key = make_key(db, "classify", "train", models=["default"])

    with serve(settings) as client:
        response = send(client, method, path, body, headers=bearer(key))
        own = send(client, method, path.replace("other", "default"), body, headers=bearer(key))

    assert response.status_code == 403
    assert error_code(response) == "forbidden"
    assert "'other'" in response.json()["error"]["message"]
    assert own.status_code not in (401, 403)


def test_the_short_forms_without_model_act_on_default_which_a_limited_key_may_lack(
    settings: Settings, db: Database
) -> None:
    add_model(db, "other")
    key = make_key(db, "train", models=["other"])

    with serve(settings) as client:
        default = client.post("/train", json=TRAIN, headers=bearer(key))
        other = client.post("/train?model=other", json=TRAIN, headers=bearer(key))

    assert default.status_code == 403
    assert other.status_code == 200


def test_an_admin_key_limited_to_a_model_manages_only_that_model(
    settings: Settings, db: Database
) -> None:
    add_model(db, "other")
    key = make_key(db, "admin", models=["other"])
    headers = bearer(key)

    with serve(settings) as client:
        own = client.get("/v1/models/other", headers=headers)
        own_stats = client.get("/v1/models/other/stats", headers=headers)
        changed = client.patch("/v1/models/other", json={"alpha": 0.5}, headers=headers)
        foreign = client.get("/v1/models/default", headers=headers)
        deleted = client.delete("/v1/models/default", headers=headers)
        listing = client.get("/v1/models", headers=headers)
        creating = client.post("/v1/models", json={"name": "third"}, headers=headers)
        metrics = client.get("/metrics", headers=headers)

    assert (own.status_code, own_stats.status_code, changed.status_code) == (200, 200, 200)
    assert (foreign.status_code, deleted.status_code) == (403, 403)
    assert (listing.status_code, creating.status_code, metrics.status_code) == (403, 403, 403)


# --- health -------------------------------------------------------------------------------------


def test_health_checks_need_no_key_even_with_keys(settings: Settings, db: Database) -> None:
    make_key(db, "admin")

    with serve(settings) as client:
        health = client.get("/healthz")
        ready = client.get("/readyz")
        with_bad_key = client.get("/healthz", headers=bearer("wrong"))

    assert (health.status_code, ready.status_code, with_bad_key.status_code) == (200, 200, 200)


# --- SPAMSIFT_ADMIN_KEY ---------------------------------------------------------------------------


def admin_settings(database_url: str, admin_key: str = ADMIN_KEY) -> Settings:
    return Settings(database_url=database_url, admin_key=admin_key, _env_file=None)  # type: ignore[call-arg]


def stored_key_rows(db: Database) -> list[Any]:
    return db.run(lambda conn: conn.execute(select(api_keys)).all(), write=False)


def test_the_admin_key_from_the_settings_is_seeded_and_works(database_url: str) -> None:
    with serve(admin_settings(database_url)) as client:
        without = client.get("/v1/models")
        with_key = client.get("/v1/models", headers=bearer(ADMIN_KEY))
        trained = client.post("/train", json=TRAIN, headers=bearer(ADMIN_KEY))

    assert without.status_code == 401
    assert with_key.status_code == 200
    assert trained.status_code == 200


def test_the_admin_key_is_stored_hashed_only_and_once_across_restarts(
    database_url: str, db: Database
) -> None:
    for _ in range(3):
        with serve(admin_settings(database_url)) as client:
            assert client.get("/v1/models", headers=bearer(ADMIN_KEY)).status_code == 200
    made = make_key(db, "classify")

    rows = stored_key_rows(db)

    assert len(rows) == 2
    seeded = next(row for row in rows if row.name == "SPAMSIFT_ADMIN_KEY")
    assert seeded.scopes == ["admin"]
    assert seeded.models is None
    assert seeded.key_hash == hashlib.sha256(ADMIN_KEY.encode()).hexdigest()
    secret_of_made = made.split("_", 2)[2]
    for row in rows:
        for value in row:
            assert ADMIN_KEY not in str(value)
            assert secret_of_made not in str(value)


def test_several_processes_seeding_the_admin_key_at_once_store_it_once(database_url: str) -> None:
    databases = [Database(database_url) for _ in range(4)]
    barrier = threading.Barrier(len(databases))
    errors: list[BaseException] = []

    def seed(database: Database) -> None:
        barrier.wait()
        try:
            seed_admin_key(database, ADMIN_KEY)
        except BaseException as error:  # reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=seed, args=(d,)) for d in databases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = stored_key_rows(databases[0])
    for database in databases:
        database.dispose()

    assert errors == []
    assert len(rows) == 1


def test_a_revoked_admin_key_stays_revoked_after_a_restart(database_url: str, db: Database) -> None:
    with serve(admin_settings(database_url)):
        pass
    revoke_key(db, key=ADMIN_KEY)

    with serve(admin_settings(database_url)) as client:
        response = client.get("/v1/models", headers=bearer(ADMIN_KEY))

    assert response.status_code == 401


def test_a_new_admin_key_is_added_beside_the_old_one_until_that_is_revoked(
    database_url: str, db: Database
) -> None:
    new_key = ADMIN_KEY + "-rotated"
    with serve(admin_settings(database_url)):
        pass

    with serve(admin_settings(database_url, new_key)) as client:
        old = client.get("/v1/models", headers=bearer(ADMIN_KEY))
        new = client.get("/v1/models", headers=bearer(new_key))

    assert (old.status_code, new.status_code) == (200, 200)
    assert len(list_keys(db)) == 2


def test_an_admin_key_clashing_with_the_id_of_another_key_is_refused(db: Database) -> None:
    key = make_key(db, "classify")
    clash = key[:-1] + ("B" if key[-1] != "B" else "C")

    with pytest.raises(Conflict):
        seed_admin_key(db, clash)


def test_a_short_admin_key_is_warned_about(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="app.service.keys"),
        serve(admin_settings(database_url, "short")),
    ):
        pass

    assert any("shorter than" in message for message in caplog.messages)


# --- making, listing and revoking keys (service) -----------------------------------------------


def test_a_made_key_has_the_documented_form_and_is_listed_without_secret(db: Database) -> None:
    key, made = create_key(db, scopes=["train", "classify"], models=["default"], name="relay")

    match = KEY_PATTERN.fullmatch(key)
    assert match is not None
    assert made.key_id == match["key_id"]
    (listed,) = list_keys(db)
    assert listed == made
    assert listed.scopes == ("classify", "train")
    assert listed.models == ("default",)
    assert listed.name == "relay"
    assert key not in repr(listed)


@pytest.mark.parametrize(
    ("scopes", "models", "error"),
    [
        ([], None, InvalidInput),
        (["classify", "root"], None, InvalidInput),
        (["classify"], ["Not A Name"], InvalidInput),
        (["classify"], [], InvalidInput),
        (["classify"], ["missing"], ModelNotFound),
    ],
)
def test_making_a_key_checks_scopes_and_models(
    db: Database, scopes: list[str], models: list[str] | None, error: type[Exception]
) -> None:
    with pytest.raises(error):
        create_key(db, scopes=scopes, models=models)
    assert list_keys(db) == []


def test_revoking_takes_the_key_id_or_the_whole_key_and_refuses_unknown_ids(
    db: Database,
) -> None:
    first, made = create_key(db, scopes=["classify"])
    second, _ = create_key(db, scopes=["classify"])

    assert revoke_key(db, key=made.key_id).revoked_at is not None
    assert revoke_key(db, key=second).revoked_at is not None
    with pytest.raises(NotFound):
        revoke_key(db, key="ffffffffffff")
    with pytest.raises(NotFound):
        revoke_key(db, key=first[:-1] + ("B" if first[-1] != "B" else "C"))
    assert all(key.revoked_at is not None for key in list_keys(db))


def test_the_key_guard_rereads_keys_after_its_cache_time(db: Database) -> None:
    now = [0.0]
    guard = KeyGuard(db, cache_seconds=1.0, clock=lambda: now[0])
    key = make_key(db, "classify")
    assert guard.enforced()
    assert guard.authenticate(key) is not None

    revoke_key(db, key=key)
    still_cached = guard.authenticate(key)
    now[0] = 1.0
    reread = guard.authenticate(key)

    assert still_cached is not None
    assert reread is None


def test_the_background_thread_reads_the_keys_again_before_requests_find_them_stale(
    db: Database,
) -> None:
    now = [0.0]
    guard = KeyGuard(db, cache_seconds=1.0, clock=lambda: now[0])
    key = make_key(db, "classify")
    guard.start()
    revoke_key(db, key=key)

    now[0] = 0.4  # less than half the cache time: nothing read
    guard.refresh_ahead()
    assert guard.authenticate(key) is not None
    now[0] = 0.6  # past half of it: read again, so still fresh when a request comes at 1.5
    guard.refresh_ahead()
    now[0] = 1.5

    assert guard.fresh()
    assert guard.authenticate(key) is None


# --- throttling failed keys ---------------------------------------------------------------------


def test_the_throttle_blocks_a_client_after_max_failures_within_the_window() -> None:
    now = [0.0]
    throttle = FailureThrottle(
        max_failures=3, window_seconds=10, block_seconds=30, clock=lambda: now[0]
    )
    for _ in range(2):
        throttle.record_failure("a")
    assert throttle.blocked_for("a") == 0

    throttle.record_failure("a")

    assert throttle.blocked_for("a") == 30
    assert throttle.blocked_for("b") == 0
    now[0] = 29.5
    assert throttle.blocked_for("a") == pytest.approx(0.5)
    now[0] = 30.0
    assert throttle.blocked_for("a") == 0


def test_the_throttle_forgets_failures_older_than_the_window() -> None:
    now = [0.0]
    throttle = FailureThrottle(
        max_failures=3, window_seconds=10, block_seconds=30, clock=lambda: now[0]
    )
    for moment in (0.0, 5.0, 10.0, 15.0, 20.0):  # never 3 within 10 seconds
        now[0] = moment
        throttle.record_failure("a")

    assert throttle.blocked_for("a") == 0


def test_the_throttle_keeps_a_bounded_number_of_clients(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "MAX_TRACKED_CLIENTS", 100)
    throttle = FailureThrottle(max_failures=3)

    for n in range(1000):
        throttle.record_failure(f"198.51.100.{n}")

    assert len(throttle._failures) <= 100


def test_failed_keys_from_one_address_get_429_and_a_good_key_still_works_there_and_elsewhere(
    settings: Settings, db: Database
) -> None:
    key = make_key(db, "classify")
    app = create_app(settings)
    other_address = TestClient(app, client=("203.0.113.9", 40000))

    with TestClient(app) as client:
        failures = [
            client.post("/classify", json=MESSAGE, headers=bearer(f"guess-{n}")).status_code
            for n in range(auth.MAX_FAILURES)
        ]
        blocked = client.post("/classify", json=MESSAGE, headers=bearer("guess-more"))
        good_key_here = client.post("/classify", json=MESSAGE, headers=bearer(key))
        elsewhere = other_address.post("/classify", json=MESSAGE, headers=bearer(key))
        health = client.get("/healthz")

    assert failures == [401] * auth.MAX_FAILURES
    assert blocked.status_code == 429
    assert error_code(blocked) == "too_many_failures"
    assert 0 < int(blocked.headers["retry-after"]) <= auth.BLOCK_SECONDS
    assert good_key_here.status_code == 409  # a valid key is never throttled: not_trained
    assert elsewhere.status_code == 409  # authorized: not_trained
    assert health.status_code == 200


def test_missing_keys_and_wrong_scopes_are_not_counted_as_guesses(
    settings: Settings, db: Database
) -> None:
    key = make_key(db, "classify")

    with serve(settings) as client:
        for _ in range(auth.MAX_FAILURES + 2):
            assert client.post("/classify", json=MESSAGE).status_code == 401
            assert client.get("/v1/models", headers=bearer(key)).status_code == 403
        still = client.post("/classify", json=MESSAGE, headers=bearer(key))

    assert still.status_code == 409


# --- OpenAPI --------------------------------------------------------------------------------------


def test_openapi_documents_the_bearer_key_and_its_errors(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()

    schemes = schema["components"]["securitySchemes"]
    assert schemes["HTTPBearer"]["scheme"] == "bearer"
    classify = schema["paths"]["/v1/models/{name}/classify"]["post"]
    assert classify["security"] == [{"HTTPBearer": []}]
    assert {"401", "403", "429"} <= set(classify["responses"])
    healthz = schema["paths"]["/healthz"]["get"]
    assert "security" not in healthz
    assert "401" not in healthz["responses"]
