"""Keep-alive connections spread over the server's worker processes by how many each serves.

With `spamsift serve --workers N` the workers share one listening socket, and the kernel gives
a new connection to whichever worker accepts first: clients that connect together (a mail
server opening its pool) often land mostly on one worker, and keep-alive keeps them there.
That worker then queues while the other idles (measured: 37 of 50 connections on one of two
workers, and a p99 hundreds of milliseconds long at 80 % of the server's capacity).

So each worker publishes how many connections it serves (open ones that sent a request within
the last `ACTIVE_SECONDS`) in a slot of a file all workers map, and a worker with at least
`MARGIN` more than the worker with the fewest answers with `Connection: close`: the client
opens a new connection, which the kernel most likely gives to a worker waiting in accept, the
idle one. Nothing else changes: the answer is complete, and a client reconnects as it would
after any keep-alive timeout. Connections, not requests in flight, are what is evened out:
requests in flight swing from one moment to the next even when the connections are even
(measured: a close on 26-29 % of answers), where connections move only when they are uneven.

The server's connection protocol (app/connections.py) tells a worker's `WorkerLoads` of each
request and of each connection's end: a closed connection stops counting at once. (Counted by
their requests alone, closed connections went on counting for `ACTIVE_SECONDS`: two clients
reconnecting every half second made each worker look 3-6 connections busy, and one worker did
90 % of the work or more in 8 of 30 such passes, against none of 30 since:
`python -m bench.lab.worker_balance`.)

A worker claims its slot with a lock on the slot's lock file (`flock`, released by the kernel
when the process ends, so a restarted worker takes the slot over). Each worker changes only
its own slot, from its event loop thread; reads of the others' slots may be a moment old, which is
all a heuristic needs. Beside its count a worker publishes when it last saw a request: a worker
whose connections all fell quiet while they stay open publishes nothing more, and the others
read its count as 0 once that is `ACTIVE_SECONDS` old, as it would read itself.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import time
from collections.abc import Callable, Hashable
from pathlib import Path

LOAD_DIR_VARIABLE = "SPAMSIFT_WORKER_LOAD_DIR"  # set by `spamsift serve` for N > 1 workers
# A worker's slot: its connections, and when it last saw a request (time.monotonic: one clock
# for every process on Linux).
SLOT = struct.Struct("=qd")
MARGIN = 2  # moving one connection narrows the gap only when it is at least 2
ACTIVE_SECONDS = 2.0  # a connection that sent a request this recently counts as served


class WorkerLoads:
    """Connections served by each worker process, one `SLOT` each in a file shared in
    `directory`; a connection is any object standing for one (the server's protocol)."""

    def __init__(
        self, directory: Path, workers: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.workers = workers
        self._clock = clock
        self.slot, self._lock_fd = _claim_slot(directory, workers)
        self._fd = os.open(directory / "connections", os.O_RDWR | os.O_CREAT, 0o600)
        size = SLOT.size * workers
        if os.fstat(self._fd).st_size < size:
            os.ftruncate(self._fd, size)
        self._map = mmap.mmap(self._fd, size)
        self._offset = self.slot * SLOT.size
        self._last_request: dict[Hashable, float] = {}
        self._pruned_at = self._latest = clock()
        self._publish()  # over whatever a dead worker left there

    @property
    def connections(self) -> int:
        return len(self._last_request)

    def saw(self, connection: Hashable) -> None:
        """Count a request on `connection`."""
        now = self._latest = self._clock()
        self._last_request[connection] = now
        if now - self._pruned_at >= ACTIVE_SECONDS / 2:
            self._pruned_at = now
            quiet = [c for c, at in self._last_request.items() if now - at > ACTIVE_SECONDS]
            for gone in quiet:
                del self._last_request[gone]
        self._publish()

    def ended(self, connection: Hashable) -> None:
        """`connection` is closed, or will be after its answer: it no longer counts here."""
        if self._last_request.pop(connection, None) is not None:
            self._publish()

    def others(self) -> list[int]:
        """The other workers' connections; none for a worker that has seen no request for
        `ACTIVE_SECONDS` (all its connections are quiet, whatever it last published)."""
        now = self._clock()
        counts = []
        for slot in range(self.workers):
            if slot != self.slot:
                connections, latest = SLOT.unpack_from(self._map, slot * SLOT.size)
                counts.append(connections if now - latest <= ACTIVE_SECONDS else 0)
        return counts

    def busier_than_another(self) -> bool:
        """Tell whether a connection moved from this worker to the one with the fewest would
        even them out."""
        others = self.others()
        return bool(others) and self.connections - min(others) >= MARGIN

    def _publish(self) -> None:
        SLOT.pack_into(self._map, self._offset, len(self._last_request), self._latest)

    def close(self) -> None:
        self._last_request.clear()
        self._publish()
        self._map.close()
        os.close(self._fd)
        os.close(self._lock_fd)  # releases the slot


class SlotsTaken(RuntimeError):
    """Every slot is held by a live worker."""


def _claim_slot(directory: Path, workers: int) -> tuple[int, int]:
    """The first slot no live worker holds, and the descriptor holding its lock."""
    for slot in range(workers):
        fd = os.open(directory / f"slot-{slot}", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return slot, fd
    raise SlotsTaken(f"all {workers} worker slots in {directory} are taken")


def loads_from_environment() -> WorkerLoads | None:
    """This worker's slot in the directory `spamsift serve` names (`path:workers`), or None
    with one worker (nothing to balance)."""
    value = os.environ.get(LOAD_DIR_VARIABLE)
    if not value:
        return None
    path, _, workers = value.rpartition(":")
    if not path or not workers.isdigit() or int(workers) < 2:
        return None
    return WorkerLoads(Path(path), int(workers))
