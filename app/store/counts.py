"""Token ids, token counts and class totals: moved only by atomic SQL increments.

Every change is an upsert adding a delta (`docs = docs + excluded.docs`), never a read, an
addition in Python and a write back, so concurrent writers cannot lose an increment. Rows are
written in (token_id, class_index) order so two transactions never lock shared rows in
opposite orders.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection, bindparam, insert, select, update

from app.store.dialect import upsert
from app.store.tables import class_totals, token_counts, tokens

IntArray = NDArray[np.int64]

# Bound the number of parameters in one IN (...) list (SQLite allows 32 766 per statement).
LOOKUP_CHUNK = 900


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


def insert_tokens(
    conn: Connection, model_id: int, *, first_id: int, texts: Sequence[str], generation: int
) -> None:
    """Store new tokens under consecutive ids starting at `first_id`."""
    if not texts:
        return
    conn.execute(
        insert(tokens),
        [
            {
                "model_id": model_id,
                "token_id": first_id + offset,
                "text": text,
                "generation": generation,
            }
            for offset, text in enumerate(texts)
        ],
    )


def add_token_counts(
    conn: Connection, model_id: int, delta: CountDelta, *, generation: int
) -> None:
    """Add `delta` to the stored counts atomically (negative deltas subtract).

    Additions are upserts. Subtractions are plain increments by a negative amount: their rows
    exist (the ledger says what was added), and an upsert's proposed row would already fail
    the non-negative CHECK before the conflict is resolved.
    """
    rows = [
        {
            "model_id": model_id,
            "token_id": token_id,
            "class_index": class_index,
            "docs": docs,
            "terms": terms,
            "generation": generation,
        }
        for token_id, class_index, docs, terms in zip(
            delta.token_ids.tolist(),
            delta.class_indices.tolist(),
            delta.docs.tolist(),
            delta.terms.tolist(),
            strict=True,
        )
    ]
    additions = [row for row in rows if row["docs"] >= 0 and row["terms"] >= 0]
    subtractions = [row for row in rows if row["docs"] < 0 or row["terms"] < 0]
    if additions:
        statement = upsert(conn, token_counts)
        statement = statement.on_conflict_do_update(
            index_elements=[
                token_counts.c.model_id,
                token_counts.c.token_id,
                token_counts.c.class_index,
            ],
            set_={
                "docs": token_counts.c.docs + statement.excluded.docs,
                "terms": token_counts.c.terms + statement.excluded.terms,
                "generation": statement.excluded.generation,
            },
        )
        conn.execute(statement, additions)
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


def read_changes(
    conn: Connection, model_id: int, *, since_generation: int, generation: int, n_classes: int
) -> CountChanges:
    """Read, in the caller's snapshot, everything changed after `since_generation`.

    With `since_generation = -1` this is the whole model (a process's first load).
    """
    token_rows = conn.execute(
        select(tokens.c.token_id, tokens.c.text).where(
            tokens.c.model_id == model_id, tokens.c.generation > since_generation
        )
    ).all()
    count_rows = conn.execute(
        select(
            token_counts.c.token_id,
            token_counts.c.class_index,
            token_counts.c.docs,
            token_counts.c.terms,
        ).where(token_counts.c.model_id == model_id, token_counts.c.generation > since_generation)
    ).all()
    counts = np.array(count_rows, dtype=np.int64).reshape(-1, 4)
    class_docs, class_terms = read_class_totals(conn, model_id, n_classes)
    return CountChanges(
        generation=generation,
        token_ids=np.array([row[0] for row in token_rows], dtype=np.int64),
        token_texts=[row[1] for row in token_rows],
        count_token_ids=counts[:, 0].copy(),
        count_class_indices=counts[:, 1].copy(),
        count_docs=counts[:, 2].copy(),
        count_terms=counts[:, 3].copy(),
        class_docs=class_docs,
        class_terms=class_terms,
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
