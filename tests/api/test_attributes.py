"""Numeric `attributes` through the HTTP API: learned as a Gaussian per class, scored as
scikit-learn's GaussianNB, validated, and taken back exactly by forget and relabel."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn.naive_bayes import GaussianNB

from app.config import Settings
from app.main import create_app
from app.store.attributes import read_attribute_cells

# The numeric weather table of the data-mining textbooks (Witten & Frank): 14 days,
# temperature and humidity, whether to play.
WEATHER = [
    (85, 85, "no"),
    (80, 90, "no"),
    (83, 86, "yes"),
    (70, 96, "yes"),
    (68, 80, "yes"),
    (65, 70, "no"),
    (64, 65, "yes"),
    (72, 95, "no"),
    (69, 70, "yes"),
    (75, 80, "yes"),
    (75, 70, "yes"),
    (72, 90, "yes"),
    (81, 75, "yes"),
    (71, 91, "no"),
]
# Every message has the same text, so its tokens add the same to both classes but for alpha,
# which is tiny: the answer is the Gaussians' and the prior's alone.
NUMERIC_ONLY = {
    "event_model": "multinomial",
    "alpha": 1e-10,
    "stop_words": "none",
    "gaussian_attributes": True,
}


def cells(client: TestClient, model: str) -> list[tuple[Any, ...]]:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    model_id = runtime.models.get(model).id
    return runtime.db.run(lambda conn: read_attribute_cells(conn, model_id), write=False)


def train(client: TestClient, model: str, label: str, **body: Any) -> None:
    response = client.post(f"/v1/models/{model}/train", json={"label": label, **body})
    assert response.status_code == 200, response.text


def test_a_numeric_table_is_classified_as_gaussian_nb_predicts(client: TestClient) -> None:
    response = client.post(
        "/v1/models", json={"name": "weather", "classes": ["yes", "no"], **NUMERIC_ONLY}
    )
    assert response.status_code == 201, response.text
    for day, (temperature, humidity, play) in enumerate(WEATHER):
        train(
            client,
            "weather",
            play,
            text="weather",
            message_id=f"day-{day}",
            attributes={"temperature": temperature, "humidity": humidity},
        )
    X = np.array([[t, h] for t, h, _ in WEATHER], dtype=np.float64)
    y = np.array([play for _, _, play in WEATHER])
    reference = GaussianNB(var_smoothing=1e-9).fit(X, y)
    for temperature, humidity in [(66, 90), (85, 60), (70.5, 80.25), (100, 100)]:
        answer = client.post(
            "/v1/models/weather/classify",
            json={
                "text": "weather",
                "attributes": {"temperature": temperature, "humidity": humidity},
            },
        )
        assert answer.status_code == 200, answer.text
        expected = reference.predict_proba([[temperature, humidity]])[0]
        got = [answer.json()["probabilities"][label] for label in reference.classes_]
        np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-12)


def test_random_numeric_tables_equal_gaussian_nb(client: TestClient) -> None:
    client.post("/v1/models", json={"name": "numbers", **NUMERIC_ONLY})
    rng = np.random.default_rng(5)
    y = rng.choice(["ham", "spam"], size=40)
    X = rng.normal(size=(40, 3)) * [1.0, 50.0, 0.01] + (y == "spam")[:, None] * [0.5, 20.0, 0.0]
    items = [
        {
            "label": str(label),
            "text": "mail",
            "message_id": f"m{i}",
            "attributes": {"spf": row[0], "score": row[1], "tiny": row[2]},
        }
        for i, (row, label) in enumerate(zip(X.tolist(), y, strict=True))
    ]
    response = client.post("/v1/models/numbers/train/batch", json={"items": items})
    assert response.status_code == 200, response.text
    reference = GaussianNB(var_smoothing=1e-9).fit(X, y)
    queries = rng.normal(size=(6, 3)) * [2.0, 80.0, 0.02]
    answer = client.post(
        "/v1/models/numbers/classify/batch",
        json={
            "items": [
                {"text": "mail", "attributes": {"spf": q[0], "score": q[1], "tiny": q[2]}}
                for q in queries.tolist()
            ]
        },
    )
    assert answer.status_code == 200, answer.text
    got = [[r["probabilities"][c] for c in reference.classes_] for r in answer.json()["results"]]
    np.testing.assert_allclose(got, reference.predict_proba(queries), rtol=1e-7, atol=1e-12)


def test_attributes_are_learned_but_not_scored_while_the_option_is_off(
    client: TestClient,
) -> None:
    client.post("/v1/models", json={"name": "m", **{**NUMERIC_ONLY, "gaussian_attributes": False}})
    train(client, "m", "spam", text="mail", message_id="1", attributes={"score": 9.0})
    train(client, "m", "spam", text="mail", message_id="2", attributes={"score": 8.0})
    train(client, "m", "ham", text="mail", message_id="3", attributes={"score": 0.0})
    train(client, "m", "ham", text="mail", message_id="4", attributes={"score": 1.0})
    query = {"text": "mail", "attributes": {"score": 8.5}}
    off = client.post("/v1/models/m/classify", json=query).json()
    assert off["probabilities"]["spam"] == pytest.approx(0.5)
    assert [cell[:3] for cell in cells(client, "m")] == [("score", 0, 2), ("score", 1, 2)]
    client.patch("/v1/models/m", json={"gaussian_attributes": True})
    on = client.post("/v1/models/m/classify", json={**query, "explain": True}).json()
    assert on["probabilities"]["spam"] > 0.99
    assert {"token": "attribute:score", "class": "spam"}.items() <= on["clues"][0].items()


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli", "robinson-fisher"])
def test_forget_and_relabel_take_back_exactly_what_a_message_added(
    client: TestClient, event_model: str
) -> None:
    client.post("/v1/models", json={"name": "m", "event_model": event_model})
    train(client, "m", "spam", text="cheap pills", message_id="a", attributes={"x": 0.1})
    train(client, "m", "ham", text="lunch today", message_id="b", attributes={"x": -3.7e-5})
    before = cells(client, "m")
    odd = {"x": 1e300 / 3, "y": 5e-324, "z": 0.30000000000000004}
    train(client, "m", "spam", text="odd one", message_id="c", attributes=odd)
    train(client, "m", "ham", text="odd one", message_id="c", attributes=odd)  # relabelled
    moved = {cell[:2]: cell[2:] for cell in cells(client, "m")}
    assert moved[("z", 0)] == (1, Fraction(odd["z"]), Fraction(odd["z"]) ** 2)  # ham: 1
    assert moved[("z", 1)] == (0, 0, 0)  # spam: none
    assert moved[("x", 0)][:2] == (2, Fraction(-3.7e-5) + Fraction(odd["x"]))
    response = client.delete("/v1/models/m/messages/c")
    assert response.status_code == 200, response.text
    after = [cell for cell in cells(client, "m") if cell[0] == "x"]
    assert after == before
    assert all(cell[2] == 0 and cell[3] == 0 and cell[4] == 0 for cell in cells(client, "m")[2:])


def test_another_process_catches_up_with_the_attributes(settings: Settings) -> None:
    with (
        TestClient(create_app(settings)) as writer,
        TestClient(create_app(settings)) as reader,
    ):
        writer.post("/v1/models", json={"name": "m", **NUMERIC_ONLY})
        for number, (label, score) in enumerate(
            [("ham", 0.0), ("ham", 2.0), ("spam", 8.0), ("spam", 10.0)]
        ):
            train(
                writer, "m", label, text="mail", message_id=str(number), attributes={"score": score}
            )
        query = {"text": "mail", "attributes": {"score": 4.0}}
        first = reader.post("/v1/models/m/classify", json=query).json()["probabilities"]
        train(writer, "m", "ham", text="mail", message_id="5", attributes={"score": 6.0})
        runtime = reader.app.state.runtime  # type: ignore[attr-defined]
        runtime.models.sync(runtime.models.get("m"))  # as it does within sync_interval_seconds
        second = reader.post("/v1/models/m/classify", json=query).json()["probabilities"]
        expected = writer.post("/v1/models/m/classify", json=query).json()["probabilities"]
        assert second == pytest.approx(expected, rel=1e-12)
        assert second["spam"] != pytest.approx(first["spam"], rel=1e-3)


@pytest.mark.parametrize(
    ("attributes", "why"),
    [
        ({f"a{i}": 1 for i in range(33)}, "at most 32"),
        ({"x" * 65: 1}, "name"),
        ({"": 1}, "name"),
        ({"has space": 1}, "name"),
        ({"spf": True}, "bool"),
        ({"spf": "pass"}, "string"),
        ({"spf": None}, "null"),
        ([1, 2], "not an object"),
    ],
)
def test_bad_attributes_are_refused_with_422(client: TestClient, attributes: Any, why: str) -> None:
    for path, body in [
        ("classify", {"text": "hello"}),
        ("train", {"text": "hello", "label": "spam"}),
    ]:
        response = client.post(
            f"/v1/models/default/{path}", json={**body, "attributes": attributes}
        )
        assert response.status_code == 422, (why, response.text)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_attributes_that_are_not_finite_are_refused_with_422(
    client: TestClient, number: str
) -> None:
    response = client.post(
        "/v1/models/default/classify",
        content=f'{{"text": "hello", "attributes": {{"x": {number}}}}}',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422, response.text


def test_a_personal_model_is_scored_on_its_attributes_summed_with_its_backing_models(
    client: TestClient,
) -> None:
    client.post("/v1/models", json={"name": "global", **NUMERIC_ONLY})
    client.post("/v1/models", json={"name": "alice", "backed_by": "global", **NUMERIC_ONLY})
    client.post("/v1/models", json={"name": "both", **NUMERIC_ONLY})
    shared = [("ham", 0.0), ("ham", 2.0), ("spam", 8.0), ("spam", 10.0)]
    own = [("ham", 5.0), ("spam", 7.0)]
    for model, examples in (("global", shared), ("alice", own), ("both", shared + own)):
        for number, (label, score) in enumerate(examples):
            train(
                client,
                model,
                label,
                text="mail",
                message_id=f"{model}-{number}",
                attributes={"score": score},
            )
    query = {"text": "mail", "attributes": {"score": 6.0}}
    blended = client.post("/v1/models/alice/classify", json=query).json()
    alone = client.post("/v1/models/both/classify", json=query).json()
    assert blended["models"] == ["alice", "global"]
    assert blended["probabilities"] == pytest.approx(alone["probabilities"], rel=1e-9)
