"""Store level: upserts add exactly, the change feed, and several Runtimes on one database."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection

from app.config import Settings
from app.errors import NotTrained
from app.live.held import LiveModel
from app.service.classification import classify
from app.service.messages import Message
from app.service.models import create_model, delete_model, update_model
from app.service.runtime import Runtime, engine_config
from app.service.training import forget, train, train_batch
from app.store import counts as counts_module
from app.store.chunks import CHUNK_IDS
from app.store.counts import (
    CountChanges,
    CountDelta,
    MessageCounts,
    add_class_totals,
    add_token_counts,
    delete_tokens,
    fold_journal,
    insert_tokens,
    read_changes,
    read_message_counts,
    read_token_counts,
    read_token_texts,
)
from app.store.engine import Database
from app.store.models import find_model, insert_model, lock_model_row
from tests.builders import counts_from_ledger, ham_text, spam_text, stored_cells, train_examples


def delta(rows: list[tuple[int, int, int, int]]) -> CountDelta:
    array = np.array(sorted(rows), dtype=np.int64).reshape(-1, 4)
    return CountDelta(array[:, 0], array[:, 1], array[:, 2], array[:, 3])


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(database_url)
    yield database
    database.dispose()


@pytest.fixture
def second_runtime(settings: Settings) -> Iterator[Runtime]:
    """Another process's view of the same database: its own Database and live models."""
    rt = Runtime(settings)
    yield rt
    rt.close()


def new_tokens(db: Database, model_id: int, texts: list[str], *, model: str = "default") -> int:
    """Give `texts` the next token ids of model `model` (id `model_id`) and store them as a
    write does; return the first id."""
    with db.transaction(write=False) as conn:
        created_at = find_model(conn, model).created_at
    with db.transaction() as conn:
        row = lock_model_row(conn, model_id, created_at=created_at)
        first = row.allocate_token_ids(len(texts))
        insert_tokens(conn, model_id, first_id=first, texts=texts, generation=row.generation)
        row.save(conn)
    return first


def count_cells(counts: CountChanges | MessageCounts) -> set[tuple[int, int, int, int]]:
    """The (token id, class index, docs, terms) rows a read brought."""
    return set(zip(*(column.tolist() for column in counts.cells()), strict=True))


def next_generation(conn: Connection, model_id: int, *, created_at: datetime) -> int:
    """Take the model's row lock and store its next generation (a write without tokens)."""
    row = lock_model_row(conn, model_id, created_at=created_at)
    row.save(conn)
    return row.generation


def test_upserts_add_deltas_exactly(db: Database) -> None:
    with db.transaction() as conn:
        model = find_model(conn, "default")
    model_id, created_at = model.id, model.created_at
    first = new_tokens(db, model_id, ["a", "b", "c"])
    a, b, c = first, first + 1, first + 2

    for rows in (
        [(a, 0, 1, 3), (b, 1, 1, 1)],
        [(a, 0, 2, 2), (a, 1, 1, 7), (c, 1, 4, 4)],
        [(a, 0, -1, -3), (b, 1, -1, -1)],
    ):
        with db.transaction() as conn:
            generation = next_generation(conn, model_id, created_at=created_at)
            add_token_counts(conn, model_id, delta(rows), generation=generation, n_classes=2)

    with db.transaction(write=False) as conn:
        counts = read_token_counts(conn, model_id, [a, b, c], n_classes=2)
    assert counts == {(a, 0): (2, 2), (a, 1): (1, 7), (c, 1): (4, 4)}  # b is back to zero


