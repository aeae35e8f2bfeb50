"""7. Steady state: a stream of real mail trained and classified, with token expiry, ledger
retention and record pruning between rounds (as the server runs them every 5 minutes): the
database size and the process's RSS per round, and how flat they are over the last half.

    python -m bench.steady_state sqlite 40        # 40 rounds of 100 trained + 100 classified
    python -m bench.steady_state postgresql 40

The SpamAssassin corpus is streamed in a fixed shuffled order (each message once, then again
with new message ids); a model keeps at most 20,000 tokens and 500 ledger entries, classification
records live a few milliseconds (so every round prunes the previous round's). PostgreSQL runs
`spamsift db vacuum` (VACUUM, token indexes rebuilt) every round; SQLite needs nothing beyond
what the periodic work does (incremental vacuum).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from app.config import Settings
from app.service.classification import classify_batch
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.scheduler import periodic_work
from app.service.training import train_batch
from app.store.migrate import upgrade_schema
from bench import data
from bench.databases import fresh_database
from bench.many_models import rss_mb

MAX_TOKENS = 20_000
MAX_LEDGER = 500


def flatness(values: list[float]) -> float:
    """(max - min) / min over the last half, in %."""
    half = values[len(values) // 2 :]
    return 100 * (max(half) - min(half)) / min(half)


def run_stream(url: str, *, rounds: int, per_round: int, bounded: bool = True) -> dict[str, Any]:
    corpus = list(data.load("spamassassin"))
    random.Random(7).shuffle(corpus)  # sorted by folder: mix ham and spam as mail arrives
    update: dict[str, Any] = {"retention_days": 1e-7}
    if bounded:
        update |= {"max_tokens_per_model": MAX_TOKENS, "max_ledger_messages_per_model": MAX_LEDGER}
    settings = Settings(database_url=url, _env_file=None).model_copy(update=update)  # type: ignore[call-arg]
    rt = Runtime(settings)
    upgrade_schema(rt.db)
    rows: list[dict[str, Any]] = []
    position = 0
    started = time.perf_counter()

    def take(n: int) -> list[tuple[Message, str]]:
        nonlocal position
        out = []
        for _ in range(n):
            m = corpus[position % len(corpus)]
            lap = position // len(corpus)
            out.append(
                (Message(raw=m.raw, text=m.text, message_id=f"<{position}.{lap}@s>"), m.label)
            )
            position += 1
        return out

    try:
        for round_ in range(rounds):
            train_batch(rt, model_name="default", items=take(per_round))
            classify_batch(rt, model_name="default", messages=[m for m, _ in take(per_round)])
            rt.flush_classifications()
            rt.expire()
            for work in periodic_work(rt):
                work()
            if not rt.db.is_sqlite:
                rt.db.vacuum()
            rows.append(
                {
                    "round": round_ + 1,
                    "trained": (round_ + 1) * per_round,
                    "database_bytes": rt.db.data_bytes(),
                    "rss_mb": rss_mb(),
                    "held_mb": rt.models.figures().bytes / 1024 / 1024,
                    "seconds": time.perf_counter() - started,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    finally:
        rt.close()
    sizes = [row["database_bytes"] for row in rows]
    rss = [row["rss_mb"] for row in rows]
    return {
        "rounds": rounds,
        "per_round": per_round,
        "bounded": bounded,
        "database_bytes_first_last": [sizes[0], sizes[-1]],
        "database_last_half_spread_pct": flatness(sizes),
        "database_last_half_median": statistics.median(sizes[len(sizes) // 2 :]),
        "rss_mb_first_last": [rss[0], rss[-1]],
        "rss_last_half_spread_pct": flatness(rss),
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.steady_state", description=__doc__)
    parser.add_argument("kind", choices=["sqlite", "postgresql"])
    parser.add_argument("rounds", type=int, nargs="?", default=40)
    parser.add_argument("--per-round", type=int, default=100)
    parser.add_argument("--unbounded", action="store_true", help="no maxima: the comparison")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        server = os.environ.get("SPAMSIFT_TEST_POSTGRES_URL")
        with fresh_database(args.kind, Path(folder), server) as url:
            result = run_stream(
                url, rounds=args.rounds, per_round=args.per_round, bounded=not args.unbounded
            )
    result.pop("rows")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
