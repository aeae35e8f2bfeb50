"""5. Memory: server RSS and database bytes for a model with 1 million distinct tokens.

The model is built directly through the store API (token rows and count rows in bulk, one
transaction per 100 000 tokens, about 1.17 count rows per token as in a real model), then a
`spamsift serve --workers 1` is started on it. Its RSS is read idle; the first classification
is timed (a Robinson-Fisher model the process does not hold is scored from the message's own
rows: no load); then a training request, which loads the whole model, is timed; RSS is read
after it and after 100 more classifications (served by the held model). The model's own
memory is the RSS after those minus the idle RSS.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Connection

from app.store.counts import CountDelta, add_class_totals, add_token_counts, insert_tokens
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from app.store.models import find_model, lock_model_row
from app.text.core import CoreChoice
from bench import data
from bench.databases import database_bytes, fresh_database
from bench.server import Request, json_request, run_load, serve

CHUNK = 100_000


def build_model(url: str, n_tokens: int, seed: int = 0) -> float:
    """Fill the model `default` with n_tokens distinct tokens; return the seconds it took."""
    rng = np.random.default_rng(seed)
    db = Database(url)
    started = time.perf_counter()
    try:
        upgrade_schema(db)
        with db.transaction(write=False) as conn:
            model = find_model(conn, "default")
        terms_total = np.zeros(2, dtype=np.int64)
        for start in range(0, n_tokens, CHUNK):
            count = min(CHUNK, n_tokens - start)

            def work(conn: Connection, count: int = count) -> None:
                row = lock_model_row(conn, model.id, created_at=model.created_at)
                generation = row.generation
                first = row.allocate_token_ids(count)
                ids = np.arange(first, first + count, dtype=np.int64)
                texts = [f"w{token_id:07x}" for token_id in ids.tolist()]
                insert_tokens(conn, model.id, first_id=first, texts=texts, generation=generation)
                # Every token has ham counts, one in six spam counts too (~1.17 rows per token).
                spam_ids = ids[ids % 6 == 0]
                token_ids = np.concatenate([ids, spam_ids])
                classes = np.concatenate(
                    [np.zeros(ids.size, np.int64), np.ones(spam_ids.size, np.int64)]
                )
                order = np.lexsort((classes, token_ids))
                docs = rng.integers(1, 6, token_ids.size)
                terms = docs + rng.integers(0, 3, token_ids.size)
                delta = CountDelta(token_ids[order], classes[order], docs[order], terms[order])
                add_token_counts(conn, model.id, delta, generation=generation, n_classes=2)
                terms_total[0] += int(terms[classes == 0].sum())
                terms_total[1] += int(terms[classes == 1].sum())
                row.save(conn)

            db.run(work)

        def totals(conn: Connection) -> None:
            row = lock_model_row(conn, model.id, created_at=model.created_at)
            add_class_totals(
                conn, model.id, class_docs=[5000, 5000], class_terms=terms_total.tolist()
            )
            row.save(conn)

        db.run(totals)
    finally:
        db.dispose()
    return time.perf_counter() - started


def probe_requests(train_id: str = "m1") -> tuple[list[Request], Request]:
    """100 classifications of SpamAssassin test messages, and a training request of one
    message (which loads the whole model) under the message id `train_id`: a new one for each
    server on the same model, since training an id again does not write (nor need the model)."""
    test = data.split("spamassassin", train_limit=0, test_limit=100).test
    requests = [
        Request("/v1/models/default/classify", m.raw or b"", content_type="message/rfc822")
        for m in test
    ]
    trained = data.split("spamassassin", train_limit=1, test_limit=0).train[0]
    train_request = json_request(
        "/v1/models/default/train/batch",
        {
            "items": [
                {"raw": data.raw_text(trained), "label": trained.label, "message_id": train_id}
            ]
        },
    )
    return requests, train_request


def measure_served_model(
    url: str,
    folder: Path,
    n_tokens: int,
    *,
    tokenizer: CoreChoice | None = None,
    train_id: str = "m1",
) -> dict[str, Any]:
    """Start `spamsift serve --workers 1` on the model at `url`: its idle RSS, the first
    classification, the training request that loads the model, RSS after it and after 100
    classifications; wall seconds and the server's CPU seconds."""
    requests, train_request = probe_requests(train_id)
    with serve(url, workers=1, folder=folder, tokenizer=tokenizer) as server:
        idle = sum(server.rss_bytes().values())
        cpu, started = server.cpu_seconds(), time.perf_counter()
        first = run_load(server, requests[:1], clients=1)
        first_seconds = time.perf_counter() - started
        first_cpu = server.cpu_seconds() - cpu
        cpu, started = server.cpu_seconds(), time.perf_counter()
        trained = run_load(server, [train_request], clients=1)
        load_seconds = time.perf_counter() - started
        load_cpu = server.cpu_seconds() - cpu
        loaded = sum(server.rss_bytes().values())
        more = run_load(server, requests, clients=1)
        after = sum(server.rss_bytes().values())
    return {
        "rss_idle_bytes": idle,
        "rss_loaded_bytes": loaded,
        "rss_after_100_classify_bytes": after,
        "first_classify_seconds": round(first_seconds, 2),
        "first_classify_cpu_seconds": round(first_cpu, 2),
        "load_seconds": round(load_seconds, 2),
        "load_cpu_seconds": round(load_cpu, 2),
        "model_bytes_per_token": round((after - idle) / n_tokens, 1),
        "errors": first.errors + trained.errors + more.errors,
    }