def test_the_change_feed_returns_what_changed_after_a_generation(db: Database) -> None:
    with db.transaction() as conn:
        model = find_model(conn, "default")
    model_id, created_at = model.id, model.created_at
    first = new_tokens(db, model_id, ["old", "both"])
    with db.transaction() as conn:
        g1 = next_generation(conn, model_id, created_at=created_at)
        add_token_counts(
            conn,
            model_id,
            delta([(first, 0, 1, 1), (first + 1, 0, 1, 2)]),
            generation=g1,
            n_classes=2,
        )
    late = new_tokens(db, model_id, ["new"])
    with db.transaction() as conn:
        g2 = next_generation(conn, model_id, created_at=created_at)
        add_token_counts(
            conn,
            model_id,
            delta([(first + 1, 1, 1, 5), (late, 1, 1, 1)]),
            generation=g2,
            n_classes=2,
        )

    with db.transaction(write=False) as conn:
        changes = read_changes(
            conn, model_id, since_generation=g1, held_tokens=late, generation=g2, n_classes=2
        )
        everything = read_changes(
            conn, model_id, since_generation=-1, held_tokens=0, generation=g2, n_classes=2
        )

    assert changes.generation == g2
    assert dict(zip(changes.token_ids.tolist(), changes.token_texts, strict=True)) == {late: "new"}
    changed = count_cells(changes)
    # Every class of each token changed after g1, as absolute values: "old" is not in it.
    assert changed == {(first + 1, 0, 1, 2), (first + 1, 1, 1, 5), (late, 0, 0, 0), (late, 1, 1, 1)}
    assert sorted(everything.token_texts) == ["both", "new", "old"]
    assert len(everything.count_token_ids) == 4


def test_a_message_read_brings_its_known_tokens_rows_and_the_class_totals(db: Database) -> None:
    """What scoring a message with a model not held reads: each known text once, with its id
    and every count row it has (none for a token without one), unknown texts left out, and
    the class totals; equal to the same tokens in the whole model's read."""
    with db.transaction() as conn:
        model = find_model(conn, "default")
    model_id, created_at = model.id, model.created_at
    first = new_tokens(db, model_id, ["both", "ham only", "no rows", "not asked", "zeroed"])
    both, ham_only, no_rows, zeroed = first, first + 1, first + 2, first + 4
    with db.transaction() as conn:
        generation = next_generation(conn, model_id, created_at=created_at)
        rows = [(both, 0, 2, 5), (both, 1, 1, 1), (ham_only, 0, 3, 3), (first + 3, 1, 1, 1)]
        add_token_counts(
            conn, model_id, delta([*rows, (zeroed, 1, 1, 2)]), generation=generation, n_classes=2
        )
        add_class_totals(conn, model_id, class_docs=[3, 2], class_terms=[40, 17])
    with db.transaction() as conn:
        generation = next_generation(conn, model_id, created_at=created_at)
        add_token_counts(
            conn, model_id, delta([(zeroed, 1, -1, -2)]), generation=generation, n_classes=2
        )

    asked = ["zeroed", "unknown", "both", "no rows", "both", "ham only", "also unknown"]
    with db.transaction(write=False) as conn:
        read = read_message_counts(conn, model_id, asked, n_classes=2)
        whole = read_changes(
            conn, model_id, since_generation=-1, held_tokens=0, generation=generation, n_classes=2
        )

    assert read.token_ids.tolist() == [both, ham_only, no_rows, zeroed]
    assert read.token_texts == ["both", "ham only", "no rows", "zeroed"]
    cells = count_cells(read)
    assert cells == {(both, 0, 2, 5), (both, 1, 1, 1), (ham_only, 0, 3, 3)}  # zeroed: none
    whole_cells = count_cells(whole)
    assert cells == {cell for cell in whole_cells if cell[0] in read.token_ids.tolist()}
    assert read.class_docs.tolist() == [3, 2]
    assert read.class_terms.tolist() == [40, 17]
    for array in (read.token_ids, *read.cells(), read.docs, read.class_docs):
        assert array.dtype == np.int64


