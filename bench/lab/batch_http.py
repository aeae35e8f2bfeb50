"""What batch classify over HTTP costs beyond classifying, in process and against servers.

    python -m bench.lab.batch_http [--runs 3]
    python -m bench.lab.batch_http --http [--repo PATH ...] [--workers 1 2] [--runs 3]
        [--train-clients 1]

Both train a model from the SpamAssassin split's first 2,000 training messages (SQLite) and
classify its 1,178 test messages in batches of 100 (JSON `raw`, as `bench.versus_bogofilter`
sends them). CPU milliseconds per batch of 100.

In process (no socket, no HTTP parsing), each stage the median of 5 passes over the batches,
the stages taking turns `--runs` times: the whole ASGI app (`create_app`: middleware, key
check, body read and parse, route, record buffering and its background flush, JSON answer);
`classify_batch` alone on the same messages and runtime; reading the body as the route's
dependency does (`parse_batch`, then `to_message()` per item); the answer as FastAPI encodes
a returned `ClassifyBatchResponse` (build it, validate it again in the thread pool, pydantic's
JSON dump), and as the route encodes it now, when it does it itself (checked equal first).

With `--http`: one `spamsift serve --workers N` on SQLite per checkout of `--repo` (default
this one) and per `--workers`, each trained over HTTP in batches of 500 from `--train-clients`
clients, then classifying the test batches from 2 clients (two passes to warm up, then one
pass a run), the servers taking turns run by run; the servers' CPU per message (from /proc)
and messages per server CPU second, median and spread over `--runs`. Trained from one client
(the default), one worker holds the model after training and any other worker does not: what
a server meets when its models were trained by another process, or the CLI.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from fastapi import Response
from fastapi.routing import serialize_response
from fastapi.utils import create_model_field
from starlette.types import ASGIApp

from app.api.deps import parse_batch
from app.api.schemas import ClassifyBatchRequest, ClassifyBatchResponse
from app.service.classification import Classification, classify_batch
from bench import data
from bench.databases import fresh_database
from bench.lab import http_floor
from bench.server import REPO, Request, Server, run_load, serve
from bench.serving import classify_batch_requests, train_batch_requests
from bench.timing import summary

TRAINED = 2000
BATCH = 100
PASSES = 5
PATH = "/v1/models/default/classify/batch"


async def call(app: ASGIApp, body: bytes) -> None:
    await http_floor.call(app, body, path=PATH, content_type=b"application/json")


def per_batch_ms(work: Callable[[], object], batches: int) -> float:
    """CPU ms per batch: the median of PASSES passes of `work` (one pass over the batches)."""
    passes = []
    for _ in range(PASSES):
        started = time.process_time()
        work()
        passes.append((time.process_time() - started) / batches * 1000)
    return statistics.median(passes)


RESPONSE_FIELD = create_model_field(
    name="Response", type_=ClassifyBatchResponse, mode="serialization"
)


async def fastapi_answer(results: list[Classification]) -> bytes:
    """The answer as FastAPI makes it from a sync route returning ClassifyBatchResponse."""
    content = await serialize_response(
        field=RESPONSE_FIELD,
        response_content=ClassifyBatchResponse(results=results),
        is_coroutine=False,  # a sync route: the validation hops to the thread pool
        dump_json=True,  # FastAPI's path for a route without a response class
    )
    return bytes(Response(content=content, media_type="application/json").body)


def route_answer() -> Callable[[list[Classification]], bytes] | None:
    """The route's own encoding of the answer, where the checkout has one."""
    try:
        from app.api.routes.messages import _batch_answer  # type: ignore[attr-defined,unused-ignore]
    except ImportError:  # code from before the batch route encoded its answer
        return None

    def encoded(results: list[Classification]) -> bytes:
        return bytes(_batch_answer(results).body)

    return encoded


