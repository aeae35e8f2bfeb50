"""Database URLs as the operator reads them: password masked, a SQLite file's path."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError


def hide_password(url: str) -> str | None:
    """The URL with its password as ***, or None when it is no URL at all (say nothing)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return None


def sqlite_file(url: str) -> Path | None:
    """The absolute path of a SQLite database file, or None (PostgreSQL, in-memory SQLite)."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite"):
        return None
    name = parsed.database or ""
    if name in ("", ":memory:") or name.startswith("file:"):
        return None
    return Path(name).absolute()
