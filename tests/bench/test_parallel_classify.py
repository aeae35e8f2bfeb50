"""classify_batch(processes=2) and train_batch(processes=2), which the benchmarks' in-process
figures use, give the same results as one process (tokenizing moves to worker processes)."""

from __future__ import annotations

from pathlib import Path

from app.config import Settings
from app.service.classification import classify_batch
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.store.counts import read_token_counts
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from app.store.models import find_model
from tests.builders import ham_text, spam_text


def test_classifying_in_two_processes_equals_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/parallel.db"
    db = Database(url)
    upgrade_schema(db)
    # No time budget cut on a busy machine (starting the worker pool counts against it).
    settings = Settings(  # type: ignore[call-arg]
        database_url=url, classify_time_budget_seconds=600, _env_file=None
    )
    runtime = Runtime(settings, db)
    try:
        items = [(Message(text=spam_text(i)), "spam") for i in range(20)]
        items += [(Message(text=ham_text(i)), "ham") for i in range(20)]
        train_batch(runtime, model_name="default", items=items)
        messages = [Message(text=spam_text(i + 100)) for i in range(60)]
        messages += [Message(raw=f"Subject: hi {i}\n\n{ham_text(i + 100)}") for i in range(60)]
        one = classify_batch(runtime, model_name="default", messages=messages)
        two = classify_batch(runtime, model_name="default", messages=messages, processes=2)
        assert two == one
    finally:
        runtime.close()


def test_training_in_two_processes_equals_one(tmp_path: Path) -> None:
    counts = []
    for processes in (1, 2):
        url = f"sqlite:///{tmp_path}/train-{processes}.db"
        db = Database(url)
        upgrade_schema(db)
        settings = Settings(  # type: ignore[call-arg]
            database_url=url, train_time_budget_seconds=600, _env_file=None
        )
        runtime = Runtime(settings, db)
        try:
            items = [(Message(text=spam_text(i)), "spam") for i in range(60)]
            items += [(Message(text=ham_text(i)), "ham") for i in range(60)]
            results = train_batch(runtime, model_name="default", items=items, processes=processes)
            with db.transaction(write=False) as conn:
                model = find_model(conn, "default")
                ids = list(range(model.n_tokens))
                stored = read_token_counts(conn, model.id, ids, len(model.classes))
            assert stored
            counts.append((results, stored))
        finally:
            runtime.close()
    assert counts[1] == counts[0]
