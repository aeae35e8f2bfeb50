"""The Gaussian statistics of a model's numeric attributes: n, Σx, Σx² per (attribute, class).

The sums are exact rationals, stored as text ("p/q"), which no SQL dialect adds exactly; a
write therefore reads the few cells it changes and writes them back. That is safe because
every write to a model holds the model's row lock (`app.live.write.ModelWrite`), so no two
writers of one model interleave here.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from app.bayes.attributes import AttributeCell, AttributeSums, MomentsDelta
from app.store.tables import attribute_sums

# Cells read per statement when a write looks up the ones it changes.
LOOKUP_CHUNK = 400
_KEY = ("model_id", "name", "class_index")


def add_attribute_sums(
    conn: Connection,
    model_id: int,
    delta: Mapping[tuple[str, int], MomentsDelta],
    *,
    generation: int,
) -> None:
    """Add `delta` ((name, class index) -> change) to the model's cells, marking them with
    `generation` (the change feed). The caller holds the model's row lock."""
    if not delta:
        return
    names = sorted({name for name, _ in delta})
    current: dict[tuple[str, int], tuple[int, Fraction, Fraction]] = {}
    for start in range(0, len(names), LOOKUP_CHUNK):
        rows = conn.execute(
            select(attribute_sums).where(
                attribute_sums.c.model_id == model_id,
                attribute_sums.c.name.in_(names[start : start + LOOKUP_CHUNK]),
            )
        )
        for row in rows:
            current[(row.name, row.class_index)] = (
                row.n,
                Fraction(row.total),
                Fraction(row.squares),
            )
    inserts: list[dict[str, object]] = []
    updates: list[dict[str, object]] = []
    for (name, class_index), change in sorted(delta.items()):
        before = current.get((name, class_index))
        n, total, squares = before or (0, Fraction(0), Fraction(0))
        values: dict[str, object] = {
            "n": n + change.n,
            "total": str(total + change.sum),
            "squares": str(squares + change.squares),
            "generation": generation,
        }
        key = {"model_id": model_id, "name": name, "class_index": class_index}
        (updates if before is not None else inserts).append({**key, **values})
    if updates:  # one statement, executed for every row
        conn.execute(
            update(attribute_sums)
            .where(
                attribute_sums.c.model_id == bindparam("key_model_id"),
                attribute_sums.c.name == bindparam("key_name"),
                attribute_sums.c.class_index == bindparam("key_class_index"),
            )
            .values(
                n=bindparam("new_n"),
                total=bindparam("new_total"),
                squares=bindparam("new_squares"),
                generation=bindparam("new_generation"),
            ),
            [
                {f"key_{k}" if k in _KEY else f"new_{k}": v for k, v in row.items()}
                for row in updates
            ],
        )
    if inserts:
        conn.execute(insert(attribute_sums), inserts)


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
