"""What the database would store for tokens as 64-bit hashes: bytes and load time (prototype).

    python -m bench.prototypes.hash_storage [sqlite|postgresql ...]

A model of 1,000,000 distinct tokens (every distinct token of the SpamAssassin corpus, then
word pairs of its body words to make up the million), its `tokens` table made three ways in
a throw-away database (a temporary SQLite file; a new PostgreSQL database on
$SPAMSIFT_TEST_POSTGRES_URL's server, dropped after):

- text: today's table (model_id, token_id, text, generation), primary key (model_id,
  token_id), unique (model_id, text), index (model_id, generation);
- hash+text: the same with a bigint `hash` column, unique (model_id, hash) instead of the
  text's unique index;
- hash: (model_id, token_id, hash, generation), unique (model_id, hash); no text at all.

For each: bytes of the table with its indexes per token (SQLite: the file's pages after
VACUUM, less those of an empty schema; PostgreSQL: pg_total_relation_size), and the time to
read the token part of a model load the way app/store/counts.py reads it (ranges of 100,000
ids, each one row of aggregated strings) and to build its index (text: `EncodedTexts` and
`TokenIndex.place`, which hashes every text; hash and hash+text: the ids and hashes as
arrays, argsorted, the texts left in the database until one is shown).
CPU time of this process and wall time, median of 3. The counts (token_counts, the same in
every schema) are not part of it.
"""

from __future__ import annotations

import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from app.bayes.tokens import EncodedTexts, TokenIndex
from app.text import tokenize_raw
from bench import data

N_TOKENS = 1_000_000
RANGE = 100_000
SCHEMAS = ("text", "hash+text", "hash")


def vocabulary() -> list[str]:
    """A million distinct token texts as a model of that size holds them."""
    texts: dict[str, None] = {}
    words: list[str] = []
    for message in data.load("spamassassin"):
        counts = tokenize_raw(message.raw or b"").token_counts
        texts.update(dict.fromkeys(counts))
        words.extend(t for t in counts if ":" not in t)
    real = len(texts)
    rng = random.Random(11)
    while len(texts) < N_TOKENS:
        texts[f"pair:{rng.choice(words)} {rng.choice(words)}"[:45]] = None
    print(f"{real} distinct tokens from the corpus, {N_TOKENS - real} made-up pairs", flush=True)
    return list(texts)[:N_TOKENS]


def ddl(schema: str, dialect: str) -> list[str]:
    bigint = "BIGINT"
    text = "VARCHAR(400)"
    columns = {
        "text": f"token_id {bigint} NOT NULL, text {text} NOT NULL, generation {bigint} NOT NULL",
        "hash+text": f"token_id {bigint} NOT NULL, hash {bigint} NOT NULL, text {text} NOT NULL, "
        f"generation {bigint} NOT NULL",
        "hash": f"token_id {bigint} NOT NULL, hash {bigint} NOT NULL, generation {bigint} NOT NULL",
    }[schema]
    unique = "text" if schema == "text" else "hash"
    return [
        f"CREATE TABLE tokens (model_id INTEGER NOT NULL, {columns}, "
        f"PRIMARY KEY (model_id, token_id), UNIQUE (model_id, {unique}))",
        "CREATE INDEX ix_tokens_generation ON tokens (model_id, generation)",
    ]


def rows(schema: str, texts: list[str], hashes: list[int]) -> list[tuple[object, ...]]:
    if schema == "text":
        return [(1, i, t, 1) for i, t in enumerate(texts)]
    if schema == "hash+text":
        return [(1, i, h, t, 1) for i, (t, h) in enumerate(zip(texts, hashes, strict=True))]
    return [(1, i, h, 1) for i, h in enumerate(hashes)]


def load_text(fetch: Callable[[str, tuple[int, ...]], tuple[str, str]], sep: str) -> int:
    """Today's load of the token part: ids and texts per range, then the index."""
    ids, encoded = [], []
    for start in range(0, N_TOKENS, RANGE):
        joined_ids, terminated = fetch(
            "SELECT {join_id}, {join_text} FROM tokens WHERE model_id = {p} AND token_id >= {p} "
            "AND token_id < {p}",
            (1, start, start + RANGE),
        )
        token_ids = np.fromstring(joined_ids, dtype=np.int64, sep=",")
        ids.append(token_ids)
        texts = EncodedTexts.from_terminated(terminated, sep, token_ids.size)
        assert texts is not None
        encoded.append(texts)
    index = TokenIndex()
    index.place(np.concatenate(ids), EncodedTexts.concatenate(encoded))
    return len(index)


def load_hash(fetch: Callable[[str, tuple[int, ...]], tuple[str, str]]) -> int:
    """The token part of a load when the hashes are stored: two integer columns, sorted."""
    ids, hashes = [], []
    for start in range(0, N_TOKENS, RANGE):
        joined_ids, joined_hashes = fetch(
            "SELECT {join_id}, {join_hash} FROM tokens WHERE model_id = {p} AND token_id >= {p} "
            "AND token_id < {p}",
            (1, start, start + RANGE),
        )
        ids.append(np.fromstring(joined_ids, dtype=np.int64, sep=","))
        hashes.append(np.fromstring(joined_hashes, dtype=np.int64, sep=","))
    all_hashes = np.concatenate(hashes)
    order = np.argsort(all_hashes)
    sorted_hashes, sorted_ids = all_hashes[order], np.concatenate(ids)[order].astype(np.int32)
    return int(sorted_hashes.size + 0 * sorted_ids.size)


