"""One log line and one metrics observation per request, with its request id, and the
`X-Content-Type-Options: nosniff` header on every answer.

The line (logger `spamsift.access`, event `request`) holds the request id (a sane
`X-Request-ID` from the client, else a new one; returned in the response header), method,
route template (never the raw path or query string: both may carry message ids), status,
duration, client address, API key id, model, the verdict of a classification and the error
code of a refusal. Never a body, a header value or a message id: the verdict and error code
are read from the JSON answer, and only those fields are kept.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.routes.metrics import HttpMetrics
from app.api.routes.ui import SECURITY_HEADERS
from app.logging_setup import request_id_var
from app.service.models import MODEL_NAME_PATTERN

log = logging.getLogger("spamsift.access")

REQUEST_ID_HEADER = b"x-request-id"
# Every answer: a browser must not read a JSON error echoing client input as HTML or script.
NOSNIFF = (b"x-content-type-options", b"nosniff")
REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+/=-]{0,127}")
MODEL_NAME = re.compile(MODEL_NAME_PATTERN)
SHORT_FORMS = frozenset({"/train", "/classify", "/feedback"})
CLASSIFY_ROUTES = frozenset(
    {"/classify", "/v1/models/{name}/classify", "/v1/models/{name}/classify/batch"}
)  # route templates without convertors, as /docs and /openapi.json name them
PROBES = frozenset({"/healthz", "/readyz", "/metrics"})  # logged at debug when they succeed
MAX_READ_BODY_BYTES = 8 * 1024 * 1024  # answers read for a verdict or an error code
CLIENT_CLOSED_REQUEST = 499  # nginx's status for a request the client gave up on


class RequestLog:
    """ASGI middleware: request id, access log line, HTTP metrics."""

    def __init__(
        self, app: ASGIApp, *, metrics: HttpMetrics, openapi: Callable[[], dict[str, Any]]
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.openapi = openapi
        self._templates: list[tuple[re.Pattern[str], str]] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        request_id = _request_id(scope)
        token = request_id_var.set(request_id)
        status: int | None = None
        kept: list[bytes] | None = None
        kept_bytes = 0
        finished = False

        def finish(final_status: int) -> None:
            nonlocal finished
            if not finished:
                finished = True
                seconds = time.perf_counter() - start
                self._finish(scope, request_id, final_status, seconds, b"".join(kept or []))

        async def send_with_id(message: Message) -> None:
            nonlocal status, kept, kept_bytes
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [
                    (name, value)
                    for name, value in message.get("headers", [])
                    if name.lower() != REQUEST_ID_HEADER
                ]
                headers.append((REQUEST_ID_HEADER, request_id.encode()))
                headers.append(NOSNIFF)
                message = {**message, "headers": headers}
                if _is_json(headers) and (status >= 400 or self._route(scope) in CLASSIFY_ROUTES):
                    kept = []
            elif message["type"] == "http.response.body":
                if kept is not None:
                    body = bytes(message.get("body", b""))
                    kept_bytes += len(body)
                    if kept_bytes > MAX_READ_BODY_BYTES:
                        kept = None
                    else:
                        kept.append(body)
                if not message.get("more_body", False) and status is not None:
                    # Counted and logged before the client has the last byte, so a scrape it
                    # sends next (to any worker) already counts this request.
                    finish(status)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except asyncio.CancelledError:
            status = status or CLIENT_CLOSED_REQUEST
            raise
        except Exception:
            # Before an answer started, the server error middleware outside answers 500; after,
            # the answer stands (Starlette's body limit raises once it has sent its 413).
            status = status or 500
            raise
        finally:
            finish(status or 500)
            request_id_var.reset(token)

    def _route(self, scope: Scope) -> str:
        """The route template the request matched (as /docs shows it), or 'unmatched'."""
        route = scope.get("route")
        if route is not None:
            return str(getattr(route, "path_format", None) or getattr(route, "path", "unmatched"))
        # Refused before routing (413 by Content-Length, 415 for a compressed body): find the
        # template among the documented paths.
        if self._templates is None:
            self._templates = [
                (compile_path(template)[0], template) for template in self.openapi()["paths"]
            ]
        path = str(scope.get("path", ""))
        return next((t for regex, t in self._templates if regex.match(path)), "unmatched")

    def _finish(
        self, scope: Scope, request_id: str, status: int, seconds: float, body: bytes
    ) -> None:
        method = str(scope["method"])
        route = self._route(scope)
        self.metrics.observe(method, route, status, seconds)
        fields: dict[str, Any] = {
            "request_id": request_id,
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": round(seconds * 1000, 3),
        }
        client = scope.get("client")
        if client:
            fields["client"] = str(client[0])
        api_key = scope.get("state", {}).get("api_key")
        if api_key is not None:
            fields["key_id"] = api_key.key_id
        model = _model(scope, route)
        if model is not None:
            fields["model"] = model
        fields.update(_answer_fields(body, status))
        level = logging.DEBUG if route in PROBES and status < 400 else logging.INFO
        if status >= 500:
            level = logging.ERROR
        log.log(level, "request", extra={"fields": fields})


def _request_id(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name.lower() == REQUEST_ID_HEADER:
            candidate = bytes(value).decode("latin-1")
            if REQUEST_ID.fullmatch(candidate):
                return candidate
            break
    return uuid.uuid4().hex


def _is_json(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name.lower() == b"content-type":
            return value.split(b";")[0].strip().lower() == b"application/json"
    return False


def _model(scope: Scope, route: str) -> str | None:
    """The model the request is about: `{name}` of the path, `?model=` of the short forms."""
    if "{name}" in route:
        name = scope.get("path_params", {}).get("name")
    elif route in SHORT_FORMS:
        query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
        name = query.get("model", ["default"])[-1]
    else:
        return None
    return name if isinstance(name, str) and MODEL_NAME.fullmatch(name) else None


def _answer_fields(body: bytes, status: int) -> dict[str, Any]:
    """The verdict(s) of a classification, or the error code of a refusal; nothing else."""
    if not body:
        return {}
    try:
        answer = json.loads(body)
    except ValueError:
        return {}
    if not isinstance(answer, dict):
        return {}
    if status >= 400:
        error = answer.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        return {"error": code} if isinstance(code, str) and code.isidentifier() else {}
    if isinstance(answer.get("verdict"), str):
        return {"verdict": answer["verdict"]}
    results = answer.get("results")
    if isinstance(results, list):
        verdicts = Counter(
            result["verdict"]
            for result in results
            if isinstance(result, dict) and isinstance(result.get("verdict"), str)
        )
        return {"verdicts": dict(verdicts)}
    return {}


DOCS_PAGES = frozenset({"/docs", "/redoc", "/docs/oauth2-redirect"})
INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.DOTALL)


class DocsPolicy:
    """ASGI middleware: /docs and /redoc get a Content-Security-Policy as strict as the
    dashboard's where their pages allow it. Their HTML (from FastAPI) starts Swagger UI with an
    inline script: allowed by its hash, so no other inline script runs. Styles may be inline
    (Redoc and Swagger UI add style elements at run time; a style runs no code); Redoc's search
    runs in a worker made from a blob. Redoc's side menu shows a logo from cdn.redoc.ly:
    img-src keeps the browser from fetching it (the image hides itself when it does not load),
    so reading the reference reaches no other host."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") not in DOCS_PAGES:
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body: list[bytes] = []

        async def send_with_policy(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            body.append(bytes(message.get("body", b"")))
            if message.get("more_body", False):
                return
            page = b"".join(body)
            headers = [*start.get("headers", []), *docs_headers(page)]
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, send_with_policy)


def docs_headers(page: bytes) -> list[tuple[bytes, bytes]]:
    """The security headers of a documentation page, its inline scripts allowed by hash."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(script).digest()).decode() + "'"
        for script in INLINE_SCRIPT.findall(page)
    )
    policy = (
        f"default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ).replace("  ", " ")
    headers = {**SECURITY_HEADERS, "Content-Security-Policy": policy}
    return [(name.lower().encode(), value.encode()) for name, value in headers.items()]
