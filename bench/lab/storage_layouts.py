"""Training's storage layouts side by side: a replay of exactly the rows training writes.

    python -m bench.lab.storage_layouts [--runs 3] [--postgres URL] [--json FILE]
        [--layouts rows,...] [--no-pairs | --pairs-seen-twice]

The SpamAssassin training split of `spamsift evaluate` is tokenized once (the compiled core,
the server's limits) and given dense token ids in order of first appearance, as a model
trained on it in order gives them. Every layout then replays the same writes with no
tokenizing and no service code in the timed part: each transaction's statement parameters are
built before the clock starts, so what is timed is the database and its driver (for
PostgreSQL, this process's CPU plus the server processes' CPU, read from /proc):

- **rows** (today's schema, `app/store/tables.py`, and statements, `app/store/counts.py`): a
  `tokens` row per new token (B-trees on id, text and generation), a `token_counts` row per
  (token, class) with an index on generation; count changes as upserts adding deltas;
- **token-row**: one row per token, WITHOUT ROWID on SQLite, holding its text, the generation
  that last changed it (a column, not indexed) and its counts as one packed blob (little-endian
  int32, docs then terms per class: any number of classes). Written as absolute values: under
  the model's lock a writer's live copy is exact (`ModelWrite.begin` catches it up), so the
  new blob needs no read. The change feed: one `token_log` row per transaction with the ids of
  the existing tokens it changed; new tokens are the ids past the reader's own count;
- **chunks** (and **chunks-64**, **chunks-16**): token texts in their own table; counts in
  blobs of 256 token ids (64, 16) by id (docs and terms per class, and the generation that
  last changed each token) behind a journal: a
  transaction appends one row holding its whole delta, and once the journal holds MERGE
  messages the writer folds it into the chunks it touches (read-modify-write under the
  model's lock) and empties it.

Every layout also writes the ledger (`trained_messages`), the class totals and the model row,
as training does. Per layout and database: training msg/CPU-s at batches of 500 and at one
message per commit (after warming up with WARM messages); database bytes per token; cold
scoring of a test message (its token ids and counts found by text, the rows the message needs
only); a change-feed catch-up 1 and 5 transactions behind; the read expiry makes (every
token with its counts and age) and the deletion of a chunk of 2,000 of the oldest tokens.
bogofilter trains the same split in the same run (`-s -b`, `-n -b`); ratios are against it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pickle
import resource
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import create_engine
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.schema import CreateIndex, CreateTable

from app.store.tables import metadata, token_counts, tokens
from bench import data
from bench.databases import fresh_database, postgres_server_url
from bench.train_path import server_cpu

BATCH = 500
WARM = 2000  # messages trained in batches before the one-message-per-commit run
SINGLE = 500  # messages then trained one per commit
MERGE = 500  # chunks: the journal is folded into the chunks once it holds this many messages
CHUNK = 256  # chunks: token ids per chunk
EXPIRE = 2000  # tokens deleted by one expiry chunk
COLD = 200  # test messages scored cold
MODEL = 1
N_CLASSES = 2
# The split in the harness's fixed shuffle (bench.data.split), as its training order changed.
CACHE = Path(tempfile.gettempdir()) / "spamsift-storage-layouts-shuffled.pickle.gz"


@dataclass
class Corpus:
    texts: list[str]  # token text by id
    classes: list[int]  # per training message
    ids: list[np.ndarray]  # per training message: token ids, ascending
    terms: list[np.ndarray]  # per training message: occurrences, same order
    keys: list[str]
    test: list[list[str]]  # per test message: distinct token texts


def without(corpus: Corpus, prefix: str) -> Corpus:
    """The corpus without the tokens whose text starts with `prefix`, ids dense again in
    order of first appearance (what storing no word pairs would write)."""
    keep = np.array([not text.startswith(prefix) for text in corpus.texts])
    new_id = np.cumsum(keep) - 1
    ids, terms = [], []
    for message_ids, message_terms in zip(corpus.ids, corpus.terms, strict=True):
        kept = keep[message_ids]
        ids.append(new_id[message_ids[kept]])
        terms.append(message_terms[kept])
    texts = [text for text, kept in zip(corpus.texts, keep, strict=True) if kept]
    test = [[text for text in message if not text.startswith(prefix)] for message in corpus.test]
    return Corpus(texts, corpus.classes, ids, terms, corpus.keys, test)


def pairs_seen_twice(corpus: Corpus, prefix: str) -> Corpus:
    """The corpus with each token starting with `prefix` only from the second training
    message that has it on, ids dense again in order of first appearance: what storing word
    pairs only where they recur writes (the writes that remember first sightings not
    counted)."""
    recurring = np.array([not text.startswith(prefix) for text in corpus.texts])
    seen = np.zeros(len(corpus.texts), dtype=bool)
    new_id = np.full(len(corpus.texts), -1, dtype=np.int64)
    texts: list[str] = []
    ids, terms = [], []
    for message_ids, message_terms in zip(corpus.ids, corpus.terms, strict=True):
        kept = recurring[message_ids] | seen[message_ids]
        seen[message_ids] = True
        fresh = message_ids[kept][new_id[message_ids[kept]] < 0]
        new_id[fresh] = np.arange(len(texts), len(texts) + fresh.size)
        texts.extend(corpus.texts[i] for i in fresh.tolist())
        order = np.argsort(new_id[message_ids[kept]])
        ids.append(new_id[message_ids[kept]][order])
        terms.append(message_terms[kept][order])
    return Corpus(texts, corpus.classes, ids, terms, corpus.keys, corpus.test)


def tokenize() -> Corpus:
    if CACHE.exists():
        with gzip.open(CACHE, "rb") as file:
            corpus: Corpus = pickle.load(file)
        return corpus
    from app.service.messages import Message
    from bench.train_path import prepare_all

    split = data.split("spamassassin")
    train = prepare_all(
        [(Message(raw=m.raw, text=m.text, message_id=m.id), m.label) for m in split.train]
    )
    test = prepare_all([(Message(raw=m.raw, text=m.text), m.label) for m in split.test[:COLD]])
    id_of: dict[str, int] = {}
    corpus = Corpus([], [], [], [], [], [])
    for prepared, label in train:
        counts = prepared.token_counts
        for text in counts:
            if text not in id_of:
                id_of[text] = len(id_of)
                corpus.texts.append(text)
        ids = np.array([id_of[text] for text in counts], dtype=np.int64)
        terms = np.array(list(counts.values()), dtype=np.int64)
        order = np.argsort(ids)
        corpus.ids.append(ids[order])
        corpus.terms.append(terms[order])
        corpus.classes.append(1 if label == "spam" else 0)
        corpus.keys.append(prepared.message_key)
    corpus.test = [list(prepared.token_counts) for prepared, _ in test]
    with gzip.open(CACHE, "wb") as file:
        pickle.dump(corpus, file)
    return corpus


# --- what each transaction writes -------------------------------------------------------------


@dataclass
class Batch:
    """One transaction's writes, as training computes them (before the clock starts)."""

    generation: int
    new_from: int  # first token id given out in it
    new_to: int  # one past the last
    token_ids: np.ndarray  # distinct tokens whose counts change, ascending
    delta: np.ndarray  # (tokens, 2 * N_CLASSES): docs then terms per class
    class_docs: np.ndarray
    class_terms: np.ndarray
    ledger: list[tuple[Any, ...]]
    messages: int


