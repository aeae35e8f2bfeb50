"""The server's background scheduler: the API keys read again every tick, the buffered records
written every second, the five-minute work (records pruned, then expiry and the rest) in order,
and a failing round survived."""

from __future__ import annotations

import logging
import time
from collections import Counter

import pytest

from app.errors import DatabaseUnavailable
from app.service.keys import KeyGuard
from app.service.runtime import Runtime
from app.service.scheduler import (
    FLUSH_INTERVAL_SECONDS,
    PRUNE_INTERVAL_SECONDS,
    Every,
    Scheduler,
    periodic_work,
    server_scheduler,
)


def test_the_server_reads_keys_every_tick_flushes_every_second_and_prunes_every_five_minutes(
    runtime: Runtime,
) -> None:
    keys = KeyGuard(runtime.db)
    scheduler = server_scheduler(runtime, keys)

    reading_keys, flushing, pruning = scheduler.jobs
    assert (reading_keys.seconds, reading_keys.work) == (0.0, [keys.refresh_ahead])
    assert flushing.work == [runtime.flush_classifications]
    # Ticks half a second apart: the flush is due at every second one, even one a little early.
    assert scheduler.tick_seconds == FLUSH_INTERVAL_SECONDS / 2
    assert scheduler.tick_seconds < flushing.seconds < FLUSH_INTERVAL_SECONDS
    assert pruning.seconds == PRUNE_INTERVAL_SECONDS
    assert pruning.work[0] == runtime.expire
    assert len(pruning.work) == 1 + len(periodic_work(runtime))


def test_each_job_runs_once_per_interval_in_order() -> None:
    ran: list[str] = []
    scheduler = Scheduler(
        [Every(0.0, [lambda: ran.append("flush")]), Every(60.0, [lambda: ran.append("prune")])]
    )

    scheduler.run_due()
    scheduler.run_due()

    assert ran == ["flush", "prune", "flush"]


def test_a_failing_round_is_logged_and_the_thread_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: Counter[str] = Counter()

    def unavailable() -> None:
        calls["unavailable"] += 1
        raise DatabaseUnavailable("down")

    def broken() -> None:
        calls["broken"] += 1
        raise RuntimeError("bug")

    scheduler = Scheduler([Every(0.0, [unavailable]), Every(0.0, [broken])], tick_seconds=0.01)
    with caplog.at_level(logging.WARNING, logger="app.service.scheduler"):
        scheduler.start()
        deadline = time.monotonic() + 5
        while calls["unavailable"] < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        scheduler.stop()

    assert calls["unavailable"] >= 3
    assert calls["broken"] == 0  # a failed step ends its round
    assert "classification records stay buffered" in caplog.text
