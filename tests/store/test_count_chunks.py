"""Counts in chunks behind a journal: whether a write goes to the journal or is folded into
the chunks, every read (a whole model, a change feed from any generation, one message's
tokens, expiry's ages) gives what a plain dict kept write by write says, on SQLite and
PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import numpy as np
import pytest
from sqlalchemy import text

from app.store import counts as counts_module
from app.store.chunks import CHUNK_IDS
from app.store.counts import (
    CountChanges,
    CountDelta,
    MessageCounts,
    add_token_counts,
    delete_tokens,
    insert_tokens,
    read_changes,
    read_message_counts,
    read_token_ages,
)
from app.store.engine import Database
from app.store.models import insert_model, lock_model_row

N_CLASSES = 3
Cells = dict[tuple[int, int], tuple[int, int]]


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.dispose()


def cells_of(changes: CountChanges | MessageCounts) -> Cells:
    return {
        (token_id, class_index): (docs, terms)
        for token_id, class_index, docs, terms in zip(
            *(column.tolist() for column in changes.cells()), strict=True
        )
    }


def held(cells: Cells) -> Cells:
    return {cell: value for cell, value in cells.items() if value != (0, 0)}


class Writer:
    """Writes one model as a ModelWrite does (row lock, new tokens, one delta a write), and
    keeps what it wrote: counts per cell and the generation that last changed each token."""

    def __init__(self, db: Database, name: str) -> None:
        self.db = db
        with db.transaction() as conn:
            classes = tuple(f"c{i}" for i in range(N_CLASSES))
            row = insert_model(conn, name=name, classes=classes, config={})
        self.model_id: int = row.id
        self.created_at: datetime = row.created_at
        self.cells: Cells = {}
        self.changed_at: dict[int, int] = {}
        self.n_tokens = 0
        self.generation = 0
        self.ids_given: dict[int, int] = {-1: 0}  # generation: token ids given out by then

    def write(self, new: int, rows: list[tuple[int, int, int, int]], *, delete: list[int]) -> int:
        """Give `new` tokens ids, add `rows` (token id, class, docs, terms), delete tokens."""
        with self.db.transaction() as conn:
            row = lock_model_row(conn, self.model_id, created_at=self.created_at)
            first = row.allocate_token_ids(new)
            texts = [f"t{first + i}" for i in range(new)]
            insert_tokens(
                conn, self.model_id, first_id=first, texts=texts, generation=row.generation
            )
            if delete:
                delete_tokens(
                    conn, self.model_id, delete, generation=row.generation, n_classes=N_CLASSES
                )
            if rows:
                table = np.array(sorted(rows), dtype=np.int64)
                delta = CountDelta(*(table[:, column].copy() for column in range(4)))
                add_token_counts(
                    conn, self.model_id, delta, generation=row.generation, n_classes=N_CLASSES
                )
            row.save(conn)
        self.n_tokens += new
        self.generation = row.generation
        self.ids_given[row.generation] = self.n_tokens
        for token_id in delete:
            for class_index in range(N_CLASSES):
                self.cells.pop((token_id, class_index), None)
            self.changed_at.pop(token_id, None)
        for token_id, class_index, docs, terms in rows:
            before = self.cells.get((token_id, class_index), (0, 0))
            self.cells[(token_id, class_index)] = (before[0] + docs, before[1] + terms)
            self.changed_at[token_id] = row.generation
        return row.generation

    def read(self, since: int) -> CountChanges:
        with self.db.transaction(write=False) as conn:
            return read_changes(
                conn,
                self.model_id,
                since_generation=since,
                held_tokens=self.ids_given[since],
                generation=self.generation,
                n_classes=N_CLASSES,
            )

    def journal_rows(self) -> int:
        with self.db.transaction(write=False) as conn:
            return int(
                conn.execute(
                    text("SELECT count(*) FROM count_journal WHERE model_id = :m"),
                    {"m": self.model_id},
                ).scalar_one()
            )


def random_writes(seed: int) -> list[tuple[int, list[tuple[int, int, int, int]], list[int]]]:
    """Writes of new tokens and counts, subtractions only of what is there (as forget and
    relabel), and now and then a deletion of tokens (as expiry)."""
    rng = np.random.default_rng(seed)
    cells: Cells = {}
    n_tokens = 0
    deleted: set[int] = set()
    writes = []
    for number in range(40):
        new = int(rng.integers(0, 3 * CHUNK_IDS))
        n_tokens += new
        alive = [t for t in range(n_tokens) if t not in deleted]
        rows = []
        touched = set()
        for token_id in rng.choice(alive, size=min(len(alive), 12), replace=False).tolist():
            class_index = int(rng.integers(0, N_CLASSES))
            if (token_id, class_index) in touched:
                continue
            touched.add((token_id, class_index))
            docs, terms = cells.get((token_id, class_index), (0, 0))
            add_docs, add_terms = int(rng.integers(-docs, 4)), int(rng.integers(-terms, 9))
            if add_docs or add_terms:
                rows.append((token_id, class_index, add_docs, add_terms))
                cells[(token_id, class_index)] = (docs + add_docs, terms + add_terms)
        delete = []
        if number % 9 == 8:
            delete = sorted(rng.choice(alive, size=3, replace=False).tolist())
            deleted.update(delete)
            rows = [row for row in rows if row[0] not in deleted]
            for token_id in delete:
                for class_index in range(N_CLASSES):
                    cells.pop((token_id, class_index), None)
        writes.append((new, rows, delete))
    return writes


def check_reads(writer: Writer, snapshots: dict[int, Cells]) -> None:
    """The whole model equals the writer's dict; a reader that held the model at any earlier
    generation without a deletion since, and applies the feed from there, holds it too."""
    expected = held(writer.cells)
    assert held(cells_of(writer.read(-1))) == expected
    for generation, cells in snapshots.items():
        changes = writer.read(generation)
        caught_up = {**cells, **cells_of(changes)}
        assert held(caught_up) == expected, generation
        new_ids = range(writer.ids_given[generation], writer.n_tokens)
        new_tokens = dict(zip(changes.token_ids.tolist(), changes.token_texts, strict=True))
        assert new_tokens == {token_id: f"t{token_id}" for token_id in new_ids}
    with writer.db.transaction(write=False) as conn:
        ages = read_token_ages(conn, writer.model_id, N_CLASSES)
        asked = [f"t{token_id}" for token_id in range(0, writer.n_tokens, 3)] + ["unknown"]
        message = read_message_counts(conn, writer.model_id, asked, n_classes=N_CLASSES)
    ages_of = dict(zip(ages.token_ids.tolist(), ages.generations.tolist(), strict=True))
    assert ages_of == writer.changed_at
    assert held(cells_of(message)) == {
        cell: value for cell, value in expected.items() if cell[0] % 3 == 0
    }


@pytest.mark.parametrize("journal_cells", [0, 40, 1_000_000])
def test_every_read_equals_the_counts_written_whether_journalled_or_folded(
    db: Database, monkeypatch: pytest.MonkeyPatch, journal_cells: int
) -> None:
    """0: every write folded; 40: folded every few writes; a million: only deletions fold."""
    monkeypatch.setattr(counts_module, "JOURNAL_CELLS", journal_cells)
    writer = Writer(db, "chunked")
    snapshots: dict[int, Cells] = {}
    journal_seen = 0
    for new, rows, delete in random_writes(seed=journal_cells):
        if delete:
            snapshots.clear()  # a deletion moves the epoch: readers load the model again
        generation = writer.write(new, rows, delete=delete)
        snapshots[generation] = cells_of(writer.read(-1))
        journal_seen = max(journal_seen, writer.journal_rows())
        assert held(snapshots[generation]) == held(writer.cells)
    check_reads(writer, snapshots)
    assert (journal_seen > 0) == (journal_cells > 0)


def test_a_fold_keeps_other_models_and_the_tokens_of_a_chunk_it_does_not_change(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two models write the same token ids: each keeps its own counts; a write to one token
    of a chunk leaves the other tokens of that chunk, and their generations, as they were."""
    monkeypatch.setattr(counts_module, "JOURNAL_CELLS", 0)
    one, other = Writer(db, "one"), Writer(db, "other")
    g1 = one.write(CHUNK_IDS, [(t, 0, 1, t + 1) for t in range(CHUNK_IDS)], delete=[])
    other.write(CHUNK_IDS, [(t, 1, 2, 2) for t in range(CHUNK_IDS)], delete=[])
    g2 = one.write(0, [(3, 2, 5, 5)], delete=[])

    assert held(cells_of(one.read(-1))) == held(one.cells)
    assert held(cells_of(other.read(-1))) == held(other.cells)
    assert held(cells_of(one.read(g1))) == {(3, 0): (1, 4), (3, 2): (5, 5)}
    with db.transaction(write=False) as conn:
        ages = read_token_ages(conn, one.model_id, N_CLASSES)
    generations = dict(zip(ages.token_ids.tolist(), ages.generations.tolist(), strict=True))
    assert generations == {t: g2 if t == 3 else g1 for t in range(CHUNK_IDS)}


