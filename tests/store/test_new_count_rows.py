"""The count rows of tokens given out in the same transaction are inserted, not upserted:
stored rows identical to upserting every row, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import text

from app.service.models import create_model
from app.service.runtime import Runtime
from app.store.counts import CountDelta, add_token_counts, insert_tokens
from app.store.models import find_model, lock_model_row

# Each write: new token texts, then count rows (token position among all texts, class, docs,
# terms): the first write's tokens are all new, the second's partly.
WRITES = [
    (["a", "b", "c"], [(0, 0, 1, 3), (0, 1, 2, 2), (1, 1, 1, 1), (2, 0, 5, 9)]),
    (["d", "e"], [(0, 0, 1, 1), (1, 1, 3, 4), (3, 0, 1, 2), (4, 1, 2, 2), (2, 0, -1, -4)]),
]


def write(rt: Runtime, model: str, *, new_rows_inserted: bool) -> None:
    texts: list[str] = []
    for new_texts, rows in WRITES:
        with rt.db.transaction() as conn:
            row = find_model(conn, model)
            locked = lock_model_row(conn, row.id, created_at=row.created_at)
            generation = locked.generation
            first = locked.allocate_token_ids(len(new_texts))
            insert_tokens(conn, row.id, first_id=first, texts=new_texts, generation=generation)
            texts += new_texts
            ids = {position: position for position in range(len(texts))}  # ids are dense
            table = np.array(
                sorted((ids[position], *rest) for position, *rest in rows), dtype=np.int64
            )
            delta = CountDelta(*(table[:, column].copy() for column in range(4)))
            add_token_counts(
                conn,
                row.id,
                delta,
                generation=generation,
                new_from=first if new_rows_inserted else None,
            )
            locked.save(conn)


def count_rows(rt: Runtime, model: str) -> list[tuple[Any, ...]]:
    with rt.db.transaction(write=False) as conn:
        model_id = find_model(conn, model).id
        return [
            tuple(row)
            for row in conn.execute(
                text(
                    "SELECT token_id, class_index, docs, terms, generation FROM token_counts "
                    "WHERE model_id = :m ORDER BY token_id, class_index"
                ),
                {"m": model_id},
            )
        ]


def test_inserting_the_rows_of_new_tokens_stores_what_upserting_them_does(
    runtime: Runtime,
) -> None:
    create_model(runtime, name="twin", classes=None, config={})

    write(runtime, "default", new_rows_inserted=False)
    write(runtime, "twin", new_rows_inserted=True)

    assert count_rows(runtime, "twin") == count_rows(runtime, "default")
    assert count_rows(runtime, "twin") == [
        (0, 0, 2, 4, 2),
        (0, 1, 2, 2, 1),
        (1, 1, 4, 5, 2),
        (2, 0, 4, 5, 2),
        (3, 0, 1, 2, 2),
        (4, 1, 2, 2, 2),
    ]
