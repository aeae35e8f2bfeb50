"""6. Many models: memory held, /metrics, the model list, cold and warm classification.

`models` mailboxes of `messages` SpamAssassin messages each (every model its own slice of the
corpus) are trained through the service, in one process holding them within the memory
budget. Then, with nothing held: the /metrics figures and the first page of the model list
(neither may load a model); classification latency on models not held (Robinson-Fisher: read
from the message's rows) against models held; the RSS of holding every model against the
budget; database bytes per model, extrapolated to 100,000 mailboxes from the measured slope.

    python -m bench.many_models postgresql 200   # 200 models on a throw-away database
    python -m bench.many_models sqlite records   # bytes per classification record
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from app.config import Settings
from app.service.classification import classify, classify_batch
from app.service.corpus import LabelledMessage
from app.service.messages import Message
from app.service.model_figures import read_model_figures
from app.service.models import create_model, list_models
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from app.store.models import list_models as store_list_models
from app.store.tables import class_totals, count_chunks, count_journal, tokens, trained_messages
from app.store.tables import models as models_table
from bench import data
from bench.databases import database_bytes, fresh_database


def rss_mb() -> float:
    """This process's resident set now, in MB (Linux /proc)."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() / 1024 / 1024


def as_message(labelled: LabelledMessage) -> Message:
    return Message(raw=labelled.raw, text=labelled.text)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def populate(
    url: str,
    *,
    n_models: int,
    n_messages: int,
    budget_mb: float,
    progress: Path | None = None,
) -> list[dict[str, Any]]:
    """Make and train the models `user00000` … that the database lacks (a long run can be
    resumed); every 1,000 models (and at the end) note the models, database bytes and
    training seconds so far, appended to `progress` as JSON lines. Return those notes."""
    corpus = data.load("spamassassin")
    settings = Settings(database_url=url, live_models_max_mb=budget_mb, _env_file=None)  # type: ignore[call-arg]
    rt = Runtime(settings)
    upgrade_schema(rt.db)
    names = model_names(n_models)
    existing = set(
        rt.db.run(lambda conn: [row.name for row in store_list_models(conn)], write=False)
    )
    notes: list[dict[str, Any]] = []
    started = time.perf_counter()
    trained = 0
    step = len(corpus) // n_messages  # the corpus is sorted by folder: take a spread
    for i, name in enumerate(names):
        if name in existing:
            continue
        create_model(rt, name=name, classes=None, config={})
        batch = [corpus[(i + k * step) % len(corpus)] for k in range(n_messages)]
        items = [(Message(raw=m.raw, text=m.text, message_id=m.id), m.label) for m in batch]
        train_batch(rt, model_name=name, items=items)
        trained += 1
        if (i + 1) % 1000 == 0 or i + 1 == n_models:
            note = {
                "models": i + 1,
                "database_bytes": rt.db.size_bytes() or 0,
                "trained_now": trained,
                "train_seconds": time.perf_counter() - started,
                "rss_mb": rss_mb(),
            }
            notes.append(note)
            print(json.dumps(note), flush=True)
            if progress is not None:
                with progress.open("a") as out:
                    out.write(json.dumps(note) + "\n")
    rt.close()
    return notes


def clone_models(url: str, *, n_models: int, sources: int, per_round: int = 250) -> float:
    """Make models `user{sources:05d}` … `user{n_models-1:05d}` that are missing as copies of
    the first `sources` models (trained through the service), row for row under new ids, in
    SQL (INSERT … SELECT): a 10,000-model run in minutes instead of hours of training. Each
    copy's rows are its own, as a trained model's are. Return the seconds it took."""
    names = model_names(n_models)
    db = Database(url)
    started = time.perf_counter()
    try:
        with db.transaction(write=False) as conn:
            existing = {row.name for row in store_list_models(conn)}
        missing = [i for i in range(sources, n_models) if names[i] not in existing]
        model_columns = [c.name for c in models_table.columns if c.name not in ("id", "name")]
        for start in range(0, len(missing), per_round):
            pairs = [(names[i % sources], names[i]) for i in missing[start : start + per_round]]
            with db.transaction() as conn:
                conn.exec_driver_sql("CREATE TEMP TABLE pairs (source text, target text)")
                conn.exec_driver_sql(
                    "INSERT INTO pairs VALUES "
                    + ", ".join(f"('{source}', '{target}')" for source, target in pairs)
                )
                columns = ", ".join(model_columns)
                picked = ", ".join(
                    "now()" if c == "created_at" else f"m.{c}" for c in model_columns
                )
                conn.exec_driver_sql(
                    f"INSERT INTO models (name, {columns}) SELECT p.target, {picked} "
                    "FROM pairs p JOIN models m ON m.name = p.source"
                )
                conn.exec_driver_sql(
                    "CREATE TEMP TABLE ids AS SELECT s.id AS source_id, t.id AS target_id "
                    "FROM pairs p JOIN models s ON s.name = p.source "
                    "JOIN models t ON t.name = p.target"
                )
                for table in (class_totals, tokens, count_chunks, count_journal, trained_messages):
                    rest = [c.name for c in table.columns if c.name != "model_id"]
                    listed = ", ".join(rest)
                    conn.exec_driver_sql(
                        f"INSERT INTO {table.name} (model_id, {listed}) "
                        f"SELECT ids.target_id, {', '.join('x.' + c for c in rest)} "
                        f"FROM {table.name} x JOIN ids ON x.model_id = ids.source_id"
                    )
                conn.exec_driver_sql("DROP TABLE pairs")
                conn.exec_driver_sql("DROP TABLE ids")
            print(json.dumps({"cloned": start + len(pairs)}), flush=True)
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("ANALYZE")
    finally:
        db.dispose()
    return time.perf_counter() - started


