"""Token ids, token counts and class totals.

Class totals move by atomic SQL increments. Token counts are kept in packed chunks behind a
journal (`app.store.chunks`): a write appends its delta to the journal, and folds the journal
into the chunks it touches once it is long enough; both happen under the model's row lock
(`app.store.models.lock_model_row`), which every writer of a model takes first, so a fold's
read-modify-write of a chunk cannot lose another writer's change. Readers add the journal to
what the chunks hold, in their one snapshot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import astuple, dataclass
from itertools import repeat
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection, bindparam, delete, or_, select, update
from sqlalchemy.exc import DBAPIError

from app.store.chunks import (
    CHUNK_IDS,
    JOURNAL_CELLS,
    NegativeCount,
    TokenEntries,
    cell_entries,
    chunk_of,
    entry_counts,
    entry_width,
    fold,
    journal_entries,
    pack_delta,
    unpack_chunks,
    without,
)
from app.store.dialect import driver_sql
from app.store.tables import class_totals, count_chunks, count_journal, tokens
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

    def cells(self) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """(token ids, class indices, docs, terms) of the (token, class) cells changed, as
        `MessageCounts.cells` gives a message's."""
        return self.count_token_ids, self.count_class_indices, self.count_docs, self.count_terms


# New tokens go to the driver as plain SQL: SQLAlchemy's per-row parameter processing cost
# more than the database's work. PostgreSQL gets them by COPY straight into their table (they
# are new: nothing to resolve). SQLite gets the texts as one JSON array, numbered by their
# place in it: an executemany of a row per token bound each row's four parameters apart,
# nearly half of its time (15,000 new tokens, a new mailbox's first 50 messages: 45 -> 24 ms).
# SQLite's JSON strings end at an escaped NUL, so a text holding one (never the tokenizer's)
# goes row by row.
_INSERT_TOKENS_SQLITE = (
    f"INSERT INTO {tokens.name} (model_id, token_id, text, generation) "
    "SELECT ?, ? + key, value, ? FROM json_each(?)"
)
_INSERT_TOKEN_ROWS_SQLITE = (
    f"INSERT INTO {tokens.name} (model_id, token_id, text, generation) VALUES (?, ?, ?, ?)"
)
_JSON_NUL = "\\u0000"  # how json.dumps writes a NUL (or a text's own backslash, u, 0000)
_COPY_TOKENS_POSTGRESQL = f"COPY {tokens.name} (model_id, token_id, text, generation) FROM STDIN"
# COPY's text format, built as one string (the driver's write_row per token cost 0.6 s of
# client CPU per 2,000 SpamAssassin messages): a backslash, tab, newline or carriage return
# in a text is escaped (the tokenizer seldom makes one: all the texts are searched at once first).
_COPY_SPECIAL = re.compile(r"[\\\t\n\r]")
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})

