"""The schema and the hot queries keep to the rules of a distributed PostgreSQL (Citus).

docs/scaling.md: every table keyed by a model is distributed by `model_id`, `models` and
`api_keys` are reference tables. Citus needs the distribution column in every primary key and
unique constraint of a distributed table, and a query that names one `model_id` goes to one
shard. Citus cannot run here; these rules can be checked on every run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import UniqueConstraint, event

from app.service.classification import classify
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import apply_feedback, forget, train, train_batch
from app.store.tables import metadata
from tests.builders import ham_text, spam_text, train_examples

REFERENCE_TABLES = {"models", "api_keys", "api_key_models", "api_key_changes", "alembic_version"}
DISTRIBUTED_TABLES = {name for name in metadata.tables if name not in REFERENCE_TABLES}


def test_every_table_is_a_reference_table_or_distributed_by_model_id() -> None:
    assert {
        "class_totals",
        "tokens",
        "count_chunks",
        "count_journal",
        "trained_messages",
        "classifications",
        "activity",
        "attribute_sums",
    } == DISTRIBUTED_TABLES
    for name in DISTRIBUTED_TABLES:
        table = metadata.tables[name]
        assert "model_id" in table.primary_key.columns, name
        for constraint in table.constraints:
            if isinstance(constraint, UniqueConstraint):
                assert "model_id" in constraint.columns, (name, constraint.name)
        for key in table.foreign_keys:  # distributed -> reference only
            assert key.column.table.name in REFERENCE_TABLES, (name, key.target_fullname)
    for name in REFERENCE_TABLES - {"alembic_version"}:
        for key in metadata.tables[name].foreign_keys:  # a reference table needs no shard
            assert key.column.table.name in REFERENCE_TABLES, (name, key.target_fullname)


@contextmanager
def statements(rt: Runtime) -> Iterator[list[str]]:
    seen: list[str] = []

    def remember(conn: object, cursor: object, sql: str, *args: object) -> None:
        seen.append(sql)

    event.listen(rt.db.engine, "before_cursor_execute", remember)
    try:
        yield seen
    finally:
        event.remove(rt.db.engine, "before_cursor_execute", remember)


def distributed_tables_in(sql: str) -> set[str]:
    words = set(re.findall(r"[a-z_]+", sql.lower()))
    return words & DISTRIBUTED_TABLES


def names_one_model(sql: str) -> bool:
    """The statement pins model_id to one value: a WHERE equality, or an INSERT of one model's
    rows (PostgreSQL: one model_id parameter for all the unnested rows)."""
    lowered = " ".join(sql.lower().split())
    return bool(
        re.search(r"model_id = (%\(|\?|%s|\$|:)", lowered)
        or (
            re.search(r"model_id\s*=\s*\w+\.model_id", lowered) is None
            and lowered.startswith("insert into")
            and "model_id" in lowered
        )
    )


def test_train_classify_feedback_and_forget_each_go_to_one_shard(runtime: Runtime) -> None:
    train_examples(runtime, 3, 3)
    runtime.flush_classifications()
    with statements(runtime) as seen:
        train(runtime, model_name="default", message=Message(text=spam_text(80)), label="spam")
        train_batch(
            runtime,
            model_name="default",
            items=[(Message(text=ham_text(81)), "ham"), (Message(text=spam_text(82)), "spam")],
        )
        runtime.models.forget("default")  # the load and the partial read are hot paths too
        classify(runtime, model_name="default",
                 message=Message(text=spam_text(83), message_id="<c>"))  # fmt: skip
        runtime.models.get("default")
        classify(runtime, model_name="default", message=Message(text=ham_text(84)))
        apply_feedback(runtime, model_name="default", label="ham", message_id="<c>", message=None)
        forget(runtime, model_name="default", message_id="<c>")
        runtime.flush_classifications()
    touching = [sql for sql in seen if distributed_tables_in(sql)]
    assert len(touching) > 10
    for sql in touching:
        assert names_one_model(sql), sql