def run(quick: bool, postgres_url: str | None) -> dict[str, Any]:
    n_tokens = 20_000 if quick else 1_000_000
    kinds = ["sqlite"] + (["postgresql"] if postgres_url else [])
    results: dict[str, Any] = {"tokens": n_tokens}
    rows = []
    with tempfile.TemporaryDirectory(prefix="spamsift-bench-") as tmp:
        for kind in kinds:
            with fresh_database(kind, Path(tmp), postgres_url) as url:
                build_seconds = build_model(url, n_tokens)
                db_bytes = database_bytes(url)
                served = measure_served_model(url, Path(tmp), n_tokens)
            entry = {
                "build_seconds": round(build_seconds, 1),
                "database_bytes": db_bytes,
                "database_bytes_per_token": round(db_bytes / n_tokens, 1),
                **served,
            }
            idle, loaded, after = (
                served["rss_idle_bytes"],
                served["rss_loaded_bytes"],
                served["rss_after_100_classify_bytes"],
            )
            results[kind] = entry
            rows.append(
                {
                    "database": kind,
                    "tokens": n_tokens,
                    "database MB": round(db_bytes / 1e6, 1),
                    "B/token": entry["database_bytes_per_token"],
                    "RSS idle MB": round(idle / 1e6, 1),
                    "RSS loaded MB": round(loaded / 1e6, 1),
                    "RSS after 100 MB": round(after / 1e6, 1),
                    "model B/token": entry["model_bytes_per_token"],
                    "first classify s": entry["first_classify_seconds"],
                    "load s (train 1)": entry["load_seconds"],
                }
            )
    results["table"] = rows
    results["notes"] = [
        "RSS of the one server process (--workers 1); loaded = after a training request, which "
        "loads the whole model (the first classification, Robinson-Fisher, reads only its "
        "message's rows); model B/token = (RSS after 100 classifications - idle) / tokens"
    ]
    return results


def repeated_runs(model_file: Path, n_tokens: int, runs: int) -> list[dict[str, Any]]:
    """Serve one SQLite model `runs` times (built into `model_file` once, kept for later calls;
    each run serves a fresh copy, so its training request writes the same way)."""
    if not model_file.exists():
        build_model(f"sqlite:///{model_file}", n_tokens)
    results = []
    with tempfile.TemporaryDirectory(prefix="spamsift-bench-") as tmp:
        copy = Path(tmp) / "model.sqlite"
        for run_index in range(runs):
            for suffix in ("", "-wal", "-shm"):
                Path(f"{copy}{suffix}").unlink(missing_ok=True)
            shutil.copyfile(model_file, copy)
            served = measure_served_model(f"sqlite:///{copy}", Path(tmp), n_tokens)
            served["load_average"] = os.getloadavg()[0]
            results.append(served)
            print(
                f"run {run_index + 1}: {served['model_bytes_per_token']} B/token, "
                f"load {served['load_seconds']} s ({served['load_cpu_seconds']} CPU s), "
                f"load average {served['load_average']:.1f}",
                flush=True,
            )
    return results


def main() -> None:
    """`python -m bench.memory --runs 5 --model /tmp/m1.sqlite`: the model's bytes a token on
    SQLite, several times on one model (the spread between runs is as large as the gaps being
    measured, so read the median)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", type=Path, required=True, help="SQLite file, built if absent")
    arguments = parser.parse_args()
    results = repeated_runs(arguments.model, arguments.tokens, arguments.runs)
    per_token = [result["model_bytes_per_token"] for result in results]
    load_cpu = [result["load_cpu_seconds"] for result in results]
    print(
        f"median {statistics.median(per_token)} B/token (runs {per_token}); load CPU median "
        f"{statistics.median(load_cpu)} s; load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
