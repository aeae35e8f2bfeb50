"""F12 (and F05's lock budget): another client holds a long write transaction, with the locks
every spamsift writer needs (SQLite: the database write lock of BEGIN IMMEDIATE; PostgreSQL:
the model's row, on which writers queue). Meanwhile /classify answers as usual (readers never
wait: WAL, MVCC), and /train waits at most the lock timeout, then answers 503 with Retry-After
and applies nothing; once the lock is gone the same trainings go through.
"""

from __future__ import annotations

import random
import sqlite3
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from sqlalchemy import create_engine, text

from tests.faults.conftest import LOAD_SECONDS, StartServer
from tests.faults.load import compare_with_ledger, message_text

LOCK_TIMEOUT_SECONDS = 1.0
HOLD_SECONDS = max(4.0, LOAD_SECONDS / 2)  # 30 s in the full run, as ROBUSTNESS F12 says


@contextmanager
def write_lock_held(database_url: str) -> Iterator[None]:
    """Hold an open write transaction with spamsift's locks for the block, then roll back."""
    if database_url.startswith("sqlite"):
        conn = sqlite3.connect(database_url.removeprefix("sqlite:///"), timeout=30)
        conn.isolation_level = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("UPDATE models SET generation = generation + 1 WHERE name = 'default'")
            yield
            conn.execute("ROLLBACK")
        finally:
            conn.close()
        return
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn, conn.begin() as transaction:
            conn.execute(text("SELECT id FROM models WHERE name = 'default' FOR UPDATE"))
            conn.execute(
                text("UPDATE class_totals SET docs = docs WHERE model_id = "
                     "(SELECT id FROM models WHERE name = 'default')")
            )  # fmt: skip
            yield
            transaction.rollback()
    finally:
        engine.dispose()


def test_f05_f12_a_long_write_transaction_blocks_no_reader_and_bounds_writers(
    any_url: str, start_server: StartServer
) -> None:
    server = start_server(any_url, settings={"lock_timeout_seconds": str(LOCK_TIMEOUT_SECONDS)})
    rng = random.Random(12)
    ledger: dict[str, tuple[str, str]] = {}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for i in range(6):
            body = {"message_id": f"<f12-{i}@x>", "text": message_text(rng, f"f12u{i}q")}
            body["label"] = ("ham", "spam")[i % 2]
            assert client.post("/v1/models/default/train", json=body).status_code == 200
            ledger[body["message_id"]] = (body["text"], body["label"])
        refused_bodies = [
            {"message_id": f"<f12-held-{i}@x>", "text": message_text(rng, f"f12h{i}q"),
             "label": "spam"}
            for i in range(3)
        ]  # fmt: skip

        classify_timings: list[tuple[int, float]] = []
        stop = threading.Event()

        def classify_meanwhile() -> None:
            with httpx.Client(base_url=server.url, timeout=60) as reader:
                while not stop.is_set():
                    started = time.monotonic()
                    response = reader.post(
                        "/v1/models/default/classify", json={"text": message_text(rng, "r")}
                    )
                    classify_timings.append((response.status_code, time.monotonic() - started))
                    time.sleep(0.02)

        refused: list[tuple[httpx.Response, float]] = []
        with write_lock_held(any_url):
            held_at = time.monotonic()
            reader = threading.Thread(target=classify_meanwhile)
            reader.start()
            for body in refused_bodies:
                started = time.monotonic()
                response = client.post("/v1/models/default/train", json=body)
                refused.append((response, time.monotonic() - started))
            time.sleep(max(0.0, HOLD_SECONDS - (time.monotonic() - held_at)))
            stop.set()
            reader.join(timeout=30)
            during = compare_with_ledger(any_url, ledger)  # read beside the open transaction
        after_release = [client.post("/v1/models/default/train", json=b) for b in refused_bodies]
        ledger.update({b["message_id"]: (b["text"], b["label"]) for b in refused_bodies})
    after = compare_with_ledger(any_url, ledger)

    latencies = sorted(seconds for _, seconds in classify_timings)
    p99 = latencies[int(0.99 * (len(latencies) - 1))]
    backend = any_url.split(":")[0].split("+")[0]
    print(  # noqa: T201
        f"F12 {backend}: lock held {HOLD_SECONDS:.0f} s; {len(latencies)} classifications, "
        f"median {statistics.median(latencies):.3f} s, p99 {p99:.3f} s, max {latencies[-1]:.3f} s; "
        f"/train answered {[r.status_code for r, _ in refused]} after "
        f"{[round(s, 2) for _, s in refused]} s (lock timeout {LOCK_TIMEOUT_SECONDS} s)"
    )
    assert {status for status, _ in classify_timings} == {200}
    assert latencies[-1] < LOCK_TIMEOUT_SECONDS  # no reader waited for the lock
    for response, seconds in refused:
        assert response.status_code == 503, response.text
        assert response.json()["error"]["code"] == "database_unavailable"
        assert response.headers["retry-after"] == "1"
        assert seconds < LOCK_TIMEOUT_SECONDS + 2.0  # gave up after the lock timeout
    assert during.problems == []
    assert [r.status_code for r in after_release] == [200] * len(refused_bodies)
    assert all(r.json()["changed"] for r in after_release)  # nothing had been applied
    assert after.problems == []
