"""The models a process keeps in memory, kept in step with the database by generation.

Each process holds, per model, the count arrays the engine scores with. A write through this
process (`app.live.write.ModelWrite`) updates them in place after its commit. Training by
another process is picked up by reading the change feed (rows whose generation is newer than
the one this process has seen), at most `sync_interval_seconds` after it committed, never by
reloading everything.

Memory is bounded by a budget (`max_bytes`), not by the number of models: past it, the least
recently used models are dropped (and loaded again when next used).

Locks: `LiveModel.lock` guards the in-memory arrays for the few microseconds of an update or a
scoring pass; database reads happen outside it, so classifying never waits on a writer. A
model being loaded holds only its own loading lock: other models are served meanwhile.
"""

from __future__ import annotations

import ctypes
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection

from app.bayes.counts import CountTable, IntArray
from app.bayes.naive_bayes import Classifier, NaiveBayesConfig, reads, vocabulary_totals
from app.bayes.scorers import Reads, VocabularyTotals
from app.errors import DatabaseUnavailable, ModelNotFound
from app.store.counts import (
    CountChanges,
    CountDelta,
    MessageCounts,
    read_all_counts,
    read_changes,
    read_message_counts,
    read_model_parts,
)
from app.store.engine import Database, trim_heap
from app.store.models import ModelRow, find_model, read_generation

T = TypeVar("T")

log = logging.getLogger(__name__)

# Turns a model's stored options into the engine's config (the service's ModelConfig does:
# this room holds models, it does not judge their options).
EngineConfig = Callable[[dict[str, Any], tuple[str, ...]], NaiveBayesConfig]

# Bytes a held model costs per token beyond its count arrays: the token's text and its index
# entry, and the scorers' cached log-probabilities. Measured: 1,000 models of ~4,300 tokens
# took 0.86 MB each in server RSS (about 200 bytes a token, of which the int64 count arrays
# of two classes are 32); holding 50 of 2,701 models of ~6,500 tokens in turn (2,651
# evictions) took 79 MB over the process with none held, about 240 bytes a token once the
# allocator's fragmentation after many loads and evictions is counted.
BYTES_PER_TOKEN = 210
BYTES_PER_MODEL = 16_384  # the Python objects of one model, whatever its size