# The statements on chunks and the journal, written with `?` (PostgreSQL's `%s` by `driver_sql`).
_JOURNAL_SIZES = f"SELECT generation, cells FROM {count_journal.name} WHERE model_id = ?"
_JOURNAL_ROWS = (
    f"SELECT generation, delta FROM {count_journal.name} WHERE model_id = ? ORDER BY generation"
)
_JOURNAL_APPEND = (
    f"INSERT INTO {count_journal.name} (model_id, generation, cells, delta) VALUES (?, ?, ?, ?)"
)
_JOURNAL_EMPTY = f"DELETE FROM {count_journal.name} WHERE model_id = ?"
_CHUNKS_SINCE = (
    f"SELECT chunk, counts FROM {count_chunks.name} WHERE model_id = ? AND generation > ?"
)
_CHUNKS_IN_RANGE = (
    f"SELECT chunk, counts FROM {count_chunks.name} "
    "WHERE model_id = ? AND chunk >= ? AND chunk < ? ORDER BY chunk"
)
_CHUNKS_ALL = f"SELECT chunk, counts FROM {count_chunks.name} WHERE model_id = ? ORDER BY chunk"
# Chunks by number, each one probe of the primary key whatever the statistics say (see the
# message read below for why PostgreSQL's is LATERAL).
_CHUNKS_BY_NUMBER_SQLITE = (
    f"SELECT c.chunk, c.counts FROM json_each(?) AS w CROSS JOIN {count_chunks.name} c "
    "ON c.model_id = ? AND c.chunk = w.value"
)
_CHUNKS_BY_NUMBER_POSTGRESQL = (
    "SELECT c.chunk, c.counts FROM unnest(%s::bigint[]) AS w(chunk) CROSS JOIN LATERAL "
    f"(SELECT chunk, counts FROM {count_chunks.name} WHERE model_id = %s AND chunk = w.chunk "
    "OFFSET 0) c"
)
_CHUNKS_UPSERT = (
    "ON CONFLICT (model_id, chunk) DO UPDATE SET generation = excluded.generation, "
    "counts = excluded.counts"
)
_CHUNKS_WRITE_SQLITE = (
    f"INSERT INTO {count_chunks.name} (model_id, chunk, generation, counts) VALUES (?, ?, ?, ?) "
    f"{_CHUNKS_UPSERT}"
)
# PostgreSQL writes chunks by a binary COPY into a temporary table (one per session, emptied
# before each use and at commit), then one INSERT ... SELECT ... ON CONFLICT: a fold of a
# batch of 500 messages writes ~8,000 chunks, and as one upsert a row (executemany) each
# cost the client and the server 3-4 times as much (docs/performance.md, "PostgreSQL's fold").
_CHUNK_WRITES = "spamsift_chunk_writes"
_CHUNK_WRITES_FIND = f"SELECT to_regclass('pg_temp.{_CHUNK_WRITES}') IS NOT NULL"
_CHUNK_WRITES_CREATE = (
    f"CREATE TEMPORARY TABLE {_CHUNK_WRITES} (chunk bigint, generation bigint, counts bytea) "
    "ON COMMIT DELETE ROWS"
)
_CHUNK_WRITES_EMPTY = f"DELETE FROM {_CHUNK_WRITES}"  # a transaction may fold twice
_CHUNK_WRITES_COPY = f"COPY {_CHUNK_WRITES} FROM STDIN (FORMAT BINARY)"
_CHUNK_WRITES_APPLY = (
    f"INSERT INTO {count_chunks.name} (model_id, chunk, generation, counts) "
    f"SELECT %s, chunk, generation, counts FROM {_CHUNK_WRITES} ORDER BY chunk {_CHUNKS_UPSERT}"
)
_BINARY_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags, no extension
_BINARY_COPY_TRAILER = b"\xff\xff"
_CHUNKS_DELETE = f"DELETE FROM {count_chunks.name} WHERE model_id = ? AND chunk = ?"


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
        return
    array = json.dumps(list(texts), ensure_ascii=False)
    if _JSON_NUL not in array:
        conn.exec_driver_sql(_INSERT_TOKENS_SQLITE, (model_id, first_id, generation, array))
    else:
        conn.exec_driver_sql(
            _INSERT_TOKEN_ROWS_SQLITE,
            list(zip(repeat(model_id), token_ids, texts, repeat(generation))),
        )


def add_token_counts(
    conn: Connection, model_id: int, delta: CountDelta, *, generation: int, n_classes: int
) -> None:
    """Store `delta`, the count changes of the write of `generation` (negative deltas
    subtract), under the model's row lock: appended to the journal, or, when the journal
    would pass JOURNAL_CELLS cells, folded with it into the chunks.

    The caller has checked that no count goes below zero (its copy of the model is exact
    under the lock); a fold checks again (NegativeCount).
    """
    if not delta.token_ids.size:
        return
    sizes = conn.exec_driver_sql(driver_sql(conn, _JOURNAL_SIZES), (model_id,)).all()
    pending = sum(int(cells) for _, cells in sizes)
    if pending + delta.token_ids.size <= JOURNAL_CELLS and all(
        int(stored) != generation for stored, _ in sizes
    ):
        conn.exec_driver_sql(
            driver_sql(conn, _JOURNAL_APPEND),
            (model_id, generation, int(delta.token_ids.size), _delta_bytes(delta)),
        )
        return
    fold_journal(conn, model_id, n_classes=n_classes, extra=delta, generation=generation)


