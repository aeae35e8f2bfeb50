"""The models a process holds, within a memory budget, and the one way to reach any model.

Memory is bounded by a budget (`max_bytes`), not by the number of models: past it, the least
recently used models are dropped (and loaded again when next used). A held model is synced
with the database at most `sync_interval_seconds` after another process committed. A model
not held is scored from its messages' rows (`app.live.cold`) until it is used often enough to
be loaded, in the background.

A model being loaded holds only its own loading lock: other models are served meanwhile.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from app.bayes.naive_bayes import NaiveBayesConfig, reads
from app.bayes.scorers import Reads
from app.errors import DatabaseUnavailable, ModelNotFound
from app.live.cold import MAX_KEPT_TOTALS, KeptTotals, PartialModel, read_partial_model
from app.live.held import EngineConfig, LiveModel, estimated_bytes
from app.live.memory import bound_kept_memory
from app.store.engine import Database
from app.store.models import ModelRow, find_model, read_generation

T = TypeVar("T")

log = logging.getLogger(__name__)

# Fresh loads a write may take while token expiry goes on (each chunk of it moves the epoch).
STALE_RETRIES = 20

# A model not held that one process classifies this often is loaded, in the background: a
# read of the message's rows costs that process 3-4 times the CPU of scoring a held model
# (one SQLite or PostgreSQL query a message), which a busy model should not pay forever,
# while a mailbox classified now and then stays out of the memory budget. A batch counts
# each of its messages: counted as one, a worker not holding a model classified in batches
# of 100 (5,000 messages in 10 seconds before it counted 50) read every batch's rows, 1.5
# times the server CPU per message of a worker holding it (`python -m bench.lab.batch_http`).
HOT_READS = 50
HOT_WINDOW_SECONDS = 10.0


@dataclass(frozen=True)
class HeldFigures:
    """What a process holds now, for /metrics."""

    models: int
    bytes: int
    max_bytes: int
    evictions: int
    loads: int
    partial_reads: int  # classifications of models not held, from their message's rows only
    totals_reads: int = 0  # of those, reads of a generation's vocabulary sums (naive Bayes)


class LiveModels:
    """The per-process cache of live models, by name, within a memory budget (LRU)."""

    def __init__(
        self,
        db: Database,
        *,
        sync_interval_seconds: float,
        engine_config: EngineConfig,
        max_bytes: int = 0,
        hot_reads: int = HOT_READS,
        hot_window_seconds: float = HOT_WINDOW_SECONDS,
    ) -> None:
        self.db = db
        self.sync_interval_seconds = sync_interval_seconds
        self.engine_config = engine_config
        self.max_bytes = max_bytes  # 0: no budget
        self._models: OrderedDict[str, LiveModel] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._held_bytes = 0
        self._evictions = 0
        self._loads = 0
        self._partial_reads = 0
        self._configs: dict[tuple[str, tuple[str, ...]], NaiveBayesConfig] = {}
        self.totals = KeptTotals()
        self._lock = threading.Lock()  # guards the dicts above for microseconds, never a load
        self._loading: dict[str, threading.Lock] = {}
        self.hot_reads = hot_reads
        self.hot_window_seconds = hot_window_seconds
        # Per model not held: (start of the window, partial reads in it).
        self._cold_reads: dict[str, tuple[float, int]] = {}
        self._background_loads: set[str] = set()
        bound_kept_memory()

    def get(self, name: str) -> LiveModel:
        """Return the model, loaded on first use and synced at most `sync_interval` ago.

        While the database does not answer, a model this process holds is returned as held
        (a mail filter keeps filtering on the counts it has; writes fail on their own, 503),
        and the sync is tried again after `sync_interval`. A model not held needs the
        database: DatabaseUnavailable."""
        with self._lock:
            live = self._models.get(name)
            if live is not None:
                self._models.move_to_end(name)
        if live is None:
            return self._load(name)
        if self._sync_due(live):
            try:
                self.sync(live)
            except DatabaseUnavailable:
                if not live.unsynced:
                    log.warning(
                        "the database is unavailable: model %r answers from the counts this "
                        "process holds until it is back",
                        name,
                    )
                live.unsynced = True
                return live
            live.unsynced = False
            if self.held(name) is not live:  # deleted meanwhile: load what is there now
                return self.get(name)
        return live

    def in_memory(self, name: str) -> LiveModel | None:
        """The model as `get(name)` would return it without reading the database: held, and
        synced within `sync_interval_seconds`; None where `get` would read (a load or a sync)."""
        with self._lock:
            live = self._models.get(name)
            if live is None:
                return None
            self._models.move_to_end(name)
        return None if self._sync_due(live) else live

    def _sync_due(self, live: LiveModel) -> bool:
        return time.monotonic() - live.last_check >= self.sync_interval_seconds

    def use(self, name: str, work: Callable[[LiveModel], T]) -> T:
        """Run `work` on the model, again on a fresh load while this copy turned out stale.

        A model deleted (and maybe re-created under the same id) by another process, or whose
        tokens expired since it was read, makes a write's model lock raise ModelNotFound; the
        copy is dropped and `work` runs again on a fresh load, which raises ModelNotFound
        itself only if the model is really gone. Expiry deletes in chunks, each moving the
        epoch, so a write may find its fresh copy stale again: up to STALE_RETRIES times.
        """
        for _ in range(STALE_RETRIES):
            live = self.get(name)  # ModelNotFound here: the model is gone
            try:
                return work(live)
            except ModelNotFound:
                self.forget(name)
        return work(self.get(name))

    def read_partial(
        self,
        name: str,
        texts: Sequence[str],
        *,
        event_model: str | None = None,
        messages: int = 1,
    ) -> PartialModel | None:
        """Read only what scoring `texts` (those of `messages` messages) needs of model `name`
        (one this process does not hold), in one read transaction: its row, the texts' token
        rows and class totals (and V's sums where the scorer needs them, see
        `cold.KeptTotals`). None when its scorer needs the whole model (`naive_bayes.reads`);
        ModelNotFound if none."""
        with self.db.transaction(write=False) as conn:
            row = find_model(conn, name)
            config = self.config_of(row)
            needs = reads(config, event_model)
            if needs is Reads.WHOLE_TABLE:
                return None
            totals = self.totals if needs is Reads.ROWS_AND_TOTALS else None
            partial = read_partial_model(
                conn, row, config, texts, self.engine_config, totals=totals
            )
        # A model the whole budget cannot hold stays read by rows, however often it is used.
        size = estimated_bytes(row.n_tokens, len(row.classes))
        fits = self.max_bytes <= 0 or size <= self.max_bytes
        with self._lock:
            self._partial_reads += 1
            hot = fits and self._count_cold_read(name, messages)
        if hot:
            threading.Thread(
                target=self._load_in_background, args=(name,), name="spamsift-load", daemon=True
            ).start()
        return partial

    def _count_cold_read(self, name: str, messages: int) -> bool:
        """Count a partial read of `name` for `messages` messages; tell whether it just
        became hot (under _lock)."""
        now = time.monotonic()
        start, reads = self._cold_reads.get(name, (now, 0))
        if now - start > self.hot_window_seconds:
            start, reads = now, 0
        reads += messages
        if reads < self.hot_reads:
            if name not in self._cold_reads and len(self._cold_reads) >= MAX_KEPT_TOTALS:
                self._cold_reads.clear()  # a bound, whatever the number of models
            self._cold_reads[name] = (start, reads)
            return False
        self._cold_reads.pop(name, None)
        if name in self._background_loads:
            return False
        self._background_loads.add(name)
        return True

    def _load_in_background(self, name: str) -> None:
        """Load a hot model while its requests go on being scored from their rows."""
        try:
            self.get(name)
        except ModelNotFound:
            pass  # deleted meanwhile: nothing to hold
        except Exception:  # the next hot window tries again
            log.warning("loading the model %r in the background failed", name, exc_info=True)
        finally:
            with self._lock:
                self._background_loads.discard(name)

    def config_of(self, row: ModelRow) -> NaiveBayesConfig:
        """The engine config of a model's stored options, parsed once per distinct options."""
        key = (json.dumps(row.config, sort_keys=True), row.classes)
        config = self._configs.get(key)
        if config is None:
            config = self.engine_config(row.config, row.classes)
            with self._lock:
                if len(self._configs) > 1000:  # a bound, whatever the models' options
                    self._configs.clear()
                self._configs[key] = config
        return config

    def held(self, name: str) -> LiveModel | None:
        """The model if this process holds it, without loading or syncing it."""
        with self._lock:
            return self._models.get(name)

    def held_by_id(self, model_id: int) -> LiveModel | None:
        """The model of that id if this process holds it (a backing model, known by id)."""
        with self._lock:
            return next((live for live in self._models.values() if live.id == model_id), None)

    def hold(self, live: LiveModel) -> None:
        """Keep `live` (a model this process just made or loaded), within the budget."""
        with self._lock:
            previous = self._models.get(live.name)
            if previous is not None and previous is not live:
                self._drop(live.name)
            self._models[live.name] = live
            self._models.move_to_end(live.name)
            self._resize(live)
            self._evict_beyond_budget(keep=live.name)

    def resize(self, live: LiveModel) -> None:
        """Account for a held model that grew (or shrank) by a write."""
        with self._lock:
            if self._models.get(live.name) is live:
                self._resize(live)
                self._evict_beyond_budget(keep=live.name)

    def sync(self, live: LiveModel) -> None:
        """Read what other processes committed since this one last looked."""
        live.last_check = time.monotonic()
        with self.db.transaction(write=False) as conn:
            generation = read_generation(
                conn, live.id, created_at=live.created_at, epoch=live.epoch
            )
            if generation is None:  # deleted (maybe re-created), or tokens expired: read again
                self.forget(live.name)
                return
            if generation > live.synced_generation:
                live.catch_up(conn, generation)
        self.resize(live)

    def forget(self, name: str) -> None:
        with self._lock:
            self._drop(name)

    def figures(self) -> HeldFigures:
        with self._lock:
            return HeldFigures(
                models=len(self._models),
                bytes=self._held_bytes,
                max_bytes=self.max_bytes,
                evictions=self._evictions,
                loads=self._loads,
                partial_reads=self._partial_reads,
                totals_reads=self.totals.reads,
            )

    def _load(self, name: str) -> LiveModel:
        # One lock per model name: loading a big model stalls only its own requests.
        with self._lock:
            loading = self._loading.setdefault(name, threading.Lock())
        with loading:
            live = self.held(name)
            if live is None:
                live = LiveModel.load(self.db, name, self.engine_config)
                with self._lock:
                    self._loads += 1
                self.hold(live)
        with self._lock:
            if not loading.locked():
                self._loading.pop(name, None)
        return live

    def _resize(self, live: LiveModel) -> None:
        size = live.size_bytes()
        self._held_bytes += size - self._sizes.get(live.name, 0)
        self._sizes[live.name] = size

    def _drop(self, name: str) -> None:
        if self._models.pop(name, None) is not None:
            self._held_bytes -= self._sizes.pop(name, 0)

    def _evict_beyond_budget(self, *, keep: str) -> None:
        if self.max_bytes <= 0:
            return
        while self._held_bytes > self.max_bytes and len(self._models) > 1:
            oldest = next(iter(self._models))
            if oldest == keep:  # the model in use stays, even alone over the budget
                self._models.move_to_end(oldest)
                if next(iter(self._models)) == keep:
                    break
                continue
            self._drop(oldest)
            self._evictions += 1
