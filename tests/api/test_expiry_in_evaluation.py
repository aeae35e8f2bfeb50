"""Token expiry as an evaluation measures it: a model trained message by message over HTTP,
with the server's expiry run every few messages, scores each message exactly as the
evaluation's stream with the same expiry (`score_stream(..., expiry=StreamExpiry(...))`),
and keeps the same tokens; `spamsift evaluate --max-tokens` measures that stream."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.bayes.counts import CountTable
from app.service.evaluation import Example, StreamExpiry, score_stream
from app.service.expiry import expire_tokens
from app.service.model_config import ModelConfig
from tests.api.test_pairs_when_unsure import (
    assert_scored_as_the_reference,
    margin_now,
    stream,
    tokens_of,
)

# min_learns 0: the model weighs the classes from the first message of each on, as the
# reference stream does.
OPTIONS = {"min_learns": 0}
MAX_TOKENS = 60
EVERY = 4


def test_the_evaluation_expires_what_the_server_expires(client: TestClient) -> None:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    examples = stream(60)
    client.post("/v1/models", json={"name": "m", **OPTIONS})
    margins, removed = [], 0
    for position, (label, text) in enumerate(examples):
        margins.append(margin_now(client, "m", label, text))
        response = client.post("/v1/models/m/train", json={"label": label, "text": text})
        assert response.status_code == 200, response.text
        if (position + 1) % EVERY == 0:
            removed += expire_tokens(runtime, model_name="m", max_tokens=MAX_TOKENS).removed

    reference = score_stream(
        [
            Example(id=str(index), label=label, tokens=tokens_of(text))
            for index, (label, text) in enumerate(examples)
        ],
        ModelConfig(**OPTIONS).to_engine(),
        expiry=StreamExpiry(max_tokens=MAX_TOKENS, every=EVERY),
    )
    vocabulary = client.get("/v1/models/m/stats").json()["vocabulary"]

    assert_scored_as_the_reference(margins, reference.scores.tolist(), examples)
    assert reference.expired_tokens > MAX_TOKENS  # expiry deleted a lot, many times over
    assert removed == reference.expired_tokens
    assert vocabulary["tokens"] == reference.stored_tokens


@pytest.mark.parametrize(("max_tokens", "every"), [(0, 10), (10, 0), (-5, 10)])
def test_a_stream_expiry_needs_a_positive_maximum_and_interval(max_tokens: int, every: int) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        StreamExpiry(max_tokens=max_tokens, every=every)


def test_a_stream_into_a_backing_model_is_not_expired() -> None:
    """The server expires each model alone; the blend's summed table would lose the backing
    model's counts too, so the stream refuses to pretend."""
    with pytest.raises(ValueError, match="backing model"):
        score_stream(
            [Example(id="1", label="spam", tokens={"a": 1})],
            ModelConfig().to_engine(),
            start=CountTable(("ham", "spam")),
            expiry=StreamExpiry(max_tokens=10, every=1),
        )