def test_another_runtime_sees_training_after_sync(
    runtime: Runtime, second_runtime: Runtime
) -> None:
    train_examples(runtime, 2, 2)
    other = second_runtime.models.get("default")
    assert other.table.class_docs.tolist() == [2, 2]

    train_examples(runtime, 5, 4)  # 3 new spam, 2 new ham; the first ones are repeats
    train(runtime, model_name="default", message=Message(text=spam_text(0)), label="ham")
    forget(runtime, model_name="default", message_id=train_examples(runtime, 0, 1)[0].message_id)
    second_runtime.models.sync(other)

    mine = runtime.models.get("default")
    assert other.synced_generation == mine.synced_generation
    assert other.table.class_docs.tolist() == mine.table.class_docs.tolist() == [4, 4]
    assert other.table.class_terms.tolist() == mine.table.class_terms.tolist()
    n = mine.table.n_tokens
    assert other.table.tokens[:n] == mine.table.tokens[:n]
    assert np.array_equal(other.table.token_docs[:, :n], mine.table.token_docs[:, :n])
    assert np.array_equal(other.table.token_terms[:, :n], mine.table.token_terms[:, :n])
    query = Message(text=spam_text(11))
    assert (
        classify(second_runtime, model_name="default", message=query).probabilities
        == classify(runtime, model_name="default", message=query).probabilities
    )


def test_training_through_two_runtimes_interleaved_keeps_ids_and_counts_exact(
    runtime: Runtime, second_runtime: Runtime
) -> None:
    for i in range(6):
        rt = runtime if i % 2 else second_runtime
        train(rt, model_name="default", message=Message(text=spam_text(i)), label="spam")
        train(rt, model_name="default", message=Message(text=ham_text(i)), label="ham")

    assert counts_from_ledger(runtime) == stored_cells(runtime)
    for rt in (runtime, second_runtime):
        live = rt.models.get("default")
        rt.models.sync(live)
        assert live.table.class_docs.tolist() == [6, 6]


def test_another_runtime_follows_a_config_change(runtime: Runtime, second_runtime: Runtime) -> None:
    train_examples(runtime, 3, 3)
    other = second_runtime.models.get("default")

    update_model(runtime, name="default", changes={"event_model": "bernoulli", "alpha": 0.5})
    second_runtime.models.sync(other)

    assert other.config.event_model == "bernoulli"
    assert other.config.alpha == 0.5


def test_another_runtime_notices_a_deleted_and_recreated_model(
    runtime: Runtime, second_runtime: Runtime
) -> None:
    create_model(runtime, name="tenant", classes=None, config={})
    train_examples(runtime, 3, 3, model="tenant")
    stale = second_runtime.models.get("tenant")
    assert stale.table.class_docs.tolist() == [3, 3]

    delete_model(runtime, name="tenant")
    create_model(runtime, name="tenant", classes=None, config={})
    second_runtime.models.sync(stale)

    with pytest.raises(NotTrained):
        classify(second_runtime, model_name="tenant", message=Message(text=spam_text(1)))
    train(second_runtime, model_name="tenant", message=Message(text=spam_text(1)), label="spam")
    assert counts_from_ledger(runtime, "tenant") == stored_cells(runtime, "tenant")
    assert stored_cells(runtime, "tenant")[1] == {1: stored_cells(runtime, "tenant")[1][1]}


def rows_read_one_by_one(
    db: Database, model_id: int, since_generation: int
) -> tuple[dict[int, str], set[tuple[int, ...]]]:
    """The reference: every token changed after `since_generation` and its counts, decoded
    here from the stored rows (chunks of 16 ids of two classes, the journal's cells): a
    change feed's every class of a changed token, a whole model's cells that hold a count."""
    postgresql = db.engine.dialect.name == "postgresql"

    def rows(sql: str, *parameters: int) -> list[Any]:
        with db.transaction(write=False) as conn:
            return conn.exec_driver_sql(
                sql.replace("?", "%s") if postgresql else sql, parameters
            ).all()

    texts = dict(
        rows(
            "SELECT token_id, text FROM tokens WHERE model_id = ? AND generation > ?",
            model_id,
            since_generation,
        )
    )
    counts: dict[tuple[int, int], list[int]] = {}
    generations: dict[int, int] = {}
    for chunk, blob in rows("SELECT chunk, counts FROM count_chunks WHERE model_id = ?", model_id):
        for slot, entry in enumerate(np.frombuffer(bytes(blob), "<i8").reshape(16, 5).tolist()):
            if entry[4]:
                token_id = 16 * chunk + slot
                generations[token_id] = entry[4]
                for class_index in (0, 1):
                    counts[(token_id, class_index)] = [entry[class_index], entry[2 + class_index]]
    journal = "SELECT generation, delta FROM count_journal WHERE model_id = ?"
    for generation, blob in rows(journal, model_id):
        for token_id, class_index, docs, terms in (
            np.frombuffer(bytes(blob), "<i8").reshape(-1, 4).tolist()
        ):
            generations[token_id] = max(generations.get(token_id, 0), generation)
            for other in (0, 1):
                counts.setdefault((token_id, other), [0, 0])
            counts[(token_id, class_index)][0] += docs
            counts[(token_id, class_index)][1] += terms
    if since_generation < 0:
        cells = {(*cell, *value) for cell, value in counts.items() if value != [0, 0]}
    else:
        cells = {
            (*cell, *value)
            for cell, value in counts.items()
            if generations[cell[0]] > since_generation
        }
    return texts, cells


