"""While PostgreSQL does not answer, a model the process holds goes on classifying (200, from
the counts in memory: mail keeps being filtered), while training answers 503 and a model not
held answers 503. The outage is real for the app: its connections go through a TCP relay
that the test cuts."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.builders import ham_text, spam_text
from tests.database_link import DatabaseLink


@pytest.fixture
def relayed(database_url: str) -> Iterator[tuple[DatabaseLink, Settings]]:
    if not database_url.startswith("postgresql"):
        pytest.skip("a PostgreSQL outage: the SQLite file has no server to lose")
    relay, through_relay = DatabaseLink.to_database(database_url)
    settings = Settings(
        database_url=through_relay,
        lock_timeout_seconds=1.0,
        sync_interval_seconds=0.2,
    )
    try:
        yield relay, settings
    finally:
        relay.close()


def test_a_held_model_classifies_through_an_outage_and_training_is_refused(
    relayed: tuple[DatabaseLink, Settings],
) -> None:
    relay, settings = relayed
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/models", json={"name": "cold"}).status_code == 201
        for i in range(3):
            for label, text in (("spam", spam_text(i)), ("ham", ham_text(i))):
                for model in ("default", "cold"):
                    trained = client.post(
                        f"/v1/models/{model}/train", json={"label": label, "text": text}
                    )
                    assert trained.status_code == 200, trained.text
        before = client.post("/v1/models/default/classify", json={"text": spam_text(1)}).json()
        client.app.state.runtime.models.forget("cold")  # type: ignore[attr-defined]

        relay.refuse()
        during = []
        deadline = time.monotonic() + 1.5  # several sync intervals
        while time.monotonic() < deadline:
            during.append(client.post("/v1/models/default/classify", json={"text": spam_text(1)}))
            time.sleep(0.05)
        train = client.post("/v1/models/default/train", json={"label": "spam", "text": "x y z"})
        cold = client.post("/v1/models/cold/classify", json={"text": spam_text(1)})
        relay.restore()
        time.sleep(0.3)
        after = client.post(
            "/v1/models/default/train", json={"label": "spam", "text": spam_text(9)}
        )

    assert {answer.status_code for answer in during} == {200}
    assert all(answer.json()["probabilities"] == before["probabilities"] for answer in during)
    assert train.status_code == 503
    assert train.headers["Retry-After"]
    assert cold.status_code == 503
    assert after.status_code == 200, after.text
