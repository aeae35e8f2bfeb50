"""Training messages tokenized beforehand (`train_prepared`, what bench/train_path.py times)
stores exactly what `train_batch` stores: the same token ids and texts, counts, class
totals and ledger rows, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from app.service.messages import Message
from app.service.models import create_model
from app.service.runtime import Runtime
from app.service.training import train, train_batch, train_prepared
from tests.builders import ham_message, spam_message

ROWS = {
    "tokens": "SELECT token_id, text, generation FROM tokens WHERE model_id = :m ORDER BY token_id",
    "count_chunks": "SELECT chunk, generation, counts FROM count_chunks WHERE model_id = :m "
    "ORDER BY chunk",
    "count_journal": "SELECT generation, cells, delta FROM count_journal WHERE model_id = :m "
    "ORDER BY generation",
    "class_totals": "SELECT class_index, docs, terms FROM class_totals WHERE model_id = :m "
    "ORDER BY class_index",
    "trained_messages": "SELECT message_key, message_id, class_index, token_ids, token_terms "
    "FROM trained_messages WHERE model_id = :m ORDER BY message_key",
}


def stored_rows(rt: Runtime, model: str) -> dict[str, list[tuple[Any, ...]]]:
    with rt.db.transaction(write=False) as conn:
        model_id = conn.execute(text("SELECT id FROM models WHERE name = :n"), {"n": model})
        m = model_id.scalar_one()
        return {
            table: [tuple(row) for row in conn.execute(text(sql), {"m": m})]
            for table, sql in ROWS.items()
        }


def test_training_prepared_messages_stores_what_training_raw_ones_stores(
    runtime: Runtime,
) -> None:
    create_model(runtime, name="twin", classes=None, config={})
    batches = [
        [(Message(raw=spam_message(i), message_id=f"<s{i}@x>"), "spam") for i in range(b, b + 6)]
        + [(Message(raw=ham_message(i), message_id=f"<h{i}@x>"), "ham") for i in range(b, b + 6)]
        for b in (0, 6, 12)
    ]
    batches[2].append((batches[0][0][0], "ham"))  # a relabel within a later batch
    one = (Message(raw=spam_message(40), message_id="<one@x>"), "spam")
    for number, batch in enumerate(batches):
        train_batch(runtime, model_name="default", items=batch)
        prepared = [(runtime.prepare(message, "train"), label) for message, label in batch]
        train_prepared(runtime, model_name="twin", items=prepared)
        if number == 0:  # a single message between batches: tokens added a few at a time
            for model in ("default", "twin"):
                train(runtime, model_name=model, message=one[0], label=one[1])

    default, twin = stored_rows(runtime, "default"), stored_rows(runtime, "twin")
    assert default["tokens"]
    assert default["trained_messages"]
    assert twin == default