def in_process(runs: int) -> dict[str, Any]:
    split = data.split("spamassassin", train_limit=TRAINED)
    app = http_floor.trained_app(split)
    rt = app.state.runtime
    bodies = [r.body for r in classify_batch_requests(split.test, BATCH)]
    max_items = rt.settings.max_batch_items
    messages = [
        [item.to_message() for item in parse_batch(ClassifyBatchRequest, b, max_items).items]
        for b in bodies
    ]
    results = [classify_batch(rt, model_name="default", messages=m) for m in messages]
    loop = asyncio.new_event_loop()
    ours = route_answer()
    if ours is not None:
        for one in results:
            if loop.run_until_complete(fastapi_answer(one)) != ours(one):
                raise RuntimeError("the route's answer differs from FastAPI's encoding")

    def whole_app() -> None:
        async def send_all() -> None:
            for body in bodies:
                await call(app, body)

        loop.run_until_complete(send_all())

    def classify_alone() -> None:
        for batch in messages:
            classify_batch(rt, model_name="default", messages=batch)

    def read_bodies() -> None:
        for body in bodies:
            [item.to_message() for item in parse_batch(ClassifyBatchRequest, body, max_items).items]

    def fastapi_answers() -> None:
        async def encode_all() -> None:
            for one in results:
                await fastapi_answer(one)

        loop.run_until_complete(encode_all())

    stages: dict[str, Callable[[], None]] = {
        "app_ms": whole_app,
        "classify_batch_ms": classify_alone,
        "parse_ms": read_bodies,
        "fastapi_answer_ms": fastapi_answers,
    }
    if ours is not None:
        encode = ours

        def route_answers() -> None:
            for one in results:
                encode(one)

        stages["route_answer_ms"] = route_answers
    figures: dict[str, Any] = {name: [] for name in stages}
    lifespan = app.router.lifespan_context(app)
    loop.run_until_complete(lifespan.__aenter__())
    try:
        whole_app()  # warm
        for _ in range(runs):
            for name, work in stages.items():
                figures[name].append(round(per_batch_ms(work, len(bodies)), 3))
            print(json.dumps(figures), flush=True)
    finally:
        loop.run_until_complete(lifespan.__aexit__(None, None, None))
        loop.close()
    return {
        "batches": len(bodies),
        "batch_size": BATCH,
        **{name: summary(values, digits=3) for name, values in figures.items()},
    }


def over_http(
    repos: list[Path], workers: list[int], runs: int, train_clients: int
) -> dict[str, Any]:
    split = data.split("spamassassin", train_limit=TRAINED)
    batches = classify_batch_requests(split.test, BATCH)
    n_messages = len(split.test)
    with tempfile.TemporaryDirectory(prefix="spamsift-batch-http-") as tmp, ExitStack() as stack:
        servers: dict[str, Server] = {}
        for repo in repos:
            for n in workers:
                folder = Path(tmp) / f"{len(servers)}"
                folder.mkdir()
                url = stack.enter_context(fresh_database("sqlite", folder, None))
                server = stack.enter_context(serve(url, workers=n, folder=folder, repo=repo))
                train_over_http(server, split.train, train_clients)
                run_load(server, batches, clients=2)  # warm: every worker holds the model
                run_load(server, batches, clients=2)
                servers[f"{repo} --workers {n}"] = server
        cpu_ms: dict[str, list[float]] = {name: [] for name in servers}
        for _ in range(runs):
            for name, server in servers.items():
                done = run_load(server, batches, clients=2)
                if done.errors:
                    raise RuntimeError(f"{name}: {done.statuses}")
                cpu_ms[name].append(round(done.server_cpu_seconds / n_messages * 1000, 4))
            print(json.dumps(cpu_ms), flush=True)
    return {
        name: {
            "server_cpu_ms_per_message": summary(values, digits=4),
            "messages_per_server_cpu_s": summary([1000 / v for v in values], digits=1),
        }
        for name, values in cpu_ms.items()
    }


def train_over_http(server: Server, messages: list[Any], clients: int) -> None:
    requests: list[Request] = train_batch_requests(messages, 500)
    trained = run_load(server, requests, clients=clients)
    if trained.errors:
        raise RuntimeError(f"training over HTTP failed: {trained.statuses}")


def repos_default(given: list[Path] | None) -> Iterator[Path]:
    for repo in given or [REPO]:
        yield repo.resolve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--http", action="store_true", help="against spamsift serve instead")
    parser.add_argument("--repo", type=Path, action="append", help="checkout served (repeat)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--train-clients", type=int, default=1)
    args = parser.parse_args()
    load_at_start = os.getloadavg()[0]
    if args.http:
        result = over_http(
            list(repos_default(args.repo)), args.workers, args.runs, args.train_clients
        )
    else:
        result = in_process(args.runs)
    result["load_average_1min"] = [round(load_at_start, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
