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
from app.store.migrate import upgrade_schema
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


def measure(url: str, *, n_models: int, n_messages: int, budget_mb: float) -> dict[str, Any]:
    corpus = data.load("spamassassin")
    settings = Settings(database_url=url, live_models_max_mb=budget_mb, _env_file=None)  # type: ignore[call-arg]
    rt = Runtime(settings)
    upgrade_schema(rt.db)
    size_before = rt.db.size_bytes() or 0
    names = [f"user{i:05d}" for i in range(n_models)]
    started = time.perf_counter()
    for i, name in enumerate(names):
        create_model(rt, name=name, classes=None, config={})
        step = len(corpus) // n_messages  # the corpus is sorted by folder: take a spread
        batch = [corpus[(i + k * step) % len(corpus)] for k in range(n_messages)]
        items = [(Message(raw=m.raw, text=m.text, message_id=m.id), m.label) for m in batch]
        train_batch(rt, model_name=name, items=items)
    train_seconds = time.perf_counter() - started
    rt.flush_classifications()
    size_after = rt.db.size_bytes() or 0
    rt.close()

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
    for i, name in enumerate(names):
        message = as_message(probe[i % len(probe)])
        started = time.perf_counter()
        classify(rt, model_name=name, message=message)
        cold.append(time.perf_counter() - started)
    warm_names = names[: min(50, len(names))]
    for name in warm_names:
        rt.models.get(name)
    warm: list[float] = []
    for i in range(len(names)):
        name = warm_names[i % len(warm_names)]
        started = time.perf_counter()
        classify(rt, model_name=name, message=as_message(probe[i % len(probe)]))
        warm.append(time.perf_counter() - started)
    for name in names:  # hold every model the budget allows
        rt.models.get(name)
    held = rt.models.figures()
    rss_all = rss_mb()
    rt.close()
    per_model = (size_after - size_before) / n_models
    return {
        "models": n_models,
        "messages_per_model": n_messages,
        "train_seconds_per_model": train_seconds / n_models,
        "database_bytes_per_model": per_model,
        "database_bytes_100k_models_extrapolated": per_model * 100_000,
        "metrics_figures_seconds": metrics_seconds,
        "metrics_models_listed": len(figures),
        "list_first_page_seconds": list_seconds,
        "list_page_models": len(page.models),
        "models_held_after_metrics_and_list": held_after_reads,
        "classify_cold_p50_ms": statistics.median(cold) * 1000,
        "classify_cold_p99_ms": percentile(cold, 0.99) * 1000,
        "classify_warm_p50_ms": statistics.median(warm) * 1000,
        "classify_warm_p99_ms": percentile(warm, 0.99) * 1000,
        "cold_over_warm_p50": statistics.median(cold) / statistics.median(warm),
        "budget_mb": budget_mb,
        "held_models": held.models,
        "held_estimated_mb": held.bytes / 1024 / 1024,
        "evictions": held.evictions,
        "rss_fresh_mb": rss_fresh,
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


if __name__ == "__main__":
    import json
    import os
    import sys

    kind = sys.argv[1] if len(sys.argv) > 1 else "postgresql"
    what = sys.argv[2] if len(sys.argv) > 2 else "100"
    with tempfile.TemporaryDirectory() as folder:
        server = os.environ.get("SPAMSIFT_TEST_POSTGRES_URL")
        with fresh_database(kind, Path(folder), server) as url:
            if what == "records":
                print(json.dumps(record_bytes(url), indent=1))
            else:
                figures = measure(url, n_models=int(what), n_messages=50, budget_mb=64)
                print(json.dumps(figures, indent=1))
