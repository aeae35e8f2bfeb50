"""Writes to one model that queue behind a commit share the next one (group commit): each is
answered after that commit, one refused request fails alone, a database error fails them all.

A second connection holds the model's row (PostgreSQL) or the write lock (SQLite), so that the
first write waits at the lock while the others queue behind it in the process: what a burst
of "mark as spam" clicks does to a model whose previous write is still committing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import update

from app.config import Settings
from app.errors import DatabaseUnavailable, TooManyNewTokens
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import apply_feedback, train
from app.store.engine import Database
from app.store.tables import models
from tests.builders import counts_from_ledger, ham_text, spam_text, stored_cells, stored_counts

WRITERS = 8


@contextmanager
def model_locked(url: str, model: str = "default") -> Iterator[threading.Event]:
    """Hold the model's row in another connection until the event yielded is set."""
    release = threading.Event()
    locked = threading.Event()
    db = Database(url)

    def hold() -> None:
        with db.transaction() as conn:
            conn.execute(update(models).where(models.c.name == model).values(name=model))
            locked.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        yield release
    finally:
        release.set()
        holder.join(30)
        db.dispose()


def run_all(calls: list[Callable[[], Any]]) -> tuple[list[Any], list[threading.Thread]]:
    """Start each call in its own thread, in order; the list filled with each one's result
    (or the exception it raised) once the threads are joined."""
    outcomes: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            outcomes[index] = calls[index]()
        except Exception as error:
            outcomes[index] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
        time.sleep(0.01)  # in order, so that the first is the one waiting at the lock
    return outcomes, threads


def wait_until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the writes never queued"
        time.sleep(0.005)


def join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive(), "a write was never answered"


def trainer(rt: Runtime, text: str, message_id: str, label: str) -> Callable[[], Any]:
    message = Message(text=text, message_id=message_id)
    return lambda: train(rt, model_name="default", message=message, label=label)


def test_writes_queued_behind_a_commit_share_the_next_one(runtime: Runtime) -> None:
    train(runtime, model_name="default", message=Message(text=ham_text(0)), label="ham")
    live = runtime.models.get("default")
    commits = runtime.group_commit.commits

    with model_locked(runtime.settings.database_url) as release:
        calls = [
            trainer(runtime, spam_text(i), f"<burst-{i}@test>", "spam") for i in range(WRITERS)
        ]
        outcomes, threads = run_all(calls)
        wait_until(lambda: runtime.group_commit.waiting(live) == WRITERS - 1)
        release.set()
        join(threads)

    assert [o.changed for o in outcomes] == [True] * WRITERS
    assert runtime.group_commit.commits - commits <= 2  # the first, then all the others
    after = stored_counts(runtime)
    trained = sorted(mid for mid, _ in after.trained.values() if mid.startswith("<burst-"))
    assert trained == sorted(f"<burst-{i}@test>" for i in range(WRITERS))
    assert stored_cells(runtime) == counts_from_ledger(runtime)


def test_the_same_message_twice_in_one_group_is_trained_once_then_relabelled(
    runtime: Runtime,
) -> None:
    train(runtime, model_name="default", message=Message(text=ham_text(0)), label="ham")
    live = runtime.models.get("default")
    text = spam_text(5)

    with model_locked(runtime.settings.database_url) as release:
        calls = [
            trainer(runtime, ham_text(9), "<first@test>", "ham"),
            trainer(runtime, text, "<click@test>", "spam"),
            trainer(runtime, text, "<click@test>", "spam"),
            lambda: apply_feedback(
                runtime,
                model_name="default",
                label="ham",
                message_id=None,
                message=Message(text=text, message_id="<click@test>"),
            ),
        ]
        outcomes, threads = run_all(calls)
        wait_until(lambda: runtime.group_commit.waiting(live) == len(calls) - 1)
        release.set()
        join(threads)

    assert outcomes[1].changed
    assert not outcomes[2].changed  # a second click: already known
    assert (outcomes[3].previous_label, outcomes[3].label) == ("spam", "ham")
    after = stored_counts(runtime)
    assert sorted(label for mid, label in after.trained.values() if mid == "<click@test>") == [0]
    assert stored_cells(runtime) == counts_from_ledger(runtime)


def test_a_request_refused_in_a_group_fails_alone(runtime: Runtime, settings: Settings) -> None:
    flood = " ".join(f"word{i}x{i * 7}" for i in range(60))
    new_tokens = len(runtime.prepare(Message(text=flood), "train").token_counts)
    limit = new_tokens * 3 // 4  # over it, yet not so far that it is refused before the write
    rt = Runtime(settings.model_copy(update={"max_new_tokens_per_request": limit}))
    try:
        train(rt, model_name="default", message=Message(text=ham_text(0)), label="ham")
        live = rt.models.get("default")
        with model_locked(settings.database_url) as release:
            calls = [trainer(rt, spam_text(i), f"<ok-{i}@test>", "spam") for i in range(3)]
            calls.insert(2, trainer(rt, flood, "<flood@test>", "spam"))
            outcomes, threads = run_all(calls)
            wait_until(lambda: rt.group_commit.waiting(live) == len(calls) - 1)
            release.set()
            join(threads)

        assert isinstance(outcomes[2], TooManyNewTokens)
        assert [o.changed for i, o in enumerate(outcomes) if i != 2] == [True] * 3
        trained = {mid for mid, _ in stored_counts(rt).trained.values()}
        assert {f"<ok-{i}@test>" for i in range(3)} <= trained
        assert "<flood@test>" not in trained
        assert stored_cells(rt) == counts_from_ledger(rt)
    finally:
        rt.close()


def test_a_database_error_fails_every_request_of_the_group(settings: Settings) -> None:
    rt = Runtime(settings.model_copy(update={"lock_timeout_seconds": 0.5}))
    try:
        train(rt, model_name="default", message=Message(text=ham_text(0)), label="ham")
        before = stored_counts(rt)
        live = rt.models.get("default")
        with model_locked(settings.database_url):
            calls = [trainer(rt, spam_text(i), f"<lost-{i}@test>", "spam") for i in range(4)]
            outcomes, threads = run_all(calls)
            wait_until(lambda: rt.group_commit.waiting(live) == 0, seconds=20)
            join(threads)  # the lock is held until every write has given up

        assert all(isinstance(outcome, DatabaseUnavailable) for outcome in outcomes)
        assert stored_counts(rt) == before
    finally:
        rt.close()
