"""Connection limits of `spamsift serve`: what uvicorn's HTTP/1.1 server does not bound itself.

uvicorn with the httptools parser, as it came (measured against `spamsift serve`):

- a connection that never sends a byte is kept forever (the keep-alive timer starts only after
  a first answer): 1,100 such sockets used up the 1,024 descriptors of a systemd service, and
  every new client was refused;
- a request head is buffered whole before anything looks at its size (httptools has no limit):
  one 32 MB header held every client up for 4 s, and ten unfinished 30 MB ones grew the
  process to 406 MB, for as long as their clients kept the connections open;
- an answer that closes the connection before the request body was read (413 by
  Content-Length, or any `Connection: close`) was followed by close() at once, and the client,
  still sending, got a TCP reset instead of the answer.

`LimitedHttpToolsProtocol` keeps uvicorn's protocol (and its speed) and adds, per process:

1. at most `max_connections` open connections, and `max_connections_per_client` from one
   address (the trusted proxies excepted, whose clients all share their address); a connection
   beyond either gets a 503 and is closed at once;
2. a header timeout: the request line and headers must arrive within `header_timeout_seconds`
   of the connection (of their first byte on a kept-alive one), else 408 and close;
3. the head size counted as it is read: past `max_header_bytes` without its blank line, 431
   and close, having fed the parser at most that many bytes;
4. with several workers, keep-alive connections spread over them (app/balance.py): each
   request and each connection's end is counted in this worker's `WorkerLoads`, and a worker
   serving `MARGIN` more connections than another answers with `Connection: close`;
5. lingering close, as nginx does: when the server closes a connection whose request has not
   all arrived, it sends its answer, stops writing (FIN), and reads and throws away what the
   client still sends, for at most `lingering_close_seconds` and `LINGERING_CLOSE_BYTES`,
   before it closes. A client that sends its whole body before it reads (Python's http.client,
   curl without Expect) then reads the answer instead of a reset.

A uvicorn protocol subclass rather than another server or a proxy: it keeps httptools'
throughput (see docs/performance.md, "Connection limits") and needs nothing in front.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import weakref
from collections import Counter
from dataclasses import dataclass
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.balance import SlotsTaken, WorkerLoads, loads_from_environment
from app.config import Settings


@dataclass(frozen=True)
class ConnectionLimits:
    """The numbers a server process bounds its connections by (see the module docstring)."""

    max_connections: int
    max_connections_per_client: int
    header_timeout_seconds: float
    max_header_bytes: int
    lingering_close_seconds: float
    uncapped_clients: tuple[str, ...] = ()  # networks (the trusted proxies)

    @classmethod
    def from_settings(cls, settings: Settings, *, max_connections: int) -> ConnectionLimits:
        """The limits of `settings`, with `max_connections` as many as the process can keep."""
        return cls(
            max_connections=max_connections,
            max_connections_per_client=settings.max_connections_per_client,
            header_timeout_seconds=settings.header_timeout_seconds,
            max_header_bytes=settings.max_header_bytes,
            lingering_close_seconds=settings.lingering_close_seconds,
            uncapped_clients=tuple(filter(None, settings.trusted_proxies.split(","))),
        )

    def capped(self, address: str) -> bool:
        """Tell whether connections from `address` count against the per-client cap."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return True
        return not any(ip in ipaddress.ip_network(n, strict=False) for n in self.uncapped_clients)


# Bytes read and thrown away after such an answer: enough for a client to finish sending a
# body somewhat over the largest accepted (64 MiB by default) and read its 413; reading them
# costs no memory and ~0.1 s of CPU (discarded 64 KiB reads).
LINGERING_CLOSE_BYTES = 256 * 1024 * 1024
REFUSAL_LOG_SECONDS = 10.0  # refusals are logged at most this often, counted in between


class _Clients:
    """One server's open connections per client address, and its refusals for the log."""

    def __init__(self) -> None:
        self.connections: Counter[str] = Counter()
        self.refused = 0
        self.logged_at = -REFUSAL_LOG_SECONDS

    def refused_one(self, logger: logging.Logger, reason: str, now: float) -> None:
        """Log a refusal, or count it for the next line: a flood of them must not flood
        the log."""
        self.refused += 1
        if now - self.logged_at >= REFUSAL_LOG_SECONDS:
            logger.warning(
                "%d connection%s refused in the last %g s, the latest: %s",
                self.refused,
                "" if self.refused == 1 else "s",
                REFUSAL_LOG_SECONDS,
                reason,
            )
            self.refused = 0
            self.logged_at = now


log = logging.getLogger("spamsift.serve")

# Per server (a process runs one; tests may run several).
_clients: weakref.WeakKeyDictionary[ServerState, _Clients] = weakref.WeakKeyDictionary()
_loads: weakref.WeakKeyDictionary[ServerState, WorkerLoads | None] = weakref.WeakKeyDictionary()


def _worker_loads(server_state: ServerState) -> WorkerLoads | None:
    """The server's slot among the workers of `spamsift serve`, claimed by its first
    connection and given back when the server is gone; None with one worker, or while every
    slot is held: uvicorn starts a worker's replacement (SIGHUP) before it stops the worker,
    and a worker added by SIGTTIN has none. Such a worker serves without balancing and tries
    again at its next connection. A directory it cannot use (a cleaner emptied /tmp) leaves
    it without balancing, said once: never a reason to refuse a connection."""
    if server_state in _loads:
        return _loads[server_state]
    try:
        loads = loads_from_environment()
    except SlotsTaken:
        return None
    except OSError as error:
        log.warning("this worker does not balance connections with the others: %s", error)
        loads = None
    if loads is not None:
        weakref.finalize(server_state, loads.close)
    _loads[server_state] = loads
    return loads


