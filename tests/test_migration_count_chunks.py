"""Migration 0009 (token counts packed into chunks behind a journal) converts every model's
count rows into chunks and, downgraded, the chunks and the journal back into rows, on SQLite
and PostgreSQL.

The databases are built at 0008 by SQL, not by training (today's code writes chunks), and
the chunks are decoded here with `struct`, apart from the migration's packing: per token of
a chunk its docs per class, its terms per class and its generation, little-endian int64.
"""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import JSON, BigInteger, DateTime, String, column, insert, inspect, table, text
from sqlalchemy.exc import IntegrityError

from app.store.engine import Database
from app.store.migrate import downgrade_schema, upgrade_schema
from app.store.schema_version import current_revision

REVISION = "0009"
BEFORE = "0008"
CHUNK_IDS = 16

# The models made besides `default` (ham, spam): one of three classes, one with no counts.
MODELS = {"tri": ["a", "b", "c"], "quiet": ["ham", "spam"]}
# (model, token id, class index, docs, terms, generation) rows at 0008. A token's rows share
# a generation, and a token whose counts are all zero has one row, of class 0: such rows come
# back exactly from the downgrade.
ROWS = [
    ("default", 0, 0, 3, 5, 4),
    ("default", 0, 1, 1, 1, 4),
    ("default", 1, 1, 2, 7, 3),  # a row in one class only
    ("default", 5, 0, 0, 0, 6),  # every count zero (forgotten)
    ("default", 15, 0, 1, 2, 1),  # 15 | 16, 17: two chunks
    ("default", 16, 1, 4, 4, 5),
    ("default", 17, 0, 1, 1, 7),
    ("default", 17, 1, 2**40, 2**41, 7),  # beyond 32 bits
    ("default", 99_999, 0, 1, 1, 3),  # the migration reads 100,000 ids at a time
    ("default", 100_000, 1, 1, 1, 3),
    ("default", 250_001, 0, 9, 9, 7),
    ("default", 1_000_000_007, 1, 1, 3, 8),  # far beyond: the ranges between hold nothing
    ("tri", 0, 2, 1, 1, 1),  # token ids `default` has too: the models stay apart
    ("tri", 3, 0, 2, 2, 3),
    ("tri", 3, 2, 1, 4, 3),
    ("tri", 16, 0, 1, 1, 2),
    ("tri", 16, 1, 2, 2, 2),
    ("tri", 16, 2, 3, 3, 2),
    ("tri", 31, 0, 0, 0, 4),
    ("tri", 123_456, 1, 5, 6, 4),
]  # fmt: skip
Row = tuple[Any, ...]
COLUMNS = ("token_id", "class_index", "docs", "terms", "generation")  # of a row, after the model
# (model, token id) -> (docs per class, terms per class, generation)
Entries = dict[tuple[str, int], tuple[list[int], list[int], int]]

models = table(
    "models",
    column("name", String),
    column("classes", JSON),
    column("config", JSON),
    column("generation", BigInteger),
    column("n_tokens", BigInteger),
    column("created_at", DateTime(timezone=True)),
)


@pytest.fixture
def db(empty_database: Database) -> Database:
    """A database at 0008 holding ROWS, with their models and a `tokens` row for each of
    their tokens."""
    upgrade_schema(empty_database, BEFORE)
    insert_rows(empty_database, ROWS)
    return empty_database


