"""API keys → scopes (SPEC §8): the dependency each route declares, and the failure throttle.

    classify   POST /v1/models/{name}/classify[/batch], POST /classify
    train      POST /v1/models/{name}/train[/batch], /feedback, DELETE …/messages/{id},
               POST /train, POST /feedback
    admin      everything else: models (list, create, read, change, delete), stats, /metrics;
               admin implies the other two

/healthz and /readyz need no key (nor do /docs and /openapi.json: the schema is public).
In development mode a request from this machine must name it (`Host: localhost`, 127.0.0.1,
[::1], any port): a web page whose own name is made to resolve to 127.0.0.1 (DNS rebinding)
cannot drive a server with no key from the browser of someone on this machine.
A key limited to some models may only make requests about one of them: the `{name}` of the
path, or `?model=` (default `default`) of the short forms; listing or creating models and
/metrics need a key for every model. With no key at all (development mode) all is open.

All of it is decided from the request head: each route lists `requires(...)` before the
dependency that reads its body, so a refused request costs no body read (app/api/deps.py).

A tenant's key (limited to models, not admin) may have at most SPAMSIFT_MAX_REQUESTS_PER_KEY
requests in progress in one process (`KeyRequests`); one more is refused at once with 429 and
Retry-After, so one tenant's clients cannot take the server from the others. Keys for every
model are the operator's (a mail server's) and are not limited.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from app.api.error_responses import error_responses
from app.errors import Forbidden, TooManyFailures, TooManyRequests, Unauthorized
from app.service.keys import MAX_KEY_CHARS, ApiKey, KeyGuard, Scope, key_id_of
from app.serving import is_loopback

MAX_FAILURES = 10  # per client address, and per key id, within the window
MAX_PROCESS_FAILURES = 1_000  # by all clients of this process together, within the window
FAILURE_WINDOW_SECONDS = 60.0
BLOCK_SECONDS = 60.0
MAX_TRACKED_CLIENTS = 10_000
PROCESS = "*"  # the one subject of the process-wide throttle
DEVELOPMENT_KEY_WARNING_SECONDS = 60.0

log = logging.getLogger(__name__)

AUTH_ERRORS = error_responses(401, 403, 429)  # the `responses=` of every router needing a key

bearer = HTTPBearer(
    auto_error=False,
    description="An API key made by `spamsift keys create`: `Authorization: Bearer ss_…`",
)


class FailureThrottle:
    """Refuse a subject (a client address, a key id, the process) for `block_seconds` after
    `max_failures` failed authentications within `window_seconds`, so keys cannot be guessed
    at speed. Only failed keys are refused: a valid key is never throttled.

    Kept in memory per process: with N server processes a client gets up to N * max_failures
    tries per window, which still leaves a 256-bit key unguessable. Behind a reverse proxy the
    client is the proxy unless SPAMSIFT_TRUSTED_PROXIES names it (then its X-Forwarded-For).
    """

    def __init__(
        self,
        *,
        max_failures: int = MAX_FAILURES,
        window_seconds: float = FAILURE_WINDOW_SECONDS,
        block_seconds: float = BLOCK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures = max_failures
        self.window_seconds = window_seconds
        self.block_seconds = block_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: dict[str, deque[float]] = {}
        self._blocked_until: dict[str, float] = {}

    def blocked_for(self, client: str) -> float:
        """Return how many seconds `client` stays refused (0 when it is not)."""
        with self._lock:
            until = self._blocked_until.get(client)
            if until is None:
                return 0.0
            left = until - self._clock()
            if left <= 0:
                del self._blocked_until[client]
                return 0.0
            return left

    def record_failure(self, client: str) -> None:
        now = self._clock()
        with self._lock:
            if len(self._failures) >= MAX_TRACKED_CLIENTS and client not in self._failures:
                self._forget_stale(now)
            failures = self._failures.setdefault(client, deque())
            failures.append(now)
            while failures and failures[0] <= now - self.window_seconds:
                failures.popleft()
            if len(failures) >= self.max_failures:
                self._blocked_until[client] = now + self.block_seconds
                del self._failures[client]

    def _forget_stale(self, now: float) -> None:
        """Bound the memory a flood of addresses can take: drop quiet clients, then the oldest."""
        for client in [
            c for c, times in self._failures.items() if times[-1] <= now - self.window_seconds
        ]:
            del self._failures[client]
        for client in [c for c, until in self._blocked_until.items() if until <= now]:
            del self._blocked_until[client]
        while len(self._failures) >= MAX_TRACKED_CLIENTS:
            del self._failures[next(iter(self._failures))]


class FailedKeys:
    """The throttles of failed keys: per client address, per key id (guessing one key's
    secret from many addresses) and for the whole process (guessing from many addresses at
    once, which per-address counting alone would miss)."""

    def __init__(
        self,
        *,
        max_failures: int | None = None,
        max_process_failures: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        per_subject = MAX_FAILURES if max_failures is None else max_failures
        in_all = MAX_PROCESS_FAILURES if max_process_failures is None else max_process_failures
        self.by_client = FailureThrottle(max_failures=per_subject, clock=clock)
        self.by_key_id = FailureThrottle(max_failures=per_subject, clock=clock)
        self.process = FailureThrottle(max_failures=in_all, clock=clock)

    def blocked_for(self, *, client: str, key_id: str) -> float:
        """Return how many seconds a failed key from `client` for `key_id` stays refused."""
        return max(
            self.by_client.blocked_for(client),
            self.by_key_id.blocked_for(key_id),
            self.process.blocked_for(PROCESS),
        )

    def record(self, *, client: str, key_id: str) -> None:
        self.by_client.record_failure(client)
        self.by_key_id.record_failure(key_id)
        self.process.record_failure(PROCESS)


class DevelopmentKeyWarning:
    """In development mode a key means nothing: say so when a request carries one, at most
    once a minute, so a client that believes itself authenticated is noticed."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._warned_at = -math.inf

    def saw_key(self) -> None:
        now = self._clock()
        with self._lock:
            if now - self._warned_at < DEVELOPMENT_KEY_WARNING_SECONDS:
                return
            self._warned_at = now
        log.warning(
            "a request carries an API key, but no key exists (development mode): the key is "
            "ignored and every request is served; create keys to require them"
        )


