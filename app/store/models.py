"""Model rows: name, classes, config, generation and the token-id counter."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, bindparam, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.errors import ModelExists, ModelNotFound
from app.store.counts import read_all_counts
from app.store.tables import (
    activity,
    attribute_sums,
    class_totals,
    classifications,
    count_chunks,
    count_journal,
    models,
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
    vocabulary: int = 0
    epoch: int = 0
    backed_by: int | None = None  # the id of the model backing this one
    feedback_trains_backing: bool = False


def _row(row: Any) -> ModelRow:
    return ModelRow(
        id=row.id,
        name=row.name,
        classes=tuple(row.classes),
        config=dict(row.config),
        generation=row.generation,
        n_tokens=row.n_tokens,
        created_at=as_utc(row.created_at),
        vocabulary=row.vocabulary,
        epoch=row.epoch,
        backed_by=row.backed_by,
        feedback_trains_backing=bool(row.feedback_trains_backing),
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


# Every request that names a model reads its row: built once (see
# `app.store.dialect.PrebuiltUpsert`), where building the statement anew cost as much as
# running it.
_MODEL_BY_NAME = select(models).where(models.c.name == bindparam("b_name"))
_MODEL_BY_ID = select(models).where(models.c.id == bindparam("b_id"))


def find_model(conn: Connection, name: str) -> ModelRow:
    row = conn.execute(_MODEL_BY_NAME, {"b_name": name}).first()
    if row is None:
        raise ModelNotFound(f"no model named {name!r}")
    return _row(row)


def find_model_by_id(conn: Connection, model_id: int) -> ModelRow:
    row = conn.execute(_MODEL_BY_ID, {"b_id": model_id}).first()
    if row is None:
        raise ModelNotFound(f"no model with the id {model_id}")
    return _row(row)


def lock_models(conn: Connection, names: Sequence[str]) -> dict[str, ModelRow]:
    """Read the named models, row-locked in name order (PostgreSQL; SQLite's write lock is
    already held), so two changes of backing relations cannot interleave. ModelNotFound
    names the first missing one."""
    rows = {
        row.name: _row(row)
        for row in conn.execute(
            select(models)
            .where(models.c.name.in_(sorted(set(names))))
            .order_by(models.c.name)
            .with_for_update()
        )
    }
    for name in names:
        if name not in rows:
            raise ModelNotFound(f"no model named {name!r}")
    return rows


def names_backed_by(conn: Connection, model_id: int) -> list[str]:
    """The names of the models `model_id` backs, sorted."""
    return list(
        conn.execute(
            select(models.c.name).where(models.c.backed_by == model_id).order_by(models.c.name)
        ).scalars()
    )


def model_names(conn: Connection, model_ids: Sequence[int]) -> dict[int, str]:
    """The name of each of `model_ids` that exists."""
    if not model_ids:
        return {}
    return {
        int(model_id): name
        for model_id, name in conn.execute(
            select(models.c.id, models.c.name).where(models.c.id.in_(sorted(set(model_ids))))
        )
    }


def set_backing(
    conn: Connection, model_id: int, *, backed_by: int | None, feedback_trains_backing: bool
) -> None:
    """Set (or clear, with None) the model backing `model_id`; bumps its generation so every
    process holding it reads the change."""
    conn.execute(
        update(models)
        .where(models.c.id == model_id)
        .values(
            backed_by=backed_by,
            feedback_trains_backing=feedback_trains_backing,
            generation=models.c.generation + 1,
        )
    )


def list_models(conn: Connection) -> list[ModelRow]:
    return [_row(row) for row in conn.execute(select(models).order_by(models.c.name))]


@dataclass(frozen=True)
class ModelTotals:
    """A model's running totals, as /metrics and the model list show them."""

    row: ModelRow
    class_docs: list[int]  # trained messages by class index
    trained_messages: int  # messages in the ledger
    events: dict[str, int]  # all-time activity counters (empty unless asked for)

    @property
    def name(self) -> str:
        return self.row.name

    @property
    def classes(self) -> tuple[str, ...]:
        return self.row.classes

    @property
    def generation(self) -> int:
        return self.row.generation

    @property
    def vocabulary(self) -> int:
        return self.row.vocabulary


def page_models(
    conn: Connection, *, after: str | None, limit: int, trained: bool = True
) -> list[ModelTotals]:
    """Up to `limit` models whose names sort after `after`, with their class totals and
    (when `trained`) ledger sizes: one statement, whatever the number of models."""
    page = select(models).order_by(models.c.name).limit(limit)
    if after is not None:
        page = page.where(models.c.name > after)
    chosen = page.subquery("chosen")
    columns = [*chosen.c, class_totals.c.class_index, class_totals.c.docs]
    if trained:
        columns.append(
            select(func.count())
            .where(trained_messages.c.model_id == chosen.c.id)
            .scalar_subquery()
            .label("trained_messages")
        )
    rows = conn.execute(
        select(*columns)
        .join_from(chosen, class_totals, class_totals.c.model_id == chosen.c.id)
        .order_by(chosen.c.name, class_totals.c.class_index)
    )
    found: dict[int, ModelTotals] = {}
    for row in rows:
        totals = found.get(row.id)
        if totals is None:
            totals = ModelTotals(_row(row), [], int(row.trained_messages) if trained else 0, {})
            found[row.id] = totals
        totals.class_docs.append(int(row.docs))
    return list(found.values())


