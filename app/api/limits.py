"""Guards in front of the app for what uvicorn and Starlette do not bound by themselves.

- A request body that trickles or stalls is cut off when the whole body has not arrived within
  `receive_timeout_seconds` (slowloris): 408, and the connection is closed.
- A request head over `max_header_bytes` is refused with 431, one with both Transfer-Encoding
  and Content-Length with 400 (request smuggling), and the connection is closed. (`spamsift
  serve` counts the head as it reads it, app/connections.py; this check is for any other
  server the app runs under.)
- Compressed request bodies (`Content-Encoding: gzip`, …) are refused with 415: spamsift never
  decompresses anything a client sends, so no zip bomb can expand inside it.
- A body whose Content-Length is over `max_request_bytes` is refused with 413 and the JSON
  error body before anything reads it.

A chunked body that grows past the limit while it streams is stopped by Starlette's
RequestBodyLimitMiddleware inside this guard (its 413 goes through the error handlers, so it is
JSON too; over Content-Length it would answer plain text, which is why the guard sits outside).
"""

from __future__ import annotations

import asyncio
import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.error_responses import escape_markup


class RequestGuard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        receive_timeout_seconds: float,
        max_request_bytes: int,
        max_header_bytes: int,
    ) -> None:
        self.app = app
        self.receive_timeout_seconds = receive_timeout_seconds
        self.max_request_bytes = max_request_bytes
        self.max_header_bytes = max_header_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head_refusal = _check_head(scope, self.max_header_bytes)
        if head_refusal is not None:
            await _refuse(send, *head_refusal)
            return
        encoding = _header(scope, b"content-encoding")
        if encoding not in (None, b"identity"):
            await _refuse(
                send,
                415,
                "unsupported_media_type",
                "compressed request bodies are not accepted; send it uncompressed",
            )
            return
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_request_bytes:
            await _refuse(
                send,
                413,
                "request_too_large",
                f"the request body is {int(declared)} bytes; the limit is {self.max_request_bytes}",
            )
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.receive_timeout_seconds

        async def receive_before_deadline() -> Message:
            remaining = deadline - loop.time()
            try:
                return await asyncio.wait_for(receive(), timeout=max(remaining, 0.001))
            except TimeoutError:
                raise HTTPException(
                    408,
                    f"the request body did not arrive within {self.receive_timeout_seconds:g} s",
                    headers={"Connection": "close"},
                ) from None

        await self.app(scope, receive_before_deadline, send)


def _check_head(scope: Scope, max_header_bytes: int) -> tuple[int, str, str] | None:
    """Refuse a request head over `max_header_bytes` (431) or framed both ways (400).

    h11 only bounds a head that arrives in pieces; one sent whole (up to uvicorn's 64 KiB
    reads) passes. Transfer-Encoding with Content-Length is how requests are smuggled past a
    proxy that reads the other header: refused, and the connection closed.
    """
    headers = scope["headers"]
    size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
    size += sum(len(name) + len(value) + 4 for name, value in headers)
    if size > max_header_bytes:
        return (
            431,
            "request_header_fields_too_large",
            f"the request head is over {max_header_bytes} bytes",
        )
    names = {bytes(name).lower() for name, _ in headers}
    if b"transfer-encoding" in names and b"content-length" in names:
        return (
            400,
            "bad_request",
            "a request with both Transfer-Encoding and Content-Length is refused",
        )
    return None


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).strip().lower()
    return None


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = escape_markup(json.dumps({"error": {"code": code, "message": message}}).encode())
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