class KeyRequests:
    """The requests each API key has in progress in this process, at most `limit` (0: no
    limit). Counted in memory: with N server processes a key may have N times as many."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._in_progress: dict[str, int] = {}

    def enter(self, key_id: str) -> bool:
        """Count one more request of `key_id`; False (nothing counted) when it has `limit`."""
        with self._lock:
            count = self._in_progress.get(key_id, 0)
            if self.limit and count >= self.limit:
                return False
            self._in_progress[key_id] = count + 1
            return True

    def leave(self, key_id: str) -> None:
        with self._lock:
            count = self._in_progress.pop(key_id) - 1
            if count:
                self._in_progress[key_id] = count


def install_auth(app: FastAPI, guard: KeyGuard, *, max_requests_per_key: int = 0) -> None:
    """Give the app its key guard, failure throttles and per-key request counts (one per
    app, so tests stay apart)."""
    app.state.key_guard = guard
    app.state.failed_keys = FailedKeys()
    app.state.development_key_warning = DevelopmentKeyWarning()
    app.state.key_requests = KeyRequests(max_requests_per_key)


def _authenticate(
    request: Request, credentials: HTTPAuthorizationCredentials | None
) -> ApiKey | None:
    """Return the request's valid key; None in development mode; Unauthorized, TooManyFailures
    otherwise. A valid key is never throttled: only failed keys count and are refused."""
    guard: KeyGuard = request.app.state.key_guard
    if not guard.enforced():
        check_development_host(request)
        if credentials is not None:
            request.app.state.development_key_warning.saw_key()
        return None
    if credentials is None:
        raise Unauthorized("this request needs an API key: Authorization: Bearer <key>")
    key = guard.authenticate(credentials.credentials)
    if key is None:
        failed_keys: FailedKeys = request.app.state.failed_keys
        client = request.client.host if request.client else "unknown"
        key_id = key_id_of(credentials.credentials[:MAX_KEY_CHARS])
        blocked_seconds = failed_keys.blocked_for(client=client, key_id=key_id)
        if blocked_seconds > 0:
            raise TooManyFailures(
                "too many failed API keys; wait and retry",
                retry_after_seconds=math.ceil(blocked_seconds),
            )
        failed_keys.record(client=client, key_id=key_id)
        raise Unauthorized("unknown or revoked API key")
    request.state.api_key = key
    return key


def check_development_host(request: Request) -> None:
    """Forbidden for a request from this machine naming another host, in development mode."""
    client = request.client.host if request.client else ""
    if not is_loopback(client):
        return  # beyond this machine: --allow-no-authentication opened the server to it
    host = request.headers.get("host", "")
    name = _host_name(host).lower().rstrip(".")
    if is_loopback(name) or name.endswith(".localhost"):
        return
    raise Forbidden(
        f"with no API key (development mode) this server answers requests naming this machine "
        f"only (localhost, 127.0.0.1, [::1]); this one names {host[:100]!r}. Create an API "
        "key to serve other names"
    )


def _host_name(host: str) -> str:
    """A Host header without its port: `[::1]:8000` is `::1`, `localhost:8000` `localhost`."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    name, _, port = host.rpartition(":")
    return name if name and port.isdigit() else host


