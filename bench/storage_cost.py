"""Bytes the database takes per trained message and per distinct token, on SQLite and
PostgreSQL, and batch training speed: the figures of docs/installation.md's storage table.

Trains the training split of a shared corpus (or an even sample of `--messages N` of it)
through the service (batches of --batch messages, one transaction each) into a fresh database,
then measures what spamsift's data takes: the SQLite file after VACUUM; PostgreSQL's tables
with their indexes and TOAST after VACUUM, without the catalogs (Database.data_bytes). Prints a
table and writes JSON (bench/results/storage_cost.json, or --json FILE).

    python -m bench.storage_cost [--corpus spamassassin] [--messages N] [--postgres URL]

tests/bench/test_storage_figures.py runs it on a few hundred messages and holds the
documented per-message and per-token figures to what it measures, within a factor.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import text

from app.config import Settings
from app.service.corpus import LabelledMessage
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from bench import data
from bench.databases import fresh_database, postgres_server_url


def measure(url: str, messages: Sequence[LabelledMessage], batch: int) -> dict[str, Any]:
    db = Database(url)
    upgrade_schema(db)
    runtime = Runtime(Settings(database_url=url, _env_file=None), db)  # type: ignore[call-arg]
    started = time.perf_counter()
    for start in range(0, len(messages), batch):
        chunk = messages[start : start + batch]
        train_batch(
            runtime,
            model_name="default",
            items=[(Message(raw=m.raw, text=m.text, message_id=m.id), m.label) for m in chunk],
        )
    seconds = time.perf_counter() - started
    runtime.close()
    with db.transaction() as conn:
        distinct = conn.execute(text("SELECT count(*) FROM tokens")).scalar_one()
        chunks = conn.execute(text("SELECT count(*) FROM count_chunks")).scalar_one()
    db.vacuum()  # SQLite: the file without free pages; PostgreSQL: dead rows gone
    if db.is_sqlite:
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as raw:
            raw.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    data = db.data_bytes()
    db.dispose()
    return {
        "database": "sqlite" if url.startswith("sqlite") else "postgresql",
        "messages": len(messages),
        "distinct_tokens": distinct,
        "count_chunks": chunks,
        "data_bytes": data,
        "bytes_per_message": round(data / len(messages)),
        "bytes_per_token": round(data / distinct),
        "train_seconds": round(seconds, 2),
        "train_messages_per_second": round(len(messages) / seconds, 1),
    }


def run(
    corpus: Path, *, messages: int | None = None, batch: int = 500, postgres: str | None = None
) -> list[dict[str, Any]]:
    """Measure on a SQLite file, and on a throw-away database of `postgres`'s server."""
    sample = data.split_of(corpus, train_limit=messages).train
    kinds = ("sqlite", "postgresql") if postgres else ("sqlite",)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in kinds:
            with fresh_database(kind, Path(tmp), postgres) as url:
                results.append(measure(url, sample, batch))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", default="spamassassin")
    parser.add_argument("--messages", type=int, default=None, help="default: the whole split")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--postgres", default=postgres_server_url(), help='"": SQLite only')
    parser.add_argument("--json", type=Path, default=Path("bench/results/storage_cost.json"))
    args = parser.parse_args()
    corpora = Path(os.environ.get("SPAMSIFT_CORPORA", "../shared/corpora"))
    corpus = corpora / args.corpus / "messages.jsonl.gz"
    results = run(corpus, messages=args.messages, batch=args.batch, postgres=args.postgres)
    print(
        f"{'database':<11} {'messages':>8} {'tokens':>8} {'chunks':>8} {'bytes':>12} "
        f"{'B/message':>9} {'B/token':>8} {'train msg/s':>11}"
    )
    for r in results:
        print(
            f"{r['database']:<11} {r['messages']:>8} {r['distinct_tokens']:>8} "
            f"{r['count_chunks']:>8} {r['data_bytes']:>12} {r['bytes_per_message']:>9} "
            f"{r['bytes_per_token']:>8} {r['train_messages_per_second']:>11}"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
