"""The database levels off: a stream of training and classification, with token expiry,
ledger retention and record pruning running between rounds as the server runs them, keeps
the database size flat once the maxima are reached.

Generous margins, and sizes rather than times: the longer run with its numbers is
`python -m bench.steady_state` (docs/growth.md)."""

from __future__ import annotations

import random
import time

from app.service.classification import classify_batch
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.scheduler import periodic_work
from app.service.training import train_batch

ROUNDS = 10
PER_ROUND = 20
MAX_TOKENS = 400
MAX_LEDGER = 30
# Records live milliseconds: every round prunes all of its own.
RETENTION_SECONDS = 0.01


def stream_message(i: int, rng: random.Random) -> Message:
    """A message of common words and words seen once: the vocabulary grows without end."""
    common = [f"word{rng.randrange(300)}" for _ in range(60)]
    rare = [f"once{i}x{k}" for k in range(40)]
    return Message(text=" ".join(common + rare), message_id=f"<{i}@stream>")


def test_the_database_and_memory_level_off_under_a_stream(runtime: Runtime) -> None:
    rt = Runtime(
        runtime.settings.model_copy(
            update={
                "max_tokens_per_model": MAX_TOKENS,
                "max_ledger_messages_per_model": MAX_LEDGER,
                "retention_days": 1e-7,  # records live milliseconds: every round prunes them
            }
        )
    )
    rng = random.Random(12)
    sizes: list[int] = []
    try:
        for round_ in range(ROUNDS):
            first = round_ * 2 * PER_ROUND
            items = [
                (stream_message(first + k, rng), "spam" if k % 2 else "ham")
                for k in range(PER_ROUND)
            ]
            train_batch(rt, model_name="default", items=items)
            messages = [stream_message(first + PER_ROUND + k, rng) for k in range(PER_ROUND)]
            classify_batch(rt, model_name="default", messages=messages)
            rt.flush_classifications()
            time.sleep(RETENTION_SECONDS * 2)  # every record of the round past retention
            # What the server's background thread does every 5 minutes.
            rt.expire()
            for work in periodic_work(rt):
                work()
            if not rt.db.is_sqlite:
                # `spamsift db vacuum`: autovacuum's work, run now rather than when it likes,
                # and the token indexes rebuilt (PostgreSQL never merges their sparse pages:
                # without it they grow by every token ever made, 2.7 times in 40 rounds).
                rt.db.vacuum()
            sizes.append(rt.db.data_bytes())
    finally:
        rt.close()

    last_half = sizes[ROUNDS // 2 :]
    assert max(last_half) <= 1.10 * min(last_half), sizes
    # Without the maxima the same stream grows it round after round (40 new tokens and a
    # ledger entry per trained message, a record per classified one): the last round 4.9
    # times the first on SQLite, 3.5 times on PostgreSQL.
