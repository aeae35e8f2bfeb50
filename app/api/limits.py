"""Guards in front of the app for what uvicorn and Starlette do not bound by themselves.

- A request body that trickles or stalls is cut off when the whole body has not arrived within
  `receive_timeout_seconds` (slowloris): 408, and the connection is closed.
- Compressed request bodies (`Content-Encoding: gzip`, …) are refused with 415: spamsift never
  decompresses anything a client sends, so no zip bomb can expand inside it.

The size limit itself is Starlette's `max_body_size` (413 before a body over the limit is read,
by Content-Length or while streaming chunked).
"""

from __future__ import annotations

import asyncio
import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class RequestGuard:
    def __init__(self, app: ASGIApp, *, receive_timeout_seconds: float) -> None:
        self.app = app
        self.receive_timeout_seconds = receive_timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
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


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).strip().lower()
    return None


async def _refuse(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
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
