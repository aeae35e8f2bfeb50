"""The database as the probes, /metrics and `spamsift expire` see it: its condition, whether it
answers, and the space deletions freed handed back."""

from __future__ import annotations

from app.service.runtime import Runtime
from app.store.engine import DatabaseCondition


def database_condition(rt: Runtime) -> DatabaseCondition:
    """The database's condition as this process last met it (no query)."""
    return rt.db.condition


def database_ready(rt: Runtime) -> bool:
    """Whether the database answers a trivial query."""
    return rt.db.ping()


def reclaim_space(rt: Runtime) -> int:
    """Hand the pages deletions freed back to the file system (SQLite); the pages freed."""
    return rt.db.reclaim_space()
