"""The Gaussian statistics of a model's numeric attributes: n, Σx, Σx² per (attribute, class).

The sums are exact rationals, stored as text ("p/q"), which no SQL dialect adds exactly; a
write therefore stores the new values, computed from the live copy of the model. That is exact
because every write to a model holds the model's row lock and first catches its live copy up
to the generation before (`app.live.write.ModelWrite`), so no two writers of one model
interleave here and the copy holds the stored values.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from sqlalchemy import Connection, delete, insert, select

from app.bayes.attributes import AttributeCell, AttributeSums, MomentsDelta
from app.store.dialect import PrebuiltUpsert
from app.store.tables import attribute_sums

_KEY = ("model_id", "name", "class_index")


def add_attribute_sums(
    conn: Connection,
    model_id: int,
    delta: Mapping[tuple[str, int], MomentsDelta],
    *,
    current: AttributeSums,
    generation: int,
) -> None:
    """Add `delta` ((name, class index) -> change) to the model's cells, whose values are
    `current` (the live copy, caught up under the model's row lock to the generation before
    this write), marking them with `generation` (the change feed). One upsert of the new
    absolute values: nothing is read."""
    if not delta:
        return
    rows: list[dict[str, object]] = []
    for (name, class_index), change in sorted(delta.items()):
        moments = current.moments.get(name)
        n, total, squares = (
            (0, Fraction(0), Fraction(0))
            if moments is None
            else (moments.n[class_index], moments.sums[class_index], moments.squares[class_index])
        )
        rows.append(
            {
                "model_id": model_id,
                "name": name,
                "class_index": class_index,
                "n": n + change.n,
                "total": str(total + change.sum),
                "squares": str(squares + change.squares),
                "generation": generation,
            }
        )
    conn.execute(_SET_ATTRIBUTE_SUMS(conn), rows)


_SET_ATTRIBUTE_SUMS = PrebuiltUpsert(
    attribute_sums,
    _KEY,
    lambda statement: {
        column: statement.excluded[column] for column in ("n", "total", "squares", "generation")
    },
)


def read_attribute_cells(
    conn: Connection, model_id: int, *, since_generation: int = -1
) -> list[AttributeCell]:
    """The model's cells changed after `since_generation` (-1: all), absolute values."""
    rows = conn.execute(
        select(attribute_sums)
        .where(
            attribute_sums.c.model_id == model_id,
            attribute_sums.c.generation > since_generation,
        )
        .order_by(attribute_sums.c.name, attribute_sums.c.class_index)
    )
    return [
        (row.name, row.class_index, row.n, Fraction(row.total), Fraction(row.squares))
        for row in rows
    ]


def read_attribute_sums(
    conn: Connection, model_id: int, n_classes: int, *, into: AttributeSums | None = None
) -> AttributeSums:
    """All of the model's cells, put into `into` or into new sums."""
    sums = into if into is not None else AttributeSums(n_classes)
    sums.set_cells(read_attribute_cells(conn, model_id))
    return sums


def replace_attribute_sums(
    conn: Connection, model_id: int, sums: AttributeSums, *, generation: int
) -> None:
    """Put `sums` in place of the model's cells (a model imported whole)."""
    conn.execute(delete(attribute_sums).where(attribute_sums.c.model_id == model_id))
    rows = [
        {
            "model_id": model_id,
            "name": name,
            "class_index": class_index,
            "n": n,
            "total": str(total),
            "squares": str(squares),
            "generation": generation,
        }
        for name, class_index, n, total, squares in sums.cells()
    ]
    if rows:
        conn.execute(insert(attribute_sums), rows)