def _delta_bytes(delta: CountDelta) -> bytes:
    return pack_delta(delta.token_ids, delta.class_indices, delta.docs, delta.terms)


def fold_journal(
    conn: Connection,
    model_id: int,
    *,
    n_classes: int,
    extra: CountDelta | None = None,
    generation: int = 0,
) -> None:
    """Fold the model's journal, and `extra` (the changes of the write of `generation`), into
    its chunks, and empty the journal: under the model's row lock."""
    rows = _journal_rows(conn, model_id)
    changes = journal_entries(rows, n_classes)
    if extra is not None and extra.token_ids.size:
        generations = np.full(extra.token_ids.size, generation, dtype=np.int64)
        changes = changes.plus(
            cell_entries(
                extra.token_ids,
                extra.class_indices,
                extra.docs,
                extra.terms,
                generations,
                n_classes=n_classes,
            )
        )
    _add_to_chunks(conn, model_id, changes, n_classes)
    if rows:
        conn.exec_driver_sql(driver_sql(conn, _JOURNAL_EMPTY), (model_id,))


def _add_to_chunks(conn: Connection, model_id: int, changes: TokenEntries, n_classes: int) -> None:
    """Add `changes` to the chunks they fall in (read, added to, written back)."""
    if not len(changes):
        return
    numbers = np.unique(chunk_of(changes.token_ids))
    stored = dict(_chunks_by_number(conn, model_id, numbers))
    blobs, generations = fold(
        numbers, [stored.get(number) for number in numbers.tolist()], changes, n_classes
    )
    _write_chunks(conn, model_id, numbers, generations, blobs)


def _write_chunks(
    conn: Connection, model_id: int, numbers: IntArray, generations: IntArray, blobs: list[bytes]
) -> None:
    """Store the chunks `numbers` (each `blobs`' entry, of one length, and its generation),
    in place of what they held."""
    if conn.dialect.name != "postgresql":
        conn.exec_driver_sql(
            _CHUNKS_WRITE_SQLITE,
            [
                (model_id, number, generation, blob)
                for number, generation, blob in zip(
                    numbers.tolist(), generations.tolist(), blobs, strict=True
                )
            ],
        )
        return
    if conn.exec_driver_sql(_CHUNK_WRITES_FIND).scalar_one():
        conn.exec_driver_sql(_CHUNK_WRITES_EMPTY)
    else:
        conn.exec_driver_sql(_CHUNK_WRITES_CREATE)
    _copy(conn, _CHUNK_WRITES_COPY, _binary_chunks(numbers, generations, blobs))
    conn.exec_driver_sql(_CHUNK_WRITES_APPLY, (model_id,))


def _binary_chunks(numbers: IntArray, generations: IntArray, blobs: list[bytes]) -> bytes:
    """(chunk, generation, counts) rows as a binary COPY stream: per row a field count, then
    each field's byte length and value, big-endian; numpy lays them all out at once."""
    size = len(blobs[0]) if blobs else 0
    layout = [
        ("fields", ">i2"),
        ("chunk_size", ">i4"),
        ("chunk", ">i8"),
        ("generation_size", ">i4"),
        ("generation", ">i8"),
        ("counts_size", ">i4"),
        ("counts", f"V{size}"),
    ]
    rows = np.empty(numbers.size, dtype=np.dtype(layout))
    rows["fields"] = 3
    rows["chunk_size"] = rows["generation_size"] = 8
    rows["chunk"] = numbers
    rows["generation"] = generations
    rows["counts_size"] = size
    rows["counts"] = np.frombuffer(b"".join(blobs), dtype=f"V{size}")
    return _BINARY_COPY_HEADER + rows.tobytes() + _BINARY_COPY_TRAILER