_MODEL_NUMBERS = itertools.count()


def stored_texts(db: Database, texts: list[str]) -> dict[int, str]:
    """`texts` stored as a new model's new tokens, then read back: {token id: text}."""
    name = f"texts{next(_MODEL_NUMBERS)}"
    with db.transaction() as conn:
        model = insert_model(conn, name=name, classes=("ham", "spam"), config={})
    first = new_tokens(db, model.id, texts, model=name)
    with db.transaction(write=False) as conn:
        stored = read_token_texts(conn, model.id, range(first, first + len(texts)))
    assert set(stored) == set(range(first, first + len(texts)))
    return {token_id - first: text for token_id, text in stored.items()}


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(
        # Any character a str can carry to the database (no surrogate, no NUL: PostgreSQL's
        # text refuses it; SQLite's is tested below).
        st.text(
            st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
            min_size=1,
            max_size=40,  # a token is at most 200 characters (tokens.text)
        ),
        min_size=1,
        max_size=30,
        unique=True,
    )
)
@example(texts=[" padded ", "\t", "\\u0041", '"', "\\", "\x1f", "\u2028", "\U0001f600", "größe"])
def test_new_tokens_are_stored_as_given_whatever_their_characters(
    db: Database, texts: list[str]
) -> None:
    """Quotes, backslashes, control characters, escapes' look-alikes (`\\u0041`), any
    script: SQLite takes the texts as one JSON array, PostgreSQL by COPY."""
    assert stored_texts(db, texts) == dict(enumerate(texts))


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_text_holding_nul_is_stored_whole_on_sqlite(db: Database) -> None:
    """SQLite's JSON strings end at an escaped NUL: such texts go row by row."""
    texts = ["a\x00b", "plain", "\\u0000", 'q"\\']
    assert stored_texts(db, texts) == dict(enumerate(texts))


@pytest.mark.parametrize("id_range", [2, 500_000])
def test_the_bulk_read_of_a_model_equals_its_rows_read_one_by_one(
    db: Database, monkeypatch: pytest.MonkeyPatch, id_range: int
) -> None:
    """Texts of any script, a text holding the terminator the bulk read splits on, gaps left
    by deleted tokens, and ranges of ids smaller than the model: the same texts and rows."""
    monkeypatch.setattr(counts_module, "READ_ID_RANGE", id_range)
    with db.transaction() as conn:
        model = find_model(conn, "default")
    model_id, created_at = model.id, model.created_at
    texts = ["plain", "größe", "日本語", "a\x1fb", "emoji\U0001f600", "x" * 200, "z"]
    first = new_tokens(db, model_id, texts)
    with db.transaction() as conn:
        g1 = next_generation(conn, model_id, created_at=created_at)
        add_token_counts(
            conn,
            model_id,
            delta([(first + i, i % 2, i + 1, 2 * i + 1) for i in range(len(texts))]),
            generation=g1,
            n_classes=2,
        )
        delete_tokens(conn, model_id, [first + 1, first + 5], generation=g1, n_classes=2)
    later = new_tokens(db, model_id, ["later\x1f", "más"])
    with db.transaction() as conn:
        g2 = next_generation(conn, model_id, created_at=created_at)
        add_token_counts(
            conn,
            model_id,
            delta([(first, 1, 3, 3), (later + 1, 0, 1, 1)]),
            generation=g2,
            n_classes=2,
        )

    # A reader at g1 holds the ids given out by then: every id below `later`.
    for since, held_tokens in ((-1, 0), (g1, later)):
        with db.transaction(write=False) as conn:
            changes = read_changes(
                conn,
                model_id,
                since_generation=since,
                held_tokens=held_tokens,
                generation=g2,
                n_classes=2,
            )
        expected_texts, expected_counts = rows_read_one_by_one(db, model_id, since)
        got = dict(zip(changes.token_ids.tolist(), changes.token_texts, strict=True))
        assert got == expected_texts
        assert list(changes.token_texts) == [expected_texts[i] for i in changes.token_ids.tolist()]
        assert (
            set(
                zip(
                    changes.count_token_ids.tolist(),
                    changes.count_class_indices.tolist(),
                    changes.count_docs.tolist(),
                    changes.count_terms.tolist(),
                    strict=True,
                )
            )
            == expected_counts
        )
        assert len(changes.count_token_ids) == len(expected_counts)
        if since < 0:
            assert "a\x1fb" in got.values()
            assert first + 1 not in got