def read_model_totals(conn: Connection) -> list[ModelTotals]:
    """Every model's running totals and all-time activity, in name order, in two queries."""
    totals = page_models(conn, after=None, limit=2**31 - 1, trained=False)
    by_id = {model.row.id: model for model in totals}
    rows = conn.execute(
        select(activity.c.model_id, activity.c.event, func.sum(activity.c.count)).group_by(
            activity.c.model_id, activity.c.event
        )
    )
    for model_id, event, count in rows:
        if model_id in by_id:
            by_id[model_id].events[event] = int(count)
    return totals


def update_model_config(conn: Connection, model_id: int, config: dict[str, Any]) -> None:
    conn.execute(
        update(models)
        .where(models.c.id == model_id)
        .values(config=config, generation=models.c.generation + 1)
    )


def delete_model(conn: Connection, model_id: int) -> None:
    """Delete a model and everything keyed by it."""
    for table in (
        activity,
        classifications,
        trained_messages,
        count_journal,
        count_chunks,
        tokens,
        class_totals,
        attribute_sums,
    ):
        conn.execute(delete(table).where(table.c.model_id == model_id))
    conn.execute(delete(models).where(models.c.id == model_id))


@dataclass
class LockedModelRow:
    """A model's row, locked for one write: the write's generation and the row's counters as
    they stand under the lock. The write's changes gather here and reach the row in one UPDATE
    (`save`), in the same transaction, so the new generation and the counts it brings commit
    together."""

    model_id: int
    generation: int  # the write's: one past the stored generation
    n_tokens: int  # token ids given so far, with those this write allocated
    vocabulary: int  # the stored vocabulary size, with this write's changes so far
    _allocated: int = field(default=0, init=False)
    _vocabulary_change: int = field(default=0, init=False)
    _epoch_bumped: bool = field(default=False, init=False)

    def allocate_token_ids(self, count: int) -> int:
        """Reserve `count` dense token ids; return the first (exact: the row is locked)."""
        first = self.n_tokens
        self.n_tokens += count
        self._allocated += count
        return first

    def add_vocabulary(self, change: int) -> None:
        """Move the model's vocabulary size by `change`."""
        self.vocabulary += change
        self._vocabulary_change += change

    def bump_epoch(self) -> None:
        """Tell every process holding the model to read it again (tokens were deleted)."""
        self._epoch_bumped = True

    def save(self, conn: Connection) -> None:
        """Store the generation and the changes in the row's one UPDATE of this write."""
        # Increments, not the values read: the same under the lock, and exact without it.
        conn.execute(
            _SAVE_WRITE,
            {
                "b_id": self.model_id,
                "b_tokens": self._allocated,
                "b_vocabulary": self._vocabulary_change,
                "b_epoch": int(self._epoch_bumped),
            },
        )


# The statements every write runs, built once (see `app.store.dialect.PrebuiltUpsert`).
_SAVE_WRITE = (
    update(models)
    .where(models.c.id == bindparam("b_id"))
    .values(
        generation=models.c.generation + 1,
        n_tokens=models.c.n_tokens + bindparam("b_tokens"),
        vocabulary=models.c.vocabulary + bindparam("b_vocabulary"),
        epoch=models.c.epoch + bindparam("b_epoch"),
    )
)
_LOCK_ROW = (
    select(models.c.generation, models.c.n_tokens, models.c.vocabulary)
    .where(models.c.id == bindparam("b_id"), models.c.created_at == bindparam("b_created_at"))
    .with_for_update(key_share=True)
)
_LOCK_ROW_OF_EPOCH = _LOCK_ROW.where(models.c.epoch == bindparam("b_epoch"))


def lock_model_row(
    conn: Connection, model_id: int, *, created_at: datetime, epoch: int | None = None
) -> LockedModelRow:
    """Start a write on the model: take its row lock and read the write's generation.

    Writers of one model queue here (PostgreSQL row lock, the one an UPDATE takes, so inserts
    that reference the model do not wait; SQLite's database lock is already held), so
    generations commit in order and a change feed read by generation misses nothing.
    `created_at` tells the model apart from a later one that got the same id (SQLite reuses
    the highest id after a delete): ModelNotFound unless the row is the model the caller holds.
    With `epoch`, also ModelNotFound when tokens expired since the caller read the model (its
    copy must be read again).
    """
    matching: dict[str, object] = {"b_id": model_id, "b_created_at": created_at}
    if epoch is None:
        row = conn.execute(_LOCK_ROW, matching).first()
    else:
        row = conn.execute(_LOCK_ROW_OF_EPOCH, {**matching, "b_epoch": epoch}).first()
    if row is None:
        raise ModelNotFound(f"model {model_id} was deleted")
    return LockedModelRow(
        model_id=model_id,
        generation=int(row.generation) + 1,
        n_tokens=int(row.n_tokens),
        vocabulary=int(row.vocabulary),
    )


def recount_vocabulary(conn: Connection, model: ModelRow) -> None:
    """Set the model's vocabulary size from its counts (after an import)."""
    token_ids, _, docs, _ = read_all_counts(conn, model.id, len(model.classes))
    counted = int(np.unique(token_ids[docs > 0]).size)
    conn.execute(update(models).where(models.c.id == model.id).values(vocabulary=counted))


def read_generation(
    conn: Connection, model_id: int, *, created_at: datetime, epoch: int | None = None
) -> int | None:
    """Return the model's generation; None if it was deleted (or its id is now another's), or
    if its epoch is not `epoch` (tokens expired: the copy must be read again)."""
    matching = [models.c.id == model_id, models.c.created_at == created_at]
    if epoch is not None:
        matching.append(models.c.epoch == epoch)
    value = conn.execute(select(models.c.generation).where(*matching)).scalar()
    return None if value is None else int(value)
