"""Whole tables in and out, for `spamsift export` / `import`, and SQLite backups.

Everything keyed by a model is copied: its row, class totals, tokens, token counts, the training
ledger, recent classifications, activity counters and the Gaussian sums of its attributes. API
keys are not: they belong to an installation, not to a model. Rows are read in primary-key order
and in chunks, through the caller's transaction, so an export is one consistent snapshot however
long it takes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    LargeBinary,
    MetaData,
    SmallInteger,
    Table,
    insert,
    select,
    update,
)

from app.store.counts import add_count_rows, count_rows
from app.store.engine import Database
from app.store.models import as_utc
from app.store.tables import (
    activity,
    attribute_sums,
    class_totals,
    classifications,
    models,
    tokens,
    trained_messages,
)

CHUNK_ROWS = 5000
# Columns added since exports began: an export made before them lacks them, and its rows are
# imported with null there (a body digest only helps a report of a delivered copy).
LATER_COLUMNS = frozenset({"body_digest", "attributes"})
# Tables added since exports began: an export made before them has none of their rows.
LATER_TABLES = frozenset({"attribute_sums"})

# An export carries a model's counts as one row per (token, class), as they were once stored,
# whatever layout stores them now (`app.store.counts.count_rows`): exports stay readable
# across versions. Not a table of the database.
TOKEN_COUNTS = Table(
    "token_counts",
    MetaData(),
    Column("model_id", BigInteger, primary_key=True),
    Column("token_id", BigInteger, primary_key=True),
    Column("class_index", SmallInteger, primary_key=True),
    Column("docs", BigInteger),
    Column("terms", BigInteger),
    Column("generation", BigInteger),
)

# What one model owns, in the order an import writes it; the columns but `model_id`.
MODEL_TABLES: dict[str, Table] = {
    "class_totals": class_totals,
    "tokens": tokens,
    "token_counts": TOKEN_COUNTS,
    "trained_messages": trained_messages,
    "classifications": classifications,
    "activity": activity,
    "attribute_sums": attribute_sums,
}
MODEL_COLUMNS = ("name", "classes", "config", "generation", "n_tokens", "created_at")


def table_columns(name: str) -> list[str]:
    """The columns of a model table as exported: all but `model_id`, in table order."""
    return [column.name for column in MODEL_TABLES[name].columns if column.name != "model_id"]


def column_kinds(name: str) -> dict[str, str]:
    """How each exported column of table `name` travels in JSON: "datetime", "bytes" or "value"."""
    kinds = {}
    for column_name in table_columns(name):
        column_type = MODEL_TABLES[name].c[column_name].type
        if isinstance(column_type, DateTime):
            kinds[column_name] = "datetime"
        elif isinstance(column_type, LargeBinary):
            kinds[column_name] = "bytes"
        else:
            kinds[column_name] = "value"
    return kinds


def read_models(conn: Connection, names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The model rows (with `id`), by name; only `names` when given."""
    query = select(models).order_by(models.c.name)
    if names is not None:
        query = query.where(models.c.name.in_(list(names)))
    backing: dict[int, str] = {
        int(row.id): row.name
        for row in conn.execute(
            select(models.c.id, models.c.name).where(
                models.c.id.in_(select(models.c.backed_by).where(models.c.backed_by.isnot(None)))
            )
        )
    }
    return [
        {
            "id": row.id,
            "name": row.name,
            "classes": list(row.classes),
            "config": dict(row.config),
            "generation": int(row.generation),
            "n_tokens": int(row.n_tokens),
            "created_at": as_utc(row.created_at),
            "backed_by": None if row.backed_by is None else backing.get(row.backed_by),
            "feedback_trains_backing": bool(row.feedback_trains_backing),
        }
        for row in conn.execute(query)
    ]


def read_table(conn: Connection, name: str, model_id: int) -> Iterator[list[tuple[Any, ...]]]:
    """Yield a model's rows of table `name` in chunks, in primary-key order, as tuples in the
    order of `table_columns(name)`; datetimes in UTC."""
    if name == TOKEN_COUNTS.name:
        yield from _count_rows(conn, model_id)
        return
    table = MODEL_TABLES[name]
    columns = [table.c[column] for column in table_columns(name)]
    key = [column for column in table.primary_key.columns if column.name != "model_id"]
    result = conn.execution_options(yield_per=CHUNK_ROWS).execute(
        select(*columns).where(table.c.model_id == model_id).order_by(*key)
    )
    for chunk in result.partitions():
        yield [tuple(_utc(value) for value in row) for row in chunk]


def _count_rows(conn: Connection, model_id: int) -> Iterator[list[tuple[Any, ...]]]:
    classes = conn.execute(select(models.c.classes).where(models.c.id == model_id)).scalar_one()
    rows = list(
        zip(*(part.tolist() for part in count_rows(conn, model_id, len(classes))), strict=True)
    )
    for start in range(0, len(rows), CHUNK_ROWS):
        yield rows[start : start + CHUNK_ROWS]


def insert_model_row(conn: Connection, model: dict[str, Any]) -> int:
    """Store a model row as exported (name, classes, config, generation, n_tokens,
    created_at); return its new id."""
    values = {column: model[column] for column in MODEL_COLUMNS}
    return int(conn.execute(insert(models).values(**values).returning(models.c.id)).scalar_one())


def repoint_backing(conn: Connection, old_id: int, new_id: int) -> None:
    """Models backed by the model `old_id` (replaced by an import) are backed by `new_id`."""
    conn.execute(update(models).where(models.c.backed_by == old_id).values(backed_by=new_id))


def insert_rows(conn: Connection, name: str, model_id: int, rows: Sequence[dict[str, Any]]) -> None:
    """Insert rows of table `name` (each a dict of `table_columns(name)`) for the model."""
    if not rows:
        return
    if name == TOKEN_COUNTS.name:
        classes = conn.execute(select(models.c.classes).where(models.c.id == model_id)).scalar_one()
        columns = table_columns(name)
        arrays = [np.array([row[column] for row in rows], dtype=np.int64) for column in columns]
        add_count_rows(conn, model_id, (*arrays,), len(classes))  # type: ignore[arg-type]
        return
    conn.execute(insert(MODEL_TABLES[name]), [{"model_id": model_id, **row} for row in rows])


def vacuum_into(db: Database, path: Path) -> None:
    """Write a compacted copy of the SQLite database to `path` (which must not exist).

    `VACUUM INTO` reads one consistent snapshot, as a read transaction does: training may go on
    meanwhile (WAL), and the copy holds every transaction committed before it began.
    """
    with db.engine.connect() as conn:
        autocommit = conn.execution_options(isolation_level="AUTOCOMMIT")
        autocommit.exec_driver_sql("VACUUM INTO ?", (str(path),))


def integrity_check(path: Path) -> list[str]:
    """Run `PRAGMA integrity_check` on the SQLite file at `path`; ["ok"] when it is sound."""
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [str(row[0]) for row in connection.execute("PRAGMA integrity_check")]
    finally:
        connection.close()


def _utc(value: Any) -> Any:
    return as_utc(value) if isinstance(value, datetime) else value
