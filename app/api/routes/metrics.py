"""Prometheus metrics: requests by route and status, and their latency (SPEC §6 `/metrics`).

Each app has its own registry, so several apps in one process (tests) never share counters.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

from app.api.auth import AUTH_ERRORS, requires

router = APIRouter(tags=["health"], dependencies=[requires("admin")], responses=AUTH_ERRORS)


class HttpMetrics:
    """The counters of one app."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "spamsift_http_requests",
            "HTTP requests answered, by method, route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "spamsift_http_request_seconds",
            "Time to answer an HTTP request, by method and route template",
            ["method", "route"],
            registry=self.registry,
        )


def install_metrics(app: FastAPI) -> None:
    """Count every request by its route template (never its path: names and ids stay out)."""
    metrics = HttpMetrics()
    app.state.metrics = metrics

    @app.middleware("http")
    async def count_requests(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        start = time.perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        metrics.requests.labels(request.method, route, str(response.status_code)).inc()
        metrics.seconds.labels(request.method, route).observe(time.perf_counter() - start)
        return response

    app.include_router(router)


@router.get("/metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Prometheus exposition: request counts and latencies of this process."""
    registry: CollectorRegistry = request.app.state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