def timed(work: Callable[[], object]) -> tuple[float, float]:
    cpu, wall = [], []
    for _ in range(3):
        started, started_wall = time.process_time(), time.perf_counter()
        work()
        cpu.append(time.process_time() - started)
        wall.append(time.perf_counter() - started_wall)
    return statistics.median(cpu), statistics.median(wall)


def sqlite_part(texts: list[str], hashes: list[int]) -> None:
    sql = {
        "join_id": "group_concat(token_id, ',')",
        "join_text": "group_concat(text || char(31), '')",
        "join_hash": "group_concat(hash, ',')",
        "p": "?",
    }
    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder, "empty.db")
        connection = sqlite3.connect(empty)
        for statement in ddl("text", "sqlite"):
            connection.execute(statement)
        connection.commit()
        connection.close()
        base = empty.stat().st_size
        for schema in SCHEMAS:
            path = Path(folder, f"{schema}.db")
            connection = sqlite3.connect(path)
            for statement in ddl(schema, "sqlite"):
                connection.execute(statement)
            values = rows(schema, texts, hashes)
            marks = ",".join("?" * len(values[0]))
            connection.executemany(f"INSERT INTO tokens VALUES ({marks})", values)
            connection.commit()
            connection.execute("VACUUM")
            size = path.stat().st_size - base

            def fetch(
                query: str, parameters: tuple[int, ...], connection: sqlite3.Connection = connection
            ) -> tuple[str, str]:
                return connection.execute(query.format(**sql), parameters).fetchone()

            load = (
                (lambda: load_hash(fetch))
                if schema != "text"
                else (lambda: load_text(fetch, "\x1f"))
            )
            cpu, wall = timed(load)
            print(
                f"| sqlite | {schema} | {size / N_TOKENS:.1f} | {cpu:.2f} | {wall:.2f} |",
                flush=True,
            )
            connection.close()


def postgresql_part(texts: list[str], hashes: list[int]) -> None:
    import psycopg

    url = os.environ.get("SPAMSIFT_TEST_POSTGRES_URL", "")
    if not url:
        print("| postgresql | (SPAMSIFT_TEST_POSTGRES_URL not set) | | | |")
        return
    conninfo = url.replace("postgresql+psycopg://", "postgresql://")
    server, _, _ = conninfo.rpartition("/")
    name = f"h4_hash_storage_{os.getpid()}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    sql = {
        "join_id": "string_agg(token_id::text, ',')",
        "join_text": "string_agg(text || chr(31), '')",
        "join_hash": "string_agg(hash::text, ',')",
        "p": "%s",
    }
    try:
        with psycopg.connect(f"{server}/{name}", autocommit=True) as connection:
            for schema in SCHEMAS:
                connection.execute("DROP TABLE IF EXISTS tokens")
                for statement in ddl(schema, "postgresql"):
                    connection.execute(statement)
                columns = {
                    "text": "model_id, token_id, text, generation",
                    "hash+text": "model_id, token_id, hash, text, generation",
                    "hash": "model_id, token_id, hash, generation",
                }[schema]
                with (
                    connection.cursor() as cursor,
                    cursor.copy(f"COPY tokens ({columns}) FROM STDIN") as copy,
                ):
                    for row in rows(schema, texts, hashes):
                        copy.write_row(row)
                connection.execute("VACUUM ANALYZE tokens")
                size = connection.execute("SELECT pg_total_relation_size('tokens')").fetchone()[0]

                def fetch(query: str, parameters: tuple[int, ...]) -> tuple[str, str]:
                    return connection.execute(query.format(**sql), parameters).fetchone()

                load = (
                    (lambda: load_hash(fetch))
                    if schema != "text"
                    else (lambda: load_text(fetch, "\x1f"))
                )
                cpu, wall = timed(load)
                print(
                    f"| postgresql | {schema} | {size / N_TOKENS:.1f} | {cpu:.2f} | {wall:.2f} |",
                    flush=True,
                )
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")


def main() -> None:
    parts = sys.argv[1:] or ["sqlite", "postgresql"]
    texts = vocabulary()
    # A 64-bit hash of each text's UTF-8 (CPython's keyed one: as random as any key's; the
    # str's own hash would collide across kinds, see docs/token-hashes.md).
    hashes = [hash(t.encode("utf-8")) for t in texts]
    utf8 = sum(len(t.encode()) for t in texts)
    print(f"{N_TOKENS} tokens, {utf8 / N_TOKENS:.1f} UTF-8 bytes a text on average")
    print("| database | schema | bytes per token (table + indexes) | load CPU s | load wall s |")
    if "sqlite" in parts:
        sqlite_part(texts, hashes)
    if "postgresql" in parts:
        postgresql_part(texts, hashes)


if __name__ == "__main__":
    main()
