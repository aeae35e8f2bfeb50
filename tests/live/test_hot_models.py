"""A model not held that a process classifies often is loaded in the background."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from app.config import Settings
from app.service.classification import classify, classify_batch
from app.service.messages import Message
from app.service.runtime import Runtime
from tests.builders import ham_text, spam_text, train_examples


@pytest.fixture
def trainer(settings: Settings) -> Iterator[Runtime]:
    """Another process: the one that trained the model, and so holds it."""
    rt = Runtime(settings)
    yield rt
    rt.close()


def wait_until_held(rt: Runtime, name: str) -> None:
    deadline = time.monotonic() + 30
    while rt.models.held(name) is None:
        assert time.monotonic() < deadline, f"{name} was not loaded in the background"
        time.sleep(0.01)


def test_a_model_classified_often_is_loaded_and_scores_the_same(
    runtime: Runtime, trainer: Runtime
) -> None:
    train_examples(trainer, 8, 8)
    runtime.models.hot_reads = 3
    messages = [Message(text=spam_text(70)), Message(text=ham_text(71))]
    expected = [classify(trainer, model_name="default", message=m, explain=True) for m in messages]

    cold = [
        classify(runtime, model_name="default", message=messages[i % 2], explain=True)
        for i in range(3)
    ]
    wait_until_held(runtime, "default")
    held = [classify(runtime, model_name="default", message=m, explain=True) for m in messages]

    figures = runtime.models.figures()
    assert figures.partial_reads == 3  # none once it is held
    assert figures.loads == 1
    wanted = [expected[i % 2] for i in range(3)] + expected
    for result, want in zip(cold + held, wanted, strict=True):
        assert result.probabilities == pytest.approx(want.probabilities, rel=1e-9)
        assert result.verdict == want.verdict
        assert result.tokens == want.tokens
        assert result.clues == want.clues


def test_a_model_classified_now_and_then_stays_out_of_memory(
    runtime: Runtime, trainer: Runtime
) -> None:
    train_examples(trainer, 8, 8)
    runtime.models.hot_reads = 3
    runtime.models.hot_window_seconds = 0.0  # each read starts a window of its own

    assert_six_reads_load_nothing(runtime)


def test_a_model_the_budget_cannot_hold_stays_out_of_memory_however_often_used(
    runtime: Runtime, trainer: Runtime
) -> None:
    train_examples(trainer, 8, 8)
    runtime.models.hot_reads = 3
    runtime.models.max_bytes = 1024  # far below any model

    assert_six_reads_load_nothing(runtime)


def assert_six_reads_load_nothing(runtime: Runtime) -> None:
    """Classify six messages on a model not held; check that none of it loaded the model."""
    for _ in range(6):
        classify(runtime, model_name="default", message=Message(text=spam_text(70)))
    time.sleep(0.2)  # a background load, were one started, would be well under way

    figures = runtime.models.figures()
    assert figures.models == 0
    assert figures.loads == 0
    assert figures.partial_reads == 6


def test_a_batch_counts_each_of_its_messages_towards_loading_the_model(
    runtime: Runtime, trainer: Runtime
) -> None:
    # A batch of 100 on HTTP is 100 classifications: counted as one, a worker not holding a
    # busy model read every batch's rows from the database instead of loading it.
    train_examples(trainer, 8, 8)
    runtime.models.hot_reads = 3
    messages = [Message(text=spam_text(70)), Message(text=ham_text(71)), Message(text="hi")]

    classify_batch(runtime, model_name="default", messages=messages)
    wait_until_held(runtime, "default")

    assert runtime.models.figures().partial_reads == 1
