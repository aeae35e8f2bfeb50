"""What learning raw mail's own numeric attributes costs a train and a classify request.

    python -m bench.lab.attribute_cost [--messages 300] [--rounds 3]

Trains `messages` raw spamassassin messages (spread over the corpus, in a fixed shuffle) one
request at a time (the service's `train`, SQLite in a temporary directory), then classifies
as many others, in three variants: raw mail's `mail:` features left out (as before attributes
existed), learned but not scored (the default), learned and scored (`gaussian_attributes`).
Rounds alternate the variants, each in a fresh database; prints this process's CPU
milliseconds per message, median and range over rounds. CPU time: other processes on a shared
machine slow the wall clock, not this.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import resource
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path

from app.config import Settings
from app.service.classification import classify
from app.service.messages import Message
from app.service.models import create_model
from app.service.runtime import Runtime
from app.service.training import train
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from bench import data


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def without_features() -> Iterator[None]:
    """Prepare messages without raw mail's own features (as before attributes)."""
    messages = importlib.import_module("app.service.messages")
    saved = messages.mail_features
    messages.mail_features = lambda _raw, *, max_scan_bytes: {}
    try:
        yield
    finally:
        messages.mail_features = saved


def one_round(raws: list[tuple[bytes, str]], config: dict[str, object]) -> tuple[float, float]:
    """(train, classify) CPU ms per message in a fresh SQLite database."""
    half = len(raws) // 2  # the first half trained, the second classified
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{Path(directory) / 'bench.db'}"
        upgrade_schema(Database(url))
        settings = Settings(database_url=url, min_learns=0, _env_file=None)  # type: ignore[call-arg]
        rt = Runtime(settings)
        try:
            create_model(rt, name="m", classes=None, config=config)
            started = cpu_seconds()
            for raw, label in raws[:half]:
                train(rt, model_name="m", message=Message(raw=raw), label=label)
            trained = cpu_seconds() - started
            started = cpu_seconds()
            for raw, _ in raws[half:]:
                classify(rt, model_name="m", message=Message(raw=raw))
            classified = cpu_seconds() - started
        finally:
            rt.close()
    return 1000 * trained / half, 1000 * classified / (len(raws) - half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    messages = data.load("spamassassin", limit=2 * args.messages)
    # A fixed shuffle, so both halves hold ham and spam.
    raws = sorted(
        ((m.raw, m.label) for m in messages if m.raw is not None),
        key=lambda item: hashlib.sha256(item[0]).digest(),
    )
    results: dict[str, list[tuple[float, float]]] = {}
    variants = {
        "without features (before)": (without_features, {}),
        "features learned, not scored (default)": (contextlib.nullcontext, {}),
        "features learned and scored": (contextlib.nullcontext, {"gaussian_attributes": True}),
    }
    for _ in range(args.rounds):
        for name, (context, config) in variants.items():
            with context():
                results.setdefault(name, []).append(one_round(raws, config))
    for name, runs in results.items():
        trains = [run[0] for run in runs]
        classifies = [run[1] for run in runs]
        print(
            f"{name}: train {statistics.median(trains):.2f} ms "
            f"({min(trains):.2f}-{max(trains):.2f}), classify "
            f"{statistics.median(classifies):.2f} ms ({min(classifies):.2f}-{max(classifies):.2f})"
        )


if __name__ == "__main__":
    main()
