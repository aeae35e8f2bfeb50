"""Domain errors → HTTP status and the SPEC body {"error": {"code", "message"}}, in one table."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from app import errors
from app.service.models import MODEL_NAME_PATTERN, MODEL_NAME_RULE

STATUS_BY_ERROR: list[tuple[type[errors.SpamsiftError], int]] = [
    (errors.InvalidInput, 422),
    (errors.ModelNotFound, 404),
    (errors.NotFound, 404),
    (errors.Conflict, 409),
    (errors.MessageTooLarge, 413),
    (errors.BatchTooLarge, 413),
    (errors.TooManyNewTokens, 413),
    (errors.Unauthorized, 401),
    (errors.Forbidden, 403),
    (errors.TooManyFailures, 429),
    (errors.TooManyRequests, 429),
    (errors.DatabaseUnavailable, 503),
    (errors.TimeBudgetExceeded, 503),
    (errors.StorageFull, 507),
]


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    error: ErrorDetail


class EscapedJSONResponse(JSONResponse):
    """JSON with `<`, `>` and `&` written as \\u escapes: the same JSON text, but nothing a
    browser sniffing the answer as HTML could run, whatever client input a message echoes."""

    def render(self, content: Any) -> bytes:
        return escape_markup(super().render(content))


def escape_markup(body: bytes) -> bytes:
    """Escape `<`, `>`, `&` in a JSON text (they occur only inside its strings)."""
    return body.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")


def _response(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    return EscapedJSONResponse(
        status_code=status,
        content={"error": {"code": code, "message": message}},
        headers=headers or None,
    )


def status_for(error: errors.SpamsiftError) -> int:
    for error_class, status in STATUS_BY_ERROR:
        if isinstance(error, error_class):
            return status
    return 500


def _headers_for(error: errors.SpamsiftError, status: int) -> dict[str, str]:
    if isinstance(error, errors.Unauthorized):
        return {"WWW-Authenticate": "Bearer"}
    if isinstance(error, errors.TooManyFailures | errors.TooManyRequests):
        return {"Retry-After": str(error.retry_after_seconds)}
    return {"Retry-After": "1"} if status == 503 else {}


# Patterns said in words: a regular expression is no answer to give a person.
PATTERN_RULES = {MODEL_NAME_PATTERN: f"a model name is {MODEL_NAME_RULE}"}
MAX_SHOWN_INPUT_CHARS = 80


def describe_validation_error(error: dict[str, Any]) -> str:
    """One of pydantic's validation errors as a person reads it: where, what is expected, and
    what came (`path.name: a model name is 1-64 characters: …; got 'Bad Name'`)."""
    location = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
    kind = error.get("type")
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    if kind == "missing":
        message = "required"
    elif kind == "string_pattern_mismatch":
        pattern = (error.get("ctx") or {}).get("pattern")
        message = PATTERN_RULES.get(str(pattern), "not of the expected form")
    given = error.get("input")
    if kind != "missing" and isinstance(given, str | int | float) and not isinstance(given, bool):
        shown = repr(given)
        if len(shown) <= MAX_SHOWN_INPUT_CHARS and shown not in message:
            message = f"{message}; got {shown}"
    return f"{location}: {message}" if location else message


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(errors.SpamsiftError)
    async def spamsift_error(_: Request, error: errors.SpamsiftError) -> JSONResponse:
        status = status_for(error)
        headers = _headers_for(error, status)
        return _response(status, error.code, error.message, **headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, error: RequestValidationError) -> JSONResponse:
        details = error.errors()
        message = "; ".join(describe_validation_error(detail) for detail in details[:5])
        message = message or "invalid request"
        return _response(422, "invalid_request", message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        if _undecodable_json(error):
            return _response(
                422, "invalid_request", "Invalid JSON: not UTF-8, or nested too deeply"
            )
        code = {
            404: "not_found",
            405: "method_not_allowed",
            413: "request_too_large",
            415: "unsupported_media_type",
            401: "unauthorized",
            403: "forbidden",
        }.get(error.status_code, "http_error")
        return _response(error.status_code, code, str(error.detail), **(error.headers or {}))


def _undecodable_json(error: StarletteHTTPException) -> bool:
    """FastAPI answers a JSON body it cannot decode at all (not UTF-8, nested past the
    recursion limit) with 400, raised from the decoding error. Every other malformed JSON body
    is 422 invalid_request, and so is this one where a route parses its body itself (found by
    schemathesis: the same bytes got 422 from /train and 400 from /train/batch)."""
    return error.status_code == 400 and isinstance(error.__cause__, ValueError | RecursionError)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of a route: each listed status documented with the error body."""
    texts = {
        401: "Missing, unknown or revoked API key",
        403: "The API key lacks the scope, or may not use this model",
        404: "Unknown model or message",
        409: "Conflict: exists already, or a class has no trained message",
        413: "Message, batch or request too large, or more new tokens than a request may add",
        415: "Unsupported media type",
        422: "Invalid request or model option",
        429: "Too many failed API keys (from this address, for this key id, or in all), or "
        "a non-admin key with as many requests in progress as it may have; retry after "
        "Retry-After seconds",
        503: "Database unavailable; retry (Retry-After)",
        507: "The database's storage is full; nothing was written",
    }
    return {status: {"model": ErrorBody, "description": texts[status]} for status in statuses}
