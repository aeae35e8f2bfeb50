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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from app.bayes.blend import merge_counts, restrict
from app.bayes.counts import CountTable, IntArray
from app.bayes.naive_bayes import Classifier
from app.live.models import LiveModel, LiveModels, scores_from_message_rows
from app.store.models import ModelRow


@dataclass(frozen=True)
class Part:
    """What one model gives to a blend: its counts (all, or a message's rows) and how to find
    its own ids of token texts (-1 for a text it does not know)."""

    model_id: int
    name: str
    table: CountTable
    ids_of: Callable[[Sequence[str]], IntArray]


@dataclass(frozen=True)
class Blend:
    """The merged model to score with, and the models that went into it (personal first)."""

    live: LiveModel
    parts: tuple[Part, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(part.name for part in self.parts)

    def messages(self) -> list[int]:
        """Trained messages per class of both models, each counted once (not weighted)."""
        total = np.zeros(len(self.live.classes), dtype=np.int64)
        for part in self.parts:
            total += part.table.class_docs
        return total.tolist()

    def ids_in(self, part: Part, merged_ids: IntArray) -> IntArray:
        """The ids `part`'s model gives the merged table's tokens `merged_ids` (-1: none)."""
        if not merged_ids.size:
            return np.zeros(0, dtype=np.int64)
        tokens = self.live.table.tokens
        return part.ids_of([tokens[int(i)] for i in merged_ids.tolist()])


def read_blend(
    models: LiveModels,
    personal: LiveModel | ModelRow,
    backing: ModelRow,
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
    table = merge_counts(first.table, second.table, base_weight=personal_weight)
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
    return Blend(live=live, parts=(first, second))


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
            table = live.table.copy() if whole else restrict(live.table, texts)
        held = live

        def held_ids(wanted: Sequence[str]) -> IntArray:
            with held.lock:
                return held.table.lookup(list(wanted), exact=True)

        return Part(live.id, live.name, table, held_ids)
    assert isinstance(model, ModelRow)
    partial = models.read_partial(model, texts, event_model=event_model)
    assert partial is not None  # not whole: its scorer reads only the messages' rows
    local, model_ids = partial.live.table, partial.token_ids

    def partial_ids(wanted: Sequence[str]) -> IntArray:
        if not model_ids.size:
            return np.full(len(wanted), -1, dtype=np.int64)
        found = local.lookup(list(wanted), exact=True)
        return np.where(found >= 0, model_ids[np.maximum(found, 0)], -1)

    return Part(model.id, model.name, local, partial_ids)
