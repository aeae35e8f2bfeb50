"""F14: a database handle created before a fork() (gunicorn --preload, a forking supervisor).

`uvicorn --workers N` spawns fresh interpreters, each building its own engine in create_app
(F01's SQLite run goes through two such workers). Here the harder case: a Runtime with open
pooled connections and a loaded model is forked into three children, which train through the
inherited object at the same time as the parent. Each process must open connections of its own
(an inherited pool is dropped, never closed, in the child), so afterwards the parent's own
connections still work, the counts equal the ledger and SQLite's integrity_check says ok.
"""

from __future__ import annotations

import multiprocessing
import random
import sqlite3
import traceback
from multiprocessing.queues import Queue
from typing import Any

from app.config import Settings
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import forget, train, train_batch
from tests.faults.load import compare_with_ledger, message_text

CHILDREN = 3
MESSAGES = 30  # per process


def work(rt: Runtime, worker: int) -> dict[str, tuple[str, str]]:
    """Train, batch, relabel and forget through `rt`; return the acknowledged ledger."""
    rng = random.Random(worker)
    ledger: dict[str, tuple[str, str]] = {}
    for i in range(0, MESSAGES, 3):
        items = []
        for k in range(i, i + 3):
            message_id = f"<f14-{worker}-{k}@faults.test>"
            text = message_text(rng, f"f14u{worker}x{k}q")
            items.append((message_id, text, ("ham", "spam")[k % 2]))
        if i % 2:
            train_batch(
                rt,
                model_name="default",
                items=[(Message(text=t, message_id=m), label) for m, t, label in items],
            )
        else:
            for m, t, label in items:
                train(rt, model_name="default", message=Message(text=t, message_id=m), label=label)
        ledger.update({m: (t, label) for m, t, label in items})
    moved, dropped = sorted(ledger)[:2], sorted(ledger)[2]
    for message_id in moved:
        text, label = ledger[message_id]
        other = "ham" if label == "spam" else "spam"
        train(
            rt, model_name="default", message=Message(text=text, message_id=message_id), label=other
        )
        ledger[message_id] = (text, other)
    forget(rt, model_name="default", message_id=dropped)
    del ledger[dropped]
    return ledger


def child(rt: Runtime, worker: int, results: Queue[Any]) -> None:
    try:
        results.put((worker, work(rt, worker), None))
    except BaseException:
        results.put((worker, {}, traceback.format_exc()))


def test_f14_a_runtime_forked_with_open_connections_keeps_counts_exact(any_url: str) -> None:
    rt = Runtime(Settings(database_url=any_url, _env_file=None))  # type: ignore[call-arg]
    try:
        ledger = work(rt, worker=100)  # the pool holds connections, the model is loaded
        context = multiprocessing.get_context("fork")
        results: Queue[Any] = context.Queue()
        children = [
            context.Process(target=child, args=(rt, worker, results)) for worker in range(CHILDREN)
        ]
        for process in children:
            process.start()
        ledger |= work(rt, worker=101)  # the parent trains at the same time
        outcomes = [results.get(timeout=120) for _ in children]
        for process in children:
            process.join(timeout=60)
        ledger |= work(rt, worker=102)  # its own connections survived the children's exit
    finally:
        rt.close()

    assert [error for _, _, error in outcomes if error] == []
    assert [process.exitcode for process in children] == [0] * CHILDREN
    for _, child_ledger, _ in outcomes:
        ledger |= child_ledger
    comparison = compare_with_ledger(any_url, ledger)
    assert comparison.problems == []
    assert len(ledger) == (CHILDREN + 3) * (MESSAGES - 1)
    if any_url.startswith("sqlite"):
        with sqlite3.connect(any_url.removeprefix("sqlite:///")) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
