"""`pairs_until_log_odds`: a trained message's word pairs are stored only while the model is
less sure of its label than that; its words always. The service's writer stores exactly what
the evaluation's reference stream (`score_stream`) learns, message by message."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.service.evaluation import Example, score_stream
from app.service.model_config import ModelConfig
from app.text import tokenize_text
from app.text.families import FAMILY_PREFIXES
from tests.builders import HAM_WORDS, SHARED_WORDS, SPAM_WORDS, counts_from_ledger, stored_cells
from tests.cores import TOKEN_CORE

PAIRS = FAMILY_PREFIXES["word_pairs"]
# min_learns 0: the model weighs the classes from the first message of each on, as the
# reference stream does. These short texts' log odds stay within a few nats.
SURE = 1.5
OPTIONS: dict[str, Any] = {"pairs_until_log_odds": SURE, "min_learns": 0}


def stream(n: int, seed: int = 7) -> list[tuple[str, str]]:
    """Texts of mostly one class's words with some of the other's and shared ones, labelled
    by their majority but for one in ten: a model calls some right, some unsure, some wrong."""
    rng = random.Random(seed)
    examples = []
    for _ in range(n):
        spam = rng.random() < 0.5
        own, other = (SPAM_WORDS, HAM_WORDS) if spam else (HAM_WORDS, SPAM_WORDS)
        words = rng.sample(own, 5) + rng.sample(other, rng.randint(0, 3))
        words += rng.sample(SHARED_WORDS, 2)
        rng.shuffle(words)
        label = "spam" if spam != (rng.random() < 0.1) else "ham"
        examples.append((label, " ".join(words)))
    return examples


def tokens_of(text: str) -> dict[str, int]:
    return tokenize_text(text, core=TOKEN_CORE).token_counts


def words_of(text: str) -> list[str]:
    return [token for token in tokens_of(text) if not token.startswith(PAIRS)]


def margin_now(client: TestClient, model: str, label: str, text: str) -> float | None:
    """The model's log odds for `label` now; None while a class has no trained message."""
    response = client.post(f"/v1/models/{model}/classify", json={"text": text})
    if response.status_code == 409:
        return None
    assert response.status_code == 200, response.text
    scores = response.json()["scores"]
    other = "ham" if label == "spam" else "spam"
    return float(scores[label] - scores[other])


def assert_scored_as_the_reference(
    margins: list[float | None], reference_scores: Sequence[float], examples: list[tuple[str, str]]
) -> None:
    """Each message's margin before its training (None: not weighed yet) is the reference
    stream's spam log odds, turned to its label's."""
    seen: set[str] = set()
    expected: list[float | None] = []
    for score, (label, _) in zip(reference_scores, examples, strict=True):
        weighed = len(seen) == 2  # until both classes have a message, no model weighs them
        expected.append((score if label == "spam" else -score) if weighed else None)
        seen.add(label)
    assert [m is None for m in margins] == [e is None for e in expected]
    weighed_margins = [(m, e) for m, e in zip(margins, expected, strict=True) if e is not None]
    for margin, reference_margin in weighed_margins:
        assert margin == pytest.approx(reference_margin, rel=1e-9, abs=1e-9)


def test_the_writer_stores_what_the_reference_stream_learns(client: TestClient) -> None:
    examples = stream(80)
    client.post("/v1/models", json={"name": "m", **OPTIONS})
    margins, stored = [], []
    for label, text in examples:
        margins.append(margin_now(client, "m", label, text))
        response = client.post("/v1/models/m/train", json={"label": label, "text": text})
        assert response.status_code == 200, response.text
        stored.append(response.json()["tokens"])

    reference = score_stream(
        [
            Example(id=str(index), label=label, tokens=tokens_of(text))
            for index, (label, text) in enumerate(examples)
        ],
        ModelConfig(**OPTIONS).to_engine(),
    )
    vocabulary = client.get("/v1/models/m/stats").json()["vocabulary"]

    assert_scored_as_the_reference(margins, reference.scores.tolist(), examples)
    sure = [margin is not None and margin >= SURE for margin in margins]
    assert 10 < sum(sure) < len(examples) - 10  # both kinds of message, many of each
    for is_sure, (_, text), count in zip(sure, examples, stored, strict=True):
        assert count == (len(words_of(text)) if is_sure else len(tokens_of(text)))
    assert vocabulary["tokens"] == reference.stored_tokens


def test_on_by_default_and_0_stores_every_pair(client: TestClient) -> None:
    created = client.post("/v1/models", json={"name": "m", "min_learns": 0}).json()
    always = client.post("/v1/models", json={"name": "a", "pairs_until_log_odds": 30}).json()
    turned = client.patch("/v1/models/a", json={"pairs_until_log_odds": 0}).json()
    refused = client.post("/v1/models", json={"name": "x", "pairs_until_log_odds": -1})
    for label, text in stream(30):
        trained = client.post("/v1/models/a/train", json={"label": label, "text": text})
        assert trained.json()["tokens"] == len(tokens_of(text))

    assert created["config"]["pairs_until_log_odds"] == 20.0
    assert always["config"]["pairs_until_log_odds"] == 30
    assert turned["config"]["pairs_until_log_odds"] == 0
    assert refused.status_code == 422
    assert "pairs_until_log_odds" in refused.text


@pytest.mark.parametrize("route", ["train/batch", "feedback"])
def test_batches_and_feedback_store_pairs_by_how_sure_the_model_was_before(
    client: TestClient, route: str
) -> None:
    client.post("/v1/models", json={"name": "m", **OPTIONS})
    for label, text in stream(40):
        client.post("/v1/models/m/train", json={"label": label, "text": text})
    # Two texts the model is sure are spam: one reported as spam, one as ham.
    agreed, corrected = ("spam", " ".join(SPAM_WORDS[:12])), ("ham", " ".join(SPAM_WORDS[12:]))
    before = [margin_now(client, "m", "spam", text) or 0.0 for _, text in (agreed, corrected)]

    if route == "train/batch":
        items = [{"label": label, "text": text} for label, text in (agreed, corrected)]
        response = client.post("/v1/models/m/train/batch", json={"items": items})
        assert response.status_code == 200, response.text
        counts = [result["tokens"] for result in response.json()["results"]]
    else:
        counts = []
        for label, text in (agreed, corrected):
            response = client.post("/v1/models/m/feedback", json={"label": label, "text": text})
            assert response.status_code == 200, response.text
            counts.append(response.json()["tokens"])

    assert min(before) >= SURE
    assert counts == [len(words_of(agreed[1])), len(tokens_of(corrected[1]))]


def test_forget_and_relabel_move_exactly_what_was_stored(client: TestClient) -> None:
    client.post("/v1/models", json={"name": "m", **OPTIONS})
    examples = stream(40)
    ids = []
    for label, text in examples:
        response = client.post("/v1/models/m/train", json={"label": label, "text": text})
        ids.append(response.json()["message_id"])
    for message_id in ids[::3]:
        assert client.delete(f"/v1/models/m/messages/{message_id}").status_code == 200
    for (label, _), message_id in list(zip(examples, ids, strict=True))[1::3]:
        other = "ham" if label == "spam" else "spam"
        moved = client.post(
            "/v1/models/m/feedback", json={"label": other, "message_id": message_id}
        )
        assert moved.json()["previous_label"] == label

    assert stored_cells(client, "m") == counts_from_ledger(client, "m")
