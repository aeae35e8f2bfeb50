"""API key rows: found by their public `key_id`, holding a hash of the key, never the key."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, exists, func, select, update

from app.store.dialect import upsert
from app.store.models import as_utc
from app.store.tables import api_keys


@dataclass(frozen=True)
class KeyRow:
    id: int
    key_id: str
    key_hash: str
    name: str
    scopes: tuple[str, ...]
    models: tuple[str, ...] | None  # None: every model
    created_at: datetime
    revoked_at: datetime | None


def _row(row: Any) -> KeyRow:
    return KeyRow(
        id=row.id,
        key_id=row.key_id,
        key_hash=row.key_hash,
        name=row.name,
        scopes=tuple(row.scopes),
        models=None if row.models is None else tuple(row.models),
        created_at=as_utc(row.created_at),
        revoked_at=None if row.revoked_at is None else as_utc(row.revoked_at),
    )


def insert_key(
    conn: Connection,
    *,
    key_id: str,
    key_hash: str,
    name: str,
    scopes: tuple[str, ...],
    models: tuple[str, ...] | None,
) -> KeyRow | None:
    """Insert a key; None (and nothing changed) when a key with this `key_id` exists."""
    row = conn.execute(
        upsert(conn, api_keys)
        .values(
            key_id=key_id,
            key_hash=key_hash,
            name=name,
            scopes=list(scopes),
            models=None if models is None else list(models),
            created_at=datetime.now(UTC),
            revoked_at=None,
        )
        .on_conflict_do_nothing(index_elements=[api_keys.c.key_id])
        .returning(*api_keys.c)
    ).first()
    return None if row is None else _row(row)


def find_key(conn: Connection, key_id: str) -> KeyRow | None:
    row = conn.execute(select(api_keys).where(api_keys.c.key_id == key_id)).first()
    return None if row is None else _row(row)


def list_keys(conn: Connection) -> list[KeyRow]:
    return [_row(row) for row in conn.execute(select(api_keys).order_by(api_keys.c.id))]


def revoke_key(conn: Connection, key_id: str) -> None:
    """Mark a key revoked, keeping the first revocation time."""
    conn.execute(
        update(api_keys)
        .where(api_keys.c.key_id == key_id, api_keys.c.revoked_at.is_(None))
        .values(revoked_at=datetime.now(UTC))
    )


def any_key(conn: Connection) -> bool:
    """Tell whether any key was ever made, revoked ones included."""
    return bool(conn.execute(select(exists().select_from(api_keys))).scalar())


def count_active_keys(conn: Connection) -> int:
    active = select(func.count()).select_from(api_keys).where(api_keys.c.revoked_at.is_(None))
    return int(conn.execute(active).scalar_one())