def count_rows(
    conn: Connection, model_id: int, n_classes: int
) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
    """The model's counts as rows of (token id, class index, docs, terms, generation), in
    that order: each cell that holds a count, and class 0 of a token counted once and back
    to zero (forgotten). The shape of an export, whatever the layout."""
    entries = _stored_entries(conn, model_id, n_classes)
    token_ids, class_indices, docs, terms = entries.cells(every_class=True)
    generations = np.repeat(entries.generations, n_classes)
    emptied = np.repeat(~(entries.docs.any(axis=1) | entries.terms.any(axis=1)), n_classes)
    kept = (docs != 0) | (terms != 0) | (emptied & (class_indices == 0))
    return (
        token_ids[kept],
        class_indices[kept],
        docs[kept],
        terms[kept],
        generations[kept],
    )


def add_count_rows(
    conn: Connection,
    model_id: int,
    rows: tuple[IntArray, IntArray, IntArray, IntArray, IntArray],
    n_classes: int,
) -> None:
    """Add rows in the shape of `count_rows` to the model's counts (an import)."""
    token_ids, class_indices, docs, terms, generations = rows
    if (docs < 0).any() or (terms < 0).any():
        raise NegativeCount("a count row holds a negative count")
    if (token_ids < 0).any() or (generations < 1).any():
        raise ValueError("a count row needs a token id >= 0 and a generation >= 1")
    if ((class_indices < 0) | (class_indices >= n_classes)).any():
        raise ValueError(f"a count row's class index is not one of the model's 0..{n_classes - 1}")
    entries = cell_entries(token_ids, class_indices, docs, terms, generations, n_classes=n_classes)
    _add_to_chunks(conn, model_id, entries, n_classes)


def _journal_rows(conn: Connection, model_id: int) -> list[tuple[int, bytes]]:
    return [
        (int(generation), bytes(delta))
        for generation, delta in conn.exec_driver_sql(driver_sql(conn, _JOURNAL_ROWS), (model_id,))
    ]


def _chunks_by_number(
    conn: Connection, model_id: int, numbers: IntArray
) -> list[tuple[int, bytes]]:
    """The stored chunks among `numbers` (chunk number, counts)."""
    if not numbers.size:
        return []
    if conn.dialect.name == "postgresql":
        rows = conn.exec_driver_sql(_CHUNKS_BY_NUMBER_POSTGRESQL, (numbers.tolist(), model_id))
    else:
        rows = conn.exec_driver_sql(
            _CHUNKS_BY_NUMBER_SQLITE, (json.dumps(numbers.tolist()), model_id)
        )
    return [(int(number), bytes(counts)) for number, counts in rows]


def _chunk_rows(
    conn: Connection, statement: str, parameters: tuple[int, ...]
) -> tuple[list[int], list[bytes]]:
    numbers: list[int] = []
    blobs: list[bytes] = []
    for rows in _fetch_chunks(conn, statement, parameters):
        for number, counts in rows:
            numbers.append(int(number))
            blobs.append(bytes(counts))
    return numbers, blobs


def _stored_entries(conn: Connection, model_id: int, n_classes: int) -> TokenEntries:
    """Every token's counts: the chunks with the journal added."""
    numbers, blobs = _chunk_rows(conn, _CHUNKS_ALL, (model_id,))
    return unpack_chunks(numbers, blobs, n_classes).plus(
        journal_entries(_journal_rows(conn, model_id), n_classes)
    )