def insert_rows(db: Database, rows: list[Row]) -> None:
    """The models of MODELS with their class totals, and `rows` in token_counts and tokens."""
    with db.transaction() as conn:
        conn.execute(
            insert(models),
            [
                {
                    "name": name,
                    "classes": classes,
                    "config": {},
                    "generation": 40,
                    "n_tokens": 0,
                    "created_at": datetime(2026, 11, 30, tzinfo=UTC),
                }
                for name, classes in MODELS.items()
            ],
        )
        ids: dict[str, int] = dict(conn.execute(text("SELECT name, id FROM models")).all())
        conn.execute(
            text(
                "INSERT INTO class_totals (model_id, class_index, docs, terms) "
                "VALUES (:model_id, :class_index, 10, 100)"
            ),
            [
                {"model_id": ids[name], "class_index": class_index}
                for name, classes in MODELS.items()
                for class_index in range(len(classes))
            ],
        )
        conn.execute(
            text(
                "INSERT INTO token_counts "
                "(model_id, token_id, class_index, docs, terms, generation) "
                "VALUES (:model_id, :token_id, :class_index, :docs, :terms, :generation)"
            ),
            [
                dict(zip(COLUMNS, rest, strict=True)) | {"model_id": ids[name]}
                for name, *rest in rows
            ],
        )
        latest: dict[tuple[int, int], int] = {}  # (model id, token id) -> generation
        for name, token_id, *_, generation in rows:
            key = (ids[name], token_id)
            latest[key] = max(latest.get(key, 0), generation)
        conn.execute(
            text(
                "INSERT INTO tokens (model_id, token_id, text, generation) "
                "VALUES (:model_id, :token_id, :text, :generation)"
            ),
            [
                {"model_id": m, "token_id": t, "text": f"token{t}", "generation": g}
                for (m, t), g in latest.items()
            ],
        )


def model_ids(db: Database) -> dict[str, int]:
    with db.transaction(write=False) as conn:
        return dict(conn.execute(text("SELECT name, id FROM models")).all())


def classes_of(name: str) -> int:
    return len(MODELS.get(name, ["ham", "spam"]))


def named(db: Database, rows: list[Row]) -> set[Row]:
    """Rows (model name, ...) as stored: (model id, ...)."""
    ids = model_ids(db)
    return {(ids[name], *rest) for name, *rest in rows}


def count_rows(db: Database) -> set[Row]:
    with db.transaction(write=False) as conn:
        rows = conn.execute(
            text(
                "SELECT model_id, token_id, class_index, docs, terms, generation FROM token_counts"
            )
        )
        return {tuple(row) for row in rows}


def other_rows(db: Database) -> dict[str, set[Row]]:
    """The rows beside the counts: the migration leaves them as they are."""
    with db.transaction(write=False) as conn:
        return {
            name: {tuple(row) for row in conn.execute(text(query))}
            for name, query in (
                ("models", "SELECT id, name, generation, n_tokens, vocabulary, epoch FROM models"),
                ("class_totals", "SELECT model_id, class_index, docs, terms FROM class_totals"),
                ("tokens", "SELECT model_id, token_id, text, generation FROM tokens"),
            )
        }


def table_names(db: Database) -> set[str]:
    with db.engine.connect() as conn:
        return set(inspect(conn).get_table_names())


def token_counts_schema(db: Database) -> dict[str, Any]:
    """What `token_counts` is made of; its CHECK by what it checks (SQLite at 0008 calls it
    `ck__new_token_counts_ck_token_counts_counts_not_negative`, the name 0006's rebuild gave)."""
    with db.engine.connect() as conn:
        inspector = inspect(conn)
        return {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"])
                for c in inspector.get_columns("token_counts")
            ],
            "primary key": inspector.get_pk_constraint("token_counts"),
            "indexes": [
                (index["name"], index["column_names"], index["unique"])
                for index in inspector.get_indexes("token_counts")
            ],
            "foreign keys": inspector.get_foreign_keys("token_counts"),
            "checks": [
                check["sqltext"] for check in inspector.get_check_constraints("token_counts")
            ],
        }


def expected_entries(rows: list[Row]) -> Entries:
    """Each token's entry as the rows make it: its counts per class (0 where it has no row) and
    the latest of its rows' generations."""
    entries: Entries = {}
    for name, token_id, class_index, docs, terms, generation in rows:
        n_classes = classes_of(name)
        entry = entries.setdefault((name, token_id), ([0] * n_classes, [0] * n_classes, 0))
        entry[0][class_index] = docs
        entry[1][class_index] = terms
        entries[(name, token_id)] = (entry[0], entry[1], max(entry[2], generation))
    return entries


