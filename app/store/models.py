"""Model rows: name, classes, config, generation and the token-id counter."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.errors import ModelExists, ModelNotFound
from app.store.tables import (
    activity,
    class_totals,
    classifications,
    models,
    token_counts,
    tokens,
    trained_messages,
)


@dataclass(frozen=True)
class ModelRow:
    id: int
    name: str
    classes: tuple[str, ...]
    config: dict[str, Any]
    generation: int
    n_tokens: int
    created_at: datetime


def _row(row: Any) -> ModelRow:
    return ModelRow(
        id=row.id,
        name=row.name,
        classes=tuple(row.classes),
        config=dict(row.config),
        generation=row.generation,
        n_tokens=row.n_tokens,
        created_at=as_utc(row.created_at),
    )


def as_utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything spamsift stores is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def insert_model(
    conn: Connection, *, name: str, classes: tuple[str, ...], config: dict[str, Any]
) -> ModelRow:
    """Create a model and its zeroed class totals; ModelExists if the name is taken."""
    if conn.execute(select(models.c.id).where(models.c.name == name)).first() is not None:
        raise ModelExists(f"model {name!r} already exists")
    try:
        with conn.begin_nested():
            model_id = conn.execute(
                insert(models)
                .values(
                    name=name,
                    classes=list(classes),
                    config=config,
                    generation=0,
                    n_tokens=0,
                    created_at=datetime.now(UTC),
                )
                .returning(models.c.id)
            ).scalar_one()
    except IntegrityError as error:  # a concurrent create won the race
        raise ModelExists(f"model {name!r} already exists") from error
    conn.execute(
        insert(class_totals),
        [
            {"model_id": model_id, "class_index": index, "docs": 0, "terms": 0}
            for index in range(len(classes))
        ],
    )
    return find_model(conn, name)


def find_model(conn: Connection, name: str) -> ModelRow:
    row = conn.execute(select(models).where(models.c.name == name)).first()
    if row is None:
        raise ModelNotFound(f"no model named {name!r}")
    return _row(row)


def list_models(conn: Connection) -> list[ModelRow]:
    return [_row(row) for row in conn.execute(select(models).order_by(models.c.name))]


def update_model_config(conn: Connection, model_id: int, config: dict[str, Any]) -> None:
    conn.execute(
        update(models)
        .where(models.c.id == model_id)
        .values(config=config, generation=models.c.generation + 1)
    )


def delete_model(conn: Connection, model_id: int) -> None:
    """Delete a model and everything keyed by it."""
    for table in (activity, classifications, trained_messages, token_counts, tokens, class_totals):
        conn.execute(delete(table).where(table.c.model_id == model_id))
    conn.execute(delete(models).where(models.c.id == model_id))


def lock_and_bump_generation(conn: Connection, model_id: int, *, created_at: datetime) -> int:
    """Start a write on the model: take its row lock and return the new generation.

    Writers of one model queue here (PostgreSQL row lock; SQLite's database lock is already
    held), so generations commit in order and a change feed read by generation misses nothing.
    `created_at` tells the model apart from a later one that got the same id (SQLite reuses
    the highest id after a delete): ModelNotFound unless the row is the model the caller holds.
    """
    generation = conn.execute(
        update(models)
        .where(models.c.id == model_id, models.c.created_at == created_at)
        .values(generation=models.c.generation + 1)
        .returning(models.c.generation)
    ).scalar_one_or_none()
    if generation is None:
        raise ModelNotFound(f"model {model_id} was deleted")
    return int(generation)


def allocate_token_ids(conn: Connection, model_id: int, count: int) -> int:
    """Reserve `count` dense token ids; return the first. Call under the model's lock."""
    end = conn.execute(
        update(models)
        .where(models.c.id == model_id)
        .values(n_tokens=models.c.n_tokens + count)
        .returning(models.c.n_tokens)
    ).scalar_one()
    return int(end) - count


def read_generation(conn: Connection, model_id: int, *, created_at: datetime) -> int | None:
    """Return the model's generation; None if it was deleted (or its id is now another's)."""
    value = conn.execute(
        select(models.c.generation).where(
            models.c.id == model_id, models.c.created_at == created_at
        )
    ).scalar()
    return None if value is None else int(value)
