"""Group commit: concurrent writes to one model coalesced into one transaction.

A "mark as spam" click trains one message, and most of its transaction's cost is the commit
itself: the model's row, the ledger row and the pages of every index touched, written to the
journal and synced. Writers of one model queue on its row lock anyway (`ModelWrite.begin`),
so while one write commits the next ones can only wait. Here they wait in this process's
queue instead, and the first of them (the leader) runs everything that queued meanwhile as
one transaction: each request's work in turn on the same `ModelWrite`, as a batch would be.
A burst of clicks on one model then costs a few commits, not one per click.

Nothing is answered before it is durable: each request of a group gets its result only after
the group's commit and the live copy's update. A request refused inside the group (its own
`SpamsiftError`, such as too many new tokens) fails alone: the transaction is rolled back and
run again without it, so its neighbours are answered as if it had not been sent. A database
error (unavailable, storage full, anything else raised) fails every request of the group with
that error, as each would have failed alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar, cast

from app.errors import DatabaseUnavailable, SpamsiftError, StorageFull
from app.live.held import LiveModel
from app.live.models import LiveModels
from app.live.write import NO_TOKEN_LIMITS, ModelWrite, TokenLimits, write_model
from app.store.engine import Database

T = TypeVar("T")

# Requests one transaction takes at most: a burst of 50 clicks is one or two groups, and a
# group's transaction (and the lock held meanwhile) stays short.
MAX_GROUP_REQUESTS = 64


@dataclass(eq=False)
class _Request:
    work: Callable[[ModelWrite], object]
    done: threading.Event = field(default_factory=threading.Event)
    leads: bool = False  # this request's thread runs the next group
    finished: bool = False
    result: object = None
    error: BaseException | None = None

    def finish(self, *, result: object = None, error: BaseException | None = None) -> None:
        self.result, self.error, self.finished = result, error, True
        self.done.set()


class _Refused(Exception):
    """One request of a group refused by its own error: run the group again without it."""


class GroupCommit:
    """The queues of this process's writes, one per model copy while any write is under way."""

    def __init__(
        self,
        db: Database,
        models: LiveModels,
        *,
        limits: TokenLimits = NO_TOKEN_LIMITS,
        max_requests: int = MAX_GROUP_REQUESTS,
    ) -> None:
        self.db = db
        self.models = models
        self.limits = limits
        self.max_requests = max_requests
        self._lock = threading.Lock()
        self._queues: dict[int, list[_Request]] = {}  # by id() of the LiveModel written
        self.commits = 0  # group transactions committed by this process (for tests, benches)

    def write(self, live: LiveModel, work: Callable[[ModelWrite], T]) -> T:
        """Run `work` on a write to `live`, in one transaction with the other writes to it
        that queued meanwhile; return its result once that transaction is committed and
        applied. `work` may run more than once (a retried or regrouped transaction), each
        time on a fresh write; `limits` bound each request's new tokens on its own."""
        request = _Request(work)
        key = id(live)
        with self._lock:
            queue = self._queues.get(key)
            if queue is None:
                queue = self._queues[key] = []
                request.leads = True
            queue.append(request)
        if not request.leads:
            request.done.wait()
        while not request.finished:  # leading: this request is first in the queue
            with self._lock:
                group = queue[: self.max_requests]
                del queue[: len(group)]
            self._commit(live, group)
            with self._lock:
                if queue:
                    successor = queue[0]
                    successor.leads = True
                    successor.done.set()
                else:
                    del self._queues[key]
        if request.error is not None:
            raise request.error
        return cast(T, request.result)

    def waiting(self, live: LiveModel) -> int:
        """How many writes to `live` wait for the group under way (tests use it)."""
        with self._lock:
            return len(self._queues.get(id(live), ()))

    def _commit(self, live: LiveModel, group: list[_Request]) -> None:
        """Write `group` in one transaction and finish each of its requests."""
        remaining = list(group)
        try:
            while remaining:
                refused: list[tuple[_Request, SpamsiftError]] = []
                try:
                    results = write_model(
                        self.db,
                        self.models,
                        live,
                        partial(_work_of_group, remaining, refused),
                        limits=self.limits,
                    )
                except _Refused:
                    request, error = refused[-1]
                    remaining.remove(request)
                    request.finish(error=error)
                    continue
                self.commits += 1
                for request, result in zip(remaining, results, strict=True):
                    request.finish(result=result)
                return
        except BaseException as error:
            for request in remaining:
                if not request.finished:
                    request.finish(error=error)


def _work_of_group(
    group: list[_Request], refused: list[tuple[_Request, SpamsiftError]], write: ModelWrite
) -> list[object]:
    """Run each request's work on `write`, in turn; a request's own error is noted in
    `refused` and rolls the whole write back (`_Refused`)."""
    results = []
    for request in group:
        write.next_request()
        try:
            results.append(request.work(write))
        except (DatabaseUnavailable, StorageFull):
            raise
        except SpamsiftError as error:
            refused.append((request, error))
            raise _Refused from error
    return results