@dataclass
class LiveModel:
    """One model's counts in memory, and the generation they reflect."""

    id: int
    name: str
    classes: tuple[str, ...]
    options: dict[str, Any]  # the model's stored config, as the database holds it
    table: CountTable
    classifier: Classifier
    created_at: datetime  # with `id`, tells this model from a re-created one of the same id
    engine_config: EngineConfig
    epoch: int = 0  # the model's epoch when read: tokens expired since make it stale
    backed_by: int | None = None  # the id of the model whose counts are merged with these
    feedback_trains_backing: bool = False
    synced_generation: int = -1
    last_check: float = 0.0
    unsynced: bool = False  # the last sync failed: the database did not answer
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def config(self) -> NaiveBayesConfig:
        return self.classifier.config

    @classmethod
    def load(cls, db: Database, name: str, engine_config: EngineConfig) -> LiveModel:
        with db.transaction(write=False) as conn:
            row = find_model(conn, name)
            live = cls.empty(row, engine_config)
            # No other thread sees `live` yet: its parts go in without its lock.
            for part in read_model_parts(
                conn, row.id, generation=row.generation, n_classes=len(row.classes)
            ):
                live._apply_rows(part)
            live.synced_generation = row.generation
        live.classifier.warm()  # its temporaries are freed below, not after the first request
        trim_heap()
        live.last_check = time.monotonic()
        return live

    @classmethod
    def empty(cls, row: ModelRow, engine_config: EngineConfig) -> LiveModel:
        table = CountTable(row.classes)
        return cls(
            id=row.id,
            name=row.name,
            classes=row.classes,
            options=dict(row.config),
            table=table,
            classifier=Classifier(table, engine_config(row.config, row.classes)),
            created_at=row.created_at,
            engine_config=engine_config,
            epoch=row.epoch,
            backed_by=row.backed_by,
            feedback_trains_backing=row.feedback_trains_backing,
        )

    def present(self, token_ids: IntArray) -> NDArray[np.bool_]:
        """Which of `token_ids` this copy knows (expired ones have no text)."""
        with self.lock:
            tokens = self.table.tokens
            size = len(tokens)
            known = [i < size and tokens[i] != "" for i in token_ids.tolist()]
        return np.array(known, dtype=np.bool_)

    def size_bytes(self) -> int:
        """Estimate the memory this model holds (see BYTES_PER_TOKEN)."""
        return estimated_bytes(self.table.n_tokens, len(self.classes))

    def apply(self, changes: CountChanges) -> None:
        """Apply a change feed read from the database (absolute values; idempotent)."""
        capacity = self.table.capacity
        with self.lock:
            if changes.generation <= self.synced_generation:
                return
            self._apply_rows(changes)
            self.synced_generation = changes.generation
        self._return_memory_if_grown(capacity)

    def _apply_rows(self, changes: CountChanges) -> None:
        if len(changes.token_ids):
            self.table.place(changes.token_ids, changes.token_texts)
        if len(changes.count_token_ids):
            self.table.set_counts(
                changes.count_token_ids,
                changes.count_class_indices,
                changes.count_docs,
                changes.count_terms,
            )
        self.table.set_class_totals(changes.class_docs, changes.class_terms)

    def catch_up(self, conn: Connection, generation: int) -> None:
        """Bring config and arrays to `generation` by reading the change feed through `conn`."""
        if generation <= self.synced_generation:
            return
        row = find_model(conn, self.name)
        if row.config != self.options:
            self.reconfigure(dict(row.config))
        self.backed_by, self.feedback_trains_backing = row.backed_by, row.feedback_trains_backing
        self.apply(
            read_changes(
                conn,
                self.id,
                since_generation=self.synced_generation,
                generation=generation,
                n_classes=len(self.classes),
            )
        )

    def apply_own_write(
        self,
        generation: int,
        *,
        new_token_ids: IntArray,
        new_token_texts: list[str],
        delta: CountDelta,
        class_docs: IntArray,
        class_terms: IntArray,
    ) -> bool:
        """Apply this process's committed write in place, if it directly follows what we hold.

        Returns False when another write came in between; the caller then reads the feed.
        """
        capacity = self.table.capacity
        with self.lock:
            if generation <= self.synced_generation:
                return True  # already read back through the feed
            if generation != self.synced_generation + 1:
                return False
            if len(new_token_ids):
                self.table.place(new_token_ids, new_token_texts)
            if len(delta.token_ids):
                cells = (delta.class_indices, delta.token_ids)
                self.table.set_counts(
                    delta.token_ids,
                    delta.class_indices,
                    self.table.token_docs[cells] + delta.docs,
                    self.table.token_terms[cells] + delta.terms,
                )
            self.table.set_class_totals(
                self.table.class_docs + class_docs, self.table.class_terms + class_terms
            )
            self.synced_generation = generation
        self._return_memory_if_grown(capacity)
        return True

    def _return_memory_if_grown(self, capacity: int) -> None:
        """After the arrays grew, give the old ones' heap pages back to the system.

        glibc serves arrays below its (self-raising) mmap threshold from the heap and keeps
        them when freed: a million-token model's first trained message left 30 MB of freed
        arrays resident. malloc_trim costs ~0.2 ms, so only after a growth (every 12.5 %).
        """
        if self.table.capacity != capacity:
            trim_heap()

    def reconfigure(self, options: dict[str, Any]) -> None:
        with self.lock:
            self.options = options
            self.classifier = Classifier(self.table, self.engine_config(options, self.classes))


@dataclass(frozen=True)
class PartialModel:
    """A model as far as some messages need it: their tokens' rows and the class totals.

    Its table numbers the tokens 0..k-1; `token_ids` gives each one's id in the model.
    """

    live: LiveModel
    token_ids: IntArray


# Fresh loads a write may take while token expiry goes on (each chunk of it moves the epoch).
STALE_RETRIES = 20

