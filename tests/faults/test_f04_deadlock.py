"""F04: PostgreSQL lock-order deadlocks. spamsift's writers take the model's row first and
upsert tokens sorted, so they never deadlock each other (F01's 16 trainers on PostgreSQL saw
no failure); should a deadlock or serialization failure still happen (another program on the
database), the whole transaction is run again, a bounded number of times with jitter.

Here a real deadlock: two transactions of `Database.run` update the same two rows in opposite
orders; PostgreSQL aborts one with 40P01, which is retried and then succeeds.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Connection, text

from app.store.engine import Database


def test_f04_a_real_deadlock_is_retried_and_both_transactions_succeed(postgres_url: str) -> None:
    db = Database(postgres_url)
    barrier = threading.Barrier(2)
    attempts = {0: 0, 1: 0}
    lock = threading.Lock()

    def work(first: int) -> int:
        def transaction(conn: Connection) -> int:
            with lock:
                attempts[first] += 1
                attempt = attempts[first]
            for step, class_index in enumerate((first, 1 - first)):
                conn.execute(
                    text("UPDATE class_totals SET docs = docs WHERE class_index = :c"),
                    {"c": class_index},
                )
                if step == 0 and attempt == 1:
                    barrier.wait(timeout=30)  # both hold their first row: a lock cycle
            return attempt

        return db.run(transaction)

    try:
        with ThreadPoolExecutor(2) as pool:
            finished_on = list(pool.map(work, (0, 1)))
    finally:
        db.dispose()
    assert sorted(finished_on) == [1, 2]  # one went through; the deadlock victim on its retry
