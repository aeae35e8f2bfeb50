"""Token counts move from one row per (token, class) to packed chunks behind a journal.

`token_counts` held a row per (model, token, class): a batch training upserted every cell it
touched, and a "mark as spam" click hundreds of them. `count_chunks` holds CHUNK_IDS
consecutive token ids a row, packed (per token its docs and terms per class, then the
generation that last changed it, little-endian int64); `count_journal` holds each write's
whole delta as one row until the writer folds it into the chunks (app/store/chunks.py,
docs/performance.md, "Storage layout for training").

The upgrade packs every model's rows into chunks: a token's entry generation is the latest of
its rows', and a class it had no row for counts 0. The downgrade adds the journal to the
chunks and writes a row per (token, class) holding a count; a token whose counts are all zero
(forgotten, kept for the change feed) keeps one row, of class 0. Both read a model
ID_RANGE token ids at a time, so memory stays bounded whatever the vocabulary.

The packing is copied here, not imported from app.store.chunks: this migration must convert
the same way whatever that module becomes. Rows of a model that no longer exists (the token
tables have no foreign key since 0006) are dropped with their table.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None

# The layout of app.store.chunks at this revision.
CHUNK_IDS = 16  # token ids a chunk holds: chunk c holds c * 16 .. c * 16 + 15
INT = np.dtype('<i8')
CELL_COLUMNS = 4  # a journal cell: token id, class index, docs delta, terms delta
# Token ids converted at a time per model (a multiple of CHUNK_IDS: no chunk spans two reads).
ID_RANGE = 100_000

IntArray = npt.NDArray[np.int64]

models = sa.table('models', sa.column('id', sa.Integer()), sa.column('classes', sa.JSON()))
token_counts = sa.table(
    'token_counts',
    sa.column('model_id', sa.Integer()),
    sa.column('token_id', sa.BigInteger()),
    sa.column('class_index', sa.SmallInteger()),
    sa.column('docs', sa.BigInteger()),
    sa.column('terms', sa.BigInteger()),
    sa.column('generation', sa.BigInteger()),
)
count_chunks = sa.table(
    'count_chunks',
    sa.column('model_id', sa.Integer()),
    sa.column('chunk', sa.BigInteger()),
    sa.column('generation', sa.BigInteger()),
    sa.column('counts', sa.LargeBinary()),
)
count_journal = sa.table(
    'count_journal',
    sa.column('model_id', sa.Integer()),
    sa.column('generation', sa.BigInteger()),
    sa.column('cells', sa.Integer()),
    sa.column('delta', sa.LargeBinary()),
)


def _model_classes(conn: sa.Connection) -> list[tuple[int, int]]:
    """(model id, number of classes) of every model."""
    rows = conn.execute(sa.select(models.c.id, models.c.classes).order_by(models.c.id))
    return [(model_id, len(classes)) for model_id, classes in rows]


def _ranges(following: Callable[[int], int | None]) -> Iterator[tuple[int, int]]:
    """Token id ranges [start, start + ID_RANGE) holding something, ascending; `following(end)`
    is the lowest token id held at or after `end` (None: none). Each range starts on a chunk
    boundary."""
    start = following(0)
    while start is not None:
        start -= start % CHUNK_IDS
        end = start + ID_RANGE
        yield start, end
        start = following(end)


def _next_count_row(conn: sa.Connection, model_id: int, end: int) -> int | None:
    """The lowest token id at or after `end` with a token_counts row."""
    return conn.execute(
        sa.select(sa.func.min(token_counts.c.token_id)).where(
            token_counts.c.model_id == model_id, token_counts.c.token_id >= end
        )
    ).scalar()


def _next_entry(conn: sa.Connection, model_id: int, journal_ids: IntArray, end: int) -> int | None:
    """The lowest token id at or after `end` (a chunk boundary) that a chunk or the journal
    holds."""
    chunk = conn.execute(
        sa.select(sa.func.min(count_chunks.c.chunk)).where(
            count_chunks.c.model_id == model_id, count_chunks.c.chunk >= end // CHUNK_IDS
        )
    ).scalar()
    later = journal_ids[journal_ids >= end]
    found = [chunk * CHUNK_IDS] if chunk is not None else []
    found += [int(later.min())] if later.size else []
    return min(found) if found else None


def _create_count_tables() -> None:
    op.create_table(
        'count_chunks',
        sa.Column('model_id', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('chunk', sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column('generation', sa.BigInteger(), nullable=False),
        sa.Column('counts', sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint('model_id', 'chunk', name=op.f('pk_count_chunks')),
    )
    op.create_index(
        'ix_count_chunks_model_id_generation', 'count_chunks', ['model_id', 'generation']
    )
    op.create_table(
        'count_journal',
        sa.Column('model_id', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('generation', sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column('cells', sa.Integer(), nullable=False),
        sa.Column('delta', sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint('model_id', 'generation', name=op.f('pk_count_journal')),
    )


def _create_token_counts() -> None:
    """`token_counts` as revision 0008 has it (0001, less the foreign key 0006 dropped)."""
    op.create_table(
        'token_counts',
        sa.Column('model_id', sa.Integer(), nullable=False),
        sa.Column('token_id', sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column('class_index', sa.SmallInteger(), nullable=False),
        sa.Column('docs', sa.BigInteger(), nullable=False),
        sa.Column('terms', sa.BigInteger(), nullable=False),
        sa.Column('generation', sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            'docs >= 0 AND terms >= 0', name=op.f('ck_token_counts_counts_not_negative')
        ),
        sa.PrimaryKeyConstraint('model_id', 'token_id', 'class_index', name='pk_token_counts'),
    )
    op.create_index(
        'ix_token_counts_model_id_generation', 'token_counts', ['model_id', 'generation']
    )


def pack_chunks(rows: Sequence[Sequence[int]], n_classes: int) -> list[dict[str, Any]]:
    """Count rows (token id, class index, docs, terms, generation) as count_chunks rows
    (without model_id): each token's entry its docs and terms per class (0 where it had no
    row) and the latest of its rows' generations."""
    cells = np.array(rows, dtype=np.int64).reshape(-1, 5)
    token_ids, class_indices, docs, terms, generations = cells.T
    if cells.size and (class_indices.min() < 0 or class_indices.max() >= n_classes):
        raise ValueError(f'token_counts holds a class index outside 0..{n_classes - 1}')
    numbers, row = np.unique(token_ids // CHUNK_IDS, return_inverse=True)
    slot = token_ids % CHUNK_IDS
    table = np.zeros((numbers.size, CHUNK_IDS, 2 * n_classes + 1), dtype=INT)
    table[row, slot, class_indices] = docs
    table[row, slot, n_classes + class_indices] = terms
    # An entry of generation 0 reads as no entry: a row at generation 0 (no write makes one)
    # still counts, as at generation 1.
    np.maximum.at(table[:, :, -1], (row, slot), np.maximum(generations, 1))
    latest = table[:, :, -1].max(axis=1)
    return [
        {'chunk': int(number), 'generation': int(generation), 'counts': chunk.tobytes()}
        for number, generation, chunk in zip(numbers, latest, table, strict=True)
    ]


def count_rows(
    chunks: Sequence[tuple[int, bytes]],
    cells: IntArray,
    n_classes: int,
) -> list[dict[str, int]]:
    """token_counts rows (without model_id) of chunks (number, counts) plus journal cells
    (token id, class index, docs, terms, generation): a row per (token, class) holding a count,
    or one of class 0 for a token whose counts are all zero; a token's generation the latest
    of its entry's and of the journal rows that changed it."""
    width = 2 * n_classes + 1
    blob = b''.join(bytes(counts) for _, counts in chunks)
    entries = np.frombuffer(blob, dtype=INT).reshape(-1, width)
    entry_ids = (
        np.array([number for number, _ in chunks], dtype=np.int64)[:, None] * CHUNK_IDS
        + np.arange(CHUNK_IDS, dtype=np.int64)
    ).ravel()
    present = entries[:, -1] > 0
    entries, entry_ids = entries[present], entry_ids[present]

    token_ids, position = np.unique(np.concatenate([entry_ids, cells[:, 0]]), return_inverse=True)
    at_entry, at_cell = position[: entry_ids.size], position[entry_ids.size :]
    docs = np.zeros((token_ids.size, n_classes), dtype=np.int64)
    terms = np.zeros((token_ids.size, n_classes), dtype=np.int64)
    generations = np.zeros(token_ids.size, dtype=np.int64)
    docs[at_entry] = entries[:, :n_classes]
    terms[at_entry] = entries[:, n_classes : 2 * n_classes]
    generations[at_entry] = entries[:, -1]
    np.add.at(docs, (at_cell, cells[:, 1]), cells[:, 2])
    np.add.at(terms, (at_cell, cells[:, 1]), cells[:, 3])
    np.maximum.at(generations, at_cell, cells[:, 4])

    held = (docs != 0) | (terms != 0)
    held[:, 0] |= ~held.any(axis=1)  # all zero: one row, of class 0
    token_index, class_index = np.nonzero(held)  # row-major: by token, then class
    return [
        {
            'token_id': int(token_ids[t]),
            'class_index': int(c),
            'docs': int(docs[t, c]),
            'terms': int(terms[t, c]),
            'generation': int(generations[t]),
        }
        for t, c in zip(token_index.tolist(), class_index.tolist(), strict=True)
    ]


def _journal_cells(conn: sa.Connection, model_id: int) -> IntArray:
    """A model's journal as cells (token id, class index, docs, terms, generation), read
    whole: the writer folds it into the chunks once it holds a few thousand cells."""
    parts = [np.zeros((0, CELL_COLUMNS + 1), dtype=np.int64)]
    for generation, delta in conn.execute(
        sa.select(count_journal.c.generation, count_journal.c.delta).where(
            count_journal.c.model_id == model_id
        )
    ):
        cells = np.frombuffer(bytes(delta), dtype=INT).reshape(-1, CELL_COLUMNS)
        parts.append(np.column_stack([cells, np.full(len(cells), generation, dtype=np.int64)]))
    return np.concatenate(parts)


def upgrade() -> None:
    _create_count_tables()
    conn = op.get_bind()
    for model_id, n_classes in _model_classes(conn):
        for start, end in _ranges(partial(_next_count_row, conn, model_id)):
            rows = conn.execute(
                sa.select(
                    token_counts.c.token_id,
                    token_counts.c.class_index,
                    token_counts.c.docs,
                    token_counts.c.terms,
                    token_counts.c.generation,
                )
                .where(
                    token_counts.c.model_id == model_id,
                    token_counts.c.token_id >= start,
                    token_counts.c.token_id < end,
                )
                .order_by(token_counts.c.token_id, token_counts.c.class_index)
            ).all()
            chunks = pack_chunks([tuple(row) for row in rows], n_classes)
            if chunks:
                conn.execute(
                    sa.insert(count_chunks), [{'model_id': model_id, **row} for row in chunks]
                )
    op.drop_index('ix_token_counts_model_id_generation', table_name='token_counts')
    op.drop_table('token_counts')


def downgrade() -> None:
    _create_token_counts()
    conn = op.get_bind()
    for model_id, n_classes in _model_classes(conn):
        journal = _journal_cells(conn, model_id)
        journal_ids = journal[:, 0]
        for start, end in _ranges(partial(_next_entry, conn, model_id, journal_ids)):
            chunks = conn.execute(
                sa.select(count_chunks.c.chunk, count_chunks.c.counts)
                .where(
                    count_chunks.c.model_id == model_id,
                    count_chunks.c.chunk >= start // CHUNK_IDS,
                    count_chunks.c.chunk < end // CHUNK_IDS,
                )
                .order_by(count_chunks.c.chunk)
            ).all()
            cells = journal[(journal_ids >= start) & (journal_ids < end)]
            rows = count_rows([tuple(chunk) for chunk in chunks], cells, n_classes)
            if rows:
                conn.execute(
                    sa.insert(token_counts), [{'model_id': model_id, **row} for row in rows]
                )
    op.drop_table('count_journal')
    op.drop_index('ix_count_chunks_model_id_generation', table_name='count_chunks')
    op.drop_table('count_chunks')
