"""What `spamsift serve` does before and around uvicorn.

1. Settings are read and checked: a bad one stops the start with one line naming the
   variable (no traceback), e.g. `SPAMSIFT_MAX_MESSAGE_BYTES=-1: must be greater than 0`.
2. Logging is configured as the workers will have it (JSON lines unless
   SPAMSIFT_LOG_FORMAT=text), so migration messages look like the rest.
3. The schema is brought up to date once, before any worker starts; a database that cannot
   be reached stops the start with one line.
4. With several workers, Prometheus multiprocess mode gets a fresh directory
   (PROMETHEUS_MULTIPROC_DIR, made here unless given, and emptied either way), and the workers
   a directory through which they tell each other how busy they are, to spread keep-alive
   connections (app/balance.py).
5. With no API key, a server on an address beyond this machine refuses to start unless the
   operator allows it (--allow-no-authentication); on loopback it starts, and says so loudly.
6. One line says what starts: version, database (password masked), workers, mode.
7. uvicorn runs the app with spamsift's log configuration; its own access line is off, since
   it carries the raw path and query string (message ids) and spamsift logs a better one.
   Forwarded headers are believed only from SPAMSIFT_TRUSTED_PROXIES (none by default).
8. Its HTTP protocol is uvicorn's httptools one with connection limits added
   (app/connections.py), and the process may open a descriptor for each connection it
   keeps: the soft descriptor limit is raised towards the hard one where it is lower.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import resource
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.balance import LOAD_DIR_VARIABLE
from app.config import Settings
from app.errors import DatabaseUnavailable
from app.logging_setup import configure_logging, uvicorn_log_config

log = logging.getLogger("spamsift.serve")

MULTIPROCESS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
SECRET_SETTINGS = frozenset({"admin_key"})
# Descriptors beside the connections: listening socket, database files or connections, logs,
# the metrics and worker-load files.
SPARE_DESCRIPTORS = 256


class ServeError(Exception):
    """A reason not to start, as one line for the operator."""


def load_settings() -> Settings:
    """Return the process's Settings, or raise ServeError naming each bad variable (a token
    core this install lacks too: settings import no other room, so that is checked here)."""
    from app.text.core import CoreUnavailable, resolve

    try:
        settings = Settings()
    except ValidationError as error:
        raise ServeError(describe_settings_error(error)) from None
    try:
        resolve(settings.tokenizer)
    except CoreUnavailable as error:
        raise ServeError(f"SPAMSIFT_TOKENIZER={settings.tokenizer!r}: {error}") from None
    return settings


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
    from app.store.urls import hide_password

    return hide_password(url)


def sqlite_file(url: str) -> Path | None:
    """The absolute path of a SQLite database file, or None (PostgreSQL, in-memory SQLite)."""
    from app.store.urls import sqlite_file

    return sqlite_file(url)


def describe_database(url: str) -> str:
    """The database as an operator recognises it, password masked: `sqlite:////abs/path.db`
    (the absolute path, whatever the URL's working-directory-relative form) or the URL."""
    path = sqlite_file(url)
    if path is not None:
        return f"sqlite:///{path}"
    return _hide_password(url) or "(unreadable URL)"


def upgrade_database(settings: Settings) -> str | None:
    """Bring the schema up to date and return its revision (`serve` and `db upgrade` only:
    no other command migrates); raise ServeError when the database cannot be reached."""
    from app.store.engine import Database
    from app.store.migrate import upgrade_schema
    from app.store.schema_version import current_revision

    db = Database(settings.database_url, lock_timeout_seconds=settings.lock_timeout_seconds)
    try:
        upgrade_schema(db)
        return current_revision(db)
    except DatabaseUnavailable as error:
        raise ServeError(describe_database_failure(error, settings.database_url)) from None
    finally:
        db.dispose()


def vacuum_database(settings: Settings) -> tuple[int, int]:
    """Rebuild the database to its live rows (`db vacuum`); return its size in bytes before
    and after. ServeError naming the cause when it cannot be done."""
    from app.store import StoreError
    from app.store.engine import Database

    db = Database(settings.database_url, lock_timeout_seconds=settings.lock_timeout_seconds)
    try:
        before = db.size_bytes() or 0
        db.vacuum()
        return before, db.size_bytes() or 0
    except (StoreError, DatabaseUnavailable) as error:
        raise ServeError(describe_database_failure(error, settings.database_url)) from None
    finally:
        db.dispose()


def describe_database_failure(error: Exception, url: str) -> str:
    """One line for the operator: the database (password masked) and the driver's own first
    line of why it cannot be used (`database "x" does not exist`, `password authentication
    failed`, `Connection refused`, `unable to open database file`), which the API's answer
    ("unreachable … retry later") leaves out for its clients. `error` is the
    DatabaseUnavailable the store raised, or the SQLAlchemy error itself."""
    cause = error.__cause__ if isinstance(error, DatabaseUnavailable) else error
    orig = getattr(cause, "orig", None) or cause
    reason = str(orig).strip().splitlines()[0] if orig is not None and str(orig).strip() else ""
    if not reason and isinstance(error, DatabaseUnavailable):
        reason = error.message  # no driver error behind it (the lock timeout): say ours
    where = _hide_password(url)
    return f"SPAMSIFT_DATABASE_URL: cannot use the database {where}" + (
        f": {reason}" if reason else ""
    )


def authentication_mode(settings: Settings) -> str:
    """`api keys` when requests need a key (one was ever made, or SPAMSIFT_ADMIN_KEY seeds
    one), else `development` (every endpoint open)."""
    from app.service.keys import list_keys
    from app.store.engine import Database

    if settings.admin_key is not None:
        return "api keys"
    db = Database(settings.database_url, lock_timeout_seconds=settings.lock_timeout_seconds)
    try:
        return "api keys" if list_keys(db) else "development"
    except DatabaseUnavailable:
        return "development"  # checked again at start by the server itself
    finally:
        db.dispose()


def is_loopback(host: str) -> bool:
    """Tell whether `host` is reachable from this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def check_open_server(*, host: str, mode: str, allow_no_authentication: bool) -> None:
    """Refuse to serve every endpoint without authentication beyond this machine, unless the
    operator said so (as Redis' protected mode does): ServeError naming both ways out."""
    if mode != "development" or is_loopback(host) or allow_no_authentication:
        return
    raise ServeError(
        f"refusing to serve on {host} without authentication: no API key exists, so anyone "
        "who can reach this address could train and read every model. Create a key first "
        "(spamsift keys create --scope admin, or set SPAMSIFT_ADMIN_KEY), or, on a network "
        "you trust, start with --allow-no-authentication "
        "(SPAMSIFT_ALLOW_NO_AUTHENTICATION=true)"
    )


def log_start(*, settings: Settings, host: str, port: int, workers: int, mode: str) -> None:
    """One line saying what starts: version, database (password masked), workers, mode."""
    from app import __version__

    where = describe_database(settings.database_url)
    log.info(
        "spamsift %s starting on %s:%d: database %s, %d worker%s, %s mode",
        __version__,
        host,
        port,
        where,
        workers,
        "" if workers == 1 else "s",
        mode,
        extra={
            "fields": {
                "version": __version__,
                "database": where,
                "workers": workers,
                "mode": mode,
                "host": host,
                "port": port,
            }
        },
    )


def warn_about_shared_sqlite(settings: Settings, *, workers: int) -> None:
    """Name the SQLite WAL-reset bug once, where it applies: several server processes on one
    SQLite file with a library that has it."""
    import sqlite3

    from app.store.engine import warn_if_wal_reset_bug

    if workers > 1 and sqlite_file(settings.database_url) is not None:
        warn_if_wal_reset_bug(sqlite3.sqlite_version)


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


def prepare_worker_load_dir(workers: int) -> Path | None:
    """With several workers, make the directory through which they share how many connections
    each serves (app/balance.py), named in the environment they inherit; return it."""
    if workers <= 1:
        os.environ.pop(LOAD_DIR_VARIABLE, None)
        return None
    made = Path(tempfile.mkdtemp(prefix="spamsift-worker-loads-"))
    os.environ[LOAD_DIR_VARIABLE] = f"{made}:{workers}"
    return made


def raise_descriptor_limit(settings: Settings) -> int:
    """Let the process keep SPAMSIFT_MAX_CONNECTIONS connections open: raise the soft
    descriptor limit (often 1,024) towards the hard one. Return how many connections it can
    keep (fewer, with a warning, when even the hard limit is too low)."""
    needed = settings.max_connections + SPARE_DESCRIPTORS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return settings.max_connections
    if soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = raised
    if soft >= needed:
        return settings.max_connections
    keeps = max(soft - SPARE_DESCRIPTORS, 1)
    log.warning(
        "the process may open %d files, too few for SPAMSIFT_MAX_CONNECTIONS=%d (%d needed): "
        "it keeps at most %d connections; raise LimitNOFILE (systemd) or ulimit -n",
        soft,
        settings.max_connections,
        needed,
        keeps,
    )
    return keeps


def serve(
    *,
    host: str,
    port: int,
    workers: int = 1,
    allow_no_authentication: bool = False,
    **uvicorn_options: Any,
) -> None:
    """Check settings and database, then run the HTTP API until stopped."""
    import uvicorn

    from app.connections import ConnectionLimits, LimitedHttpToolsProtocol

    settings = load_settings()
    configure_logging(settings)
    upgrade_database(settings)  # before the workers start: they never migrate on import
    mode = authentication_mode(settings)
    check_open_server(
        host=host,
        mode=mode,
        allow_no_authentication=allow_no_authentication or settings.allow_no_authentication,
    )
    log_start(settings=settings, host=host, port=port, workers=workers, mode=mode)
    warn_about_shared_sqlite(settings, workers=workers)
    made = prepare_multiprocess_dir(workers)
    load_dir = prepare_worker_load_dir(workers)
    limits = ConnectionLimits.from_settings(
        settings, max_connections=raise_descriptor_limit(settings)
    )
    try:
        uvicorn.run(
            "app.main:create_worker_app",
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
            # httptools with limits added, rather than uvicorn's h11 (which bounds a head, but
            # not an idle connection) or another server: see app/connections.py.
            # uvicorn calls it as it would the class: config, server_state, app_state.
            http=functools.partial(LimitedHttpToolsProtocol, limits=limits),  # type: ignore[arg-type]
            timeout_keep_alive=settings.keep_alive_timeout_seconds,
            # No route takes a WebSocket; an upgraded connection would also leave the
            # protocol's connection count behind.
            ws="none",
            **uvicorn_options,
        )
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        if load_dir is not None:
            shutil.rmtree(load_dir, ignore_errors=True)
