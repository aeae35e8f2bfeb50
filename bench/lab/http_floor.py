"""What a single classify costs beyond classifying: `python -m bench.lab.http_floor [runs]`.

CPU milliseconds per request, in process (no socket, no HTTP parsing): each SpamAssassin test
message (message/rfc822) sent through the whole ASGI app (`create_app`: middleware, key
check, body read, route, record buffering and its background flush, JSON answer), then
`classify()` alone on the same runtime, then the whole app again with the classification
(and its record) replaced by a canned answer: what spamsift's HTTP layer and the framework
cost, then a bare FastAPI app whose one sync route answers a constant: the framework's
floor. The model is trained from 2,000 messages of the split first (SQLite, held in memory).
Each figure: the median of 5 passes over the messages; the four take turns, `runs` times
(default 2). Then the answer's JSON encoding alone: FastAPI's
(validate the returned Classification again, dump, encode) against the adapter's dump
encoded as JSONResponse encodes it (the classify routes' `_answer`).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from fastapi.routing import serialize_response
from fastapi.utils import create_model_field
from starlette.types import ASGIApp, Message

import app.api.routes.messages as routes
from app.config import Settings
from app.main import create_app
from app.service.classification import Classification, classify
from app.service.messages import Message as MailMessage
from app.service.training import train_batch
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from bench import data

PASSES = 5


def bare_app() -> FastAPI:
    bare = FastAPI()

    @bare.post("/v1/models/{name}/classify")
    def constant(name: str) -> dict[str, Any]:
        return {"verdict": "ham", "probabilities": {"ham": 0.9, "spam": 0.1}}

    return bare


async def call(
    app: ASGIApp,
    body: bytes,
    *,
    path: str = "/v1/models/default/classify",
    content_type: bytes = b"message/rfc822",
) -> None:
    """POST `body` to `path` of `app` straight through ASGI (no socket, no HTTP parsing);
    RuntimeError unless it answers 200."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"localhost"),
            (b"content-type", content_type),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    sent = False
    status: list[int] = []

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(scope, receive, send)
    if status != [200]:
        raise RuntimeError(f"answered {status}")


async def per_request(app: ASGIApp, bodies: list[bytes]) -> float:
    passes = []
    for _ in range(PASSES):
        started = time.process_time()
        for body in bodies:
            await call(app, body)
        passes.append((time.process_time() - started) / len(bodies) * 1000)
    return statistics.median(passes)


def encodings(sample: Classification, n: int = 3000) -> dict[str, float]:
    field = create_model_field(name="Response", type_=Classification, mode="serialization")

    async def fastapi_way() -> bytes:
        # is_coroutine=False, as for the sync classify routes: the validation hops to a thread
        content = await serialize_response(field=field, response_content=sample, is_coroutine=False)
        return bytes(JSONResponse(content).body)

    async def timed() -> float:
        started = time.process_time()
        for _ in range(n):
            await fastapi_way()
        return (time.process_time() - started) / n * 1000

    try:
        from app.api.routes.messages import _answer
    except ImportError:  # code from before the classify routes encoded their answers
        return {"fastapi_ms": round(asyncio.run(timed()), 4)}

    if asyncio.run(fastapi_way()) != bytes(_answer(sample).body):
        raise RuntimeError("the two encodings differ")
    started = time.process_time()
    for _ in range(n):
        _answer(sample)
    ours = (time.process_time() - started) / n * 1000
    return {"fastapi_ms": round(asyncio.run(timed()), 4), "answer_ms": round(ours, 4)}


def trained_app(split: data.Split) -> FastAPI:
    """The whole app on a fresh SQLite file, its default model trained (in process, batches
    of 500) from the split's training messages; no time budget cuts a message short."""
    folder = tempfile.mkdtemp(prefix="spamsift-floor-")
    url = f"sqlite:///{folder}/floor.db"
    db = Database(url)
    upgrade_schema(db)
    db.dispose()
    settings = Settings(
        database_url=url,
        classify_time_budget_seconds=600,
        _env_file=None,  # type: ignore[call-arg]
    )
    app = create_app(settings, freeze_startup_objects=True)  # as a server worker
    for start in range(0, len(split.train), 500):
        items = [
            (MailMessage(raw=m.raw, text=m.text, message_id=m.id), m.label)
            for m in split.train[start : start + 500]
        ]
        train_batch(app.state.runtime, model_name="default", items=items)
    return app


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    split = data.split("spamassassin", train_limit=2000, test_limit=400)
    app = trained_app(split)
    rt = app.state.runtime
    bodies = [m.raw or b"" for m in split.test]
    bare = bare_app()

    def alone() -> float:
        passes = []
        for _ in range(PASSES):
            started = time.process_time()
            for body in bodies:
                classify(rt, model_name="default", message=MailMessage(raw=body))
            passes.append((time.process_time() - started) / len(bodies) * 1000)
        return statistics.median(passes)

    canned = classify(rt, model_name="default", message=MailMessage(raw=bodies[0]))

    async def stubbed() -> float:
        """The whole app with the classification itself replaced by a canned answer."""
        saved = routes.classify
        routes.classify = lambda *args, **kwargs: canned
        try:
            return await per_request(app, bodies)
        finally:
            routes.classify = saved

    async def measure() -> dict[str, Any]:
        figures: dict[str, Any] = {
            "app_ms": [],
            "classify_ms": [],
            "app_classify_stubbed_ms": [],
            "bare_ms": [],
        }
        async with app.router.lifespan_context(app):
            for body in bodies[:50]:
                await call(app, body)
            for _ in range(runs):
                figures["app_ms"].append(round(await per_request(app, bodies), 3))
                figures["classify_ms"].append(round(alone(), 3))
                figures["app_classify_stubbed_ms"].append(round(await stubbed(), 3))
                figures["bare_ms"].append(round(await per_request(bare, bodies), 3))
            print(json.dumps(figures), flush=True)
        return figures

    figures = asyncio.run(measure())
    sample = classify(rt, model_name="default", message=MailMessage(raw=bodies[0]))
    figures["encoding"] = encodings(sample)
    figures["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
