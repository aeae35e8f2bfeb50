"""Bytes a stored token costs, and batch training speed, on SQLite and PostgreSQL.

Trains the training split of a shared corpus through the service (batches of --batch messages,
one transaction each) into a fresh database, then divides the database's size by the number of
distinct tokens. Prints a table and writes JSON (bench/results/storage_cost.json).

    python -m bench.storage_cost [--corpus spamassassin] [--postgres URL]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from app.cli.corpora import read_jsonl
from app.config import Settings
from app.service.evaluation import is_test_message
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.store.engine import Database
from app.store.migrate import upgrade_schema

TABLES = ("tokens", "token_counts", "trained_messages", "class_totals", "models")


def measure(url: str, corpus: Path, batch: int) -> dict[str, object]:
    db = Database(url)
    upgrade_schema(db)
    runtime = Runtime(Settings(database_url=url, _env_file=None), db)  # type: ignore[call-arg]
    messages = [m for m in read_jsonl(corpus) if not is_test_message(m.id)]
    started = time.perf_counter()
    for start in range(0, len(messages), batch):
        chunk = messages[start : start + batch]
        train_batch(
            runtime,
            model_name="default",
            items=[(Message(raw=m.raw, text=m.text, message_id=m.id), m.label) for m in chunk],
        )
    seconds = time.perf_counter() - started
    with db.transaction() as conn:
        distinct = conn.execute(text("SELECT count(*) FROM tokens")).scalar_one()
        cells = conn.execute(text("SELECT count(*) FROM token_counts")).scalar_one()
    if db.is_sqlite:
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as raw:
            raw.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            raw.exec_driver_sql("VACUUM")
        token_bytes = None
    else:
        with db.transaction() as conn:
            conn.exec_driver_sql("ANALYZE")
            token_bytes = sum(
                conn.execute(text("SELECT pg_total_relation_size(:t)"), {"t": t}).scalar_one()
                for t in ("tokens", "token_counts")
            )
    total = db.size_bytes() or 0
    runtime.close()
    return {
        "database": "sqlite" if db.is_sqlite else "postgresql",
        "messages": len(messages),
        "distinct_tokens": distinct,
        "count_rows": cells,
        "database_bytes": total,
        "bytes_per_token_all_tables": round(total / distinct, 1),
        "bytes_per_token_token_tables": None
        if token_bytes is None
        else round(token_bytes / distinct, 1),
        "train_seconds": round(seconds, 2),
        "train_messages_per_second": round(len(messages) / seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", default="spamassassin")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--postgres", default=os.environ.get("SPAMSIFT_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    corpora = Path(os.environ.get("SPAMSIFT_CORPORA", "../shared/corpora"))
    corpus = corpora / args.corpus / "messages.jsonl.gz"
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        results.append(measure(f"sqlite:///{tmp}/cost.db", corpus, args.batch))
    if args.postgres:
        admin = Database(args.postgres)
        with admin.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("DROP DATABASE IF EXISTS spamsift_bench_cost")
            conn.exec_driver_sql("CREATE DATABASE spamsift_bench_cost")
        url = args.postgres.rsplit("/", 1)[0] + "/spamsift_bench_cost"
        results.append(measure(url, corpus, args.batch))
        with admin.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("DROP DATABASE IF EXISTS spamsift_bench_cost WITH (FORCE)")
        admin.dispose()
    print(
        f"{'database':<11} {'tokens':>8} {'rows':>8} {'bytes':>12} {'B/token':>8} "
        f"{'train msg/s':>11}"
    )
    for r in results:
        print(
            f"{r['database']:<11} {r['distinct_tokens']:>8} {r['count_rows']:>8} "
            f"{r['database_bytes']:>12} {r['bytes_per_token_all_tables']:>8} "
            f"{r['train_messages_per_second']:>11}"
        )
    out = Path("bench/results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "storage_cost.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
