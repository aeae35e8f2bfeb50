"""The time budget is per message: a batch's last messages are not cut because its first
ones used the time (each message is bounded by the caps, so a batch's time stays linear)."""

from __future__ import annotations

import itertools

import pytest

from app.config import Settings
from app.service import runtime as runtime_module
from app.service.classification import classify_batch
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import train_batch
from tests.builders import spam_message, train_examples

BATCH = 30


@pytest.fixture
def slow_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock that moves 10 s each time it is read: a message reads it a few times (when its
    budget starts, between parts and texts), a batch of 30 messages far more than 10 times."""
    ticks = itertools.count(step=10.0)
    monkeypatch.setattr(runtime_module.time, "monotonic", lambda: float(next(ticks)))


def budget_runtime(database_url: str, classify: float, train: float = 100) -> Runtime:
    settings = Settings(  # type: ignore[call-arg]
        database_url=database_url,
        classify_time_budget_seconds=classify,
        train_time_budget_seconds=train,
        _env_file=None,
    )
    return Runtime(settings)


def test_every_message_of_a_batch_has_the_whole_budget(database_url: str, slow_clock: None) -> None:
    rt = budget_runtime(database_url, classify=100)  # 10 reads of the clock per message
    try:
        train_examples(rt, 3, 3)
        messages = [Message(raw=spam_message(i)) for i in range(BATCH)]

        results = classify_batch(rt, model_name="default", messages=messages)
        trained = train_batch(
            rt, model_name="default", items=[(message, "spam") for message in messages]
        )

        assert all("time_budget" not in result.defects for result in results)
        assert all(result.changed for result in trained)
    finally:
        rt.close()


def test_a_message_past_its_budget_is_still_cut(database_url: str, slow_clock: None) -> None:
    rt = budget_runtime(database_url, classify=5)  # gone by the first look
    try:
        train_examples(rt, 3, 3)
        [result] = classify_batch(rt, model_name="default", messages=[Message(raw=spam_message(1))])
        assert "time_budget" in result.defects
    finally:
        rt.close()
