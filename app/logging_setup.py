"""Logs: one JSON object per line (or plain text), the same for spamsift's and uvicorn's lines.

Every line carries `ts`, `level`, `logger`, `event` and, inside a request, its `request_id`.
A line is built only from the log call's message and the fields it hands over in
`extra={"fields": {...}}`; an exception adds its type and stack frames but never its message,
since exception messages may quote the input (a message id, a header value).

No terminal control character ever reaches a line (ROBUSTNESS I38, uvicorn CVE-2020-7694): JSON
output is pure printable ASCII (json.dumps escapes C0 controls, `ensure_ascii` everything beyond
ASCII, and DEL is escaped here); text output escapes every control and format character as
`\\xNN` / `\\uNNNN`.

A small Formatter of our own rather than python-json-logger or structlog: the line needs ten
fields, control over what an exception adds, and the same escaping in text mode; both libraries
would still need this code around them, and structlog would also need ProcessorFormatter wiring
to take uvicorn's stdlib records.
"""

from __future__ import annotations

import contextvars
import json
import logging
import logging.config
import re
import traceback
import unicodedata
from datetime import UTC, datetime
from typing import Any, Literal

from app.config import Settings

LogFormat = Literal["json", "text"]
LogLevel = Literal["debug", "info", "warning", "error"]

# The request being answered, set by the request middleware; copied into the worker threads
# that run the routes, so a line logged anywhere during a request carries its id.
request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "spamsift_request_id", default=None
)

# Loggers at the configured level. Everything else (the root logger) stays at WARNING, so that
# no library logs at debug: SQLAlchemy's engine log would print statement parameters (tokens,
# message ids), and it follows the root logger's level.
OWN_LOGGERS = ("app", "spamsift", "uvicorn")
# alembic says "Context impl SQLiteImpl", "Will assume transactional DDL" … at every start:
# warnings only (the start-up line says what runs).
QUIET_LOGGERS = (
    "sqlalchemy",
    "multipart",
    "python_multipart",
    "httpx",
    "httpcore",
    "asyncio",
    "alembic",
)

_UNSAFE_TEXT = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]")


def escape_text(value: str) -> str:
    """Return `value` with every control or format character written as an escape."""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    escaped = _UNSAFE_TEXT.sub(escape, value)
    # Other format characters (Cf) beyond the usual ones: escape too, rare enough to be slow.
    if escaped.isascii():
        return escaped
    return "".join(
        f"\\u{ord(c):04x}" if unicodedata.category(c) in ("Cc", "Cf") else c for c in escaped
    )


def _exception_fields(record: logging.LogRecord) -> dict[str, Any]:
    if not record.exc_info or record.exc_info[1] is None:
        return {}
    error = record.exc_info[1]
    chain: list[dict[str, Any]] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(chain) < 5:
        seen.add(id(current))
        frames = traceback.extract_tb(current.__traceback__)
        chain.append(
            {
                "type": f"{type(current).__module__}.{type(current).__qualname__}",
                "stack": [f"{f.filename}:{f.lineno} in {f.name}" for f in frames[-20:]],
            }
        )
        current = current.__cause__ or current.__context__
    return {"exception": chain}


def _record_fields(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
        "level": record.levelname.lower(),
        "logger": record.name,
        "event": record.getMessage(),
    }
    request_id = getattr(record, "request_id", None) or request_id_var.get()
    if request_id:
        fields["request_id"] = request_id
    extra = getattr(record, "fields", None)
    if isinstance(extra, dict):
        fields.update(extra)
    fields.update(_exception_fields(record))
    return fields


class JsonFormatter(logging.Formatter):
    """One JSON object per line, printable ASCII only."""

    def format(self, record: logging.LogRecord) -> str:
        line = json.dumps(_record_fields(record), ensure_ascii=True, default=str)
        return line.replace("\x7f", "\\u007f")


class TextFormatter(logging.Formatter):
    """`ts level logger event key=value …` for people reading a terminal; escaped alike."""

    def format(self, record: logging.LogRecord) -> str:
        fields = _record_fields(record)
        head = " ".join(
            str(fields.pop(key)) for key in ("ts", "level", "logger", "event") if key in fields
        )
        tail = " ".join(
            f"{key}={json.dumps(value, ensure_ascii=False, default=str)}"
            for key, value in fields.items()
        )
        return escape_text(f"{head} {tail}" if tail else head)


def logging_config(*, level: LogLevel = "info", log_format: LogFormat = "json") -> dict[str, Any]:
    """The dictConfig of a spamsift process: every line through one formatter, on stderr."""
    formatter = JsonFormatter if log_format == "json" else TextFormatter
    handler = {
        "class": "logging.StreamHandler",
        "formatter": "default",
        "stream": "ext://sys.stderr",
    }
    own = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        # uvicorn writes into log_config["formatters"]["default"|"access"] for --use-colors.
        "formatters": {"default": {"()": formatter}, "access": {"()": formatter}},
        "handlers": {"default": handler},
        "root": {"handlers": ["default"], "level": "WARNING"},
        "loggers": {
            **{name: dict(own) for name in OWN_LOGGERS},
            # uvicorn's access line holds the raw path and query string, which may carry a
            # message id; spamsift's own request line (logger spamsift.access) replaces it.
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "uvicorn.error": {"level": level.upper(), "propagate": True},
            **{name: {"level": "WARNING"} for name in QUIET_LOGGERS},
        },
    }


def uvicorn_log_config(settings: Settings) -> dict[str, Any]:
    """The `log_config` for uvicorn.run from Settings (`log_level`, `log_format`)."""
    return logging_config(level=settings.log_level, log_format=settings.log_format)


def configure_logging(settings: Settings) -> None:
    """Configure this process's logging as uvicorn's workers will be."""
    logging.config.dictConfig(uvicorn_log_config(settings))