# Vocabulary totals kept for models not held, per process: each is a few numbers, so many
# thousands cost well under a megabyte.
MAX_KEPT_TOTALS = 20_000

# A model not held that one process classifies this often is loaded, in the background: a
# read of the message's rows costs that process 3-4 times the CPU of scoring a held model
# (one SQLite or PostgreSQL query a message), which a busy model should not pay forever,
# while a mailbox classified now and then stays out of the memory budget.
HOT_READS = 50
HOT_WINDOW_SECONDS = 10.0


def estimated_bytes(n_tokens: int, n_classes: int) -> int:
    """The memory a model of `n_tokens` tokens takes when held (see BYTES_PER_TOKEN)."""
    return BYTES_PER_MODEL + n_tokens * (BYTES_PER_TOKEN + 16 * n_classes)


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
        # Per model not held: (generation, V's sums at it); see `_vocabulary_totals`.
        self._totals: OrderedDict[
            tuple[int, datetime, float, int, frozenset[str]], tuple[int, VocabularyTotals]
        ] = OrderedDict()
        self._totals_reads = 0
        # Per blend (personal and backing model at their generations, and the options the
        # sums depend on): the merged vocabulary's sums; see app/live/blend.py.
        self._blend_totals: OrderedDict[Hashable, VocabularyTotals] = OrderedDict()
        self.blend_totals_lock = threading.Lock()  # held while one blend's sums are made
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
        if time.monotonic() - live.last_check >= self.sync_interval_seconds:
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
        self, name: str, texts: Sequence[str], *, event_model: str | None = None
    ) -> PartialModel | None:
        """Read only what scoring `texts` needs of model `name` (one this process does not
        hold), in one read transaction: its row, the texts' token rows and class totals (and
        V's sums where the scorer needs them, see `_vocabulary_totals`). None when its scorer
        needs the whole model (`naive_bayes.reads`); ModelNotFound if none."""
        totals = None
        with self.db.transaction(write=False) as conn:
            row = find_model(conn, name)
            config = self.config_of(row)
            needs = reads(config, event_model)
            if needs is Reads.WHOLE_TABLE:
                return None
            counts = read_message_counts(conn, row.id, texts, n_classes=len(row.classes))
            if needs is Reads.ROWS_AND_TOTALS:
                totals = self._vocabulary_totals(conn, row, config, counts)
        table = CountTable(row.classes)
        table.place(np.arange(counts.token_ids.size, dtype=np.int64), counts.token_texts)
        if counts.count_token_ids.size:
            table.set_counts(
                np.searchsorted(counts.token_ids, counts.count_token_ids),
                counts.count_class_indices,
                counts.count_docs,
                counts.count_terms,
            )
        table.set_class_totals(counts.class_docs, counts.class_terms)
        live = LiveModel(
            id=row.id,
            name=row.name,
            classes=row.classes,
            options=dict(row.config),
            table=table,
            classifier=Classifier(table, config, totals=totals),
            created_at=row.created_at,
            engine_config=self.engine_config,
            epoch=row.epoch,
            synced_generation=row.generation,
            backed_by=row.backed_by,
            feedback_trains_backing=row.feedback_trains_backing,
        )
        # A model the whole budget cannot hold stays read by rows, however often it is used.
        size = estimated_bytes(row.n_tokens, len(row.classes))
        fits = self.max_bytes <= 0 or size <= self.max_bytes
        with self._lock:
            self._partial_reads += 1
            hot = fits and self._count_cold_read(name)
        if hot:
            threading.Thread(
                target=self._load_in_background, args=(name,), name="spamsift-load", daemon=True
            ).start()
        return PartialModel(live=live, token_ids=counts.token_ids)

    def _count_cold_read(self, name: str) -> bool:
        """Count a partial read of `name`; tell whether it just became hot (under _lock)."""
        now = time.monotonic()
        start, reads = self._cold_reads.get(name, (now, 0))
        if now - start > self.hot_window_seconds:
            start, reads = now, 0
        reads += 1
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

    def _vocabulary_totals(
        self, conn: Connection, row: ModelRow, config: NaiveBayesConfig, counts: MessageCounts
    ) -> VocabularyTotals:
        """V's sums for the model at the generation of `row` (read in `conn`'s snapshot):
        kept from an earlier read of that generation, else summed from every count row (no
        texts) in the same snapshot. Every write moves the generation (and expiry the epoch,
        which moves the generation too), so a kept sum is never stale."""
        key = (row.id, row.created_at, config.alpha, config.min_df, config.stop_words)
        with self._lock:
            kept = self._totals.get(key)
            if kept is not None:
                self._totals.move_to_end(key)
        if kept is not None and kept[0] == row.generation:
            return kept[1]
        token_ids, class_indices, docs, terms = read_all_counts(conn, row.id)
        n_tokens = int(token_ids.max()) + 1 if token_ids.size else 0
        token_docs = np.zeros((len(row.classes), n_tokens), dtype=np.int64)
        token_terms = np.zeros((len(row.classes), n_tokens), dtype=np.int64)
        token_docs[class_indices, token_ids] = docs
        token_terms[class_indices, token_ids] = terms
        stop_word_ids = None
        if config.stop_words:  # V leaves them out: find which of them the model knows
            stop_word_ids = read_message_counts(
                conn, row.id, sorted(config.stop_words), n_classes=len(row.classes)
            ).token_ids
        totals = vocabulary_totals(
            token_docs,
            token_terms,
            counts.class_docs,
            alpha=config.alpha,
            min_df=config.min_df,
            stop_word_ids=stop_word_ids,
        )
        with self._lock:
            self._totals[key] = (row.generation, totals)
            self._totals.move_to_end(key)
            self._totals_reads += 1
            while len(self._totals) > MAX_KEPT_TOTALS:
                self._totals.popitem(last=False)
        return totals

    def kept_blend_totals(self, key: Hashable) -> VocabularyTotals | None:
        """The merged vocabulary's sums kept for a blend at `key` (its models' generations)."""
        with self._lock:
            totals = self._blend_totals.get(key)
            if totals is not None:
                self._blend_totals.move_to_end(key)
            return totals

    def keep_blend_totals(self, key: Hashable, totals: VocabularyTotals) -> None:
        """Keep a blend's sums; a few numbers each, the oldest dropped past MAX_KEPT_TOTALS
        (a key names its generations, so an entry is never stale, only unused)."""
        with self._lock:
            self._blend_totals[key] = totals
            self._blend_totals.move_to_end(key)
            self._totals_reads += 1
            while len(self._blend_totals) > MAX_KEPT_TOTALS:
                self._blend_totals.popitem(last=False)

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
                totals_reads=self._totals_reads,
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


