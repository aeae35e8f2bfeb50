"""Token ids, token counts and class totals: moved only by atomic SQL increments.

Every change is an upsert adding a delta (`docs = docs + excluded.docs`), never a read, an
addition in Python and a write back, so concurrent writers cannot lose an increment. Rows are
written in (token_id, class_index) order so two transactions never lock shared rows in
opposite orders.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection, bindparam, delete, select, update

from app.store.tables import class_totals, token_counts, tokens

IntArray = NDArray[np.int64]

# Bound the number of parameters in one IN (...) list (SQLite allows 32 766 per statement).
LOOKUP_CHUNK = 900
# Rows fetched at a time when a model is read (a server-side cursor on PostgreSQL).
READ_CHUNK = 50_000


@dataclass(frozen=True)
class CountDelta:
    """Changes to apply in one transaction; rows sorted by (token_id, class_index)."""

    token_ids: IntArray
    class_indices: IntArray
    docs: IntArray
    terms: IntArray


@dataclass(frozen=True)
class CountChanges:
    """Absolute values of everything that changed after some generation (the change feed)."""

    generation: int
    token_ids: IntArray  # newly known token ids …
    token_texts: list[str]  # … and their text
    count_token_ids: IntArray
    count_class_indices: IntArray
    count_docs: IntArray
    count_terms: IntArray
    class_docs: IntArray
    class_terms: IntArray


def find_token_ids(conn: Connection, model_id: int, texts: Sequence[str]) -> dict[str, int]:
    """Return the ids of those of `texts` the model already knows."""
    found: dict[str, int] = {}
    for start in range(0, len(texts), LOOKUP_CHUNK):
        chunk = texts[start : start + LOOKUP_CHUNK]
        rows = conn.execute(
            select(tokens.c.text, tokens.c.token_id).where(
                tokens.c.model_id == model_id, tokens.c.text.in_(chunk)
            )
        )
        found.update({text: int(token_id) for text, token_id in rows})
    return found


# Bulk writes go to the driver as plain SQL: SQLAlchemy's per-row parameter processing cost
# more than the database's work (28 % of batch training). PostgreSQL gets all rows in one
# statement as arrays (unnest); SQLite, in process, takes executemany.
_INSERT_TOKENS_SQLITE = (
    f"INSERT INTO {tokens.name} (model_id, token_id, text, generation) VALUES (?, ?, ?, ?)"
)
_INSERT_TOKENS_POSTGRESQL = (
    f"INSERT INTO {tokens.name} (model_id, token_id, text, generation) "
    "SELECT %s, u.token_id, u.text, %s FROM unnest(%s::bigint[], %s::text[]) AS u(token_id, text)"
)
_UPSERT_COUNTS = (
    "ON CONFLICT (model_id, token_id, class_index) DO UPDATE SET "
    f"docs = {token_counts.name}.docs + excluded.docs, "
    f"terms = {token_counts.name}.terms + excluded.terms, generation = excluded.generation"
)
_ADD_COUNTS_SQLITE = (
    f"INSERT INTO {token_counts.name} (model_id, token_id, class_index, docs, terms, generation) "
    f"VALUES (?, ?, ?, ?, ?, ?) {_UPSERT_COUNTS}"
)
_ADD_COUNTS_POSTGRESQL = (
    f"INSERT INTO {token_counts.name} (model_id, token_id, class_index, docs, terms, generation) "
    "SELECT %s, u.token_id, u.class_index, u.docs, u.terms, %s FROM unnest("
    "%s::bigint[], %s::smallint[], %s::bigint[], %s::bigint[]) "
    f"AS u(token_id, class_index, docs, terms) {_UPSERT_COUNTS}"
)


def insert_tokens(
    conn: Connection, model_id: int, *, first_id: int, texts: Sequence[str], generation: int
) -> None:
    """Store new tokens under consecutive ids starting at `first_id`."""
    if not texts:
        return
    token_ids = range(first_id, first_id + len(texts))
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(
            _INSERT_TOKENS_POSTGRESQL, (model_id, generation, list(token_ids), list(texts))
        )
    else:
        conn.exec_driver_sql(
            _INSERT_TOKENS_SQLITE,
            list(zip(repeat(model_id), token_ids, texts, repeat(generation))),
        )


def add_token_counts(
    conn: Connection, model_id: int, delta: CountDelta, *, generation: int
) -> None:
    """Add `delta` to the stored counts atomically (negative deltas subtract).

    Additions are upserts. Subtractions are plain increments by a negative amount: their rows
    exist (the ledger says what was added), and an upsert's proposed row would already fail
    the non-negative CHECK before the conflict is resolved.
    """
    adding = (delta.docs >= 0) & (delta.terms >= 0)
    if adding.any():
        columns = [
            array[adding].tolist()
            for array in (delta.token_ids, delta.class_indices, delta.docs, delta.terms)
        ]
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(_ADD_COUNTS_POSTGRESQL, (model_id, generation, *columns))
        else:
            conn.exec_driver_sql(
                _ADD_COUNTS_SQLITE,
                list(zip(repeat(model_id), *columns, repeat(generation))),
            )
    subtractions = [
        {
            "model_id": model_id,
            "token_id": token_id,
            "class_index": class_index,
            "docs": docs,
            "terms": terms,
            "generation": generation,
        }
        for token_id, class_index, docs, terms in zip(
            delta.token_ids[~adding].tolist(),
            delta.class_indices[~adding].tolist(),
            delta.docs[~adding].tolist(),
            delta.terms[~adding].tolist(),
            strict=True,
        )
    ]
    if subtractions:
        conn.execute(
            update(token_counts)
            .where(
                token_counts.c.model_id == bindparam("b_model_id"),
                token_counts.c.token_id == bindparam("b_token_id"),
                token_counts.c.class_index == bindparam("b_class_index"),
            )
            .values(
                docs=token_counts.c.docs + bindparam("b_docs"),
                terms=token_counts.c.terms + bindparam("b_terms"),
                generation=bindparam("b_generation"),
            ),
            [{f"b_{key}": value for key, value in row.items()} for row in subtractions],
        )


def add_class_totals(
    conn: Connection, model_id: int, *, class_docs: Iterable[int], class_terms: Iterable[int]
) -> None:
    """Add per-class message and term deltas atomically."""
    for class_index, (docs, terms) in enumerate(zip(class_docs, class_terms, strict=True)):
        if docs == 0 and terms == 0:
            continue
        conn.execute(
            update(class_totals)
            .where(class_totals.c.model_id == model_id, class_totals.c.class_index == class_index)
            .values(docs=class_totals.c.docs + docs, terms=class_totals.c.terms + terms)
        )


def read_class_totals(conn: Connection, model_id: int, n_classes: int) -> tuple[IntArray, IntArray]:
    class_docs = np.zeros(n_classes, dtype=np.int64)
    class_terms = np.zeros(n_classes, dtype=np.int64)
    rows = conn.execute(
        select(class_totals.c.class_index, class_totals.c.docs, class_totals.c.terms).where(
            class_totals.c.model_id == model_id
        )
    )
    for class_index, docs, terms in rows:
        class_docs[class_index] = docs
        class_terms[class_index] = terms
    return class_docs, class_terms


_READ_TOKENS = f"SELECT token_id, text FROM {tokens.name} WHERE model_id = ? AND generation > ?"
_READ_COUNTS = (
    f"SELECT token_id, class_index, docs, terms FROM {token_counts.name} "
    "WHERE model_id = ? AND generation > ?"
)


def read_changes(
    conn: Connection, model_id: int, *, since_generation: int, generation: int, n_classes: int
) -> CountChanges:
    """Read, in the caller's snapshot, everything changed after `since_generation`.

    With `since_generation = -1` this is the whole model (a process's first load).
    """
    token_ids: list[IntArray] = []
    token_texts: list[str] = []
    for part in _fetch_chunks(conn, _READ_TOKENS, (model_id, since_generation)):
        ids, texts = zip(*part, strict=True)
        token_ids.append(np.fromiter(ids, np.int64, len(part)))
        token_texts.extend(texts)
    parts = [
        np.fromiter(chain.from_iterable(part), np.int64, 4 * len(part)).reshape(-1, 4)
        for part in _fetch_chunks(conn, _READ_COUNTS, (model_id, since_generation))
    ]
    counts = np.concatenate(parts) if parts else np.zeros((0, 4), dtype=np.int64)
    class_docs, class_terms = read_class_totals(conn, model_id, n_classes)
    return CountChanges(
        generation=generation,
        token_ids=np.concatenate(token_ids) if token_ids else np.zeros(0, dtype=np.int64),
        token_texts=token_texts,
        count_token_ids=counts[:, 0].copy(),
        count_class_indices=counts[:, 1].copy(),
        count_docs=counts[:, 2].copy(),
        count_terms=counts[:, 3].copy(),
        class_docs=class_docs,
        class_terms=class_terms,
    )


def _fetch_chunks(
    conn: Connection, sql: str, parameters: tuple[int, ...]
) -> Iterator[list[tuple[Any, ...]]]:
    """Rows of a query (`?` placeholders) as tuples, READ_CHUNK at a time, from the driver's
    own cursor in the caller's transaction; a server-side cursor on PostgreSQL.

    SQLAlchemy's Row objects cost more than the database: a million-token model's load took
    9.2 s through them, of which the driver's own fetching was 3.1 s.
    """
    raw = conn.connection
    if conn.dialect.name == "postgresql":
        sql = sql.replace("?", "%s")
        driver = raw.driver_connection
        assert driver is not None  # a checked-out connection always has one
        cursor = driver.cursor(name="spamsift_read")  # psycopg: a server-side cursor
    else:
        cursor = raw.cursor()
    try:
        cursor.execute(sql, parameters)
        while rows := cursor.fetchmany(READ_CHUNK):
            yield rows
    finally:
        cursor.close()


@dataclass(frozen=True)
class MessageCounts:
    """A model's rows for some token texts only: what scoring one message needs."""

    token_ids: IntArray  # ascending
    token_texts: list[str]  # in the order of token_ids
    count_token_ids: IntArray
    count_class_indices: IntArray
    count_docs: IntArray
    count_terms: IntArray
    class_docs: IntArray
    class_terms: IntArray


# One statement, one round trip: the message's tokens with their count rows, then the class
# totals (token_id -1). The texts go as one array parameter (PostgreSQL, unnested so that
# each text is one probe of the (model_id, text) index whatever the table statistics say) or
# one JSON array (SQLite's json_each), never as an IN list: building and converting a
# 300-placeholder statement cost more than the database's work (profiled: 4 of a cold
# classification's 11 ms).
_MESSAGE_ROWS_POSTGRESQL = (
    f"SELECT t.token_id, t.text, c.class_index, c.docs, c.terms "
    f"FROM unnest(%(texts)s::text[]) AS m(text) JOIN {tokens.name} t "
    "ON t.model_id = %(model)s AND t.text = m.text "
    f"LEFT JOIN {token_counts.name} c ON c.model_id = %(model)s AND c.token_id = t.token_id "
    f"UNION ALL SELECT -1, NULL, class_index, docs, terms FROM {class_totals.name} "
    "WHERE model_id = %(model)s"
)
_MESSAGE_ROWS_SQLITE = (
    f"SELECT t.token_id, t.text, c.class_index, c.docs, c.terms FROM {tokens.name} t "
    f"LEFT JOIN {token_counts.name} c ON c.model_id = t.model_id AND c.token_id = t.token_id "
    "WHERE t.model_id = :model AND t.text IN (SELECT value FROM json_each(:texts)) "
    f"UNION ALL SELECT -1, NULL, class_index, docs, terms FROM {class_totals.name} "
    "WHERE model_id = :model"
)


def read_message_counts(
    conn: Connection, model_id: int, texts: Sequence[str], *, n_classes: int
) -> MessageCounts:
    """Read the token ids, count rows and class totals a message's `texts` need, in the
    caller's snapshot: one statement on the index of (model_id, text), never the whole
    model."""
    distinct = list(dict.fromkeys(texts))
    cursor = conn.connection.cursor()
    try:
        if conn.dialect.name == "postgresql":
            cursor.execute(_MESSAGE_ROWS_POSTGRESQL, {"model": model_id, "texts": distinct})
        else:
            cursor.execute(_MESSAGE_ROWS_SQLITE, {"model": model_id, "texts": json.dumps(distinct)})
        rows = cursor.fetchall()
    finally:
        cursor.close()
    found: dict[int, str] = {}
    counts: list[tuple[int, int, int, int]] = []
    class_docs = np.zeros(n_classes, dtype=np.int64)
    class_terms = np.zeros(n_classes, dtype=np.int64)
    for token_id, text, class_index, docs, terms in rows:
        if token_id >= 0:
            found[token_id] = text
            if class_index is not None:
                counts.append((token_id, class_index, docs, terms))
        else:
            class_docs[class_index] = docs
            class_terms[class_index] = terms
    token_ids = np.array(sorted(found), dtype=np.int64)
    count_rows = np.array(counts, dtype=np.int64).reshape(-1, 4)
    return MessageCounts(
        token_ids=token_ids,
        token_texts=[found[token_id] for token_id in token_ids.tolist()],
        count_token_ids=count_rows[:, 0].copy(),
        count_class_indices=count_rows[:, 1].copy(),
        count_docs=count_rows[:, 2].copy(),
        count_terms=count_rows[:, 3].copy(),
        class_docs=class_docs,
        class_terms=class_terms,
    )


def read_all_counts(
    conn: Connection, model_id: int
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Read every count row of the model, without token texts: (token ids, class indices,
    docs, terms), for sums over the whole vocabulary."""
    parts = [
        np.fromiter(chain.from_iterable(part), np.int64, 4 * len(part)).reshape(-1, 4)
        for part in _fetch_chunks(conn, _READ_COUNTS, (model_id, -1))
    ]
    rows = np.concatenate(parts) if parts else np.zeros((0, 4), dtype=np.int64)
    return rows[:, 0].copy(), rows[:, 1].copy(), rows[:, 2].copy(), rows[:, 3].copy()


@dataclass(frozen=True)
class TokenAges:
    """Every count row of a model with the generation that last changed it."""

    token_ids: IntArray
    class_indices: IntArray
    docs: IntArray
    terms: IntArray
    generations: IntArray


_READ_AGES = (
    f"SELECT token_id, class_index, docs, terms, generation FROM {token_counts.name} "
    "WHERE model_id = ? AND generation > ?"
)


def read_token_ages(conn: Connection, model_id: int) -> TokenAges:
    """Read every count row of the model, with its last-changed generation (for expiry)."""
    parts = [
        np.fromiter(chain.from_iterable(part), np.int64, 5 * len(part)).reshape(-1, 5)
        for part in _fetch_chunks(conn, _READ_AGES, (model_id, -1))
    ]
    rows = np.concatenate(parts) if parts else np.zeros((0, 5), dtype=np.int64)
    return TokenAges(*(rows[:, column].copy() for column in range(5)))


def delete_tokens(conn: Connection, model_id: int, token_ids: Sequence[int]) -> None:
    """Delete tokens and their count rows; their ids are never given out again."""
    for start in range(0, len(token_ids), LOOKUP_CHUNK):
        chunk = list(token_ids[start : start + LOOKUP_CHUNK])
        for table in (token_counts, tokens):
            conn.execute(
                delete(table).where(table.c.model_id == model_id, table.c.token_id.in_(chunk))
            )


def read_token_counts(
    conn: Connection, model_id: int, token_ids: Sequence[int]
) -> dict[tuple[int, int], tuple[int, int]]:
    """Return {(token_id, class_index): (docs, terms)} for the given tokens (tests, audits)."""
    result: dict[tuple[int, int], tuple[int, int]] = {}
    for start in range(0, len(token_ids), LOOKUP_CHUNK):
        chunk = list(token_ids[start : start + LOOKUP_CHUNK])
        rows = conn.execute(
            select(
                token_counts.c.token_id,
                token_counts.c.class_index,
                token_counts.c.docs,
                token_counts.c.terms,
            ).where(token_counts.c.model_id == model_id, token_counts.c.token_id.in_(chunk))
        )
        for token_id, class_index, docs, terms in rows:
            result[(int(token_id), int(class_index))] = (int(docs), int(terms))
    return result


def read_token_texts(conn: Connection, model_id: int, token_ids: Sequence[int]) -> dict[int, str]:
    """The text of each of `token_ids` the model still has (expired ones have none)."""
    found: dict[int, str] = {}
    wanted = sorted(set(token_ids))
    for start in range(0, len(wanted), 1000):  # bound the statement's parameters
        chunk = wanted[start : start + 1000]
        for token_id, text in conn.execute(
            select(tokens.c.token_id, tokens.c.text).where(
                tokens.c.model_id == model_id, tokens.c.token_id.in_(chunk)
            )
        ):
            found[int(token_id)] = text
    return found
