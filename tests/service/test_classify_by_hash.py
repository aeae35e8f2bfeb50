"""Scoring by the tokenizer's hashes: messages tokenized in worker processes come back
pickled and hashed again there, and score as messages tokenized here."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from itertools import islice

import pytest

from app.config import Settings
from app.service.classification import classify_batch, prepare_messages
from app.service.messages import Message, message_key
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.text import token_digest, token_hash
from tests.conftest import corpus_path
from tests.cores import TOKEN_CORE


def spamassassin(every: int) -> list[tuple[Message, str]]:
    """Every `every`-th SpamAssassin message (ham and spam) as raw bytes, with its label."""
    with gzip.open(corpus_path("spamassassin"), "rt", encoding="utf-8") as lines:
        records = [json.loads(line) for line in islice(lines, 0, None, every)]
    return [
        (Message(raw=record["text"].encode(record["encoding"])), record["label"])
        for record in records
    ]


@pytest.fixture
def patient_runtime(patient_settings: Settings) -> Iterator[Runtime]:
    # No time budget cut on a busy machine (starting the worker pool counts against it).
    rt = Runtime(patient_settings)
    yield rt
    rt.close()


def test_raw_mail_tokenized_in_two_processes_scores_as_in_one(patient_runtime: Runtime) -> None:
    rt = patient_runtime
    items = spamassassin(16)
    train_batch(rt, model_name="default", items=items[::3])
    messages = [message for index, (message, _) in enumerate(items) if index % 3]
    assert len(messages) >= 200  # enough for the worker processes to be used

    here = prepare_messages(rt, messages, "classify")
    there = prepare_messages(rt, messages, "classify", processes=2)

    for local, remote in zip(here, there, strict=True):
        assert remote.message_key == local.message_key
        assert remote.message_id == local.message_id
        assert remote.defects == local.defects
        assert remote.token_counts == local.token_counts
        # Hashed again in this process: the hashes this process's model index uses.
        assert remote.tokens.hashes.tolist() == local.tokens.hashes.tolist()
        assert local.tokens.hashes.tolist() == list(map(token_hash, local.token_counts))
        assert local.message_key == message_key(
            local.message_id, token_digest(local.token_counts, core=TOKEN_CORE)
        )
    one = classify_batch(rt, model_name="default", messages=messages)
    two = classify_batch(rt, model_name="default", messages=messages, processes=2)
    assert two == one
    assert sum(result.tokens for result in one) > 0.5 * sum(len(m.token_counts) for m in here)