def error_answer(status: int, reason: str, code: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, with spamsift's JSON error body."""
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nx-content-type-options: nosniff\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class _Transport:
    """The connection's transport as uvicorn's protocol sees it: close() lingers while the
    request is still arriving (see the module docstring, 5)."""

    def __init__(self, transport: asyncio.Transport, protocol: LimitedHttpToolsProtocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._closing = False

    def close(self) -> None:
        self._closing = True
        self._protocol.close_connection()

    def is_closing(self) -> bool:
        return self._closing or self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the connection limits of the module docstring."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        limits: ConnectionLimits,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = limits
        self.clients = _clients.setdefault(server_state, _Clients())
        self.loads = _worker_loads(server_state)
        self.counted_as: str | None = None
        self.raw_transport: asyncio.Transport | None = None
        self.in_head = True  # the request line and headers are not complete yet
        self.head_bytes = 0
        self.head_timer: asyncio.TimerHandle | None = None
        self.lingering = False
        self.lingered_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.raw_transport = transport
        super().connection_made(_Transport(transport, self))  # type: ignore[arg-type]
        address = self.client[0] if self.client else ""
        limits = self.limits
        open_here = self.clients.connections
        over_total = len(self.connections) > limits.max_connections
        if over_total or (
            limits.capped(address) and open_here[address] >= limits.max_connections_per_client
        ):
            reason = (
                f"{limits.max_connections} connections open"
                if over_total
                else f"{limits.max_connections_per_client} connections open from {address}"
            )
            self.clients.refused_one(self.logger, reason, self.loop.time())
            transport.write(
                error_answer(
                    503,
                    "Service Unavailable",
                    "too_many_connections",
                    "too many open connections; try again later",
                )
            )
            transport.close()
            return
        self.counted_as = address
        open_here[address] += 1
        self._start_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.loads is not None:
            self.loads.ended(self)
        if self.counted_as is not None:
            open_here = self.clients.connections
            open_here[self.counted_as] -= 1
            if open_here[self.counted_as] <= 0:
                del open_here[self.counted_as]
            self.counted_as = None
        self._stop_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            self.lingered_bytes += len(data)
            if self.lingered_bytes > LINGERING_CLOSE_BYTES:
                self._close_now()
            return
        if not self.in_head:
            super().data_received(data)
            return
        if self.head_timer is None:  # the first byte of a kept-alive connection's next head
            self._start_head_timer()
        room = self.limits.max_header_bytes - self.head_bytes
        if len(data) <= room:
            self.head_bytes += len(data)
            super().data_received(data)
            return
        # Feed the parser up to the limit; if the head has not ended by then, refuse it.
        self.head_bytes += room
        super().data_received(data[:room])
        if self.transport.is_closing():
            return
        if self.in_head:
            self._refuse(
                431,
                "Request Header Fields Too Large",
                "request_header_fields_too_large",
                f"the request head is over {self.limits.max_header_bytes} bytes",
            )
            return
        self.data_received(data[room:])

    def on_headers_complete(self) -> None:
        self.in_head = False
        self._stop_head_timer()
        super().on_headers_complete()
        loads = self.loads
        if loads is not None and self.cycle is not None:
            loads.saw(self)
            if loads.busier_than_another():
                # The cycle's task has not started: its answer carries `Connection: close`.
                loads.ended(self)
                self.cycle.keep_alive = False

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self.in_head = True  # whatever comes next is the next request's head
        self.head_bytes = 0

    def close_connection(self) -> None:
        """Close now if the request has all arrived; else linger (module docstring, 5)."""
        if self.lingering:
            return
        transport = self.raw_transport
        assert transport is not None
        if transport.is_closing():
            return
        if self.in_head:
            request_arriving = self.head_bytes > 0
        else:
            request_arriving = self.cycle is not None and self.cycle.more_body
        if not request_arriving or self.limits.lingering_close_seconds <= 0:
            transport.close()
            return
        self.lingering = True
        self._stop_head_timer()
        self._unset_keepalive_if_required()
        self.lingered_bytes = 0
        self.flow.resume_reading()
        if transport.can_write_eof():
            transport.write_eof()  # after what is buffered: the answer, then FIN
        self.loop.call_later(self.limits.lingering_close_seconds, self._close_now)

    def shutdown(self) -> None:
        """The server stops: close idle connections now, not after lingering."""
        if self.cycle is None or self.cycle.response_complete:
            self._close_now()
        else:
            self.cycle.keep_alive = False

    def eof_received(self) -> None:
        if self.lingering:
            self._close_now()  # the client has sent all it will: done

    def _close_now(self) -> None:
        transport = self.raw_transport
        if transport is not None and not transport.is_closing():
            transport.close()

    def _refuse(
        self, status: int, reason: str, code: str, message: str, *, linger: bool = True
    ) -> None:
        where = self.client[0] if self.client else "?"
        self.clients.refused_one(self.logger, f"{status} for {where}: {message}", self.loop.time())
        self.transport.write(error_answer(status, reason, code, message))
        if linger:
            self.transport.close()
        else:
            self._close_now()

    def _start_head_timer(self) -> None:
        self._stop_head_timer()
        self.head_timer = self.loop.call_later(
            self.limits.header_timeout_seconds, self._head_timed_out
        )

    def _stop_head_timer(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_timed_out(self) -> None:
        self.head_timer = None
        if self.transport.is_closing() or not self.in_head:
            return
        if self.head_bytes == 0:  # nothing asked: nothing to answer
            self._close_now()
            return
        self._refuse(
            408,
            "Request Timeout",
            "request_timeout",
            f"the request head did not arrive within {self.limits.header_timeout_seconds:g} s",
            linger=False,  # a client this slow is not kept any longer to read its answer
        )