# mallopt's parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Blocks from 1 MiB are mapped on their own: a model's arrays and the load's larger
# temporaries. A load's many blocks of ~800 KB (a range of 100,000 ids in int64) stay in the
# arena, where they are reused: mapping those too (128 KiB, glibc's default) cost a
# million-token load 0.3 s more CPU (0.9 -> 1.2 s) in page faults.
SEPARATE_MAPPING_BYTES = 1 << 20
# Free memory at the top of an arena above this goes back to the system when a block is freed.
KEPT_TOP_BYTES = 128 * 1024


def bound_kept_memory() -> bool:
    """Keep glibc from holding freed model-sized blocks: fix its mmap and trim thresholds.

    By default glibc raises its mmap threshold (up to 32 MiB) each time a large block is
    freed, and its trim threshold to twice that, so the arrays of a model's load came from the
    heap of the loading thread's arena, and up to 64 MiB freed at its top stayed resident:
    malloc_trim gives back free blocks inside an arena but not a thread arena's top. A
    million-token model's server kept 64 or 83 bytes a token from one run to the next.
    Process-wide, and idempotent; False where there is no glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(
            libc.mallopt(M_MMAP_THRESHOLD, SEPARATE_MAPPING_BYTES)
            and libc.mallopt(M_TRIM_THRESHOLD, KEPT_TOP_BYTES)
        )
    except (OSError, AttributeError):
        return False
