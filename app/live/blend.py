"""A personal model and the model backing it, merged for one classification.

The merge itself is pure (`app.bayes.blend`); this room gathers what it merges:

- the messages' own rows of each model, summed (`merge_rows`): from its held copy, or, when
  the scorer reads nothing else (Robinson-Fisher), read from the database for a model this
  process does not hold (as a cold model is classified alone), so neither needs loading;
- multinomial and Bernoulli also read sums over the merged vocabulary (|V|, T_c, the
  absent-token sum): both models are held, and those sums are computed once per pair of the
  models' generations and kept (`KeptTotals.kept_blend`), so a message costs its own
  rows, not the tables' size (a per-request event model on a big backing model cost 460
  times a classification when the whole tables were merged for each message);
- only a max_vocab cut, which ranks every token, merges both whole tables per request.

Only the first way reads the messages' texts; the merged model, either way, scores them by
their hashes. The merged model scores with the personal model's options (thresholds, event
model, floor of trained messages); the view maps its tokens back to each model's own ids, so
the classification record kept for feedback by message_id names tokens each model knows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from app.bayes.attributes import AttributeSums
from app.bayes.blend import (
    Rows,
    merge_counts_mapped,
    merge_rows,
    merged_vocabulary_totals,
    rows_of,
)
from app.bayes.naive_bayes import Classifier, NaiveBayesConfig, reads
from app.bayes.scorers import Reads, VocabularyTotals
from app.live.cold import PartialModel
from app.live.held import LiveModel
from app.live.models import LiveModels
from app.live.view import Part, ScoringView
from app.store.attributes import read_attribute_sums
from app.store.models import ModelRow


def read_blend(
    models: LiveModels,
    personal: LiveModel | ModelRow | PartialModel,
    backing: LiveModel | ModelRow,
    texts: Callable[[], Sequence[str]],
    *,
    event_model: str | None,
    personal_weight: int = 1,
    messages: int = 1,
) -> ScoringView:
    """Merge `personal`'s counts (times `personal_weight`) with `backing`'s for scoring
    `messages` messages made of `texts()` (called only when the blend reads rows by text: a
    merge of whole tables needs no text of the messages, which are scored by hash).

    `personal` is the held copy, the row of a model this process does not hold, or what was
    already read of such a model for these texts (a `PartialModel`, so nothing is read twice).
    """
    source = personal.live if isinstance(personal, PartialModel) else personal
    if isinstance(source, LiveModel):
        row_config, config = source.options, source.config
    else:
        row_config, config = source.config, models.config_of(source)
    # Summing two models' message rows is exact where the scorer needs nothing but those rows
    # and the class totals (Robinson-Fisher), or those and the merged vocabulary's sums, kept
    # per generation pair (multinomial, Bernoulli); a max_vocab cut ranks every token, so
    # both whole tables are merged.
    totals = None
    needs = reads(config, event_model)
    if needs is not Reads.WHOLE_TABLE:
        distinct = list(dict.fromkeys(texts()))
        if needs is Reads.ROWS_AND_TOTALS:
            first, second, totals = _held_rows_and_totals(
                models, source.name, backing.name, distinct, config, personal_weight
            )
        else:
            first = _rows(models, personal, distinct, event_model=event_model, messages=messages)
            second = _rows(models, backing, distinct, event_model=event_model, messages=messages)
        table, id_lists = merge_rows(
            source.classes, distinct, [first[1], second[1]], [personal_weight, 1]
        )
        parts = (first[0], second[0])
        id_maps = (id_lists[0], id_lists[1])
    else:
        whole_first, whole_second = models.get(source.name), models.get(backing.name)
        with whole_first.lock:
            first_table = whole_first.table.copy()
        with whole_second.lock:
            second_table = whole_second.table.copy()
        table, second_to_merged = merge_counts_mapped(
            first_table, second_table, base_weight=personal_weight
        )
        first_map = np.full(table.n_tokens, -1, dtype=np.int64)
        first_map[: first_table.n_tokens] = np.arange(first_table.n_tokens, dtype=np.int64)
        second_map = np.full(table.n_tokens, -1, dtype=np.int64)
        placed = np.flatnonzero(second_to_merged >= 0)
        second_map[second_to_merged[placed]] = placed
        parts = (
            Part(whole_first.id, whole_first.name, first_table.class_docs),
            Part(whole_second.id, whole_second.name, second_table.class_docs),
        )
        id_maps = (first_map, second_map)
    attributes = None
    if config.gaussian_attributes:  # a few numbers per attribute: summed for each request
        attributes = _attributes_of(models, personal).merged(
            _attributes_of(models, backing), weight=personal_weight
        )
    live = LiveModel(
        id=source.id,
        name=source.name,
        classes=source.classes,
        options=dict(row_config),
        table=table,
        classifier=Classifier(table, config, totals=totals, attributes=attributes),
        created_at=source.created_at,
        engine_config=models.engine_config,
        epoch=source.epoch,
        backed_by=backing.id,
    )
    return ScoringView(live=live, parts=parts, id_maps=id_maps)


def _held_rows_and_totals(
    models: LiveModels,
    personal_name: str,
    backing_name: str,
    texts: list[str],
    config: NaiveBayesConfig,
    personal_weight: int,
) -> tuple[tuple[Part, Rows], tuple[Part, Rows], VocabularyTotals]:
    """Both models' rows of `texts` from their held copies, and the merged vocabulary's sums
    at the same generations: kept from an earlier message where neither model changed since,
    else summed from copies of both tables (taken at the generations their rows come from)."""
    held = (models.get(personal_name), models.get(backing_name))
    read = [_held_rows(live, texts) for live in held]
    key = (
        read[0][0],
        read[1][0],
        personal_weight,
        config.alpha,
        config.min_df,
        config.stop_words,
        config.excluded_prefixes,
    )
    totals = models.totals.kept_blend(key)
    if totals is not None:
        return read[0][1], read[1][1], totals
    # One sum at a time per process: clients sending at once at a new generation would
    # otherwise each merge both tables (40 at once kept the server busy for minutes).
    with models.totals.blend_lock:
        totals = models.totals.kept_blend(key)
        if totals is not None:
            return read[0][1], read[1][1], totals
        copies = []
        for index, live in enumerate(held):
            with live.lock:
                copies.append(live.table.copy())
                generation = _generation_of(live)
            read[index] = (generation, _part_rows(live, rows_of(copies[index], texts)))
        key = (read[0][0], read[1][0], *key[2:])
        totals = merged_vocabulary_totals(copies[0], copies[1], config, base_weight=personal_weight)
        models.totals.keep_blend(key, totals)
    return read[0][1], read[1][1], totals


def _attributes_of(models: LiveModels, model: LiveModel | ModelRow | PartialModel) -> AttributeSums:
    """A copy of `model`'s attribute sums: from its held (or partially read) copy, else read."""
    live = model.live if isinstance(model, PartialModel) else model
    if not isinstance(live, LiveModel):
        live = models.held(live.name) or live
    if isinstance(live, LiveModel):
        with live.lock:
            return live.attributes.copy()
    row = live
    return models.db.run(
        lambda conn: read_attribute_sums(conn, row.id, len(row.classes)), write=False
    )


