"""API key rows: found by their public `key_id`, holding a hash of the key, never the key.

A key limited to models is bound to their ids (`api_key_models`); every change to keys bumps
the one `api_key_changes` generation, which server processes poll to know when to re-read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, exists, func, insert, select, update

from app.store.dialect import upsert
from app.store.models import as_utc
from app.store.tables import api_key_changes, api_key_models, api_keys, models

CHANGES_ROW = 1


@dataclass(frozen=True)
class KeyRow:
    id: int
    key_id: str
    key_hash: str
    name: str
    scopes: tuple[str, ...]
    models: tuple[str, ...] | None  # None: every model; else the bound models' names now
    created_at: datetime
    revoked_at: datetime | None


def _row(row: Any, bound: dict[int, list[str]]) -> KeyRow:
    return KeyRow(
        id=row.id,
        key_id=row.key_id,
        key_hash=row.key_hash,
        name=row.name,
        scopes=tuple(row.scopes),
        models=None if row.models is None else tuple(sorted(bound.get(row.id, ()))),
        created_at=as_utc(row.created_at),
        revoked_at=None if row.revoked_at is None else as_utc(row.revoked_at),
    )


def _bound_names(
    conn: Connection, key_row_ids: Iterable[int] | None = None
) -> dict[int, list[str]]:
    """The names of the models each key (by row id) is bound to; all keys when None."""
    query = select(api_key_models.c.api_key_id, models.c.name).join(
        models, models.c.id == api_key_models.c.model_id
    )
    if key_row_ids is not None:
        query = query.where(api_key_models.c.api_key_id.in_(list(key_row_ids)))
    bound: dict[int, list[str]] = defaultdict(list)
    for key_row_id, name in conn.execute(query):
        bound[key_row_id].append(name)
    return bound


def bump_generation(conn: Connection) -> None:
    """Tell every server process that keys changed (they re-read them within a second)."""
    statement = upsert(conn, api_key_changes).values(id=CHANGES_ROW, generation=1)
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=[api_key_changes.c.id],
            set_={"generation": api_key_changes.c.generation + 1},
        )
    )


def read_generation(conn: Connection) -> tuple[int, int]:
    """Return (the keys' generation, the number of model bindings): either changes when what
    a key may do changes (the second when a model is deleted by any path, its bindings with it)."""
    generation = conn.execute(
        select(api_key_changes.c.generation).where(api_key_changes.c.id == CHANGES_ROW)
    ).scalar()
    bindings = conn.execute(select(func.count()).select_from(api_key_models)).scalar_one()
    return int(generation or 0), int(bindings)


def insert_key(
    conn: Connection,
    *,
    key_id: str,
    key_hash: str,
    name: str,
    scopes: tuple[str, ...],
    models: dict[str, int] | None,
) -> KeyRow | None:
    """Insert a key limited to `models` (name → model id; None: every model); None (and
    nothing changed) when a key with this `key_id` exists."""
    row = conn.execute(
        upsert(conn, api_keys)
        .values(
            key_id=key_id,
            key_hash=key_hash,
            name=name,
            scopes=list(scopes),
            models=None if models is None else sorted(models),
            created_at=datetime.now(UTC),
            revoked_at=None,
        )
        .on_conflict_do_nothing(index_elements=[api_keys.c.key_id])
        .returning(*api_keys.c)
    ).first()
    if row is None:
        return None
    if models:
        conn.execute(
            insert(api_key_models),
            [{"api_key_id": row.id, "model_id": model_id} for model_id in models.values()],
        )
    bump_generation(conn)
    return _row(row, {row.id: sorted(models or ())})


def find_key(conn: Connection, key_id: str) -> KeyRow | None:
    row = conn.execute(select(api_keys).where(api_keys.c.key_id == key_id)).first()
    return None if row is None else _row(row, _bound_names(conn, [row.id]))


def list_keys(conn: Connection) -> list[KeyRow]:
    bound = _bound_names(conn)
    return [_row(row, bound) for row in conn.execute(select(api_keys).order_by(api_keys.c.id))]


def list_active_keys(conn: Connection) -> list[KeyRow]:
    """Every unrevoked key, with the models it is bound to."""
    bound = _bound_names(conn)
    query = select(api_keys).where(api_keys.c.revoked_at.is_(None)).order_by(api_keys.c.id)
    return [_row(row, bound) for row in conn.execute(query)]


def revoke_key(conn: Connection, key_id: str) -> None:
    """Mark a key revoked, keeping the first revocation time."""
    conn.execute(
        update(api_keys)
        .where(api_keys.c.key_id == key_id, api_keys.c.revoked_at.is_(None))
        .values(revoked_at=datetime.now(UTC))
    )
    bump_generation(conn)


def end_model_keys(conn: Connection, model_id: int) -> list[str]:
    """Unbind every key from the model `model_id` (about to be deleted); revoke the keys left
    with no model. Return the key ids revoked."""
    bound_here = select(api_key_models.c.api_key_id).where(api_key_models.c.model_id == model_id)
    key_row_ids = list(conn.execute(bound_here).scalars())
    if not key_row_ids:
        return []
    conn.execute(delete(api_key_models).where(api_key_models.c.model_id == model_id))
    still_bound = exists().where(api_key_models.c.api_key_id == api_keys.c.id)
    ended = list(
        conn.execute(
            update(api_keys)
            .where(api_keys.c.id.in_(key_row_ids), api_keys.c.revoked_at.is_(None), ~still_bound)
            .values(revoked_at=datetime.now(UTC))
            .returning(api_keys.c.key_id)
        ).scalars()
    )
    bump_generation(conn)
    return sorted(ended)


def any_key(conn: Connection) -> bool:
    """Tell whether any key was ever made, revoked ones included."""
    return bool(conn.execute(select(exists().select_from(api_keys))).scalar())
