"""The models a process keeps in memory, kept in step with the database by generation.

Each process holds, per model, the count arrays the engine scores with. Training through this
process updates them in place after its commit. Training by another process is picked up by
reading the change feed (rows whose generation is newer than the one this process has seen),
at most `sync_interval_seconds` after it committed, never by reloading everything.

Locks: `LiveModel.lock` guards the in-memory arrays for the few microseconds of an update or a
scoring pass; database reads happen outside it, so classifying never waits on a writer.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Connection

from app.bayes.counts import CountTable, IntArray
from app.bayes.naive_bayes import Classifier
from app.service.model_config import ModelConfig, parse_config
from app.store.counts import CountChanges, CountDelta, read_changes
from app.store.engine import Database
from app.store.models import ModelRow, find_model, read_generation


@dataclass
class LiveModel:
    """One model's counts in memory, and the generation they reflect."""

    id: int
    name: str
    classes: tuple[str, ...]
    config: ModelConfig
    table: CountTable
    classifier: Classifier
    created_at: datetime  # with `id`, tells this model from a re-created one of the same id
    synced_generation: int = -1
    last_check: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, db: Database, name: str) -> LiveModel:
        with db.transaction(write=False) as conn:
            row = find_model(conn, name)
            live = cls.empty(row)
            live.apply(
                read_changes(
                    conn,
                    row.id,
                    since_generation=-1,
                    generation=row.generation,
                    n_classes=len(row.classes),
                )
            )
        live.classifier.warm()  # its temporaries are freed below, not after the first request
        return_freed_memory()
        live.last_check = time.monotonic()
        return live

    @classmethod
    def empty(cls, row: ModelRow) -> LiveModel:
        config = parse_config(row.config, classes=row.classes)
        table = CountTable(row.classes)
        return cls(
            id=row.id,
            name=row.name,
            classes=row.classes,
            config=config,
            table=table,
            classifier=Classifier(table, config.to_engine()),
            created_at=row.created_at,
        )

    def apply(self, changes: CountChanges) -> None:
        """Apply a change feed read from the database (absolute values; idempotent)."""
        with self.lock:
            if changes.generation <= self.synced_generation:
                return
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
            self.synced_generation = changes.generation

    def catch_up(self, conn: Connection, generation: int) -> None:
        """Bring config and arrays to `generation` by reading the change feed through `conn`."""
        if generation <= self.synced_generation:
            return
        row = find_model(conn, self.name)
        config = parse_config(row.config, classes=row.classes)
        if config != self.config:
            self.reconfigure(config)
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
            return True

    def reconfigure(self, config: ModelConfig) -> None:
        with self.lock:
            self.config = config
            self.classifier = Classifier(self.table, config.to_engine())


class LiveModels:
    """The per-process cache of live models, by name."""

    def __init__(self, db: Database, *, sync_interval_seconds: float) -> None:
        self.db = db
        self.sync_interval_seconds = sync_interval_seconds
        self._models: dict[str, LiveModel] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> LiveModel:
        """Return the model, loaded on first use and synced at most `sync_interval` ago."""
        live = self._models.get(name)
        if live is None:
            with self._lock:
                live = self._models.get(name)
                if live is None:
                    live = LiveModel.load(self.db, name)
                    self._models[name] = live
            return live
        if time.monotonic() - live.last_check >= self.sync_interval_seconds:
            self.sync(live)
            if self._models.get(name) is not live:  # deleted meanwhile: load what is there now
                return self.get(name)
        return live

    def sync(self, live: LiveModel) -> None:
        """Read what other processes committed since this one last looked."""
        live.last_check = time.monotonic()
        with self.db.transaction(write=False) as conn:
            generation = read_generation(conn, live.id, created_at=live.created_at)
            if generation is None:  # deleted (and maybe re-created) by another process
                self.forget(live.name)
                return
            if generation > live.synced_generation:
                live.catch_up(conn, generation)

    def forget(self, name: str) -> None:
        with self._lock:
            self._models.pop(name, None)


def return_freed_memory() -> None:
    """Give the memory freed after loading a model back to the operating system.

    glibc keeps freed heap pages for reuse: the temporaries of a million-token load stayed
    resident (server RSS 375 MB -> 300 MB with this). Nothing to do where there is no glibc.
    """
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
