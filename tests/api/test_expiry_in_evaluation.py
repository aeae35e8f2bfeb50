"""Token expiry as an evaluation measures it: a model trained message by message over HTTP,
with the server's expiry run every few messages, scores each message exactly as the
evaluation's stream with the same expiry (`score_stream(..., expiry=StreamExpiry(...))`),
and keeps the same tokens; `spamsift evaluate --max-tokens` and `--pair-probation` measure
that stream."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.bayes.counts import CountTable
from app.service.evaluation import Example, StreamExpiry, score_stream
from app.service.expiry import expire_tokens, prune_ledger
from app.service.model_config import ModelConfig
from tests.api.test_pairs_when_unsure import (
    assert_scored_as_the_reference,
    margin_now,
    stream,
    tokens_of,
)
from tests.builders import model_contents, texts_of

# min_learns 0: the model weighs the classes from the first message of each on, as the
# reference stream does.
OPTIONS = {"min_learns": 0}
MAX_TOKENS = 60
PAIR_PROBATION = 12
EVERY = 4


@pytest.mark.parametrize(
    ("options", "max_tokens", "expiry"),
    [
        ({}, MAX_TOKENS, StreamExpiry(max_tokens=MAX_TOKENS, every=EVERY)),
        (
            {"pair_probation": PAIR_PROBATION},
            None,  # the model's own rules: no maximum, its pair probation
            StreamExpiry(max_tokens=None, every=EVERY, pair_probation=PAIR_PROBATION),
        ),
    ],
    ids=["max_tokens", "pair_probation"],
)
def test_the_evaluation_expires_what_the_server_expires(
    client: TestClient, options: dict[str, int], max_tokens: int | None, expiry: StreamExpiry
) -> None:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    examples = stream(60)
    client.post("/v1/models", json={"name": "m", **OPTIONS, **options})
    margins, removed = [], 0
    for position, (label, text) in enumerate(examples):
        margins.append(margin_now(client, "m", label, text))
        response = client.post("/v1/models/m/train", json={"label": label, "text": text})
        assert response.status_code == 200, response.text
        if (position + 1) % EVERY == 0:
            removed += expire_tokens(runtime, model_name="m", max_tokens=max_tokens).removed

    reference = score_stream(
        [
            Example(id=str(index), label=label, tokens=tokens_of(text))
            for index, (label, text) in enumerate(examples)
        ],
        ModelConfig(**OPTIONS).to_engine(),
        expiry=expiry,
    )
    vocabulary = client.get("/v1/models/m/stats").json()["vocabulary"]
    unexpired = score_stream(
        [
            Example(id=str(index), label=label, tokens=tokens_of(text))
            for index, (label, text) in enumerate(examples)
        ],
        ModelConfig(**OPTIONS).to_engine(),
    )

    assert_scored_as_the_reference(margins, reference.scores.tolist(), examples)
    assert reference.expired_tokens > MAX_TOKENS  # expiry deleted a lot, many times over
    assert removed == reference.expired_tokens
    assert vocabulary["tokens"] == reference.stored_tokens < unexpired.stored_tokens


def test_pair_probation_deletes_only_pairs_of_one_message_older_than_it(
    client: TestClient,
) -> None:
    """A pair counted in one message goes once PAIR_PROBATION newer messages were trained; a
    pair counted twice stays, and so does every word; a pair of a recent message stays."""
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    every_pair = {"pairs_until_log_odds": 0}
    client.post("/v1/models", json={"name": "m", "pair_probation": 3, **every_pair, **OPTIONS})
    texts = [
        ("spam", "cheap pills online"),  # "cheap pills" recurs below, "pills online" does not
        ("ham", "lunch meeting agenda"),
        ("spam", "cheap pills tonight"),
        ("ham", "quarterly report draft"),
        ("ham", "project meeting notes"),  # among the 3 newest: its pairs stay
    ]
    for label, text in texts:
        client.post("/v1/models/m/train", json={"label": label, "text": text})

    removed = expire_tokens(runtime, model_name="m").removed
    kept = set(texts_of(model_contents(client, "m")).values())

    assert removed == 3  # pills online, lunch meeting, meeting agenda
    assert {"pair:pills online", "pair:lunch meeting", "pair:meeting agenda"}.isdisjoint(kept)
    assert {"pair:cheap pills", "pair:pills tonight", "pair:project meeting"} <= kept
    assert {"pills", "online", "lunch", "agenda"} <= kept  # words never go on probation


def test_a_ledger_shorter_than_the_probation_deletes_nothing(client: TestClient) -> None:
    """The ledger tells the newest messages; pruned below the probation, it cannot tell
    whether a pair's message is among them, so no pair goes (where a ledger of every message
    sends the same pairs)."""
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    for name in ("pruned", "whole"):
        client.post("/v1/models", json={"name": name, "pair_probation": 5, **OPTIONS})
        for label, text in stream(12):
            client.post(f"/v1/models/{name}/train", json={"label": label, "text": text})
    prune_ledger(runtime, model_name="pruned", keep=4)

    assert expire_tokens(runtime, model_name="pruned").removed == 0
    assert expire_tokens(runtime, model_name="whole").removed > 0


@pytest.mark.parametrize(
    ("max_tokens", "every", "pair_probation", "said"),
    [
        (0, 10, None, "must be >= 1"),
        (10, 0, None, "must be >= 1"),
        (-5, 10, None, "must be >= 1"),
        (None, 10, 0, "must be >= 1"),
        (None, 10, None, "needs max_tokens or pair_probation"),
    ],
)
def test_a_stream_expiry_needs_a_positive_maximum_and_interval(
    max_tokens: int | None, every: int, pair_probation: int | None, said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        StreamExpiry(max_tokens=max_tokens, every=every, pair_probation=pair_probation)


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