def _generation_of(live: LiveModel) -> tuple[int, object, int, int]:
    """What tells one state of a held model's counts from every other (under its lock)."""
    return (live.id, live.created_at, live.epoch, live.synced_generation)


def _held_rows(live: LiveModel, texts: list[str]) -> tuple[Any, tuple[Part, Rows]]:
    with live.lock:
        return _generation_of(live), _part_rows(live, rows_of(live.table, texts))


def _part_rows(live: LiveModel, rows: Rows) -> tuple[Part, Rows]:
    return Part(live.id, live.name, rows.class_docs), rows


def _rows(
    models: LiveModels,
    model: LiveModel | ModelRow | PartialModel,
    texts: list[str],
    *,
    event_model: str | None,
    messages: int,
) -> tuple[Part, Rows]:
    """The rows of `texts` (those of `messages` messages) in `model`: from its held copy, else
    read from the database."""
    if isinstance(model, PartialModel):
        return _partial_rows(model, texts)
    live = model if isinstance(model, LiveModel) else models.held(model.name)
    if live is None:
        partial = models.read_partial(model.name, texts, event_model=event_model, messages=messages)
        if partial is not None:
            return _partial_rows(partial, texts)
    # Held: synced if due. Not held, with a scorer that reads the whole vocabulary: loaded.
    live = models.get(model.name)
    with live.lock:
        rows = rows_of(live.table, texts)
    return Part(live.id, live.name, rows.class_docs), rows


def _partial_rows(partial: PartialModel, texts: list[str]) -> tuple[Part, Rows]:
    """The rows of `texts` in a model read partially (for at least these texts)."""
    model = partial.live
    rows = rows_of(partial.live.table, texts)
    if partial.token_ids.size:  # the partial table's ids are 0..k-1: the model's own ids
        model_ids = np.where(rows.ids >= 0, partial.token_ids[np.maximum(rows.ids, 0)], -1)
    else:
        model_ids = np.full(len(texts), -1, dtype=np.int64)
    rows = Rows(model_ids, rows.docs, rows.terms, rows.class_docs, rows.class_terms)
    return Part(model.id, model.name, rows.class_docs), rows
