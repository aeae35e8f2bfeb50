"""The classification records and activity counters a process buffers between flushes.

Classifying only reads, so that it never waits on a writer: the record of each classification
(kept `retention_days` for feedback by message_id) and the dashboard's counters are buffered
here and written about once a second, in one small transaction, by the server's scheduler
(app/service/scheduler.py), which also prunes old records every five minutes.

The buffer is bounded per process, not per model: while the database is unreachable it keeps
at most `max_records` records (about 3.1 KB each), the oldest dropped first, whatever the
number of models.

What one tenant may store is bounded too: a key limited to some models (a tenant's key) has
its classifications recorded at most `max_records_per_key` times per retention period in one
process; beyond that they are answered as ever but not recorded, so feedback on them needs
the message itself. Records live `retention_days`, so a key's stored records stay below
twice its quota per process, whatever it sends.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from app.errors import DatabaseUnavailable, StorageFull
from app.store import Connection
from app.store.activity import add_activity
from app.store.engine import Database
from app.store.ledger import ClassificationRecord, expire_classifications, insert_classifications

MAX_BUFFERED_RECORDS = 100_000  # per process; beyond this (database down long) oldest dropped
PRUNE_CHUNK_ROWS = 500  # rows deleted per transaction: a writer waits for one chunk at most


class ClassificationLog:
    """Buffered classification records (by model) and activity counters (by model, hour)."""

    def __init__(
        self,
        db: Database,
        *,
        retention_days: float,
        max_records: int = MAX_BUFFERED_RECORDS,
        max_records_per_key: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.retention_days = retention_days
        self.max_records = max_records
        self.max_records_per_key = max_records_per_key  # 0: no quota
        self._clock = clock
        self._quota_window_start = clock()
        self._recorded_by_key: Counter[str] = Counter()  # in this retention period
        self.dropped = 0  # records dropped by the cap since the process started
        self.over_quota = 0  # records not kept: their key had used its quota
        self._records: list[tuple[int, ClassificationRecord]] = []  # oldest first
        self._events: dict[tuple[int, datetime], Counter[str]] = defaultdict(Counter)
        self._buffer_lock = threading.Lock()
        self._flush_lock = threading.Lock()

    def retention_start(self) -> datetime | None:
        """The oldest classification time still kept, or None when nothing is kept."""
        if self.retention_days <= 0:
            return None
        return datetime.now(UTC) - timedelta(days=self.retention_days)

    def buffered(self) -> int:
        with self._buffer_lock:
            return len(self._records)

    def record(
        self,
        model_id: int,
        records: list[ClassificationRecord],
        events: Counter[str],
        *,
        key_id: str | None = None,
    ) -> None:
        """Buffer `records` and `events`; with `key_id` (a tenant's key), only as many records
        as its quota has left (the events always)."""
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        with self._buffer_lock:
            if key_id is not None and self.max_records_per_key:
                records = records[: self._quota_left(key_id, len(records))]
            if self.retention_days > 0:
                self._records.extend((model_id, record) for record in records)
                self._cap()
            self._events[(model_id, hour)].update(events)

    def _quota_left(self, key_id: str, wanted: int) -> int:
        """Take up to `wanted` of `key_id`'s quota; return how many (under _buffer_lock)."""
        now = self._clock()
        if now - self._quota_window_start >= self.retention_days * 86_400:
            self._quota_window_start = now
            self._recorded_by_key.clear()
        taken = min(wanted, max(0, self.max_records_per_key - self._recorded_by_key[key_id]))
        self._recorded_by_key[key_id] += taken
        self.over_quota += wanted - taken
        return taken

    def flush(self, model_id: int | None = None) -> None:
        """Write buffered records and counters in one transaction; with `model_id`, only that
        model's records (what feedback by message_id needs), leaving the rest to the flusher."""
        with self._flush_lock:
            with self._buffer_lock:
                if model_id is None:
                    records, self._records = self._records, []
                    events, self._events = self._events, defaultdict(Counter)
                else:
                    records = [entry for entry in self._records if entry[0] == model_id]
                    if records:
                        self._records = [entry for entry in self._records if entry[0] != model_id]
                    events = defaultdict(Counter)
            if not records and not events:
                return
            by_model: dict[int, list[ClassificationRecord]] = defaultdict(list)
            for owner, record in records:
                by_model[owner].append(record)

            def work(conn: Connection) -> None:
                for owner, model_records in sorted(by_model.items()):
                    insert_classifications(conn, owner, model_records)
                for (owner, hour), counter in sorted(events.items()):
                    add_activity(conn, owner, hour=hour, events=counter)

            try:
                self.db.run(work)
            except (DatabaseUnavailable, StorageFull):
                with self._buffer_lock:  # keep them for the next attempt, oldest first
                    self._records[:0] = records
                    self._cap()
                    for key, counter in events.items():
                        self._events[key].update(counter)
                raise

    def prune(self, *, chunk_rows: int = PRUNE_CHUNK_ROWS) -> int:
        """Delete records past the retention period, `chunk_rows` per transaction; return how
        many went. Each chunk is a short write: a training queued behind it waits for one chunk,
        never for the whole pruning."""
        before = self.retention_start() or datetime.now(UTC) + timedelta(seconds=1)
        removed = 0
        while True:
            count = self.db.run(
                lambda conn: expire_classifications(conn, before=before, limit=chunk_rows)
            )
            removed += count
            if count < chunk_rows:
                return removed

    def _cap(self) -> None:
        excess = len(self._records) - self.max_records
        if excess > 0:
            del self._records[:excess]
            self.dropped += excess