def batches(corpus: Corpus, sizes: Sequence[tuple[int, int]]) -> list[Batch]:
    """The transactions of training messages [start, end) in each (start, end) of `sizes`."""
    result = []
    n_tokens = 0
    for generation, (start, end) in enumerate(sizes, start=1):
        ids = np.concatenate(corpus.ids[start:end])
        terms = np.concatenate(corpus.terms[start:end])
        classes = np.concatenate(
            [np.full(corpus.ids[i].size, corpus.classes[i]) for i in range(start, end)]
        )
        token_ids, position = np.unique(ids, return_inverse=True)
        delta = np.zeros((token_ids.size, 2 * N_CLASSES), dtype=np.int64)
        np.add.at(delta, (position, classes), 1)
        np.add.at(delta, (position, N_CLASSES + classes), terms)
        class_docs = np.bincount(corpus.classes[start:end], minlength=N_CLASSES)
        class_terms = np.bincount(classes, weights=terms, minlength=N_CLASSES).astype(np.int64)
        new_to = max(n_tokens, int(token_ids[-1]) + 1)
        ledger = [
            (
                MODEL,
                corpus.keys[i],
                f"<{i}@bench>",
                corpus.classes[i],
                corpus.ids[i].astype("<u4").tobytes(),
                corpus.terms[i].astype("<u4").tobytes(),
                "2026-11-26 00:00:00.000000",
            )
            for i in range(start, end)
        ]
        result.append(
            Batch(
                generation,
                n_tokens,
                new_to,
                token_ids,
                delta,
                class_docs,
                class_terms,
                ledger,
                end - start,
            )
        )
        n_tokens = new_to
    return result


# --- the executors: a transaction is a list of operations ---------------------------------------


@dataclass
class Op:
    sql: str
    rows: Any = None  # executemany rows, one parameter tuple, or COPY data (bytes)
    kind: str = "many"  # many | one | read | copy


def run_sqlite(path: Path, transactions: Sequence[list[Op]]) -> None:
    conn = sqlite_connect(path)
    try:
        for ops in transactions:
            conn.execute("BEGIN IMMEDIATE")
            for op in ops:
                if op.kind == "many":
                    conn.executemany(op.sql, op.rows)
                elif op.kind == "read":
                    conn.execute(op.sql, op.rows).fetchall()
                else:
                    conn.execute(op.sql, op.rows or ())
            conn.execute("COMMIT")
    finally:
        conn.close()


def sqlite_connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")  # as app/store/engine.py
    return conn


def run_postgres(conn: Any, transactions: Sequence[list[Op]]) -> None:
    """On the caller's connection: its server process lives on, so its CPU can be read."""
    if True:
        for ops in transactions:
            with conn.transaction(), conn.cursor() as cursor:
                for op in ops:
                    sql = op.sql.replace("?", "%s")
                    if op.kind == "copy":
                        with cursor.copy(sql) as copy:
                            copy.write(op.rows)
                    elif op.kind == "many":
                        cursor.executemany(sql, op.rows)
                    else:
                        cursor.execute(sql, op.rows or ())
                        if op.kind == "read":
                            cursor.fetchall()


def postgres_url_of(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)


def binary_copy(rows: int, columns: Sequence[tuple[str, Any]]) -> bytes:
    """Fixed-size columns (">i2", ">i4", ">i8" or "S<n>" for bytea) as a binary COPY stream."""
    layout: list[tuple[str, str]] = [("fields", ">i2")]
    for number, (kind, _) in enumerate(columns):
        layout += [(f"size{number}", ">i4"), (f"value{number}", kind)]
    table = np.empty(rows, dtype=np.dtype(layout))
    table["fields"] = len(columns)
    for number, (kind, values) in enumerate(columns):
        table[f"size{number}"] = np.dtype(kind).itemsize
        table[f"value{number}"] = values
    return _HEADER + table.tobytes() + b"\xff\xff"


def copy_text(value: str) -> str:
    return (
        value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )


def common_ops(batch: Batch, postgres: bool) -> list[Op]:
    """The writes every layout makes: class totals, the model row, the ledger."""
    ops = [
        Op(
            "UPDATE class_totals SET docs = docs + ?, terms = terms + ? "
            "WHERE model_id = ? AND class_index = ?",
            [
                (int(batch.class_docs[c]), int(batch.class_terms[c]), MODEL, c)
                for c in range(N_CLASSES)
                if batch.class_docs[c]
            ],
        ),
        Op(
            "UPDATE models SET generation = ?, n_tokens = ?, vocabulary = ? WHERE id = ?",
            (batch.generation, batch.new_to, batch.new_to, MODEL),
            "one",
        ),
        Op(
            "INSERT INTO trained_messages (model_id, message_key, message_id, class_index, "
            "token_ids, token_terms, trained_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            batch.ledger,
        ),
    ]
    return ops


# --- the layouts ---------------------------------------------------------------------------------


