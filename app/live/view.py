"""One scoring view: what classifying some messages reads, whether the model is held, not held
(its messages' rows read, `app.live.cold`) or backed by another model (both merged,
`app.live.blend`); `app.live.scoring` makes it.

The view's table and classifier score the messages; its parts are the models whose counts went
in (the classified model first), each with its own id of every token of the table, so each
model's classification record names tokens it knows; and the trained messages per class that
the floor of trained messages applies to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from app.bayes.counts import IntArray
from app.live.held import LiveModel
from app.store.ledger import ClassificationRecord


@dataclass(frozen=True)
class Part:
    """A model whose counts a view holds, and its trained messages per class."""

    model_id: int
    name: str
    class_docs: IntArray


@dataclass(frozen=True)
class ScoringView:
    """`live`: the table and classifier to score with, and the options of the model classified;
    `parts`: the models whose counts went in, the classified model first; `id_maps`: for each,
    its own id of each of the table's tokens (-1: a token it does not know; None: the table's
    ids are the model's own)."""

    live: LiveModel
    parts: tuple[Part, ...]
    id_maps: tuple[IntArray | None, ...]

    @classmethod
    def of(cls, live: LiveModel, model_ids: IntArray | None = None) -> ScoringView:
        """The view of one model: held (`model_ids` None), or read for some messages."""
        part = Part(live.id, live.name, live.table.class_docs)
        return cls(live=live, parts=(part,), id_maps=(model_ids,))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(part.name for part in self.parts)

    def class_messages(self) -> list[int] | None:
        """Trained messages per class the floor applies to: of every model, each counted once
        (a weighted blend's table counts the personal model's several times); None for one
        model: its table's own, read when it is scored."""
        if len(self.parts) == 1:
            return None
        total = np.zeros(len(self.live.classes), dtype=np.int64)
        for part in self.parts:
            total += part.class_docs
        result: list[int] = total.tolist()
        return result

    def record_in(self, index: int, record: ClassificationRecord) -> ClassificationRecord:
        """`record` (of the table's token ids) as model `parts[index]` keeps it: by its own ids,
        in their order, without the tokens it does not know."""
        id_map = self.id_maps[index]
        if id_map is None:
            return record
        ids = id_map[record.token_ids]
        known = ids >= 0
        order = np.argsort(ids[known], kind="stable")
        return replace(
            record, token_ids=ids[known][order], token_terms=record.token_terms[known][order]
        )
