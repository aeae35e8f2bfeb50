"""create_app(settings): builds the FastAPI app; the one place a server worker's rooms are
wired: its Runtime, its background scheduler, its key guard and milter."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from fastapi_offline import FastAPIOffline
from pydantic import TypeAdapter
from starlette.middleware.body_limit import RequestBodyLimitMiddleware

from app import __version__
from app.api.auth import install_auth
from app.api.deps import reject_unknown_query
from app.api.error_responses import ErrorBody, install_error_handlers
from app.api.limits import RequestGuard
from app.api.middleware import DocsPolicy, RequestLog
from app.api.routes import activity, health, keys, messages, models, ui
from app.api.routes import metrics as metrics_routes
from app.api.routes.keys import CreateKeyRequest
from app.api.routes.metrics import install_metrics
from app.api.schemas import (
    ClassifyBatchRequest,
    ClassifyRequest,
    CreateModelRequest,
    FeedbackRequest,
    TrainBatchRequest,
    TrainRequest,
    UpdateModelRequest,
)
from app.config import Settings
from app.milter.server import MilterServer
from app.service.keys import KeyGuard
from app.service.runtime import Runtime
from app.service.scheduler import server_scheduler

DESCRIPTION = """A self-hosted naive Bayes spam filter. Mail servers classify each message;
users' "mark as spam / not spam" clicks train it. Errors are
`{"error": {"code": "...", "message": "..."}}`."""


def create_app(
    settings: Settings | None = None,
    *,
    runtime: Runtime | None = None,
    freeze_startup_objects: bool = False,
) -> FastAPI:
    """The app on `settings`; `freeze_startup_objects` for a server's worker process (see
    `create_worker_app`)."""
    settings = settings or Settings()
    rt = runtime or Runtime(settings)
    key_guard = KeyGuard(rt.db, admin_key=settings.admin_key)
    scheduler = server_scheduler(rt, key_guard)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        key_guard.start()  # seeds SPAMSIFT_ADMIN_KEY; warns loudly in development mode
        scheduler.start()
        milter = MilterServer(rt, settings) if settings.milter_address else None
        if milter is not None:
            await milter.start()  # on this worker's event loop, beside the HTTP API
        if freeze_startup_objects:
            gc.collect()
            gc.freeze()
        try:
            yield
        finally:
            if freeze_startup_objects:
                gc.unfreeze()  # an app made and closed again leaves nothing frozen behind
            if milter is not None:
                await milter.close()
            scheduler.stop()
            rt.close()

    # /docs and /redoc from assets shipped in the fastapi-offline package, not from a CDN: a
    # mail host often has no way out to the internet, and a CDN page stays blank there.
    app = FastAPIOffline(
        title="spamsift",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        # No 307 from /v1/models/ to /v1/models: Starlette builds that Location from the
        # client's Host header, which would send a browser wherever the request named.
        redirect_slashes=False,
        static_url=ui.DOCS_ASSETS_URL,
        redoc_url=None,  # served by app.api.routes.ui, with a Content-Security-Policy
        dependencies=[Depends(reject_unknown_query)],
    )
    # Starlette's request body limit, here rather than as FastAPI(max_body_size=...) so that it
    # sits inside the guard (which answers Content-Length overs with the JSON error body) and
    # the request log (so its 413s are logged, counted and carry X-Request-ID).
    app.add_middleware(RequestBodyLimitMiddleware, max_body_size=settings.max_request_bytes)
    app.add_middleware(
        RequestGuard,
        receive_timeout_seconds=settings.receive_timeout_seconds,
        max_request_bytes=settings.max_request_bytes,
        max_header_bytes=settings.max_header_bytes,
    )
    app.add_middleware(DocsPolicy)
    app.state.runtime = rt
    install_error_handlers(app)
    install_auth(app, key_guard, max_requests_per_key=settings.max_requests_per_key)
    metrics = install_metrics(app, rt)
    # Outermost, so its line and timing cover the guards' refusals too.
    app.add_middleware(RequestLog, metrics=metrics, openapi=lambda: app.openapi())
    # A request is matched against the routes in this order, one after the other: the routes
    # a mail server calls for every message come first (a single classify's HTTP layer cost
    # 15-20 us less than with them after the rest: `app_classify_stubbed_ms` of
    # python -m bench.lab.http_floor).
    app.include_router(messages.router)
    app.include_router(messages.short_forms)
    app.include_router(health.router)
    app.include_router(metrics_routes.router)
    app.include_router(models.router)
    app.include_router(activity.router)
    app.include_router(keys.router)
    app.include_router(ui.router)
    _document_message_bodies(app)
    return app


def create_worker_app() -> FastAPI:
    """The app as each worker process of `spamsift serve` runs it (uvicorn's factory).

    Its start freezes the process's objects out of the garbage collector: the ~120,000
    objects of the interpreter and libraries (FastAPI, pydantic, numpy, SQLAlchemy) live as
    long as the process, and out of the collector's sight a full collection scans only what
    requests made since, in a millisecond or so, instead of stalling every request of the
    worker for 50-250 ms (130 ms for 122,000 objects, measured on a loaded 2-core machine).
    Not for an app made in a process that makes many (a test suite): the collection before
    the freeze scans everything the process holds, each time.
    """
    return create_app(freeze_startup_objects=True)


def _document_message_bodies(app: FastAPI) -> None:
    """Add the JSON schemas that routes reading their body in a dependency (after the API
    key is checked; message/rfc822 too) refer to by name."""
    default_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = default_openapi()
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for model in (
                TrainRequest,
                ClassifyRequest,
                FeedbackRequest,
                TrainBatchRequest,
                ClassifyBatchRequest,
                CreateModelRequest,
                UpdateModelRequest,
                CreateKeyRequest,
                ErrorBody,
            ):
                adapter: TypeAdapter[Any] = TypeAdapter(model)
                definition = adapter.json_schema(ref_template="#/components/schemas/{model}")
                components.update(definition.pop("$defs", {}))
                components.setdefault(model.__name__, definition)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
