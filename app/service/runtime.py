"""What one spamsift process holds: settings, the database, live models, the classification log.

Classifying only reads, so that it never waits on a writer: the record of each classification
(kept `retention_days` for feedback by message_id) and the dashboard's counters are buffered
here and written by a background thread about once a second, in one small transaction.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy import Connection

from app.config import Settings
from app.errors import DatabaseUnavailable, StorageFull
from app.service.live import LiveModels
from app.service.messages import Message, PreparedMessage, prepare
from app.store.activity import add_activity
from app.store.engine import Database
from app.store.ledger import ClassificationRecord, expire_classifications, insert_classifications
from app.text import TokenizerLimits

log = logging.getLogger(__name__)

FLUSH_INTERVAL_SECONDS = 1.0
EXPIRY_INTERVAL_SECONDS = 300.0
MAX_BUFFERED_RECORDS = 100_000  # beyond this (database down for long) the oldest are dropped


def tokenizer_limits(settings: Settings) -> TokenizerLimits:
    """The message-level caps of `settings`, as the text room takes them (no time budget)."""
    return TokenizerLimits(
        max_scan_bytes=settings.max_scan_bytes,
        max_header_value_bytes=settings.max_header_value_bytes,
        max_header_fields=settings.max_header_fields,
        max_mime_depth=settings.max_mime_depth,
        max_mime_parts=settings.max_mime_parts,
        max_token_chars=settings.max_token_chars,
        max_distinct_tokens=settings.max_distinct_tokens,
    )


def with_time_budget(limits: TokenizerLimits, seconds: float) -> TokenizerLimits:
    # Per message, not per request: a batch of a thousand messages must not have its last ones
    # cut (or refused) because the first ones took the time; each message is bounded by the
    # caps anyway, so a batch's time stays proportional to its size.
    return replace(limits, deadline=time.monotonic() + seconds, clock=time.monotonic)


class Runtime:
    def __init__(self, settings: Settings, db: Database | None = None) -> None:
        self.settings = settings
        self.db = db or Database(
            settings.database_url, lock_timeout_seconds=settings.lock_timeout_seconds
        )
        self.models = LiveModels(self.db, sync_interval_seconds=settings.sync_interval_seconds)
        self.limits = tokenizer_limits(settings)
        self._records: dict[int, list[ClassificationRecord]] = defaultdict(list)
        self._events: dict[tuple[int, datetime], Counter[str]] = defaultdict(Counter)
        self._buffer_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self._last_expiry = 0.0

    def prepare(
        self, message: Message, budget: Literal["classify", "train"] | None = None
    ) -> PreparedMessage:
        """Check and tokenize `message`, within the time budget of a classify or a train."""
        limits = self.limits if budget is None else self.budgeted_limits(budget)
        return prepare(message, limits=limits, max_message_bytes=self.settings.max_message_bytes)

    def budget_seconds(self, kind: Literal["classify", "train"]) -> float:
        if kind == "classify":
            return self.settings.classify_time_budget_seconds
        return self.settings.train_time_budget_seconds

    def budgeted_limits(self, kind: Literal["classify", "train"]) -> TokenizerLimits:
        """The tokenizer limits for one message, its time budget starting now."""
        return with_time_budget(self.limits, self.budget_seconds(kind))

    def retention_start(self) -> datetime | None:
        """The oldest classification time still kept, or None when nothing is kept."""
        if self.settings.retention_days <= 0:
            return None
        return datetime.now(UTC) - timedelta(days=self.settings.retention_days)

    def record_classifications(
        self, model_id: int, records: list[ClassificationRecord], events: Counter[str]
    ) -> None:
        hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        with self._buffer_lock:
            if self.settings.retention_days > 0:
                buffered = self._records[model_id]
                buffered.extend(records)
                if len(buffered) > MAX_BUFFERED_RECORDS:
                    del buffered[: len(buffered) - MAX_BUFFERED_RECORDS]
            self._events[(model_id, hour)].update(events)

    def flush_classifications(self) -> None:
        """Write buffered classification records and counters in one transaction."""
        with self._flush_lock:
            with self._buffer_lock:
                records, self._records = self._records, defaultdict(list)
                events, self._events = self._events, defaultdict(Counter)
            if not records and not events:
                return

            def work(conn: Connection) -> None:
                for model_id, model_records in sorted(records.items()):
                    insert_classifications(conn, model_id, model_records)
                for (model_id, hour), counter in sorted(events.items()):
                    add_activity(conn, model_id, hour=hour, events=counter)

            try:
                self.db.run(work)
            except (DatabaseUnavailable, StorageFull):
                with self._buffer_lock:  # keep them for the next attempt
                    for model_id, model_records in records.items():
                        self._records[model_id][:0] = model_records
                    for key, counter in events.items():
                        self._events[key].update(counter)
                raise

    def expire(self) -> int:
        """Delete classification records past the retention period."""
        before = self.retention_start() or datetime.now(UTC) + timedelta(seconds=1)
        return self.db.run(lambda conn: expire_classifications(conn, before=before))

    def start(self) -> None:
        """Start the background flusher (the server does; short-lived CLI commands need not)."""
        if self._flusher is None:
            self._flusher = threading.Thread(
                target=self._run_flusher, name="spamsift-flush", daemon=True
            )
            self._flusher.start()

    def close(self) -> None:
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join(timeout=10)
            self._flusher = None
        try:
            self.flush_classifications()
        except (DatabaseUnavailable, StorageFull):
            log.warning("could not write the last classification records: database unavailable")
        self.db.dispose()

    def _run_flusher(self) -> None:
        while not self._stop.wait(FLUSH_INTERVAL_SECONDS):
            try:
                self.flush_classifications()
                if time.monotonic() - self._last_expiry > EXPIRY_INTERVAL_SECONDS:
                    self._last_expiry = time.monotonic()
                    self.expire()
            except (DatabaseUnavailable, StorageFull):
                log.warning("database unavailable or full; classification records stay buffered")
            except Exception:  # the flusher must outlive any one bad flush
                log.exception("flushing classification records failed")
