"""One model held in memory: its count arrays and classifier, kept in step with the database
by generation.

A write through this process (`app.live.write.ModelWrite`) updates the arrays in place after
its commit. Training by another process is picked up by reading the change feed (rows whose
generation is newer than the one this process has seen), never by reloading everything.

`LiveModel.lock` guards the in-memory arrays for the few microseconds of an update or a scoring
pass; database reads happen outside it, so classifying never waits on a writer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection

from app.bayes.attributes import AttributeCell, AttributeSums, MomentsDelta
from app.bayes.counts import CountTable, IntArray
from app.bayes.naive_bayes import Classifier, NaiveBayesConfig
from app.bayes.scorers import VocabularyTotals
from app.store.attributes import read_attribute_cells, read_attribute_sums
from app.store.counts import CountChanges, CountDelta, read_changes, read_model_parts
from app.store.engine import Database, trim_heap
from app.store.models import ModelRow, find_model
from app.token_texts import HashedTexts

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


def estimated_bytes(n_tokens: int, n_classes: int) -> int:
    """The memory a model of `n_tokens` tokens takes when held (see BYTES_PER_TOKEN)."""
    return BYTES_PER_MODEL + n_tokens * (BYTES_PER_TOKEN + 16 * n_classes)


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

    @property
    def attributes(self) -> AttributeSums:
        """The Gaussian sums of the model's numeric attributes (changed under `lock`)."""
        return self.classifier.attributes

    @classmethod
    def load(cls, db: Database, name: str, engine_config: EngineConfig) -> LiveModel:
        with db.transaction(write=False) as conn:
            row = find_model(conn, name)
            live = cls.empty(row, engine_config)
            live.table.reserve(row.n_tokens)  # every id this snapshot can hold
            # No other thread sees `live` yet: its parts go in without its lock.
            for part in read_model_parts(
                conn, row.id, generation=row.generation, n_classes=len(row.classes)
            ):
                live._apply_rows(part)
            live.table.drop_journal()  # the last parts' old counts: no one needs them
            read_attribute_sums(conn, row.id, len(row.classes), into=live.attributes)
            live.synced_generation = row.generation
        live.classifier.warm()  # its temporaries are freed below, not after the first request
        trim_heap()
        live.last_check = time.monotonic()
        return live

    @classmethod
    def empty(
        cls,
        row: ModelRow,
        engine_config: EngineConfig,
        *,
        config: NaiveBayesConfig | None = None,
        totals: VocabularyTotals | None = None,
    ) -> LiveModel:
        """Model `row` with no counts yet, scored with `config` (default: its stored options')
        and, for a table of only some of its tokens, V's sums `totals`."""
        table = CountTable(row.classes)
        config = config or engine_config(row.config, row.classes)
        return cls(
            id=row.id,
            name=row.name,
            classes=row.classes,
            options=dict(row.config),
            table=table,
            classifier=Classifier(table, config, totals=totals),
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

    def apply(self, changes: CountChanges, attributes: Sequence[AttributeCell] = ()) -> None:
        """Apply a change feed read from the database, with the attribute cells changed in
        it (absolute values; idempotent)."""
        capacity = self.table.capacity
        with self.lock:
            if changes.generation <= self.synced_generation:
                return
            self._apply_rows(changes)
            self.attributes.set_cells(attributes)
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
        since = self.synced_generation
        self.apply(
            read_changes(
                conn,
                self.id,
                since_generation=since,
                held_tokens=self.table.n_tokens,
                generation=generation,
                n_classes=len(self.classes),
            ),
            read_attribute_cells(conn, self.id, since_generation=since),
        )

    def apply_own_write(
        self,
        generation: int,
        *,
        new_token_ids: IntArray,
        new_tokens: HashedTexts,
        delta: CountDelta,
        class_docs: IntArray,
        class_terms: IntArray,
        attributes: Mapping[tuple[str, int], MomentsDelta] | None = None,
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
                self.table.place(new_token_ids, new_tokens)
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
            for (name, class_index), change in (attributes or {}).items():
                self.attributes.change(name, class_index, change)
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
            self.classifier = Classifier(
                self.table,
                self.engine_config(options, self.classes),
                attributes=self.classifier.attributes,
            )
