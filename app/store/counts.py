"""Token ids, token counts and class totals: moved only by atomic SQL increments.

Every change is an upsert adding a delta (`docs = docs + excluded.docs`), never a read, an
addition in Python and a write back, so concurrent writers cannot lose an increment. Rows are
written in (token_id, class_index) order so two transactions never lock shared rows in
opposite orders.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import astuple, dataclass
from itertools import chain, repeat
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection, bindparam, delete, or_, select, update
from sqlalchemy.exc import DBAPIError

from app.store.tables import class_totals, token_counts, tokens
from app.token_texts import EncodedTexts

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
    token_texts: EncodedTexts  # … and their text
    count_token_ids: IntArray
    count_class_indices: IntArray
    count_docs: IntArray
    count_terms: IntArray
    class_docs: IntArray
    class_terms: IntArray


# Bulk writes go to the driver as plain SQL: SQLAlchemy's per-row parameter processing cost
# more than the database's work (28 % of batch training). SQLite, in process, takes
# executemany. PostgreSQL gets new tokens by COPY straight into their table (they are new:
# nothing to resolve), and count changes by a binary COPY into a temporary table, then one
# INSERT ... SELECT ... ON CONFLICT: 1.3-2x faster than one statement over unnest(arrays)
# (docs/performance.md, "Training's SQL").
_INSERT_TOKENS_SQLITE = (
    f"INSERT INTO {tokens.name} (model_id, token_id, text, generation) VALUES (?, ?, ?, ?)"
)
_COPY_TOKENS_POSTGRESQL = f"COPY {tokens.name} (model_id, token_id, text, generation) FROM STDIN"
# COPY's text format, built as one string (the driver's write_row per token cost 0.6 s of
# client CPU per 2,000 SpamAssassin messages): a backslash, tab, newline or carriage return
# in a text is escaped (the tokenizer seldom makes one: all the texts are searched at once first).
_COPY_SPECIAL = re.compile(r"[\\\t\n\r]")
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_COUNT_CHANGES = "spamsift_count_changes"  # one per session, emptied at every commit
_FIND_COUNT_CHANGES = f"SELECT to_regclass('pg_temp.{_COUNT_CHANGES}') IS NOT NULL"
_CREATE_COUNT_CHANGES = (
    f"CREATE TEMPORARY TABLE {_COUNT_CHANGES} (token_id bigint, "
    "class_index smallint, docs bigint, terms bigint) ON COMMIT DELETE ROWS"
)
# Emptied before use too: a transaction may add counts twice (each COPY must stand alone).
_EMPTY_COUNT_CHANGES = f"TRUNCATE {_COUNT_CHANGES}"
_COPY_COUNT_CHANGES = f"COPY {_COUNT_CHANGES} FROM STDIN (FORMAT BINARY)"
# The count rows of tokens new in this transaction have no row to add to: COPY straight into
# the table (PostgreSQL), a plain INSERT (SQLite).
_COPY_NEW_COUNTS = (
    f"COPY {token_counts.name} (model_id, token_id, class_index, docs, terms, generation) "
    "FROM STDIN (FORMAT BINARY)"
)
_INSERT_COUNTS_SQLITE = (
    f"INSERT INTO {token_counts.name} (model_id, token_id, class_index, docs, terms, generation) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_BINARY_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, no extension
_BINARY_COPY_TRAILER = b"\xff\xff"
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
    f"SELECT %s, token_id, class_index, docs, terms, %s FROM {_COUNT_CHANGES} "
    f"ORDER BY token_id, class_index {_UPSERT_COUNTS}"
)


def _copy(conn: Connection, sql: str, data: bytes) -> None:
    """COPY ... FROM STDIN through the driver (psycopg 3) in the caller's transaction.

    The driver's errors are raised as SQLAlchemy's, as from any other statement: a full disk
    is then a 507, a lost server a 503, a serialization failure a retry.
    """
    driver = conn.connection.driver_connection
    assert driver is not None  # a checked-out connection always has one
    dbapi_error = conn.dialect.loaded_dbapi.Error
    try:
        with driver.cursor() as cursor, cursor.copy(sql) as copy:
            copy.write(data)
    except dbapi_error as error:
        invalidated = conn.dialect.is_disconnect(error, conn.connection.dbapi_connection, None)
        if invalidated:
            conn.invalidate()
        raise DBAPIError.instance(
            sql,
            None,
            error,
            dbapi_error,
            connection_invalidated=invalidated,
            dialect=conn.dialect,
        ) from error


def _binary_rows(rows: int, columns: Sequence[tuple[str, IntArray | int]]) -> bytes:
    """Integer columns, each (its big-endian type ">i2" | ">i4" | ">i8", its values or one
    value for every row), as a binary COPY stream: per row a field count, then each field's
    byte length and value. numpy writes them all at once."""
    layout: list[tuple[str, str]] = [("fields", ">i2")]
    for number, (kind, _) in enumerate(columns):
        layout += [(f"size{number}", ">i4"), (f"value{number}", kind)]
    table = np.empty(rows, dtype=np.dtype(layout))
    table["fields"] = len(columns)
    for number, (kind, values) in enumerate(columns):
        table[f"size{number}"] = np.dtype(kind).itemsize
        table[f"value{number}"] = values
    return _BINARY_COPY_HEADER + table.tobytes() + _BINARY_COPY_TRAILER


def _binary_counts(columns: Sequence[IntArray]) -> bytes:
    """(token_id, class_index, docs, terms) columns (bigint, smallint, bigint, bigint) as a
    binary COPY stream."""
    kinds = (">i8", ">i2", ">i8", ">i8")
    return _binary_rows(columns[0].size, list(zip(kinds, columns, strict=True)))


def insert_tokens(
    conn: Connection, model_id: int, *, first_id: int, texts: Sequence[str], generation: int
) -> None:
    """Store new tokens under consecutive ids starting at `first_id`."""
    if not texts:
        return
    token_ids = range(first_id, first_id + len(texts))
    if conn.dialect.name == "postgresql":
        if _COPY_SPECIAL.search("".join(texts)):
            texts = [text.translate(_COPY_ESCAPES) for text in texts]
        row = f"{model_id}\t{{}}\t{{}}\t{generation}\n".format
        _copy(conn, _COPY_TOKENS_POSTGRESQL, "".join(map(row, token_ids, texts)).encode())
    else:
        conn.exec_driver_sql(
            _INSERT_TOKENS_SQLITE,
            list(zip(repeat(model_id), token_ids, texts, repeat(generation))),
        )


def add_token_counts(
    conn: Connection,
    model_id: int,
    delta: CountDelta,
    *,
    generation: int,
    new_from: int | None = None,
) -> None:
    """Add `delta` to the stored counts atomically (negative deltas subtract).

    Additions are upserts, but for the tokens with ids from `new_from` on, given out in this
    transaction: they have no count row yet, and theirs are inserted. Subtractions are plain
    increments by a negative amount: their rows exist (the ledger says what was added), and an
    upsert's proposed row would already fail the non-negative CHECK before the conflict is
    resolved.
    """
    adding = (delta.docs >= 0) & (delta.terms >= 0)
    subtracting = ~adding
    new = np.zeros(adding.size, dtype=np.bool_)
    if new_from is not None:
        new = adding & (delta.token_ids >= new_from)
        adding &= ~new
    if new.any():
        _insert_new_counts(conn, model_id, delta, new, generation=generation)
    if adding.any():
        columns = [
            array[adding]
            for array in (delta.token_ids, delta.class_indices, delta.docs, delta.terms)
        ]
        if conn.dialect.name == "postgresql":
            if conn.exec_driver_sql(_FIND_COUNT_CHANGES).scalar_one():
                conn.exec_driver_sql(_EMPTY_COUNT_CHANGES)
            else:
                conn.exec_driver_sql(_CREATE_COUNT_CHANGES)
            _copy(conn, _COPY_COUNT_CHANGES, _binary_counts(columns))
            conn.exec_driver_sql(_ADD_COUNTS_POSTGRESQL, (model_id, generation))
        else:
            conn.exec_driver_sql(
                _ADD_COUNTS_SQLITE,
                list(
                    zip(
                        repeat(model_id),
                        *(column.tolist() for column in columns),
                        repeat(generation),
                    )
                ),
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
            delta.token_ids[subtracting].tolist(),
            delta.class_indices[subtracting].tolist(),
            delta.docs[subtracting].tolist(),
            delta.terms[subtracting].tolist(),
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


def _insert_new_counts(
    conn: Connection, model_id: int, delta: CountDelta, rows: NDArray[np.bool_], *, generation: int
) -> None:
    """Insert the count rows `rows` of `delta`, whose tokens have no row yet."""
    columns = [
        array[rows] for array in (delta.token_ids, delta.class_indices, delta.docs, delta.terms)
    ]
    if conn.dialect.name == "postgresql":
        kinds = (">i8", ">i2", ">i8", ">i8")
        data = _binary_rows(
            columns[0].size,
            [(">i4", model_id), *zip(kinds, columns, strict=True), (">i8", generation)],
        )
        _copy(conn, _COPY_NEW_COUNTS, data)
        return
    conn.exec_driver_sql(
        _INSERT_COUNTS_SQLITE,
        list(zip(repeat(model_id), *(column.tolist() for column in columns), repeat(generation))),
    )


def add_class_totals(
    conn: Connection, model_id: int, *, class_docs: Iterable[int], class_terms: Iterable[int]
) -> None:
    """Add per-class message and term deltas atomically."""
    changes = [
        {"b_model_id": model_id, "b_class_index": class_index, "b_docs": docs, "b_terms": terms}
        for class_index, (docs, terms) in enumerate(zip(class_docs, class_terms, strict=True))
        if docs or terms
    ]
    if changes:
        conn.execute(_ADD_CLASS_TOTALS, changes)


# Built once (every write runs it): see `app.store.dialect.PrebuiltUpsert`.
_ADD_CLASS_TOTALS = (
    update(class_totals)
    .where(
        class_totals.c.model_id == bindparam("b_model_id"),
        class_totals.c.class_index == bindparam("b_class_index"),
    )
    .values(
        docs=class_totals.c.docs + bindparam("b_docs"),
        terms=class_totals.c.terms + bindparam("b_terms"),
    )
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


# A whole model is read in ranges of token ids (on the primary key), each range as one row:
# comma-separated numbers per column and the texts in one string, each followed by U+001F. A
# million row tuples, and their garbage collection, cost 3.4 s of a million-token load; these
# strings 0.8 s. The aggregates of one query see its rows in one order, so the lists line up.
# 100,000 ids a range: libpq keeps its input buffer as large as the largest row it received,
# for the connection's life (500,000 held ~4 MB more in a server).
READ_ID_RANGE = 100_000
TEXT_TERMINATOR = "\x1f"  # the tokenizer never makes it; a text that holds it is read apart
_AGGREGATE = {
    "sqlite": {
        "join": "group_concat({}, ',')",
        "terminated": "group_concat({} || char(31), '')",
        "concat": "group_concat({}, '')",
        "bytes": "length(CAST({} AS BLOB))",
    },
    "postgresql": {
        "join": "string_agg(({})::text, ',')",
        "terminated": "string_agg({} || chr(31), '')",
        "concat": "string_agg({}, '')",
        "bytes": "octet_length({})",
    },
}


@dataclass(frozen=True)
class _BulkReads:
    tokens: str  # ids, texts each followed by TEXT_TERMINATOR
    tokens_by_length: str  # ids, byte lengths, texts (when a text holds the terminator)
    counts: str  # token ids, class indices, docs, terms


def _bulk_reads(dialect: str, *, ranged: bool) -> _BulkReads:
    sql = _AGGREGATE["postgresql" if dialect == "postgresql" else "sqlite"]
    join = sql["join"].format
    # A range is read on the primary key; a change feed on the generation index.
    where = (
        "WHERE model_id = ? AND token_id >= ? AND token_id < ?"
        if ranged
        else "WHERE model_id = ? AND generation > ?"
    )
    reads = _BulkReads(
        tokens=f"SELECT {join('token_id')}, {sql['terminated'].format('text')} "
        f"FROM {tokens.name} {where}",
        tokens_by_length=f"SELECT {join('token_id')}, {join(sql['bytes'].format('text'))}, "
        f"{sql['concat'].format('text')} FROM {tokens.name} {where}",
        counts="SELECT "
        + ", ".join(join(column) for column in ("token_id", "class_index", "docs", "terms"))
        + f" FROM {token_counts.name} {where}",
    )
    if dialect == "postgresql":
        return _BulkReads(*(query.replace("?", "%s") for query in astuple(reads)))
    return reads


def _read_texts(
    conn: Connection, reads: _BulkReads, parameters: tuple[int, ...]
) -> tuple[IntArray, EncodedTexts]:
    joined_ids, terminated = conn.exec_driver_sql(reads.tokens, parameters).one()
    token_ids = _numbers(joined_ids)
    texts = EncodedTexts.from_terminated(terminated or "", TEXT_TERMINATOR, token_ids.size)
    if texts is not None:
        return token_ids, texts
    joined_ids, joined_lengths, concatenated = conn.exec_driver_sql(
        reads.tokens_by_length, parameters
    ).one()
    lengths = _numbers(joined_lengths)
    blob = (concatenated or "").encode("utf-8", "surrogatepass")
    return _numbers(joined_ids), EncodedTexts(blob, np.cumsum(lengths) - lengths, lengths)


def _numbers(joined: str | None) -> IntArray:
    """The integers of a comma-separated list (None: no rows)."""
    if not joined:
        return np.zeros(0, dtype=np.int64)
    return np.fromstring(joined, dtype=np.int64, sep=",")


def read_changes(
    conn: Connection, model_id: int, *, since_generation: int, generation: int, n_classes: int
) -> CountChanges:
    """Read, in the caller's snapshot, everything changed after `since_generation`.

    With `since_generation = -1` this is the whole model (the parts of `read_model_parts` in
    one); a change feed is read in one go (on the generation index).
    """
    if since_generation < 0:
        parts = list(read_model_parts(conn, model_id, generation=generation, n_classes=n_classes))
    else:
        reads = _bulk_reads(conn.dialect.name, ranged=False)
        class_totals = read_class_totals(conn, model_id, n_classes)
        parts = [_read_part(conn, reads, (model_id, since_generation), generation, class_totals)]
    if len(parts) == 1:
        return parts[0]
    return CountChanges(
        generation=generation,
        token_ids=np.concatenate([part.token_ids for part in parts]),
        token_texts=EncodedTexts.concatenate([part.token_texts for part in parts]),
        count_token_ids=np.concatenate([part.count_token_ids for part in parts]),
        count_class_indices=np.concatenate([part.count_class_indices for part in parts]),
        count_docs=np.concatenate([part.count_docs for part in parts]),
        count_terms=np.concatenate([part.count_terms for part in parts]),
        class_docs=parts[0].class_docs,
        class_terms=parts[0].class_terms,
    )


def read_model_parts(
    conn: Connection, model_id: int, *, generation: int, n_classes: int
) -> Iterator[CountChanges]:
    """The whole model in the caller's snapshot, READ_ID_RANGE token ids a part (each with
    the class totals; at least one part), in ascending ids.

    A load applies each part before reading the next: the texts of one part exist as str
    objects at a time, not a million of them (64 MB of small blocks whose freed arenas the
    objects made meanwhile kept resident, ~11 bytes a token).
    """
    reads = _bulk_reads(conn.dialect.name, ranged=True)
    placeholder = "%s" if conn.dialect.name == "postgresql" else "?"
    end = max(
        conn.exec_driver_sql(
            f"SELECT coalesce(max(token_id), -1) FROM {table} WHERE model_id = {placeholder}",
            (model_id,),
        ).scalar_one()
        for table in (tokens.name, token_counts.name)
    )
    class_totals = read_class_totals(conn, model_id, n_classes)
    for start in range(0, max(end + 1, 1), READ_ID_RANGE):
        parameters = (model_id, start, start + READ_ID_RANGE)
        yield _read_part(conn, reads, parameters, generation, class_totals)


def _read_part(
    conn: Connection,
    reads: _BulkReads,
    parameters: tuple[int, ...],
    generation: int,
    class_totals: tuple[IntArray, IntArray],
) -> CountChanges:
    token_ids, texts = _read_texts(conn, reads, parameters)
    count_token_ids, count_class_indices, count_docs, count_terms = (
        _numbers(joined) for joined in conn.exec_driver_sql(reads.counts, parameters).one()
    )
    return CountChanges(
        generation=generation,
        token_ids=token_ids,
        token_texts=texts,
        count_token_ids=count_token_ids,
        count_class_indices=count_class_indices,
        count_docs=count_docs,
        count_terms=count_terms,
        class_docs=class_totals[0],
        class_terms=class_totals[1],
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
# one JSON array (SQLite's json_each, first in a CROSS JOIN, which SQLite keeps in that order
# for the same reason), never as an IN list: building and converting a 300-placeholder
# statement cost more than the database's work (profiled: 4 of a cold classification's 11 ms).
# A row names its text by its place in the array sent instead of sending the text back, and
# every column is an integer (-1 and zeros where a token has no count row), so the rows become
# one numpy array without a Python object per value.
#
# PostgreSQL's count rows are joined LATERAL, each token's probed by the primary key: as a
# plain join, with no statistics yet (a database just filled, before autovacuum's analyze:
# tables of 150 M rows planned as 500 rows a token), it merge-joined every count row of the
# model, 37 ms against 1-2 ms (`OFFSET 0` keeps the planner from flattening the subquery).
_MESSAGE_ROWS_POSTGRESQL = (
    "SELECT t.token_id, m.place - 1, COALESCE(c.class_index, -1), COALESCE(c.docs, 0), "
    "COALESCE(c.terms, 0) "
    "FROM unnest(%(texts)s::text[]) WITH ORDINALITY AS m(text, place) "
    f"JOIN {tokens.name} t ON t.model_id = %(model)s AND t.text = m.text "
    "LEFT JOIN LATERAL (SELECT class_index, docs, terms "
    f"FROM {token_counts.name} WHERE model_id = %(model)s AND token_id = t.token_id "
    "OFFSET 0) c ON true "
    f"UNION ALL SELECT -1, -1, class_index, docs, terms FROM {class_totals.name} "
    "WHERE model_id = %(model)s"
)
_MESSAGE_ROWS_SQLITE = (
    "SELECT t.token_id, m.key, COALESCE(c.class_index, -1), COALESCE(c.docs, 0), "
    "COALESCE(c.terms, 0) "
    f"FROM json_each(:texts) AS m CROSS JOIN {tokens.name} t "
    "ON t.model_id = :model AND t.text = m.value "
    f"LEFT JOIN {token_counts.name} c ON c.model_id = :model AND c.token_id = t.token_id "
    f"UNION ALL SELECT -1, -1, class_index, docs, terms FROM {class_totals.name} "
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
    # Columns: token id (-1: a class total), place of its text, class index (-1: no count
    # row), docs, terms.
    table = np.fromiter(chain.from_iterable(rows), np.int64, 5 * len(rows)).reshape(-1, 5)
    totals = table[table[:, 0] < 0]
    class_docs = np.zeros(n_classes, dtype=np.int64)
    class_terms = np.zeros(n_classes, dtype=np.int64)
    class_docs[totals[:, 2]] = totals[:, 3]
    class_terms[totals[:, 2]] = totals[:, 4]
    found = table[table[:, 0] >= 0]
    token_ids, first = np.unique(found[:, 0], return_index=True)
    counted = found[found[:, 2] >= 0]
    return MessageCounts(
        token_ids=token_ids,
        token_texts=[distinct[place] for place in found[first, 1].tolist()],
        count_token_ids=counted[:, 0].copy(),
        count_class_indices=counted[:, 2].copy(),
        count_docs=counted[:, 3].copy(),
        count_terms=counted[:, 4].copy(),
        class_docs=class_docs,
        class_terms=class_terms,
    )


_READ_COUNTS = (
    f"SELECT token_id, class_index, docs, terms FROM {token_counts.name} "
    "WHERE model_id = ? AND generation > ?"
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


def changed_since(
    conn: Connection, model_id: int, token_ids: Sequence[int], generation: int
) -> IntArray:
    """Which of `token_ids` had a count changed after `generation` (sorted)."""
    changed: set[int] = set()
    for start in range(0, len(token_ids), LOOKUP_CHUNK):
        chunk = list(token_ids[start : start + LOOKUP_CHUNK])
        changed.update(
            int(token_id)
            for (token_id,) in conn.execute(
                select(token_counts.c.token_id).where(
                    token_counts.c.model_id == model_id,
                    token_counts.c.token_id.in_(chunk),
                    token_counts.c.generation > generation,
                )
            )
        )
    return np.array(sorted(changed), dtype=np.int64)


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


def read_token_ids_starting_with(
    conn: Connection, model_id: int, prefixes: Sequence[str]
) -> IntArray:
    """The ids of the model's tokens whose text starts with one of `prefixes`, ascending."""
    if not prefixes:
        return np.zeros(0, dtype=np.int64)
    rows = conn.execute(
        select(tokens.c.token_id).where(
            tokens.c.model_id == model_id,
            or_(*(tokens.c.text.startswith(prefix, autoescape=True) for prefix in prefixes)),
        )
    )
    return np.sort(np.fromiter((int(row[0]) for row in rows), dtype=np.int64))
