"""API keys → scopes (SPEC §8): the dependency each route declares, and the failure throttle.

    classify   POST /v1/models/{name}/classify[/batch], POST /classify
    train      POST /v1/models/{name}/train[/batch], /feedback, DELETE …/messages/{id},
               POST /train, POST /feedback
    admin      everything else: models (list, create, read, change, delete), stats, /metrics;
               admin implies the other two

/healthz and /readyz need no key (nor do /docs and /openapi.json: the schema is public).
A key limited to some models may only make requests about one of them: the `{name}` of the
path, or `?model=` (default `default`) of the short forms; listing or creating models and
/metrics need a key for every model. With no key at all (development mode) all is open.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.error_responses import error_responses
from app.errors import Forbidden, TooManyFailures, Unauthorized
from app.service.keys import ApiKey, KeyGuard, Scope

MAX_FAILURES = 10
FAILURE_WINDOW_SECONDS = 60.0
BLOCK_SECONDS = 60.0
MAX_TRACKED_CLIENTS = 10_000

AUTH_ERRORS = error_responses(401, 403, 429)  # the `responses=` of every router needing a key

bearer = HTTPBearer(
    auto_error=False,
    description="An API key made by `spamsift keys create`: `Authorization: Bearer ss_…`",
)


class FailureThrottle:
    """Refuse a client (an IP address) for `block_seconds` after `max_failures` failed
    authentications within `window_seconds`, so keys cannot be guessed at speed.

    Kept in memory per process: with N server processes a client gets up to N * max_failures
    tries per window, which still leaves a 256-bit key unguessable. Behind a reverse proxy the
    client is the proxy unless uvicorn trusts its X-Forwarded-For (`--forwarded-allow-ips`).
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


def install_auth(app: FastAPI, guard: KeyGuard) -> None:
    """Give the app its key guard and failure throttle (one per app, so tests stay apart)."""
    app.state.key_guard = guard
    app.state.failure_throttle = FailureThrottle()


def _authenticate(
    request: Request, credentials: HTTPAuthorizationCredentials | None
) -> ApiKey | None:
    """Return the request's valid key; None in development mode; Unauthorized, TooManyFailures
    otherwise."""
    guard: KeyGuard = request.app.state.key_guard
    if not guard.enforced():
        return None
    throttle: FailureThrottle = request.app.state.failure_throttle
    client = request.client.host if request.client else "unknown"
    blocked_seconds = throttle.blocked_for(client)
    if blocked_seconds > 0:
        raise TooManyFailures(
            "too many failed API keys from this address; wait and retry",
            retry_after_seconds=math.ceil(blocked_seconds),
        )
    if credentials is None:
        raise Unauthorized("this request needs an API key: Authorization: Bearer <key>")
    key = guard.authenticate(credentials.credentials)
    if key is None:
        throttle.record_failure(client)
        raise Unauthorized("unknown or revoked API key")
    request.state.api_key = key
    return key


def any_key() -> Any:
    """A route dependency: the request needs a valid key of any scope and models (it is
    handed to the route); None in development mode."""

    def authenticate(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> ApiKey | None:
        return _authenticate(request, credentials)

    return Depends(authenticate)


def requires(scope: Scope, *, model_query: bool = False) -> Any:
    """A route dependency: the request needs a key with `scope` for its model, taken from the
    path's `{name}` or, with `model_query`, from `?model=` (default `default`)."""

    def authorize(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> None:
        key = _authenticate(request, credentials)
        if key is None:
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

    return Depends(authorize)