def test_bulk_writes_store_exactly_what_a_row_by_row_reference_computes(db: Database) -> None:
    """New and existing tokens, texts the COPY text format must escape, several deltas in one
    transaction (the temporary table of count changes starts empty each time), additions
    with subtractions: the stored rows equal a dict kept row by row."""
    with db.transaction() as conn:
        model = find_model(conn, "default")
    model_id, created_at = model.id, model.created_at
    texts = ["tab\there", "new\nline", "back\\slash", "\\N", "crlf\r\n", "größe", "日本", "end"]
    first = new_tokens(db, model_id, texts[:4])
    later = new_tokens(db, model_id, texts[4:])
    assert later == first + 4
    with db.transaction(write=False) as conn:
        model = read_changes(
            conn, model_id, since_generation=-1, held_tokens=0, generation=0, n_classes=2
        )
    stored = dict(zip(model.token_ids.tolist(), model.token_texts, strict=True))
    assert stored == {first + i: text for i, text in enumerate(texts)}

    rng = np.random.default_rng(7)
    expected: dict[tuple[int, int], tuple[int, int]] = {}
    for _ in range(4):
        with db.transaction() as conn:
            generation = next_generation(conn, model_id, created_at=created_at)
            for _ in range(2):  # two deltas in one transaction
                cells = sorted(
                    {(first + int(t), int(c)) for t, c in rng.integers(0, [8, 2], (6, 2))}
                )
                rows = []
                for token_id, class_index in cells:
                    docs, terms = expected.get((token_id, class_index), (0, 0))
                    # Subtractions only where a row holds enough (as forget and relabel do).
                    add_docs = int(rng.integers(-docs, 4))
                    add_terms = int(rng.integers(-terms, 6))
                    rows.append((token_id, class_index, add_docs, add_terms))
                    expected[(token_id, class_index)] = (docs + add_docs, terms + add_terms)
                add_token_counts(conn, model_id, delta(rows), generation=generation, n_classes=2)

    held = {cell: counts for cell, counts in expected.items() if counts != (0, 0)}
    with db.transaction(write=False) as conn:
        assert read_token_counts(conn, model_id, list(range(first, first + 8)), 2) == held


def test_a_training_batch_stores_the_counts_its_ledger_implies(runtime: Runtime) -> None:
    """Through the service: tokens new and known, one message twice and one relabelled
    within the batch, on each database's bulk path."""
    train_examples(runtime, 3, 3)
    items = [(Message(text=spam_text(i), message_id=f"<s{i}>"), "spam") for i in range(10, 40)] + [
        (Message(text=ham_text(i), message_id=f"<h{i}>"), "ham") for i in range(10, 40)
    ]
    items += [items[0], (items[1][0], "ham")]
    train_batch(runtime, model_name="default", items=items)

    assert stored_cells(runtime) == counts_from_ledger(runtime)