def _entries_of(
    conn: Connection, model_id: int, token_ids: IntArray, n_classes: int
) -> TokenEntries:
    """The counts of `token_ids` (those that have any): their chunks with the journal added."""
    stored = _chunks_by_number(conn, model_id, np.unique(chunk_of(token_ids)))
    held = unpack_chunks([number for number, _ in stored], [blob for _, blob in stored], n_classes)
    journal = journal_entries(_journal_rows(conn, model_id), n_classes)
    return held.plus(journal).among(token_ids)


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
# 32,768 ids a range (whole chunks): what reading and applying a part makes (its texts' str
# objects, its chunks' bytes, the copies of the hash index it grows) scales with the part,
# and the load's peak is what the allocator keeps afterwards. 100,000 ids peaked at 86 MB
# traced for a million tokens, this at 64 (with the room reserved once, `LiveModel.load`), for
# the same CPU in process (see docs/performance.md, "The load's peak"). libpq also keeps its
# input buffer as large as the largest row it received, for the connection's life (500,000
# held ~4 MB more in a server).
READ_ID_RANGE = 32_768
assert READ_ID_RANGE % CHUNK_IDS == 0  # a part reads whole chunks
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


_NO_TOKEN_ID = 2**63 - 1  # above every token id: the open end of a range


def _bulk_reads(dialect: str) -> _BulkReads:
    """The reads of a range of token ids, on the primary key (a change feed's new tokens are
    a range too: ids are given out in generation order)."""
    sql = _AGGREGATE["postgresql" if dialect == "postgresql" else "sqlite"]
    join = sql["join"].format
    where = "WHERE model_id = ? AND token_id >= ? AND token_id < ?"
    reads = _BulkReads(
        tokens=f"SELECT {join('token_id')}, {sql['terminated'].format('text')} "
        f"FROM {tokens.name} {where}",
        tokens_by_length=f"SELECT {join('token_id')}, {join(sql['bytes'].format('text'))}, "
        f"{sql['concat'].format('text')} FROM {tokens.name} {where}",
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
    conn: Connection,
    model_id: int,
    *,
    since_generation: int,
    held_tokens: int,
    generation: int,
    n_classes: int,
) -> CountChanges:
    """Read, in the caller's snapshot, everything changed after `since_generation`, for a
    reader that holds the model at that generation, token ids below `held_tokens` with it.

    With `since_generation = -1` this is the whole model (the parts of `read_model_parts` in
    one). A change feed is the new tokens, the chunks folded after it and the journal. New
    tokens are those from `held_tokens` on: ids are given out under the model's row lock, so
    a later write's are above every earlier write's (expiry deletes tokens, but it moves the
    model's epoch, and a reader then loads the model anew). A token changed after
    `since_generation` has its entry's generation, or a journal row's, past it, and its value
    is its entry plus the whole journal.
    """
    if since_generation < 0:
        parts = list(read_model_parts(conn, model_id, generation=generation, n_classes=n_classes))
        return _joined(parts, generation)
    reads = _bulk_reads(conn.dialect.name)
    token_ids, texts = _read_texts(conn, reads, (model_id, held_tokens, _NO_TOKEN_ID))
    numbers, blobs = _chunk_rows(conn, _CHUNKS_SINCE, (model_id, since_generation))
    in_chunks = unpack_chunks(numbers, blobs, n_classes)
    folded = in_chunks.token_ids[in_chunks.generations > since_generation]
    journal = journal_entries(_journal_rows(conn, model_id), n_classes)
    later = journal.token_ids[journal.generations > since_generation]  # a row after it
    unread = np.setdiff1d(np.unique(chunk_of(later)), numbers)
    stored = _chunks_by_number(conn, model_id, unread)
    in_chunks = in_chunks.plus(  # other chunks: other tokens
        unpack_chunks([n for n, _ in stored], [b for _, b in stored], n_classes)
    )
    changed_ids = np.union1d(folded, later)
    changed = in_chunks.among(changed_ids).plus(journal.among(changed_ids))
    class_totals = read_class_totals(conn, model_id, n_classes)
    return _changes(generation, token_ids, texts, changed.cells(every_class=True), class_totals)


def _changes(
    generation: int,
    token_ids: IntArray,
    texts: EncodedTexts,
    cells: tuple[IntArray, IntArray, IntArray, IntArray],
    class_totals: tuple[IntArray, IntArray],
) -> CountChanges:
    count_token_ids, count_class_indices, count_docs, count_terms = cells
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


def _joined(parts: list[CountChanges], generation: int) -> CountChanges:
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


