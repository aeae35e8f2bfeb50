"""Several OS processes train one model at once and no increment is lost (SPEC §7, F01-F03).

Each process is spawned (never forked) and builds its own Runtime and Database, as separate
server processes do. Afterwards every stored count must equal the sum recomputed from the
ledger of trained messages, and every message acknowledged must be in the ledger.
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from app.config import Settings
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import forget, train, train_batch
from app.store.engine import Database
from tests.builders import counts_from_ledger, ham_text, spam_text, stored_cells, stored_counts

PROCESSES = 4
OWN_MESSAGES = 60  # per process, half spam half ham, trained in batches of 3
SHARED_MESSAGES = 20  # trained by every process with the same label
CONTESTED_MESSAGES = 10  # trained by every process, spam by even and ham by odd ones
SPAM, HAM = 1, 0


def own_messages(worker: int) -> list[tuple[str, str, str]]:
    """(message_id, text, label) of the messages only `worker` trains."""
    messages = []
    for i in range(OWN_MESSAGES):
        n = 1000 * (worker + 1) + i
        text, label = (spam_text(n), "spam") if i % 2 else (ham_text(n), "ham")
        messages.append((f"<own-{worker}-{i}@test>", text, label))
    return messages


def train_concurrently(url: str, worker: int, start_at: float) -> dict[str, Any]:
    """Run in a spawned process: train, relabel and forget through this process's Runtime."""
    errors: list[str] = []
    operations = 0
    rt = Runtime(Settings(database_url=url, _env_file=None))  # type: ignore[call-arg]

    def attempt(use_case: Callable[..., object], **arguments: Any) -> None:
        nonlocal operations
        try:
            use_case(rt, model_name="default", **arguments)
            operations += 1
        except Exception:
            errors.append(traceback.format_exc())

    try:
        while time.time() < start_at:  # let every process start before any trains
            time.sleep(0.005)
        own = own_messages(worker)
        for r in range(SHARED_MESSAGES):
            shared = Message(text=spam_text(r), message_id=f"<shared-{r}@test>")
            attempt(train, message=shared, label="spam")
            if r < CONTESTED_MESSAGES:
                contested = Message(text=ham_text(r), message_id=f"<contested-{r}@test>")
                attempt(train, message=contested, label="spam" if worker % 2 == 0 else "ham")
            batch = [
                (Message(text=t, message_id=m), label) for m, t, label in own[3 * r : 3 * r + 3]
            ]
            attempt(train_batch, items=batch)
        # Relabel two of its own messages and forget one: moves and subtractions race too.
        for message_id, text, label in own[:2]:
            other = "ham" if label == "spam" else "spam"
            attempt(train, message=Message(text=text, message_id=message_id), label=other)
        attempt(forget, message_id=own[2][0])
    finally:
        rt.close()
    return {"worker": worker, "operations": operations, "errors": errors}


@pytest.mark.slow
def test_processes_training_at_once_lose_no_increment(database_url: str) -> None:
    context = multiprocessing.get_context("spawn")
    started = time.monotonic()
    with context.Pool(PROCESSES) as pool:
        start_at = time.time() + 4.0  # spawned interpreters import the app first
        results = pool.starmap(
            train_concurrently, [(database_url, worker, start_at) for worker in range(PROCESSES)]
        )
    elapsed = time.monotonic() - started

    assert [error for result in results for error in result["errors"]] == []
    db = Database(database_url)
    try:
        cells, totals = stored_cells(db)
        recomputed = counts_from_ledger(db)
        ledger = stored_counts(db).trained
    finally:
        db.dispose()
    assert (cells, totals) == recomputed
    ids = sorted(message_id for message_id, _ in ledger.values())
    expected = sorted(
        [f"<shared-{r}@test>" for r in range(SHARED_MESSAGES)]
        + [f"<contested-{r}@test>" for r in range(CONTESTED_MESSAGES)]
        + [mid for w in range(PROCESSES) for mid, _, _ in own_messages(w)[:2]]
        + [mid for w in range(PROCESSES) for mid, _, _ in own_messages(w)[3 : 3 * SHARED_MESSAGES]]
    )
    assert ids == expected  # each message exactly once, whoever trained it first
    for message_id, class_index in ledger.values():
        if message_id.startswith("<shared-"):
            assert class_index == SPAM
        for w in range(PROCESSES):
            for mid, _, label in own_messages(w)[:2]:
                if mid == message_id:  # relabelled by its only trainer
                    assert class_index == (HAM if label == "spam" else SPAM)
    assert sum(docs for docs, _ in totals.values()) == len(ledger)
    operations = sum(result["operations"] for result in results)
    print(f"{PROCESSES} processes, {operations} transactions in {elapsed:.1f} s")  # noqa: T201
    assert elapsed < 60, f"{PROCESSES} processes took {elapsed:.1f} s"
