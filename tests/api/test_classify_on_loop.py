"""A single classify of a model the process holds, synced within the sync interval, is answered
on the event loop: it needs no thread of the pool, so it goes on being answered while every
thread is taken (trainings waiting on a locked database, say). Whatever would read the
database waits for a thread as before: a model not held, one due for its sync, one backed by
another model, and a long message (which would hold up the loop's other requests)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import anyio.to_thread
import httpx
import pytest
from fastapi import FastAPI

from app.api.routes.messages import CLASSIFY_ON_LOOP_BYTES
from app.config import Settings
from app.main import create_app
from tests.builders import ham_text, spam_text

# Long enough that a request left waiting for the pool is told apart from one answered.
WAIT_SECONDS = 1.5

Request = Callable[[httpx.AsyncClient], Awaitable[httpx.Response]]
Prepare = Callable[[httpx.AsyncClient, FastAPI], Awaitable[None]]


async def _trained(client: httpx.AsyncClient, model: str, **create: object) -> None:
    if model != "default":
        created = await client.post("/v1/models", json={"name": model, **create})
        assert created.status_code == 201, created.text
    for i in range(3):
        for label, text in (("spam", spam_text(i)), ("ham", ham_text(i))):
            trained = await client.post(
                f"/v1/models/{model}/train", json={"label": label, "text": text}
            )
            assert trained.status_code == 200, trained.text


async def _default_trained(client: httpx.AsyncClient, app: FastAPI) -> None:
    await _trained(client, "default")


def _with_the_pool_taken(
    settings: Settings, prepare: Prepare, request: Request, *, sync_interval: float = 3600.0
) -> bool:
    """Run `prepare`, then take every thread of the pool and send `request`: return whether it
    was answered (200) while the pool stayed taken. A held model needs no sync for
    `sync_interval` seconds (by default, none in the test however slow the machine), and the
    API keys need no read of the database within the test."""
    app = create_app(settings.model_copy(update={"sync_interval_seconds": sync_interval}))
    # The API keys are read again in the background ahead of their cache time; on a slow
    # machine that thread may come late, and a request then checks its key in the pool.
    app.state.key_guard.cache_seconds = 3600.0

    async def run() -> bool:
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://localhost") as client,
        ):
            await prepare(client, app)
            limiter = anyio.to_thread.current_default_thread_limiter()
            release = threading.Event()
            taken = [
                asyncio.create_task(anyio.to_thread.run_sync(release.wait))
                for _ in range(int(limiter.total_tokens))
            ]
            while limiter.borrowed_tokens < limiter.total_tokens:
                await asyncio.sleep(0.01)
            pending = asyncio.create_task(request(client))
            try:
                done, _ = await asyncio.wait({pending}, timeout=WAIT_SECONDS)
            finally:
                release.set()
                await asyncio.gather(*taken)
            answer = await pending  # once the pool is free, every request is answered
            assert answer.status_code == 200, answer.text
            return pending in done

    return asyncio.run(run())


def _classify(model: str, text: str, path: str | None = None) -> Request:
    async def send(client: httpx.AsyncClient) -> httpx.Response:
        return await client.post(path or f"/v1/models/{model}/classify", json={"text": text})

    return send


def test_a_held_model_is_classified_while_every_thread_of_the_pool_is_taken(
    settings: Settings,
) -> None:
    train = _default_trained
    assert _with_the_pool_taken(settings, train, _classify("default", spam_text(1)))
    # The short form too, a raw message, and one of the largest size classified on the loop.
    assert _with_the_pool_taken(
        settings, train, _classify("default", spam_text(2), path="/classify?model=default")
    )
    largest = ("spam " * CLASSIFY_ON_LOOP_BYTES)[:CLASSIFY_ON_LOOP_BYTES]
    assert _with_the_pool_taken(settings, train, _classify("default", largest))

    async def raw(client: httpx.AsyncClient) -> httpx.Response:  # a message/rfc822 body
        message = f"Subject: hello\r\n\r\n{ham_text(1)}\r\n".encode()
        return await client.post(
            "/v1/models/default/classify",
            content=message,
            headers={"content-type": "message/rfc822"},
        )

    assert _with_the_pool_taken(settings, train, raw)


@pytest.mark.slow
def test_what_would_read_the_database_waits_for_a_thread(settings: Settings) -> None:
    async def trained_then_dropped(client: httpx.AsyncClient, app: FastAPI) -> None:
        await _trained(client, "default")
        app.state.runtime.models.forget("default")

    # Not held: its message's rows are read.
    assert not _with_the_pool_taken(settings, trained_then_dropped, _classify("default", "x"))

    # Held but due for its sync with the database.
    assert not _with_the_pool_taken(
        settings, _default_trained, _classify("default", spam_text(1)), sync_interval=1e-6
    )

    # A message over the size classified on the loop.
    longer = ("spam " * CLASSIFY_ON_LOOP_BYTES)[: CLASSIFY_ON_LOOP_BYTES + 1]
    assert not _with_the_pool_taken(settings, _default_trained, _classify("default", longer))

    # A model backed by another: the blend may read the backing model's rows.
    async def backed(client: httpx.AsyncClient, app: FastAPI) -> None:
        await _trained(client, "default")
        await _trained(client, "personal", backed_by="default")

    assert not _with_the_pool_taken(settings, backed, _classify("personal", spam_text(1)))