_MAX_CHUNK = f"SELECT coalesce(max(chunk), -1) FROM {count_chunks.name} WHERE model_id = ?"
_MAX_TOKEN = f"SELECT coalesce(max(token_id), -1) FROM {tokens.name} WHERE model_id = ?"


def read_model_parts(
    conn: Connection, model_id: int, *, generation: int, n_classes: int
) -> Iterator[CountChanges]:
    """The whole model in the caller's snapshot, READ_ID_RANGE token ids a part (each with
    the class totals; at least one part), in ascending ids.

    A load applies each part before reading the next: the texts of one part exist as str
    objects at a time, not a million of them (64 MB of small blocks whose freed arenas the
    objects made meanwhile kept resident, ~11 bytes a token).
    """
    reads = _bulk_reads(conn.dialect.name)
    journal = journal_entries(_journal_rows(conn, model_id), n_classes)
    last_chunk = conn.exec_driver_sql(driver_sql(conn, _MAX_CHUNK), (model_id,)).scalar_one()
    end = max(
        conn.exec_driver_sql(driver_sql(conn, _MAX_TOKEN), (model_id,)).scalar_one(),
        (last_chunk + 1) * CHUNK_IDS - 1,
        int(journal.token_ids.max()) if len(journal) else -1,
    )
    class_totals = read_class_totals(conn, model_id, n_classes)
    for start in range(0, max(end + 1, 1), READ_ID_RANGE):
        yield _model_part(conn, reads, model_id, start, journal, generation, class_totals)


