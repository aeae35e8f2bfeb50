"""What `spamsift serve` does before and around uvicorn.

1. Settings are read and checked: a bad one stops the start with one line naming the
   variable (no traceback), e.g. `SPAMSIFT_MAX_MESSAGE_BYTES=-1: must be greater than 0`.
2. Logging is configured as the workers will have it (JSON lines unless
   SPAMSIFT_LOG_FORMAT=text), so migration messages look like the rest.
3. The schema is brought up to date once, before any worker starts; a database that cannot
   be reached stops the start with one line.
4. With several workers, Prometheus multiprocess mode gets a fresh directory
   (PROMETHEUS_MULTIPROC_DIR, made here unless given, and emptied either way).
5. uvicorn runs the app with spamsift's log configuration; its own access line is off, since
   it carries the raw path and query string (message ids) and spamsift logs a better one.
   Forwarded headers are believed only from SPAMSIFT_TRUSTED_PROXIES (none by default).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.config import Settings
from app.errors import DatabaseUnavailable
from app.logging_setup import configure_logging, uvicorn_log_config

MULTIPROCESS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
SECRET_SETTINGS = frozenset({"admin_key"})


class ServeError(Exception):
    """A reason not to start, as one line for the operator."""


def load_settings() -> Settings:
    """Return the process's Settings, or raise ServeError naming each bad variable."""
    try:
        return Settings()
    except ValidationError as error:
        raise ServeError(describe_settings_error(error)) from None


def describe_settings_error(error: ValidationError) -> str:
    """One line: `SPAMSIFT_NAME=value: what is wrong` for each bad setting, joined by '; '."""
    problems = []
    for detail in error.errors(include_url=False):
        field = str(detail["loc"][0]) if detail["loc"] else ""
        variable = f"SPAMSIFT_{field.upper()}" if field else "settings"
        value = _shown_value(field, detail.get("input"))
        message = str(detail["msg"])
        message = message.removeprefix("Value error, ")
        problems.append(f"{variable}{value}: {message}")
    return "; ".join(problems)


def _shown_value(field: str, value: Any) -> str:
    if field in SECRET_SETTINGS or not isinstance(value, str | int | float) or field == "":
        return ""
    text: str | None = str(value)
    if field == "database_url":
        text = _hide_password(str(value))
    return f"={text!r}" if text is not None and len(text) <= 200 else ""


def _hide_password(url: str) -> str | None:
    """The URL with its password as ***, or None when it is no URL at all (say nothing)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return None


def upgrade_database(settings: Settings) -> None:
    """Bring the schema up to date; raise ServeError when the database cannot be reached."""
    from app.store.engine import Database
    from app.store.migrate import upgrade_schema

    db = Database(settings.database_url, lock_timeout_seconds=settings.lock_timeout_seconds)
    try:
        upgrade_schema(db)
    except DatabaseUnavailable as error:
        cause = error.__cause__
        orig = getattr(cause, "orig", None) or cause
        reason = str(orig).strip().splitlines()[0] if orig is not None and str(orig) else ""
        where = _hide_password(settings.database_url)
        raise ServeError(
            f"SPAMSIFT_DATABASE_URL: cannot use the database {where}"
            + (f": {reason}" if reason else "")
        ) from None
    finally:
        db.dispose()


def prepare_multiprocess_dir(workers: int) -> Path | None:
    """Set up PROMETHEUS_MULTIPROC_DIR for several workers; return a directory made here."""
    given = os.environ.get(MULTIPROCESS_DIR_VARIABLE)
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):  # counters of an earlier run must not add up
            stale.unlink()
        return None
    if workers <= 1:
        return None
    made = Path(tempfile.mkdtemp(prefix="spamsift-metrics-"))
    os.environ[MULTIPROCESS_DIR_VARIABLE] = str(made)
    return made


def serve(*, host: str, port: int, workers: int = 1, **uvicorn_options: Any) -> None:
    """Check settings and database, then run the HTTP API until stopped."""
    import uvicorn

    settings = load_settings()
    configure_logging(settings)
    upgrade_database(settings)  # before the workers start: they never migrate on import
    made = prepare_multiprocess_dir(workers)
    try:
        uvicorn.run(
            "app.main:create_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_config=uvicorn_log_config(settings),
            log_level=settings.log_level,
            access_log=False,
            # A worker imports numpy, scipy and SQLAlchemy before it answers the supervisor's
            # health check: on a busy machine that took over uvicorn's default 5 s, and the
            # supervisor killed and restarted workers that never came up.
            timeout_worker_healthcheck=60,
            # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise: any local
            # client could then pose as any address (past the throttle of failed keys, into the
            # log). Only the proxies of SPAMSIFT_TRUSTED_PROXIES are believed; none by default.
            proxy_headers=bool(settings.trusted_proxies),
            forwarded_allow_ips=settings.trusted_proxies or "",
            **uvicorn_options,
        )
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
