"""Use case: the figures of every model that /metrics exports, read at scrape time.

Sizes come from the live models (loaded into this process when it has not used them yet,
and synced with the database first); activity totals come from the database's hourly
counters, the ones the dashboard sums, so they count the work of every process and host
sharing the database and agree with `/v1/models/{name}/stats`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.errors import ModelNotFound
from app.service.runtime import Runtime
from app.store.activity import sum_activity
from app.store.models import list_models


@dataclass(frozen=True)
class ModelFigures:
    name: str
    generation: int  # the generation this process's copy of the model reflects
    vocabulary: int  # distinct tokens counted in at least one trained message
    messages: dict[str, int]  # trained messages by class
    events: dict[str, int]  # all-time activity: trained, forgotten, classified, verdict:<x>, …


def read_model_figures(rt: Runtime) -> list[ModelFigures]:
    """Return the figures of every model, in name order."""
    rt.flush_classifications()  # so the classification counters include this process's last second
    rows = rt.db.run(list_models, write=False)
    sizes: dict[str, tuple[int, int, int, dict[str, int]]] = {}
    for row in rows:
        try:
            live = rt.models.get(row.name)
            rt.models.sync(live)
        except ModelNotFound:  # deleted since it was listed
            continue
        with live.lock:
            vocabulary = int(np.count_nonzero(live.table.token_docs.sum(axis=0)))
            messages = dict(zip(live.classes, live.table.class_docs.tolist(), strict=True))
            sizes[row.name] = (live.id, live.synced_generation, vocabulary, messages)
    events = rt.db.run(
        lambda conn: {
            name: sum_activity(conn, model_id, since=None) for name, (model_id, *_) in sizes.items()
        },
        write=False,
    )
    return [
        ModelFigures(
            name=name,
            generation=generation,
            vocabulary=vocabulary,
            messages=messages,
            events=events[name],
        )
        for name, (_, generation, vocabulary, messages) in sizes.items()
    ]