def _model_part(
    conn: Connection,
    reads: _BulkReads,
    model_id: int,
    start: int,
    journal: TokenEntries,
    generation: int,
    class_totals: tuple[IntArray, IntArray],
) -> CountChanges:
    """The part of `read_model_parts` from token id `start`. A function of its own so that
    what reading it made (the texts' strings, the chunks' bytes, the unpacked arrays) is freed
    on return, not kept by the generator while the next part is read (at 100,000 ids a part,
    about 11 MB: the load's traced peak 85.7 -> 81.0 MB for a million tokens)."""
    stop = start + READ_ID_RANGE
    token_ids, texts = _read_texts(conn, reads, (model_id, start, stop))
    numbers, blobs = _chunk_rows(
        conn, _CHUNKS_IN_RANGE, (model_id, start // CHUNK_IDS, stop // CHUNK_IDS)
    )
    in_range = (journal.token_ids >= start) & (journal.token_ids < stop)
    n_classes = len(class_totals[0])
    entries = unpack_chunks(numbers, blobs, n_classes).plus(journal.where(in_range))
    return _changes(generation, token_ids, texts, entries.cells(every_class=False), class_totals)


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

    token_ids: IntArray  # ascending: the texts found
    token_texts: list[str]  # in the order of token_ids
    docs: IntArray  # (tokens, classes), zeros where a token holds no count
    terms: IntArray  # (tokens, classes)
    class_docs: IntArray
    class_terms: IntArray

    def cells(self) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        """(token ids, class indices, docs, terms) of the (token, class) cells that hold a
        count."""
        rows, class_indices = np.nonzero((self.docs != 0) | (self.terms != 0))
        return (
            self.token_ids[rows],
            class_indices.astype(np.int64),
            self.docs[rows, class_indices],
            self.terms[rows, class_indices],
        )


# One statement, one round trip: the message's tokens, each with its entry cut from its chunk,
# then the class totals (token_id -1) and the journal (token_id -2). The texts go as one array
# parameter (PostgreSQL, unnested so that each text is one probe of the (model_id, text) index
# whatever the table statistics say) or one JSON array (SQLite's json_each, first in a CROSS
# JOIN, which SQLite keeps in that order for the same reason), never as an IN list: building
# and converting a 300-placeholder statement cost more than the database's work (profiled: 4
# of a cold classification's 11 ms). A row names its text by its place in the array sent
# instead of sending the text back.
#
# PostgreSQL's chunk is joined LATERAL, one primary-key probe per token: as a plain join, with
# no statistics yet (a database just filled, before autovacuum's analyze), the planner may
# merge-join every chunk of the model (`OFFSET 0` keeps it from flattening the subquery).
_MESSAGE_ROWS_POSTGRESQL = (
    "SELECT t.token_id, m.place - 1, c.entry, NULL::bigint, NULL::bigint "
    "FROM json_array_elements_text(%(texts)s::json) WITH ORDINALITY AS m(text, place) "
    f"JOIN LATERAL (SELECT token_id FROM {tokens.name} WHERE model_id = %(model)s "
    "AND text = m.text OFFSET 0) t ON true "
    "LEFT JOIN LATERAL (SELECT substring(counts FROM (mod(t.token_id, "
    f"{CHUNK_IDS}) * %(width)s + 1)::int FOR %(width)s) AS entry "
    f"FROM {count_chunks.name} WHERE model_id = %(model)s AND chunk = t.token_id / {CHUNK_IDS} "
    "OFFSET 0) c ON true "
    f"UNION ALL SELECT -1, class_index, NULL, docs, terms FROM {class_totals.name} "
    "WHERE model_id = %(model)s "
    f"UNION ALL SELECT -2, generation, delta, NULL, NULL FROM {count_journal.name} "
    "WHERE model_id = %(model)s"
)
_MESSAGE_ROWS_SQLITE = (
    f"SELECT t.token_id, m.key, substr(c.counts, (t.token_id % {CHUNK_IDS}) * :width + 1, "
    ":width), NULL, NULL "
    f"FROM json_each(:texts) AS m CROSS JOIN {tokens.name} t "
    "ON t.model_id = :model AND t.text = m.value "
    f"LEFT JOIN {count_chunks.name} c ON c.model_id = :model AND c.chunk = t.token_id / "
    f"{CHUNK_IDS} "
    f"UNION ALL SELECT -1, class_index, NULL, docs, terms FROM {class_totals.name} "
    "WHERE model_id = :model "
    f"UNION ALL SELECT -2, generation, delta, NULL, NULL FROM {count_journal.name} "
    "WHERE model_id = :model"
)


def read_message_counts(
    conn: Connection, model_id: int, texts: Sequence[str], *, n_classes: int
) -> MessageCounts:
    """Read the token ids, counts and class totals a message's `texts` need, in the caller's
    snapshot: one statement on the index of (model_id, text), never the whole model."""
    distinct = list(dict.fromkeys(texts))
    width = entry_width(n_classes) * 8  # bytes
    cursor = conn.connection.cursor()
    try:
        parameters = {"model": model_id, "texts": json.dumps(distinct), "width": width}
        if conn.dialect.name == "postgresql":
            cursor.execute(_MESSAGE_ROWS_POSTGRESQL, parameters)
        else:
            cursor.execute(_MESSAGE_ROWS_SQLITE, parameters)
        rows = cursor.fetchall()
    finally:
        cursor.close()
    # Columns: token id (-1: a class total, -2: a journal row), place of its text (a class
    # total's class index, a journal row's generation), its entry (a journal row's delta),
    # docs, terms (a class total's). A few hundred rows: a pass per column in C where it can.
    ids = np.fromiter((row[0] for row in rows), np.int64, len(rows))
    class_docs = np.zeros(n_classes, dtype=np.int64)
    class_terms = np.zeros(n_classes, dtype=np.int64)
    journal: list[tuple[int, bytes]] = []
    for index in np.flatnonzero(ids < 0).tolist():
        token_id, place, entry, docs, terms = rows[index]
        if token_id == -1:
            class_docs[place] = docs
            class_terms[place] = terms
        else:
            journal.append((place, bytes(entry)))
    found = np.flatnonzero(ids >= 0)
    token_rows = rows if found.size == len(rows) else [rows[i] for i in found.tolist()]
    order = np.argsort(ids[found], kind="stable")
    token_ids = ids[found][order]
    places = np.fromiter((row[1] for row in token_rows), np.int64, len(token_rows))[order]
    docs, terms = entry_counts([row[2] for row in token_rows], n_classes)
    docs, terms = docs[order], terms[order]
    journal_entries(journal, n_classes).add_to(token_ids, docs, terms)
    return MessageCounts(
        token_ids=token_ids,
        token_texts=[distinct[place] for place in places.tolist()],
        docs=docs,
        terms=terms,
        class_docs=class_docs,
        class_terms=class_terms,
    )


def read_all_counts(
    conn: Connection, model_id: int, n_classes: int
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Read every count of the model, without token texts: (token ids, class indices, docs,
    terms) of the cells that hold one, for sums over the whole vocabulary."""
    return _stored_entries(conn, model_id, n_classes).cells(every_class=False)


@dataclass(frozen=True)
class TokenAges:
    """Every counted token's cells (each class, zeros too) with the generation that last
    changed the token."""

    token_ids: IntArray
    class_indices: IntArray
    docs: IntArray
    terms: IntArray
    generations: IntArray


def read_token_ages(conn: Connection, model_id: int, n_classes: int) -> TokenAges:
    """Read every counted token with its last-changed generation (for expiry)."""
    entries = _stored_entries(conn, model_id, n_classes)
    token_ids, class_indices, docs, terms = entries.cells(every_class=True)
    return TokenAges(
        token_ids, class_indices, docs, terms, np.repeat(entries.generations, n_classes)
    )


def changed_since(
    conn: Connection, model_id: int, token_ids: Sequence[int], generation: int, n_classes: int
) -> IntArray:
    """Which of `token_ids` had a count changed after `generation` (sorted)."""
    entries = _entries_of(conn, model_id, np.asarray(token_ids, dtype=np.int64), n_classes)
    return entries.token_ids[entries.generations > generation]


def delete_tokens(
    conn: Connection, model_id: int, token_ids: Sequence[int], *, generation: int, n_classes: int
) -> None:
    """Delete tokens and their counts, in the write of `generation` (under the model's row
    lock); their ids are never given out again."""
    if not len(token_ids):
        return
    fold_journal(conn, model_id, n_classes=n_classes)  # their counts are all in chunks then
    ids = np.unique(np.asarray(token_ids, dtype=np.int64))
    stored = _chunks_by_number(conn, model_id, np.unique(chunk_of(ids)))
    if stored:
        numbers = np.array([number for number, _ in stored], dtype=np.int64)
        order = np.argsort(numbers)
        numbers = numbers[order]
        counted = ids[np.isin(chunk_of(ids), numbers)]  # a token never counted has no chunk
        blobs, generations = without(
            numbers, [stored[i][1] for i in order.tolist()], counted, n_classes
        )
        kept = generations > 0
        if kept.any():
            _write_chunks(
                conn,
                model_id,
                numbers[kept],
                generations[kept],
                [blob for blob, keep in zip(blobs, kept.tolist(), strict=True) if keep],
            )
        emptied = [(model_id, n) for n in numbers[~kept].tolist()]
        if emptied:
            conn.exec_driver_sql(driver_sql(conn, _CHUNKS_DELETE), emptied)
    for start in range(0, len(ids), LOOKUP_CHUNK):
        chunk = ids[start : start + LOOKUP_CHUNK].tolist()
        conn.execute(
            delete(tokens).where(tokens.c.model_id == model_id, tokens.c.token_id.in_(chunk))
        )


def read_token_counts(
    conn: Connection, model_id: int, token_ids: Sequence[int], n_classes: int
) -> dict[tuple[int, int], tuple[int, int]]:
    """Return {(token_id, class_index): (docs, terms)} for the given tokens' cells that hold
    a count (tests, audits)."""
    entries = _entries_of(conn, model_id, np.asarray(token_ids, dtype=np.int64), n_classes)
    cells = entries.cells(every_class=False)
    return {
        (token_id, class_index): (docs, terms)
        for token_id, class_index, docs, terms in zip(*(c.tolist() for c in cells), strict=True)
    }


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