def test_a_journal_of_one_generation_twice_is_folded(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counts added twice in one transaction (one generation) are both kept: the second
    cannot be a second journal row of that generation, so it folds."""
    writer = Writer(db, "twice")
    writer.write(2, [(0, 0, 1, 1)], delete=[])
    with db.transaction() as conn:
        row = lock_model_row(conn, writer.model_id, created_at=writer.created_at)
        for token_id in (0, 1):
            delta = CountDelta(*(np.array([value]) for value in (token_id, 1, 2, 3)))
            add_token_counts(
                conn, writer.model_id, delta, generation=row.generation, n_classes=N_CLASSES
            )
        row.save(conn)
    writer.generation = row.generation

    assert held(cells_of(writer.read(-1))) == {(0, 0): (1, 1), (0, 1): (2, 3), (1, 1): (2, 3)}
    assert writer.journal_rows() == 0


class RolledBack(Exception):
    pass


def fold_then_fail(writer: Writer) -> None:
    """A write whose counts are folded, in a transaction that then fails."""
    with writer.db.transaction() as conn:
        row = lock_model_row(conn, writer.model_id, created_at=writer.created_at)
        delta = CountDelta(*(np.array([value]) for value in (1, 2, 5, 5)))
        add_token_counts(
            conn, writer.model_id, delta, generation=row.generation, n_classes=N_CLASSES
        )
        raise RolledBack


def test_a_fold_rolled_back_leaves_nothing_and_the_next_fold_on_its_connection_works(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first fold of a connection rolled back (on PostgreSQL, with the temporary table
    it made for its rows), the next fold on that connection stores its counts alone."""
    monkeypatch.setattr(counts_module, "JOURNAL_CELLS", 0)
    fresh = Database(database_url)  # a connection no fold has used yet
    try:
        writer = Writer(fresh, "rolled back")
        with pytest.raises(RolledBack):
            fold_then_fail(writer)
        writer.write(2, [(0, 0, 1, 1), (1, 1, 2, 3)], delete=[])
        writer.write(0, [(0, 0, 1, 1)], delete=[])

        assert held(cells_of(writer.read(-1))) == {(0, 0): (2, 2), (1, 1): (2, 3)}
    finally:
        fresh.dispose()