def model_names(n_models: int) -> list[str]:
    return [f"user{i:05d}" for i in range(n_models)]


def measure(url: str, *, n_models: int, n_messages: int, budget_mb: float) -> dict[str, Any]:
    """Train `n_models` models on an empty database, then measure them (`measure_trained`)."""
    db = Database(url)
    upgrade_schema(db)
    size_before = db.size_bytes() or 0
    db.dispose()
    started = time.perf_counter()
    populate(url, n_models=n_models, n_messages=n_messages, budget_mb=budget_mb)
    train_seconds = time.perf_counter() - started
    size_after = database_bytes(url)
    figures = measure_trained(url, n_models=n_models, budget_mb=budget_mb)
    per_model = (size_after - size_before) / n_models
    return {
        "models": n_models,
        "messages_per_model": n_messages,
        "train_seconds_per_model": train_seconds / n_models,
        "database_bytes_per_model": per_model,
        "database_bytes_100k_models_extrapolated": per_model * 100_000,
        **figures,
    }


def measure_trained(url: str, *, n_models: int, budget_mb: float) -> dict[str, Any]:
    """Measure models `user00000` … already trained, from a fresh Runtime (nothing held):
    /metrics and the model list, classification of models not held (every model, once)
    against held ones, and RSS holding every model the budget allows."""
    corpus = data.load("spamassassin")
    settings = Settings(database_url=url, live_models_max_mb=budget_mb, _env_file=None)  # type: ignore[call-arg]
    names = model_names(n_models)
    rt = Runtime(settings)  # a fresh process: nothing held
    rss_fresh = rss_mb()
    started = time.perf_counter()
    figures = read_model_figures(rt)
    metrics_seconds = time.perf_counter() - started
    started = time.perf_counter()
    page = list_models(rt, limit=100)
    list_seconds = time.perf_counter() - started
    held_after_reads = rt.models.figures().models

    probe = corpus[-200:]
    cold: list[float] = []
    rss_cold_peak = rss_fresh
    for i, name in enumerate(names):
        message = as_message(probe[i % len(probe)])
        started = time.perf_counter()
        classify(rt, model_name=name, message=message)
        cold.append(time.perf_counter() - started)
        if i % 500 == 0:
            rss_cold_peak = max(rss_cold_peak, rss_mb())
    warm_names = names[: min(50, len(names))]
    for name in warm_names:
        rt.models.get(name)
    # Only those the budget kept: the held figures must not include cold reads.
    warm_names = [name for name in warm_names if rt.models.held(name) is not None]
    warm: list[float] = []
    for i in range(len(names)):
        name = warm_names[i % len(warm_names)]
        started = time.perf_counter()
        classify(rt, model_name=name, message=as_message(probe[i % len(probe)]))
        warm.append(time.perf_counter() - started)
    rss_peak = rss_cold_peak
    for i, name in enumerate(names):  # hold every model the budget allows (LRU past it)
        rt.models.get(name)
        if i % 500 == 0:
            rss_peak = max(rss_peak, rss_mb())
    held = rt.models.figures()
    rss_all = rss_mb()
    rt.close()
    return {
        "metrics_figures_seconds": metrics_seconds,
        "metrics_models_listed": len(figures),
        "list_first_page_seconds": list_seconds,
        "list_page_models": len(page.models),
        "models_held_after_metrics_and_list": held_after_reads,
        "classify_cold_p50_ms": statistics.median(cold) * 1000,
        "classify_cold_p99_ms": percentile(cold, 0.99) * 1000,
        "classify_warm_p50_ms": statistics.median(warm) * 1000,
        "classify_warm_p99_ms": percentile(warm, 0.99) * 1000,
        "classify_all_p99_ms": percentile(cold + warm, 0.99) * 1000,
        "cold_over_warm_p50": statistics.median(cold) / statistics.median(warm),
        "budget_mb": budget_mb,
        "held_models": held.models,
        "held_estimated_mb": held.bytes / 1024 / 1024,
        "evictions": held.evictions,
        "partial_reads": held.partial_reads,
        "held_models_classified": len(warm_names),
        "rss_fresh_mb": rss_fresh,
        "rss_peak_mb": max(rss_peak, rss_all),
        "rss_holding_mb": rss_all,
    }


