"""Prometheus metrics (SPEC §6 `/metrics`), in two kinds.

Of this server (its processes): HTTP requests by method, route template and status, their
latency, and database errors. Each app has its own registry, so several apps in one process
(tests) never share counters. With several worker processes (`spamsift serve --workers N`)
prometheus-client's multiprocess mode sums every worker's counters in whichever worker
answers the scrape: `PROMETHEUS_MULTIPROC_DIR` names the directory where each worker keeps
its values (`spamsift serve` makes and empties one).

Of each model, read at scrape time by a collector without loading any model: vocabulary
size, generation and trained messages from the database's running totals, and all-time
activity (classifications by verdict, trainings, feedback, corrections, forgotten messages)
from the database counters that /stats sums. These count every process and host sharing the
database: aggregate them across several spamsift instances with max(), not sum().

Of the process answering the scrape: the models it holds in memory, their estimated bytes
against the budget (`SPAMSIFT_LIVE_MODELS_MAX_MB`), models loaded and evicted, and the
classification records it buffers for the database.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Iterator
from typing import get_args

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from starlette.responses import Response as StarletteResponse

from app.api.auth import AUTH_ERRORS, requires
from app.errors import DatabaseUnavailable, SpamsiftError
from app.service.database import database_condition
from app.service.model_figures import (
    DatabaseCondition,
    Event,
    HeldFigures,
    ModelFigures,
    read_held_figures,
    read_model_figures,
    verdict_event,
)
from app.service.runtime import Runtime

log = logging.getLogger(__name__)

router = APIRouter(tags=["health"], dependencies=[requires("admin")], responses=AUTH_ERRORS)

MULTIPROCESS_DIR_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# Methods are counted by name only when they are HTTP's own: a client cannot grow the label set.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class HttpMetrics:
    """The counters of one app, and the registry /metrics exposes."""

    def __init__(self, runtime: Runtime, *, multiprocess_dir: str | None = None) -> None:
        self.multiprocess_dir = multiprocess_dir
        self.registry = CollectorRegistry()
        # First, so that a database error it meets is in the same scrape's counters.
        self.models = ModelCollector(runtime, self)
        self.registry.register(self.models)
        self.requests = Counter(
            "spamsift_http_requests",
            "HTTP requests answered, by method, route template and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "spamsift_http_request_duration_seconds",
            "Time from the request's arrival to the end of its answer, by method and route",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.database_errors = Counter(
            "spamsift_database_errors",
            "Requests that failed because the database was unreachable or stayed locked (503), "
            "by route template; route /metrics counts failed reads of the model figures",
            ["route"],
            registry=self.registry,
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        method = method if method in KNOWN_METHODS else "other"
        self.requests.labels(method, route, str(status)).inc()
        self.duration.labels(method, route).observe(seconds)

    def exposition(self) -> bytes:
        """The Prometheus text of this server: all its workers' counters in multiprocess mode."""
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        registry.register(self.models)
        MultiProcessCollector(registry, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return generate_latest(registry)


class ModelCollector(Collector):
    """Per-model figures, read when scraped. While the database does not answer, the figures
    last read are exposed with their age (none if never read), and the database's condition as
    this process last met it, so monitoring sees the incident rather than going blind."""

    def __init__(self, runtime: Runtime, metrics: HttpMetrics) -> None:
        self.runtime = runtime
        self.metrics = metrics
        self._kept: tuple[float, list[ModelFigures]] | None = None  # (read at, figures)

    def describe(self) -> Iterator[Metric]:
        return iter(_model_families([]) + _held_families(None, 0, 0) + _database_families(None))

    def collect(self) -> Iterator[Metric]:
        try:
            self._kept = (time.time(), read_model_figures(self.runtime))
        except DatabaseUnavailable:
            self.metrics.database_errors.labels("/metrics").inc()
            log.warning("/metrics: the database is unavailable; model figures last read shown")
        held = _held_families(
            read_held_figures(self.runtime),
            self.runtime.log.buffered(),
            self.runtime.log.dropped,
        )
        figures = [] if self._kept is None else self._kept[1]
        age = None if self._kept is None else time.time() - self._kept[0]
        database = _database_families((database_condition(self.runtime), age))
        return iter(_model_families(figures) + held + database)


def _database_families(state: tuple[str, float | None] | None) -> list[Metric]:
    condition = GaugeMetricFamily(
        "spamsift_database_condition",
        "1 for what this process last met of the database: ok, unavailable (unreachable or "
        "locked beyond the budget) or storage_full (writes refused; reads go on)",
        labels=["condition"],
    )
    age = GaugeMetricFamily(
        "spamsift_model_figures_age_seconds",
        "Seconds since the per-model figures of this scrape were read from the database "
        "(about 0; more while it is unavailable)",
        labels=[],
    )
    if state is not None:
        for name in get_args(DatabaseCondition):
            condition.add_metric([name], float(name == state[0]))
        if state[1] is not None:
            age.add_metric([], round(state[1], 3))
    return [condition, age]


def _held_families(held: HeldFigures | None, buffered: int, dropped: int) -> list[Metric]:
    models = GaugeMetricFamily(
        "spamsift_live_models", "Models this process holds in memory", labels=[]
    )
    held_bytes = GaugeMetricFamily(
        "spamsift_live_model_bytes",
        "Estimated memory of the models this process holds",
        labels=[],
    )
    budget = GaugeMetricFamily(
        "spamsift_live_model_budget_bytes",
        "Memory budget of the models one process holds (0: none)",
        labels=[],
    )
    loads = CounterMetricFamily(
        "spamsift_live_model_loads", "Models this process read into memory", labels=[]
    )
    evictions = CounterMetricFamily(
        "spamsift_live_model_evictions",
        "Models this process dropped from memory to stay within the budget",
        labels=[],
    )
    records = GaugeMetricFamily(
        "spamsift_buffered_classification_records",
        "Classification records this process holds for the database",
        labels=[],
    )
    lost = CounterMetricFamily(
        "spamsift_dropped_classification_records",
        "Classification records dropped by the per-process cap while the database was down",
        labels=[],
    )
    if held is not None:
        models.add_metric([], held.models)
        held_bytes.add_metric([], held.bytes)
        budget.add_metric([], held.max_bytes)
        loads.add_metric([], held.loads)
        evictions.add_metric([], held.evictions)
        records.add_metric([], buffered)
        lost.add_metric([], dropped)
    return [models, held_bytes, budget, loads, evictions, records, lost]


def _model_families(figures: list[ModelFigures]) -> list[Metric]:
    generation = GaugeMetricFamily(
        "spamsift_model_generation",
        "Generation of the model (bumped by every write to it)",
        labels=["model"],
    )
    vocabulary = GaugeMetricFamily(
        "spamsift_model_vocabulary_tokens",
        "Distinct tokens counted in at least one trained message",
        labels=["model"],
    )
    messages = GaugeMetricFamily(
        "spamsift_model_trained_messages",
        "Trained messages by class",
        labels=["model", "class"],
    )
    classifications = CounterMetricFamily(
        "spamsift_classifications",
        "Messages classified, by verdict (all processes sharing the database)",
        labels=["model", "verdict"],
    )
    trainings = CounterMetricFamily(
        "spamsift_trainings",
        "Messages learned or moved to another class by train, batch and feedback "
        "(all processes sharing the database)",
        labels=["model"],
    )
    feedback = CounterMetricFamily(
        "spamsift_feedback",
        "Feedback requests applied (all processes sharing the database)",
        labels=["model"],
    )
    corrections = CounterMetricFamily(
        "spamsift_feedback_corrections",
        "Feedback whose label differs from the verdict or from the trained label "
        "(all processes sharing the database)",
        labels=["model"],
    )
    forgotten = CounterMetricFamily(
        "spamsift_forgotten_messages",
        "Trained messages forgotten (all processes sharing the database)",
        labels=["model"],
    )
    for model in figures:
        generation.add_metric([model.name], model.generation)
        vocabulary.add_metric([model.name], model.vocabulary)
        for label, count in model.messages.items():
            messages.add_metric([model.name, label], count)
        classes = tuple(model.messages)
        verdicts = (*classes, "unsure") if set(classes) == {"ham", "spam"} else classes
        for verdict in verdicts:
            classifications.add_metric(
                [model.name, verdict], model.events.get(verdict_event(verdict), 0)
            )
        trainings.add_metric([model.name], model.events.get(Event.TRAINED, 0))
        feedback.add_metric([model.name], model.events.get(Event.FEEDBACK, 0))
        corrections.add_metric([model.name], model.events.get(Event.CORRECTIONS, 0))
        forgotten.add_metric([model.name], model.events.get(Event.FORGOTTEN, 0))
    return [
        generation,
        vocabulary,
        messages,
        classifications,
        trainings,
        feedback,
        corrections,
        forgotten,
    ]


def install_metrics(app: FastAPI, runtime: Runtime) -> HttpMetrics:
    """Give the app its metrics; count the database errors its requests meet (the app
    includes `router`, /metrics, with its other routes)."""
    metrics = HttpMetrics(runtime, multiprocess_dir=os.environ.get(MULTIPROCESS_DIR_VARIABLE))
    app.state.metrics = metrics
    answer_error = app.exception_handlers[SpamsiftError]

    async def database_unavailable(request: Request, error: Exception) -> StarletteResponse:
        route = getattr(request.scope.get("route"), "path", "unmatched")
        metrics.database_errors.labels(route).inc()
        response = answer_error(request, error)
        return await response if inspect.isawaitable(response) else response

    app.add_exception_handler(DatabaseUnavailable, database_unavailable)
    return metrics


@router.get("/metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Prometheus exposition: this server's requests, latencies and database errors, and each
    model's size and activity."""
    http_metrics: HttpMetrics = request.app.state.metrics
    return Response(http_metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