def test_a_model_loaded_part_by_part_equals_the_model_read_whole(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load applies the model a range of ids at a time: the same texts, counts and class
    totals as one read, gaps of deleted tokens included; a model without tokens keeps its
    class totals."""
    with db.transaction() as conn:
        model = find_model(conn, "default")
    model_id, created_at = model.id, model.created_at
    with db.transaction() as conn:
        generation = next_generation(conn, model_id, created_at=created_at)
        add_class_totals(conn, model_id, class_docs=[3, 4], class_terms=[30, 40])
    empty = LiveModel.load(db, "default", engine_config)
    assert empty.table.n_tokens == 0
    assert empty.table.class_docs.tolist() == [3, 4]
    assert empty.table.class_terms.tolist() == [30, 40]
    assert empty.synced_generation == generation

    texts = [f"w{i}" for i in range(70)] + ["größe", "日本語", "a\x1fb"]
    first = new_tokens(db, model_id, texts)
    with db.transaction() as conn:
        generation = next_generation(conn, model_id, created_at=created_at)
        add_token_counts(
            conn,
            model_id,
            delta([(first + i, i % 2, i + 1, 2 * i + 1) for i in range(len(texts))]),
            generation=generation,
            n_classes=2,
        )
        # Some counts in chunks (five of them), more on top in the journal.
        fold_journal(conn, model_id, n_classes=2)
        add_token_counts(
            conn,
            model_id,
            delta([(first + i, 1 - i % 2, 1, 1) for i in range(0, len(texts), 3)]),
            generation=generation,
            n_classes=2,
        )
        delete_tokens(conn, model_id, [first + 4], generation=generation, n_classes=2)
    loads = []
    for id_range in (CHUNK_IDS, 500_000):  # a part is whole chunks
        monkeypatch.setattr(counts_module, "READ_ID_RANGE", id_range)
        loads.append(LiveModel.load(db, "default", engine_config))
    in_parts, whole = loads
    assert list(in_parts.table.tokens) == list(whole.table.tokens)
    assert "größe" in list(in_parts.table.tokens)
    assert in_parts.table.lookup(["a\x1fb", "w4"]).tolist() == [first + 72, -1]
    assert in_parts.table.token_docs[:, first + 3].tolist() == [1, 4]
    # Room for exactly the ids given out: none kept for growth the load will not need.
    assert in_parts.table.capacity == in_parts.table.n_tokens == first + len(texts)
    for name in ("token_docs", "token_terms", "class_docs", "class_terms"):
        np.testing.assert_array_equal(getattr(in_parts.table, name), getattr(whole.table, name))
    assert in_parts.synced_generation == whole.synced_generation == generation


@pytest.mark.postgresql
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_postgresql_reads_a_message_by_probes_whatever_the_statistics(db: Database) -> None:
    """A model not held is read one index probe per token of the message, its count rows
    per token by the primary key, never by sorting or hashing every count row of the model
    (what the planner chose for a plain join without statistics); and no statement is
    compiled first (jit off: compiling took longer than the reads)."""
    with db.transaction() as conn:
        model = find_model(conn, "default")
    first = new_tokens(db, model.id, ["a", "b"])
    with db.transaction() as conn:
        generation = next_generation(conn, model.id, created_at=model.created_at)
        add_token_counts(
            conn, model.id, delta([(first, 0, 1, 1)]), generation=generation, n_classes=2
        )

    with db.transaction(write=False) as conn:
        jit = conn.exec_driver_sql("SHOW jit").scalar_one()
        plan = "\n".join(
            row[0]
            for row in conn.exec_driver_sql(
                "EXPLAIN " + counts_module._MESSAGE_ROWS_POSTGRESQL,
                {"model": model.id, "texts": json.dumps(["a", "b", "c"]), "width": 40},
            )
        )
        read = read_message_counts(conn, model.id, ["a", "b", "c"], n_classes=2)

    assert jit == "off"
    assert "Nested Loop Left Join" in plan
    assert "Merge" not in plan
    assert "Hash" not in plan
    assert read.token_texts == ["a", "b"]
