"""A personal model and the model backing it, merged for one classification.

The merge itself is pure (`app.bayes.blend.merge_counts`); this room gathers what it merges:

- when the personal model's scorer reads only a message's own tokens and the class totals
  (Robinson-Fisher without max_vocab), each model gives just those rows: from its held copy,
  or read from the database for a model this process does not hold (as a cold model is
  classified alone), so neither needs to be loaded;
- otherwise (multinomial, Bernoulli, a max_vocab cut: they read the whole vocabulary) both
  models are held and their whole tables are merged, O(|V|) per request.

The merged model scores with the personal model's options (thresholds, event model, floor of
trained messages); `ids_in` maps its tokens back to each model's own ids, so the
classification record kept for feedback by message_id names tokens each model knows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.bayes.blend import merge_counts_mapped, restrict_mapped
from app.bayes.counts import CountTable, IntArray
from app.bayes.naive_bayes import Classifier
from app.live.models import LiveModel, LiveModels, scores_from_message_rows
from app.store.models import ModelRow


@dataclass(frozen=True)
class Part:
    """What one model gives to a blend: its counts (all, or a message's rows) and, for each
    token of that table, the model's own id of it."""

    model_id: int
    name: str
    table: CountTable
    model_ids: IntArray


@dataclass(frozen=True)
class Blend:
    """The merged model to score with, the models that went into it (personal first), and for
    each the model's own id of each merged token (-1: a token it does not know)."""

    live: LiveModel
    parts: tuple[Part, ...]
    id_maps: tuple[IntArray, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(part.name for part in self.parts)

    def messages(self) -> list[int]:
        """Trained messages per class of both models, each counted once (not weighted)."""
        total = np.zeros(len(self.live.classes), dtype=np.int64)
        for part in self.parts:
            total += part.table.class_docs
        result: list[int] = total.tolist()
        return result

    def ids_in(self, index: int, merged_ids: IntArray) -> IntArray:
        """The ids model `parts[index]` gives the merged table's tokens `merged_ids`."""
        return self.id_maps[index][merged_ids]


def read_blend(
    models: LiveModels,
    personal: LiveModel | ModelRow,
    backing: LiveModel | ModelRow,
    texts: Sequence[str],
    *,
    event_model: str | None,
    personal_weight: int = 1,
) -> Blend:
    """Merge `personal`'s counts (times `personal_weight`) with `backing`'s for scoring
    messages made of `texts`.

    `personal` is the held copy, or the row of a model this process does not hold.
    """
    row_config = personal.options if isinstance(personal, LiveModel) else personal.config
    config = models.engine_config(row_config, personal.classes)
    whole = not scores_from_message_rows(config, event_model)
    first = _part(models, personal, texts, whole=whole, event_model=event_model)
    second = _part(models, backing, texts, whole=whole, event_model=event_model)
    table, second_to_merged = merge_counts_mapped(
        first.table, second.table, base_weight=personal_weight
    )
    first_map = np.full(table.n_tokens, -1, dtype=np.int64)
    first_map[: first.model_ids.size] = first.model_ids
    second_map = np.full(table.n_tokens, -1, dtype=np.int64)
    placed = second_to_merged >= 0
    second_map[second_to_merged[placed]] = second.model_ids[placed]
    live = LiveModel(
        id=personal.id,
        name=personal.name,
        classes=personal.classes,
        options=dict(row_config),
        table=table,
        classifier=Classifier(table, config),
        created_at=personal.created_at,
        engine_config=models.engine_config,
        epoch=personal.epoch,
        backed_by=backing.id,
    )
    return Blend(live=live, parts=(first, second), id_maps=(first_map, second_map))


def _part(
    models: LiveModels,
    model: LiveModel | ModelRow,
    texts: Sequence[str],
    *,
    whole: bool,
    event_model: str | None,
) -> Part:
    live = model if isinstance(model, LiveModel) else models.held(model.name)
    if live is not None or whole:
        live = models.get(model.name)  # synced if due; loaded (within the budget) if whole
        with live.lock:
            if whole:
                table = live.table.copy()
                ids = np.arange(table.n_tokens, dtype=np.int64)
            else:
                table, ids = restrict_mapped(live.table, texts)
        return Part(live.id, live.name, table, ids)
    assert isinstance(model, ModelRow)
    partial = models.read_partial(model, texts, event_model=event_model)
    assert partial is not None  # not whole: its scorer reads only the messages' rows
    return Part(model.id, model.name, partial.live.table, partial.token_ids)