async def _authenticate_on_loop(
    request: Request, credentials: HTTPAuthorizationCredentials | None
) -> ApiKey | None:
    """`_authenticate` on the event loop while the keys in memory are fresh (no I/O: a hash
    and a dictionary lookup), in the thread pool when the database must be read first. A sync
    dependency would take a hop to the thread pool on every request."""
    guard: KeyGuard = request.app.state.key_guard
    if guard.fresh():
        return _authenticate(request, credentials)
    return await run_in_threadpool(_authenticate, request, credentials)


def any_key() -> Any:
    """A route dependency: the request needs a valid key of any scope and models (it is
    handed to the route); None in development mode."""

    async def authenticate(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> ApiKey | None:
        return await _authenticate_on_loop(request, credentials)

    return Depends(authenticate)


def request_key(request: Request) -> ApiKey | None:
    """The key the request was authenticated with (None in development mode)."""
    key: ApiKey | None = getattr(request.state, "api_key", None)
    return key


def may_read(request: Request) -> Callable[[str], bool]:
    """Which models the request's key may read, by name: a model outside its reach is, to
    it, a model that does not exist (app/service/models.py `MayRead`)."""
    key = request_key(request)
    if key is None or key.models is None:
        return lambda _: True
    return key.may_use


def requires(scope: Scope, *, model_query: bool = False) -> Any:
    """A route dependency: the request needs a key with `scope` for its model, taken from the
    path's `{name}` or, with `model_query`, from `?model=` (default `default`)."""

    async def authorize(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> AsyncIterator[None]:
        key = await _authenticate_on_loop(request, credentials)
        if key is None:
            yield
            return
        if not key.allows(scope):
            raise Forbidden(f"this API key lacks the {scope!r} scope")
        if model_query:
            model_name: str | None = request.query_params.get("model", "default")
        else:
            model_name = request.path_params.get("name")
        if not key.may_use(model_name):
            if model_name is None:
                raise Forbidden("this API key is limited to some models; this request is not")
            raise Forbidden(f"this API key may not use the model {model_name!r}")
        if "admin" in key.scopes or key.models is None:  # the operator's keys
            yield
            return
        requests: KeyRequests = request.app.state.key_requests
        if not requests.enter(key.key_id):
            raise TooManyRequests(
                f"this API key has {requests.limit} requests in progress, as many as it may "
                "(SPAMSIFT_MAX_REQUESTS_PER_KEY); retry when one has been answered",
                retry_after_seconds=1,
            )
        try:
            yield
        finally:
            requests.leave(key.key_id)

    return Depends(authorize)
