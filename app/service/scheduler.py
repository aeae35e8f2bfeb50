"""What a server process does in the background, in one thread: read the API keys again before
their cache time runs out, write the buffered classification records about once a second, and
every five minutes prune old records, expire tokens and ledger entries beyond their maximums,
and (SQLite) hand freed pages back.

The server's composition root (app/main.py) builds it from the process's Runtime, starts it
with the app and stops it before the Runtime closes; short-lived CLI commands run none.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.errors import DatabaseUnavailable, StorageFull
from app.service.expiry import expire_all, prune_ledgers
from app.service.keys import KeyGuard
from app.service.runtime import Runtime

log = logging.getLogger(__name__)

FLUSH_INTERVAL_SECONDS = 1.0
# The thread wakes twice per flush: the API keys (cached for KEY_CACHE_SECONDS, 1 s) are read
# again every half second, so requests find them fresh.
TICK_SECONDS = FLUSH_INTERVAL_SECONDS / 2
PRUNE_INTERVAL_SECONDS = 300.0

Work = Callable[[], object]


@dataclass
class Every:
    """Work run in order, at most once per `seconds`; a step that fails leaves the rest of the
    round (and of the scheduler's turn) to the next time."""

    seconds: float
    work: Sequence[Work]
    last_run: float = float("-inf")


class Scheduler:
    """Runs its jobs in order in one background thread, woken every `tick_seconds`."""

    def __init__(self, jobs: Sequence[Every], *, tick_seconds: float = TICK_SECONDS):
        self.jobs = list(jobs)
        self.tick_seconds = tick_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="spamsift-flush", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def run_due(self) -> None:
        """Run every job whose interval has passed, in order; stop at the first failure."""
        for job in self.jobs:
            now = time.monotonic()
            if now - job.last_run < job.seconds:
                continue
            job.last_run = now
            for work in job.work:
                work()

    def _run(self) -> None:
        while not self._stop.wait(self.tick_seconds):
            try:
                self.run_due()
            except (DatabaseUnavailable, StorageFull):
                log.warning("database unavailable or full; classification records stay buffered")
            except Exception:  # the thread must outlive any one bad round
                log.exception("flushing classification records failed")


def server_scheduler(rt: Runtime, keys: KeyGuard) -> Scheduler:
    """The server's background work for `rt`: the API `keys` read again ahead of their cache
    time every tick; flush every second; every five minutes prune classification records, then
    `periodic_work`."""
    return Scheduler(
        [
            Every(0.0, [keys.refresh_ahead]),  # every tick
            # Due at every second tick: a tick that wakes a little early still counts.
            Every(FLUSH_INTERVAL_SECONDS - TICK_SECONDS / 2, [rt.flush_classifications]),
            Every(PRUNE_INTERVAL_SECONDS, [rt.expire, *periodic_work(rt)]),
        ]
    )


def periodic_work(rt: Runtime) -> list[Work]:
    """What the server does every 5 minutes besides pruning classification records: token
    expiry of the models past their maximum (their own `max_tokens`, else the server's; a
    read of the model rows when none is) and of those with a `pair_probation` grown since
    their last expiry, ledger pruning where a maximum is set, then
    (SQLite) handing the freed pages back to the file system."""
    left: dict[int, int] = {}  # model id -> tokens its last expiry in this process left
    work: list[Work] = [lambda: expire_all(rt, over_maximum_only=True, left=left)]
    ledger_limit = rt.settings.max_ledger_messages_per_model
    if ledger_limit > 0:
        work.append(lambda: prune_ledgers(rt, keep=ledger_limit))
    work.append(rt.db.reclaim_space)
    return work