def decoded_chunks(db: Database) -> Entries:
    """Every entry of every chunk, decoded; each chunk checked whole on the way: its size, its
    empty slots all zero, its generation its latest entry's."""
    names = {model_id: name for name, model_id in model_ids(db).items()}
    with db.transaction(write=False) as conn:
        chunks = conn.execute(
            text("SELECT model_id, chunk, generation, counts FROM count_chunks")
        ).all()
    entries: Entries = {}
    for model_id, chunk, generation, counts in chunks:
        n_classes = classes_of(names[model_id])
        width = 2 * n_classes + 1
        blob = bytes(counts)
        assert len(blob) == CHUNK_IDS * width * 8
        values = struct.unpack(f"<{CHUNK_IDS * width}q", blob)
        latest = 0
        for slot in range(CHUNK_IDS):
            entry = values[slot * width : (slot + 1) * width]
            if entry[-1] == 0:
                assert entry == (0,) * width, (chunk, slot)
                continue
            entries[(names[model_id], chunk * CHUNK_IDS + slot)] = (
                list(entry[:n_classes]),
                list(entry[n_classes : 2 * n_classes]),
                entry[-1],
            )
            latest = max(latest, entry[-1])
        assert generation == latest, chunk
    return entries


def insert_journal(
    db: Database, rows: list[tuple[str, int, list[tuple[int, int, int, int]]]]
) -> None:
    """Journal rows (model, generation, cells (token id, class index, docs, terms))."""
    ids = model_ids(db)
    with db.transaction() as conn:
        conn.execute(
            text(
                "INSERT INTO count_journal (model_id, generation, cells, delta) "
                "VALUES (:model_id, :generation, :cells, :delta)"
            ),
            [
                {
                    "model_id": ids[name],
                    "generation": generation,
                    "cells": len(cells),
                    "delta": b"".join(struct.pack("<4q", *cell) for cell in cells),
                }
                for name, generation, cells in rows
            ],
        )


def test_upgrading_to_0009_packs_every_count_into_chunks_and_downgrading_gives_the_rows_back(
    db: Database,
) -> None:
    before = count_rows(db)
    assert before == named(db, ROWS)
    others = other_rows(db)
    schema = token_counts_schema(db)

    upgrade_schema(db, REVISION)

    assert current_revision(db) == REVISION
    assert "token_counts" not in table_names(db)
    assert {"count_chunks", "count_journal"} <= table_names(db)
    assert decoded_chunks(db) == expected_entries(ROWS)
    assert other_rows(db) == others
    with db.transaction(write=False) as conn:
        assert conn.execute(text("SELECT count(*) FROM count_journal")).scalar() == 0
        chunk_numbers = conn.execute(
            text("SELECT chunk FROM count_chunks WHERE model_id = :id ORDER BY chunk"),
            {"id": model_ids(db)["default"]},
        ).scalars()
        assert list(chunk_numbers) == [0, 1, 6249, 6250, 15625, 62_500_000]

    downgrade_schema(db, BEFORE)

    assert current_revision(db) == BEFORE
    assert not {"count_chunks", "count_journal"} & table_names(db)
    assert count_rows(db) == before
    assert other_rows(db) == others
    assert token_counts_schema(db) == schema
    with db.engine.connect() as conn:
        checks = inspect(conn).get_check_constraints("token_counts")
    assert [check["name"] for check in checks] == ["ck_token_counts_counts_not_negative"]
    with pytest.raises(IntegrityError), db.transaction() as conn:  # the check is back
        conn.execute(text("UPDATE token_counts SET docs = -1"))
    assert count_rows(db) == before

    upgrade_schema(db, REVISION)  # and again, from the rows the downgrade wrote
    assert decoded_chunks(db) == expected_entries(ROWS)