def record_bytes(url: str, *, n_train: int = 100, n_classified: int = 500) -> dict[str, Any]:
    """Database bytes per classification record (kept for feedback by message_id)."""
    corpus = data.load("spamassassin")
    step = len(corpus) // (n_train + n_classified)
    sample = [corpus[i * step] for i in range(n_train + n_classified)]
    random.Random(1).shuffle(sample)  # both labels among the trained ones
    settings = Settings(database_url=url, _env_file=None)  # type: ignore[call-arg]
    rt = Runtime(settings)
    upgrade_schema(rt.db)
    items = [(Message(raw=m.raw, text=m.text, message_id=m.id), m.label) for m in sample[:n_train]]
    train_batch(rt, model_name="default", items=items)
    rt.close()
    before = database_bytes(url)
    rt = Runtime(settings)
    messages = [
        Message(raw=m.raw, text=m.text, message_id=f"<r{i}@bench>")
        for i, m in enumerate(sample[n_train:])
    ]
    classify_batch(rt, model_name="default", messages=messages)
    rt.close()  # writes the records
    return {
        "classified": len(messages),
        "bytes_per_record": (database_bytes(url) - before) / len(messages),
    }


def run(
    quick: bool,
    postgres_url: str | None,
    *,
    n_models: int | None = None,
    budget_mb: float = 64,
) -> dict[str, Any]:
    count = n_models or (20 if quick else 1000)
    results: dict[str, Any] = {}
    kinds = ["sqlite"] + (["postgresql"] if postgres_url else [])
    with tempfile.TemporaryDirectory() as folder:
        for kind in kinds:
            with fresh_database(kind, Path(folder), postgres_url) as url:
                results[kind] = measure(url, n_models=count, n_messages=50, budget_mb=budget_mb)
    results["table"] = [
        {
            "database": kind,
            "models": figures["models"],
            "DB KB/model": figures["database_bytes_per_model"] / 1024,
            "/metrics s": figures["metrics_figures_seconds"],
            "list page s": figures["list_first_page_seconds"],
            "loaded by reads": figures["models_held_after_metrics_and_list"],
            "cold p50/p99 ms": f"{figures['classify_cold_p50_ms']:.1f} / "
            f"{figures['classify_cold_p99_ms']:.1f}",
            "held p50/p99 ms": f"{figures['classify_warm_p50_ms']:.1f} / "
            f"{figures['classify_warm_p99_ms']:.1f}",
            "cold/held p50": figures["cold_over_warm_p50"],
            "held models": figures["held_models"],
            "evictions": figures["evictions"],
        }
        for kind, figures in results.items()
    ]
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.many_models", description=__doc__)
    parser.add_argument("kind", choices=["sqlite", "postgresql"])
    parser.add_argument("what", help="number of models, or 'records'")
    parser.add_argument(
        "--database",
        help="use (and keep) this database instead of a throw-away one; models it already "
        "holds are not trained again, so a long run can be resumed",
    )
    parser.add_argument("--progress", type=Path, help="append training checkpoints here")
    parser.add_argument("--budget-mb", type=float, default=64)
    parser.add_argument("--train-only", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--clone-from",
        type=int,
        help="PostgreSQL, with --database: train only this many models through the service "
        "and make the others as SQL copies of them",
    )
    args = parser.parse_args(argv)

    def run_on(url: str) -> dict[str, Any]:
        if args.what == "records":
            return record_bytes(url)
        n_models = int(args.what)
        if args.database is None:
            return measure(url, n_models=n_models, n_messages=50, budget_mb=args.budget_mb)
        trained_models = args.clone_from or n_models
        notes = populate(
            url,
            n_models=trained_models,
            n_messages=50,
            budget_mb=args.budget_mb,
            progress=args.progress,
        )
        clone_seconds = None
        if args.clone_from:
            clone_seconds = clone_models(url, n_models=n_models, sources=args.clone_from)
        if args.train_only:
            return {"checkpoints": notes, "clone_seconds": clone_seconds}
        return measure_trained(url, n_models=n_models, budget_mb=args.budget_mb)

    def report(figures: dict[str, Any]) -> None:
        text = json.dumps(figures, indent=1)
        print(text)
        if args.json is not None:
            args.json.write_text(text + "\n")

    if args.database:
        report(run_on(args.database))
        return
    with tempfile.TemporaryDirectory() as folder:
        server = os.environ.get("SPAMSIFT_TEST_POSTGRES_URL")
        with fresh_database(args.kind, Path(folder), server) as url:
            report(run_on(url))


if __name__ == "__main__":
    main()