class Layout:
    name = ""
    ddl: tuple[str, ...] = ()

    def __init__(self, postgres: bool) -> None:
        self.postgres = postgres

    def transactions(self, corpus: Corpus, plan: list[Batch]) -> list[list[Op]]:
        raise NotImplementedError

    def cold(self, conn: Any, texts: list[str]) -> int:
        """Read what scoring a message of `texts` needs; return the bytes read."""
        raise NotImplementedError

    def catch_up(self, conn: Any, since: int, held_tokens: int) -> int:
        raise NotImplementedError

    def expiry_read(self, conn: Any) -> int:
        raise NotImplementedError

    def expire(self, conn: Any, token_ids: list[int]) -> None:
        raise NotImplementedError

    # helpers
    def p(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def texts_param(self, texts: list[str]) -> Any:
        return texts if self.postgres else json.dumps(texts)

    def in_texts(self, column: str) -> str:
        return (
            f"{column} = ANY(%s::text[])"
            if self.postgres
            else f"{column} IN (SELECT value FROM json_each(?))"
        )

    def by_text(self, table: str) -> str:
        """SQLite's planner, without statistics, would walk the primary key's model_id."""
        return "" if self.postgres else f"INDEXED BY uq_{table}_text"

    def in_ids(self, column: str) -> str:
        return (
            f"{column} = ANY(%s::bigint[])"
            if self.postgres
            else f"{column} IN (SELECT value FROM json_each(?))"
        )

    def ids_param(self, ids: list[int]) -> Any:
        return ids if self.postgres else json.dumps(ids)


def fetch(conn: Any, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    cursor = conn.cursor()
    cursor.execute(sql, params)
    rows = cursor.fetchall()
    cursor.close()
    return rows


def row_bytes(rows: list[tuple[Any, ...]]) -> int:
    total = 0
    for row in rows:
        for value in row:
            total += len(value) if isinstance(value, (bytes, str, memoryview)) else 8
    return total


class Rows(Layout):
    """Today's schema and statements."""

    name = "rows"

    def transactions(self, corpus: Corpus, plan: list[Batch]) -> list[list[Op]]:
        result = []
        for batch in plan:
            ops: list[Op] = []
            new_ids = range(batch.new_from, batch.new_to)
            cells = np.argwhere(batch.delta[:, :N_CLASSES] != 0)  # (token position, class)
            cell_ids = batch.token_ids[cells[:, 0]]
            docs = batch.delta[cells[:, 0], cells[:, 1]]
            terms = batch.delta[cells[:, 0], N_CLASSES + cells[:, 1]]
            new = cell_ids >= batch.new_from
            if self.postgres:
                text = "".join(
                    f"{MODEL}\t{i}\t{copy_text(corpus.texts[i])}\t{batch.generation}\n"
                    for i in new_ids
                )
                ops.append(
                    Op(
                        "COPY tokens (model_id, token_id, text, generation) FROM STDIN",
                        text.encode(),
                        "copy",
                    )
                )
                if new.any():
                    ops.append(
                        Op(
                            "COPY token_counts (model_id, token_id, class_index, docs, terms, "
                            "generation) FROM STDIN (FORMAT BINARY)",
                            binary_copy(
                                int(new.sum()),
                                [
                                    (">i4", MODEL),
                                    (">i8", cell_ids[new]),
                                    (">i2", cells[new, 1]),
                                    (">i8", docs[new]),
                                    (">i8", terms[new]),
                                    (">i8", batch.generation),
                                ],
                            ),
                            "copy",
                        )
                    )
                old = ~new
                if old.any():
                    ops += [
                        Op(
                            "CREATE TEMPORARY TABLE IF NOT EXISTS changes (token_id bigint, "
                            "class_index smallint, docs bigint, terms bigint) "
                            "ON COMMIT DELETE ROWS",
                            None,
                            "one",
                        ),
                        Op(
                            "COPY changes FROM STDIN (FORMAT BINARY)",
                            binary_copy(
                                int(old.sum()),
                                [
                                    (">i8", cell_ids[old]),
                                    (">i2", cells[old, 1]),
                                    (">i8", docs[old]),
                                    (">i8", terms[old]),
                                ],
                            ),
                            "copy",
                        ),
                        Op(
                            "INSERT INTO token_counts (model_id, token_id, class_index, docs, "
                            "terms, generation) SELECT ?, token_id, class_index, docs, terms, ? "
                            "FROM changes ORDER BY token_id, class_index "
                            "ON CONFLICT (model_id, token_id, class_index) DO UPDATE SET "
                            "docs = token_counts.docs + excluded.docs, "
                            "terms = token_counts.terms + excluded.terms, "
                            "generation = excluded.generation",
                            (MODEL, batch.generation),
                            "one",
                        ),
                    ]
            else:
                ops.append(
                    Op(
                        "INSERT INTO tokens (model_id, token_id, text, generation) "
                        "VALUES (?, ?, ?, ?)",
                        [(MODEL, i, corpus.texts[i], batch.generation) for i in new_ids],
                    )
                )
                rows = list(
                    zip(
                        [MODEL] * cell_ids.size,
                        cell_ids.tolist(),
                        cells[:, 1].tolist(),
                        docs.tolist(),
                        terms.tolist(),
                        [batch.generation] * cell_ids.size,
                        strict=True,
                    )
                )
                insert = (
                    "INSERT INTO token_counts (model_id, token_id, class_index, docs, terms, "
                    "generation) VALUES (?, ?, ?, ?, ?, ?)"
                )
                ops.append(Op(insert, [r for r, n in zip(rows, new, strict=True) if n]))
                ops.append(
                    Op(
                        insert + " ON CONFLICT (model_id, token_id, class_index) DO UPDATE SET "
                        "docs = token_counts.docs + excluded.docs, "
                        "terms = token_counts.terms + excluded.terms, "
                        "generation = excluded.generation",
                        [r for r, n in zip(rows, new, strict=True) if not n],
                    )
                )
            result.append(ops + common_ops(batch, self.postgres))
        return result

    def cold(self, conn: Any, texts: list[str]) -> int:
        if self.postgres:
            sql = (
                "SELECT t.token_id, t.text, c.class_index, c.docs, c.terms "
                "FROM unnest(%(texts)s::text[]) AS m(text) JOIN tokens t "
                "ON t.model_id = %(model)s AND t.text = m.text "
                "LEFT JOIN token_counts c ON c.model_id = %(model)s AND c.token_id = t.token_id"
            )
            rows = fetch(conn, sql, {"model": MODEL, "texts": texts})  # type: ignore[arg-type]
        else:
            sql = (
                "SELECT t.token_id, t.text, c.class_index, c.docs, c.terms FROM tokens t "
                "LEFT JOIN token_counts c ON c.model_id = t.model_id AND c.token_id = t.token_id "
                "WHERE t.model_id = ? AND t.text IN (SELECT value FROM json_each(?))"
            )
            rows = fetch(conn, sql, (MODEL, json.dumps(texts)))
        return row_bytes(rows)

    def catch_up(self, conn: Any, since: int, held_tokens: int) -> int:
        rows = fetch(
            conn,
            self.p("SELECT token_id, text FROM tokens WHERE model_id = ? AND generation > ?"),
            (MODEL, since),
        )
        rows += fetch(
            conn,
            self.p(
                "SELECT token_id, class_index, docs, terms FROM token_counts "
                "WHERE model_id = ? AND generation > ?"
            ),
            (MODEL, since),
        )
        return row_bytes(rows)

    def expiry_read(self, conn: Any) -> int:
        rows = fetch(
            conn,
            self.p(
                "SELECT token_id, class_index, docs, terms, generation FROM token_counts "
                "WHERE model_id = ? AND generation > ?"
            ),
            (MODEL, -1),
        )
        return len(rows)

    def expire(self, conn: Any, token_ids: list[int]) -> None:
        for table in ("token_counts", "tokens"):
            for start in range(0, len(token_ids), 900):
                chunk = token_ids[start : start + 900]
                conn.cursor().execute(
                    self.p(
                        f"DELETE FROM {table} WHERE model_id = ? AND token_id IN "
                        f"({','.join('?' * len(chunk))})"
                    ),
                    (MODEL, *chunk),
                )


class TokenRow(Layout):
    """One row per token: text, last generation, counts as one packed blob."""

    name = "token-row"

    @property
    def ddl(self) -> tuple[str, ...]:  # type: ignore[override]
        without_rowid = "" if self.postgres else " WITHOUT ROWID"
        blob = "bytea" if self.postgres else "BLOB"
        return (
            "CREATE TABLE token_rows (model_id integer NOT NULL, token_id bigint NOT NULL, "
            f"text varchar(200) NOT NULL, generation bigint NOT NULL, counts {blob} NOT NULL, "
            f"PRIMARY KEY (model_id, token_id)){without_rowid}",
            "CREATE UNIQUE INDEX uq_token_rows_text ON token_rows (model_id, text)",
            f"CREATE TABLE token_log (model_id integer NOT NULL, generation bigint NOT NULL, "
            f"token_ids {blob} NOT NULL, PRIMARY KEY (model_id, generation)){without_rowid}",
        )

    def transactions(self, corpus: Corpus, plan: list[Batch]) -> list[list[Op]]:
        result = []
        counts = np.zeros((len(corpus.texts), 2 * N_CLASSES), dtype="<i4")  # the live copy
        for batch in plan:
            counts[batch.token_ids] += batch.delta.astype("<i4")
            new = batch.token_ids >= batch.new_from
            old_ids = batch.token_ids[~new]
            new_ids = batch.token_ids[new]
            blobs = counts[batch.token_ids]
            ops: list[Op] = []
            if self.postgres:
                text = "".join(
                    f"{MODEL}\t{i}\t{copy_text(corpus.texts[i])}\t{batch.generation}\t"
                    f"\\\\x{counts[i].tobytes().hex()}\n"
                    for i in new_ids.tolist()
                )
                ops.append(
                    Op(
                        "COPY token_rows (model_id, token_id, text, generation, counts) FROM STDIN",
                        text.encode(),
                        "copy",
                    )
                )
                if old_ids.size:
                    # unnest, not a temporary table: without statistics on one, PostgreSQL
                    # joined a single message's rows by a scan of the whole table (40 ms).
                    ops.append(
                        Op(
                            "UPDATE token_rows t SET counts = c.counts, generation = ? "
                            "FROM unnest(?::bigint[], ?::bytea[]) AS c(token_id, counts) "
                            "WHERE t.model_id = ? AND t.token_id = ANY(?::bigint[]) "
                            "AND t.token_id = c.token_id",
                            (
                                batch.generation,
                                old_ids.tolist(),
                                [b.tobytes() for b in blobs[~new]],
                                MODEL,
                                old_ids.tolist(),
                            ),
                            "one",
                        )
                    )
            else:
                ops.append(
                    Op(
                        "INSERT INTO token_rows (model_id, token_id, text, generation, counts) "
                        "VALUES (?, ?, ?, ?, ?)",
                        [
                            (MODEL, i, corpus.texts[i], batch.generation, counts[i].tobytes())
                            for i in new_ids.tolist()
                        ],
                    )
                )
                ops.append(
                    Op(
                        "UPDATE token_rows SET counts = ?, generation = ? "
                        "WHERE model_id = ? AND token_id = ?",
                        [
                            (counts[i].tobytes(), batch.generation, MODEL, i)
                            for i in old_ids.tolist()
                        ],
                    )
                )
            ops.append(
                Op(
                    "INSERT INTO token_log (model_id, generation, token_ids) VALUES (?, ?, ?)",
                    (MODEL, batch.generation, old_ids.astype("<u4").tobytes()),
                    "one",
                )
            )
            result.append(ops + common_ops(batch, self.postgres))
        return result

    def cold(self, conn: Any, texts: list[str]) -> int:
        rows = fetch(
            conn,
            self.p(
                f"SELECT token_id, counts FROM token_rows {self.by_text('token_rows')} "
                "WHERE model_id = ? AND "
            )
            + self.in_texts("text"),
            (MODEL, self.texts_param(texts)),
        )
        return row_bytes(rows)

    def catch_up(self, conn: Any, since: int, held_tokens: int) -> int:
        logs = fetch(
            conn,
            self.p("SELECT token_ids FROM token_log WHERE model_id = ? AND generation > ?"),
            (MODEL, since),
        )
        changed = np.unique(
            np.concatenate([np.frombuffer(bytes(b), "<u4") for (b,) in logs] or [np.zeros(0)])
        ).astype(np.int64)
        rows = fetch(
            conn,
            self.p(
                "SELECT token_id, text, counts FROM token_rows WHERE model_id = ? AND token_id >= ?"
            ),
            (MODEL, held_tokens),
        )
        for start in range(0, changed.size, 20_000):
            rows += fetch(
                conn,
                self.p("SELECT token_id, counts FROM token_rows WHERE model_id = ? AND ")
                + self.in_ids("token_id"),
                (MODEL, self.ids_param(changed[start : start + 20_000].tolist())),
            )
        return row_bytes(rows) + row_bytes(logs)

    def expiry_read(self, conn: Any) -> int:
        rows = fetch(
            conn,
            self.p("SELECT token_id, generation, counts FROM token_rows WHERE model_id = ?"),
            (MODEL,),
        )
        return len(rows)

    def expire(self, conn: Any, token_ids: list[int]) -> None:
        for start in range(0, len(token_ids), 900):
            chunk = token_ids[start : start + 900]
            conn.cursor().execute(
                self.p(
                    f"DELETE FROM token_rows WHERE model_id = ? AND token_id IN "
                    f"({','.join('?' * len(chunk))})"
                ),
                (MODEL, *chunk),
            )


class CountRow(TokenRow):
    """token-row with the texts apart: a `token_texts` row per token (written once, when
    new) and a small `token_rows` row (generation, counts blob) per token, both WITHOUT ROWID
    on SQLite. On PostgreSQL an update writes a whole new tuple: without the text, a smaller
    one."""

    name = "count-row"

    @property
    def ddl(self) -> tuple[str, ...]:  # type: ignore[override]
        without_rowid = "" if self.postgres else " WITHOUT ROWID"
        blob = "bytea" if self.postgres else "BLOB"
        return (
            "CREATE TABLE token_texts (model_id integer NOT NULL, token_id bigint NOT NULL, "
            f"text varchar(200) NOT NULL, PRIMARY KEY (model_id, token_id)){without_rowid}",
            "CREATE UNIQUE INDEX uq_token_texts_text ON token_texts (model_id, text)",
            "CREATE TABLE token_rows (model_id integer NOT NULL, token_id bigint NOT NULL, "
            f"generation bigint NOT NULL, counts {blob} NOT NULL, "
            f"PRIMARY KEY (model_id, token_id)){without_rowid}",
            f"CREATE TABLE token_log (model_id integer NOT NULL, generation bigint NOT NULL, "
            f"token_ids {blob} NOT NULL, PRIMARY KEY (model_id, generation)){without_rowid}",
        )

    def transactions(self, corpus: Corpus, plan: list[Batch]) -> list[list[Op]]:
        result = []
        for batch, ops in zip(plan, super().transactions(corpus, plan), strict=True):
            new_ids = range(batch.new_from, batch.new_to)
            first = ops[0]
            if self.postgres:
                text = "".join(f"{MODEL}\t{i}\t{copy_text(corpus.texts[i])}\n" for i in new_ids)
                texts = Op(
                    "COPY token_texts (model_id, token_id, text) FROM STDIN", text.encode(), "copy"
                )
                lines = first.rows.decode().splitlines(keepends=True)
                counts = "".join(
                    "\t".join(line.split("\t")[:2] + line.split("\t")[3:]) for line in lines
                )
                first = Op(
                    "COPY token_rows (model_id, token_id, generation, counts) FROM STDIN",
                    counts.encode(),
                    "copy",
                )
            else:
                texts = Op(
                    "INSERT INTO token_texts (model_id, token_id, text) VALUES (?, ?, ?)",
                    [(MODEL, i, corpus.texts[i]) for i in new_ids],
                )
                first = Op(
                    "INSERT INTO token_rows (model_id, token_id, generation, counts) "
                    "VALUES (?, ?, ?, ?)",
                    [(m, i, g, c) for m, i, _, g, c in first.rows],
                )
            result.append([texts, first, *ops[1:]])
        return result

    def cold(self, conn: Any, texts: list[str]) -> int:
        if self.postgres:
            sql = (
                "SELECT t.token_id, c.counts FROM unnest(%s::text[]) AS m(text) "
                "JOIN token_texts t ON t.model_id = %s AND t.text = m.text "
                "JOIN token_rows c ON c.model_id = t.model_id AND c.token_id = t.token_id"
            )
            rows = fetch(conn, sql, (texts, MODEL))
        else:
            sql = (
                "SELECT t.token_id, c.counts FROM token_texts t INDEXED BY uq_token_texts_text "
                "JOIN token_rows c ON c.model_id = t.model_id AND c.token_id = t.token_id "
                "WHERE t.model_id = ? AND t.text IN (SELECT value FROM json_each(?))"
            )
            rows = fetch(conn, sql, (MODEL, json.dumps(texts)))
        return row_bytes(rows)

    def catch_up(self, conn: Any, since: int, held_tokens: int) -> int:
        texts = fetch(
            conn,
            self.p("SELECT token_id, text FROM token_texts WHERE model_id = ? AND token_id >= ?"),
            (MODEL, held_tokens),
        )
        logs = fetch(
            conn,
            self.p("SELECT token_ids FROM token_log WHERE model_id = ? AND generation > ?"),
            (MODEL, since),
        )
        changed = np.unique(
            np.concatenate([np.frombuffer(bytes(b), "<u4") for (b,) in logs] or [np.zeros(0)])
        ).astype(np.int64)
        rows = fetch(
            conn,
            self.p("SELECT token_id, counts FROM token_rows WHERE model_id = ? AND token_id >= ?"),
            (MODEL, held_tokens),
        )
        for start in range(0, changed.size, 20_000):
            rows += fetch(
                conn,
                self.p("SELECT token_id, counts FROM token_rows WHERE model_id = ? AND ")
                + self.in_ids("token_id"),
                (MODEL, self.ids_param(changed[start : start + 20_000].tolist())),
            )
        return row_bytes(texts) + row_bytes(rows) + row_bytes(logs)

    def expire(self, conn: Any, token_ids: list[int]) -> None:
        super().expire(conn, token_ids)
        for start in range(0, len(token_ids), 900):
            chunk = token_ids[start : start + 900]
            conn.cursor().execute(
                self.p(
                    f"DELETE FROM token_texts WHERE model_id = ? AND token_id IN "
                    f"({','.join('?' * len(chunk))})"
                ),
                (MODEL, *chunk),
            )


class Chunks(Layout):
    """Token texts apart; counts in chunks of `chunk_ids` ids behind a journal merged every
    MERGE."""

    name = "chunks"
    chunk_ids = CHUNK
    cold_journal_bytes = 0  # of the cold reads' bytes, the journal's
    per_token = 2 * N_CLASSES + 1  # docs, terms per class, last generation

    @property
    def ddl(self) -> tuple[str, ...]:  # type: ignore[override]
        without_rowid = "" if self.postgres else " WITHOUT ROWID"
        blob = "bytea" if self.postgres else "BLOB"
        return (
            "CREATE TABLE token_texts (model_id integer NOT NULL, token_id bigint NOT NULL, "
            f"text varchar(200) NOT NULL, PRIMARY KEY (model_id, token_id)){without_rowid}",
            "CREATE UNIQUE INDEX uq_token_texts_text ON token_texts (model_id, text)",
            "CREATE TABLE count_chunks (model_id integer NOT NULL, chunk bigint NOT NULL, "
            f"generation bigint NOT NULL, counts {blob} NOT NULL, "
            f"PRIMARY KEY (model_id, chunk)){without_rowid}",
            "CREATE INDEX ix_count_chunks_generation ON count_chunks (model_id, generation)",
            "CREATE TABLE count_journal (model_id integer NOT NULL, generation bigint NOT NULL, "
            f"messages integer NOT NULL, delta {blob} NOT NULL, "
            f"PRIMARY KEY (model_id, generation)){without_rowid}",
        )

    def transactions(self, corpus: Corpus, plan: list[Batch]) -> list[list[Op]]:
        result = []
        n_chunks = len(corpus.texts) // self.chunk_ids + 1
        chunks = np.zeros((n_chunks, self.chunk_ids, self.per_token), dtype="<i4")
        pending: list[Batch] = []
        pending_messages = 0
        for batch in plan:
            ops: list[Op] = []
            new_ids = range(batch.new_from, batch.new_to)
            if self.postgres:
                text = "".join(f"{MODEL}\t{i}\t{copy_text(corpus.texts[i])}\n" for i in new_ids)
                ops.append(
                    Op(
                        "COPY token_texts (model_id, token_id, text) FROM STDIN",
                        text.encode(),
                        "copy",
                    )
                )
            else:
                ops.append(
                    Op(
                        "INSERT INTO token_texts (model_id, token_id, text) VALUES (?, ?, ?)",
                        [(MODEL, i, corpus.texts[i]) for i in new_ids],
                    )
                )
            pending.append(batch)
            pending_messages += batch.messages
            if pending_messages < MERGE:
                delta = np.concatenate(
                    [batch.token_ids[:, None].astype("<i4"), batch.delta.astype("<i4")], axis=1
                )
                ops.append(
                    Op(
                        "INSERT INTO count_journal (model_id, generation, messages, delta) "
                        "VALUES (?, ?, ?, ?)",
                        (MODEL, batch.generation, batch.messages, delta.tobytes()),
                        "one",
                    )
                )
            else:  # fold the journal and this transaction into the chunks
                touched: set[int] = set()
                for folded in pending:
                    chunk_of, slot = np.divmod(folded.token_ids, self.chunk_ids)
                    chunks[chunk_of, slot, : 2 * N_CLASSES] += folded.delta.astype("<i4")
                    chunks[chunk_of, slot, 2 * N_CLASSES] = folded.generation
                    touched.update(chunk_of.tolist())
                ordered = sorted(touched)
                ops.append(
                    Op("SELECT delta FROM count_journal WHERE model_id = ?", (MODEL,), "read")
                )
                ops.append(
                    Op(
                        "SELECT chunk, counts FROM count_chunks WHERE model_id = ? AND "
                        + self.in_ids("chunk"),
                        (MODEL, self.ids_param(ordered)),
                        "read",
                    )
                )
                ops.append(
                    Op(
                        "INSERT INTO count_chunks (model_id, chunk, generation, counts) "
                        "VALUES (?, ?, ?, ?) ON CONFLICT (model_id, chunk) DO UPDATE SET "
                        "generation = excluded.generation, counts = excluded.counts",
                        [(MODEL, c, batch.generation, chunks[c].tobytes()) for c in ordered],
                    )
                )
                ops.append(Op("DELETE FROM count_journal WHERE model_id = ?", (MODEL,), "one"))
                pending, pending_messages = [], 0
            result.append(ops + common_ops(batch, self.postgres))
        return result

    def cold(self, conn: Any, texts: list[str]) -> int:
        found = fetch(
            conn,
            self.p(
                f"SELECT token_id FROM token_texts {self.by_text('token_texts')} "
                "WHERE model_id = ? AND "
            )
            + self.in_texts("text"),
            (MODEL, self.texts_param(texts)),
        )
        wanted = sorted({token_id // self.chunk_ids for (token_id,) in found})
        rows = fetch(
            conn,
            self.p("SELECT chunk, counts FROM count_chunks WHERE model_id = ? AND ")
            + self.in_ids("chunk"),
            (MODEL, self.ids_param(wanted)),
        )
        journal = fetch(
            conn, self.p("SELECT delta FROM count_journal WHERE model_id = ?"), (MODEL,)
        )
        self.cold_journal_bytes += row_bytes(journal)
        return row_bytes(found) + row_bytes(rows) + row_bytes(journal)

    def catch_up(self, conn: Any, since: int, held_tokens: int) -> int:
        rows = fetch(
            conn,
            self.p("SELECT token_id, text FROM token_texts WHERE model_id = ? AND token_id >= ?"),
            (MODEL, held_tokens),
        )
        rows += fetch(
            conn,
            self.p("SELECT chunk, counts FROM count_chunks WHERE model_id = ? AND generation > ?"),
            (MODEL, since),
        )
        rows += fetch(
            conn,
            self.p("SELECT delta FROM count_journal WHERE model_id = ? AND generation > ?"),
            (MODEL, since),
        )
        return row_bytes(rows)

    def expiry_read(self, conn: Any) -> int:
        rows = fetch(
            conn, self.p("SELECT chunk, counts FROM count_chunks WHERE model_id = ?"), (MODEL,)
        )
        rows += fetch(conn, self.p("SELECT delta FROM count_journal WHERE model_id = ?"), (MODEL,))
        return len(rows) * self.chunk_ids

    def expire(self, conn: Any, token_ids: list[int]) -> None:
        wanted = sorted({token_id // self.chunk_ids for token_id in token_ids})
        cursor = conn.cursor()
        cursor.execute(
            self.p("SELECT chunk, counts FROM count_chunks WHERE model_id = ? AND ")
            + self.in_ids("chunk"),
            (MODEL, self.ids_param(wanted)),
        )
        chunks = {
            c: np.frombuffer(bytes(b), "<i4").reshape(self.chunk_ids, -1).copy() for c, b in cursor
        }
        ids = np.array(token_ids)
        for c in chunks:
            chunks[c][ids[ids // self.chunk_ids == c] % self.chunk_ids] = 0
        cursor.executemany(
            self.p("UPDATE count_chunks SET counts = ? WHERE model_id = ? AND chunk = ?"),
            [(blob.tobytes(), MODEL, c) for c, blob in chunks.items()],
        )
        for start in range(0, len(token_ids), 900):
            chunk = token_ids[start : start + 900]
            cursor.execute(
                self.p(
                    f"DELETE FROM token_texts WHERE model_id = ? AND token_id IN "
                    f"({','.join('?' * len(chunk))})"
                ),
                (MODEL, *chunk),
            )


class SmallChunks(Chunks):
    """Chunks of 16 ids: a cold read of a message's ~500 tokens reads about one chunk a token
    instead of most of the model's chunks."""

    name = "chunks-16"
    chunk_ids = 16


class MidChunks(Chunks):
    name = "chunks-64"
    chunk_ids = 64


class LedgerOnly(Layout):
    """No token storage at all: the ledger, class totals and model row every layout writes
    (the floor under every layout; it stores nothing a classifier could use)."""

    name = "ledger-only"

    def transactions(self, corpus: Corpus, plan: list[Batch]) -> list[list[Op]]:
        return [common_ops(batch, self.postgres) for batch in plan]

    def cold(self, conn: Any, texts: list[str]) -> int:
        return 0

    def catch_up(self, conn: Any, since: int, held_tokens: int) -> int:
        return 0

    def expiry_read(self, conn: Any) -> int:
        return 0

    def expire(self, conn: Any, token_ids: list[int]) -> None:
        pass


class RowsWithoutRowid(Rows):
    """Today's tables and statements, `tokens` and `token_counts` WITHOUT ROWID on SQLite:
    each row lives in its primary key's B-tree, one B-tree fewer per table."""

    name = "rows-without-rowid"

    @property
    def ddl(self) -> tuple[str, ...]:  # type: ignore[override]
        if self.postgres:
            return ()
        statements: list[str] = []
        for table in (tokens, token_counts):
            options = table.dialect_options["sqlite"]
            options["with_rowid"] = False
            try:
                create = str(CreateTable(table).compile(dialect=sqlite_dialect.dialect()))
            finally:
                options["with_rowid"] = True
            statements += [
                f"DROP TABLE {table.name}",
                create,
                *(
                    str(CreateIndex(index).compile(dialect=sqlite_dialect.dialect()))
                    for index in table.indexes
                ),
            ]
        return tuple(statements)


LAYOUTS: dict[str, type[Layout]] = {
    "rows": Rows,
    "rows-without-rowid": RowsWithoutRowid,
    "token-row": TokenRow,
    "count-row": CountRow,
    "chunks": Chunks,
    "chunks-64": MidChunks,
    "chunks-16": SmallChunks,
    "ledger-only": LedgerOnly,
}


# --- running and timing --------------------------------------------------------------------------


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def database(kind: str, folder: Path, postgres: str | None) -> Iterator[tuple[str, Any]]:
    """A fresh database with the project's schema plus the layout tables; yields (url, path)."""
    with fresh_database(kind, folder, postgres) as url:
        engine = create_engine(url)
        metadata.create_all(engine)
        engine.dispose()
        yield url, (Path(url.removeprefix("sqlite:///")) if kind == "sqlite" else None)


def connect(kind: str, url: str, path: Path | None) -> Any:
    if kind == "sqlite":
        assert path is not None
        return sqlite_connect(path)
    import psycopg

    return psycopg.connect(postgres_url_of(url), autocommit=True)


def execute_plan(kind: str, conn: Any, path: Path | None, transactions: list[list[Op]]) -> None:
    if kind == "sqlite":
        assert path is not None
        run_sqlite(path, transactions)
    else:
        run_postgres(conn, transactions)


def timed_cpu(kind: str, url: str, work: Callable[[], object]) -> tuple[float, float]:
    name = url.rsplit("/", 1)[1]
    cpu, server, wall = (
        own_cpu(),
        server_cpu(name) if kind == "postgresql" else 0.0,
        time.perf_counter(),
    )
    work()
    server_after = server_cpu(name) if kind == "postgresql" else 0.0
    return own_cpu() - cpu + server_after - server, time.perf_counter() - wall


def database_bytes(kind: str, conn: Any) -> int:
    if kind == "sqlite":
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)
    return int(fetch(conn, "SELECT pg_database_size(current_database())", ())[0][0])


def one_layout(
    name: str, kind: str, corpus: Corpus, folder: Path, postgres: str | None
) -> dict[str, Any]:
    layout = LAYOUTS[name](kind == "postgresql")
    n = len(corpus.ids)
    report: dict[str, Any] = {}
    # batches of 500: the whole split into an empty model
    plan = batches(corpus, [(s, min(s + BATCH, n)) for s in range(0, n, BATCH)])
    transactions = layout.transactions(corpus, plan)
    with database(kind, folder, postgres) as (url, path):
        conn = connect(kind, url, path)
        prepare(conn, layout, kind)
        empty = database_bytes(kind, conn)
        cpu, wall = timed_cpu(kind, url, lambda: execute_plan(kind, conn, path, transactions))
        report["batch_msg_per_cpu_s"] = n / cpu
        report["batch_wall_s"] = wall
        report["bytes_per_token"] = (database_bytes(kind, conn) - empty) / plan[-1].new_to
        report["bytes_total"] = database_bytes(kind, conn)
        # cold scoring
        started = own_cpu()
        name_ = url.rsplit("/", 1)[1]
        server = server_cpu(name_) if kind == "postgresql" else 0.0
        read = sum(layout.cold(conn, texts) for texts in corpus.test)
        server = (server_cpu(name_) - server) if kind == "postgresql" else 0.0
        report["cold_ms_cpu"] = (own_cpu() - started + server) / len(corpus.test) * 1000
        report["cold_bytes_read"] = read / len(corpus.test)
        if isinstance(layout, Chunks):
            report["cold_journal_bytes"] = layout.cold_journal_bytes / len(corpus.test)
        for behind in (1, 5):
            if behind > len(plan):  # a --limit smoke run of fewer batches
                continue
            since = plan[-1].generation - behind
            held_tokens = plan[-behind].new_from
            cpu, _ = timed_cpu(kind, url, partial(layout.catch_up, conn, since, held_tokens))
            report[f"catch_up_{behind}_ms_cpu"] = cpu * 1000
        cpu, _ = timed_cpu(kind, url, lambda: layout.expiry_read(conn))
        report["expiry_read_s_cpu"] = cpu
        oldest = list(range(EXPIRE))

        def expire() -> None:
            if kind == "sqlite":
                conn.execute("BEGIN IMMEDIATE")
                layout.expire(conn, oldest)
                conn.execute("COMMIT")
            else:
                with conn.transaction():
                    layout.expire(conn, oldest)

        cpu, _ = timed_cpu(kind, url, expire)
        report["expire_2000_ms_cpu"] = cpu * 1000
        conn.close()
    # one message per commit, after WARM messages in batches
    sizes = [(s, s + BATCH) for s in range(0, WARM, BATCH)]
    sizes += [(s, s + 1) for s in range(WARM, WARM + SINGLE)]
    plan = batches(corpus, sizes)
    transactions = layout.transactions(corpus, plan)
    warm = WARM // BATCH
    with database(kind, folder, postgres) as (url, path):
        conn = connect(kind, url, path)
        prepare(conn, layout, kind)
        execute_plan(kind, conn, path, transactions[:warm])
        cpu, wall = timed_cpu(
            kind, url, lambda: execute_plan(kind, conn, path, transactions[warm:])
        )
        report["single_msg_per_cpu_s"] = SINGLE / cpu
        report["single_ms_cpu"] = cpu / SINGLE * 1000
        report["single_wall_ms"] = wall / SINGLE * 1000
        conn.close()
    return report


def prepare(conn: Any, layout: Layout, kind: str) -> None:
    statements = [
        *layout.ddl,
        "INSERT INTO models (id, name, classes, config, generation, n_tokens, created_at, "
        "vocabulary, epoch, feedback_trains_backing) VALUES "
        f"({MODEL}, 'default', '[\"ham\", \"spam\"]', '{{}}', 0, 0, '2026-11-26', 0, 0, false)",
        *(
            "INSERT INTO class_totals (model_id, class_index, docs, terms) "
            f"VALUES ({MODEL}, {c}, 0, 0)"
            for c in range(N_CLASSES)
        ),
    ]
    cursor = conn.cursor()
    for statement in statements:
        cursor.execute(statement)
    cursor.close()


def bogofilter_rate(folder: Path) -> float | None:
    from bench.versus_bogofilter import Bogofilter, Timings, find_bogofilter

    path, _ = find_bogofilter(install=False)
    if path is None:
        return None
    split = data.split("spamassassin")
    bogofilter = Bogofilter(path, split, folder / f"bogofilter-{time.monotonic_ns()}")
    timings = Timings()
    bogofilter.train(0, timings)
    return len(split.train) / timings.cpu[0]


def main(argv: Sequence[str] | None = None) -> int:
    global MERGE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", default=None, help="server URL (default: the env's)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--kinds", default="sqlite,postgresql")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=None, help="messages (a smoke test)")
    parser.add_argument(
        "--merge",
        type=int,
        default=MERGE,
        help=f"chunks: messages the journal holds before it is folded (default {MERGE})",
    )
    parser.add_argument(
        "--no-pairs", action="store_true", help="leave out word pairs (pair:a b) everywhere"
    )
    parser.add_argument(
        "--pairs-seen-twice",
        action="store_true",
        help="store each word pair only from its second training message on",
    )
    args = parser.parse_args(argv)
    MERGE = args.merge
    postgres = postgres_server_url(args.postgres)
    kinds = [k for k in args.kinds.split(",") if k == "sqlite" or postgres]
    corpus = tokenize()
    if args.no_pairs:
        corpus = without(corpus, "pair:")
    elif args.pairs_seen_twice:
        corpus = pairs_seen_twice(corpus, "pair:")
    if args.limit:
        global WARM, SINGLE
        corpus.ids, corpus.terms = corpus.ids[: args.limit], corpus.terms[: args.limit]
        corpus.classes, corpus.keys = corpus.classes[: args.limit], corpus.keys[: args.limit]
        WARM, SINGLE = BATCH, 20
    print(
        f"{len(corpus.ids)} messages, {len(corpus.texts)} tokens, "
        f"{sum(i.size for i in corpus.ids) / len(corpus.ids):.0f} distinct tokens a message",
        flush=True,
    )
    results: dict[str, list[dict[str, Any]]] = {}
    bogofilter: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(args.runs):
            rate = bogofilter_rate(Path(folder))
            if rate:
                bogofilter.append(rate)
            for kind in kinds:
                for name in args.layouts.split(","):
                    report = one_layout(name, kind, corpus, Path(folder), postgres)
                    results.setdefault(f"{kind} {name}", []).append(report)
                    print(
                        kind,
                        name,
                        json.dumps({k: round(v, 3) for k, v in report.items()}),
                        flush=True,
                    )
    bogo = statistics.median(bogofilter) if bogofilter else None
    summary: dict[str, Any] = {
        "bogofilter_msg_per_cpu_s": bogofilter,
        "load": os.getloadavg(),
        "journal_folded_every_messages": MERGE,
        "layouts": {},
    }
    print(f"\nbogofilter: {bogofilter} msg/CPU-s (median {bogo})")
    keys = list(next(iter(results.values()))[0])
    print("| layout | " + " | ".join(keys) + " |")
    for label, reports in results.items():
        medians = {k: statistics.median(r[k] for r in reports) for k in keys}
        if bogo:
            medians["batch_vs_bogofilter"] = medians["batch_msg_per_cpu_s"] / bogo
            medians["single_vs_bogofilter"] = medians["single_msg_per_cpu_s"] / bogo
        summary["layouts"][label] = {"median": medians, "runs": reports}
        print(f"| {label} | " + " | ".join(f"{medians[k]:.4g}" for k in medians) + " |")
    print(
        json.dumps(summary["layouts"] and {k: v["median"] for k, v in summary["layouts"].items()})
    )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