def test_a_token_entry_takes_its_rows_latest_generation_and_zero_rows_fold_into_one(
    empty_database: Database,
) -> None:
    rows = [
        ("default", 2, 0, 1, 1, 3),  # rows of different generations: the entry takes 5
        ("default", 2, 1, 2, 2, 5),
        ("default", 3, 0, 0, 0, 2),  # a class emptied beside one that holds counts
        ("default", 3, 1, 1, 4, 6),
        ("default", 4, 0, 0, 0, 7),  # every class emptied: one row is kept
        ("default", 4, 1, 0, 0, 8),
        ("tri", 9, 1, 0, 0, 2),  # emptied, in a class other than 0
    ]  # fmt: skip
    upgrade_schema(empty_database, BEFORE)
    insert_rows(empty_database, rows)

    upgrade_schema(empty_database, REVISION)

    assert decoded_chunks(empty_database) == {
        ("default", 2): ([1, 2], [1, 2], 5),
        ("default", 3): ([0, 1], [0, 4], 6),
        ("default", 4): ([0, 0], [0, 0], 8),
        ("tri", 9): ([0, 0, 0], [0, 0, 0], 2),
    }
    downgrade_schema(empty_database, BEFORE)
    assert count_rows(empty_database) == named(
        empty_database,
        [
            ("default", 2, 0, 1, 1, 5),
            ("default", 2, 1, 2, 2, 5),
            ("default", 3, 1, 1, 4, 6),
            ("default", 4, 0, 0, 0, 8),
            ("tri", 9, 0, 0, 0, 2),
        ],
    )


def test_downgrading_0009_adds_the_journal_to_the_chunks(db: Database) -> None:
    upgrade_schema(db, REVISION)
    insert_journal(
        db,
        [
            ("default", 41, [(0, 1, 2, 3), (5, 1, 1, 1), (300_000, 0, 1, 2), (40, 0, 1, 1)]),
            ("default", 42, [(0, 0, -3, -5), (16, 1, -4, -4), (300_000, 1, 0, 1)]),
            ("default", 43, [(40, 0, -1, -1)]),
            ("tri", 41, [(3, 1, 1, 1), (7, 2, 2, 5), (7, 2, 1, 0)]),
            ("quiet", 1, [(2, 0, 1, 1)]),  # a model whose counts are all in the journal
        ],
    )

    downgrade_schema(db, BEFORE)

    changed = {("default", 0), ("default", 5), ("default", 16), ("tri", 3)}
    kept = [row for row in ROWS if (row[0], row[1]) not in changed]
    assert count_rows(db) == named(
        db,
        [
            *kept,
            ("default", 0, 1, 3, 4, 42),  # class 0 emptied by the journal: no row
            ("default", 5, 1, 1, 1, 41),  # the emptied token counted again: its row only
            ("default", 16, 0, 0, 0, 42),  # emptied: one row, of class 0
            ("default", 40, 0, 0, 0, 43),  # in the journal only, and emptied there
            ("default", 300_000, 0, 1, 2, 42),  # in the journal only
            ("default", 300_000, 1, 0, 1, 42),
            ("tri", 3, 0, 2, 2, 41),  # a token's rows take its latest generation
            ("tri", 3, 1, 1, 1, 41),
            ("tri", 3, 2, 1, 4, 41),
            ("tri", 7, 2, 3, 5, 41),
            ("quiet", 2, 0, 1, 1, 1),
        ],
    )


def test_a_journal_driving_a_count_below_zero_fails_the_downgrade_whole(db: Database) -> None:
    upgrade_schema(db, REVISION)
    insert_journal(db, [("default", 41, [(1, 1, -3, 0)])])
    with db.transaction(write=False) as conn:
        chunks = conn.execute(
            text("SELECT model_id, chunk, counts FROM count_chunks ORDER BY 1, 2")
        ).all()

    with pytest.raises(IntegrityError):
        downgrade_schema(db, BEFORE)

    assert current_revision(db) == REVISION
    assert "token_counts" not in table_names(db)
    with db.transaction(write=False) as conn:
        after = conn.execute(
            text("SELECT model_id, chunk, counts FROM count_chunks ORDER BY 1, 2")
        ).all()
    assert [(m, c, bytes(b)) for m, c, b in after] == [(m, c, bytes(b)) for m, c, b in chunks]
