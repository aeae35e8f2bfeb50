"""Use case: the figures of every model that /metrics exports, read at scrape time.

Nothing is loaded into memory for them: generation, vocabulary and trained messages come from
the database's running totals (kept by every write), activity totals from its hourly counters
(the ones the dashboard sums), in two queries whatever the number of models. So they count the
work of every process and host sharing the database and agree with
`/v1/models/{name}/stats`. What this process holds in memory comes from its live models.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass

from app.errors import DatabaseUnavailable, StorageFull
from app.live.models import HeldFigures as HeldFigures  # routes name these through the service
from app.service.runtime import Runtime
from app.store.activity import Event as Event  # the counters' names, for the routes
from app.store.activity import verdict_event as verdict_event
from app.store.engine import DatabaseCondition as DatabaseCondition
from app.store.models import read_model_totals


@dataclass(frozen=True)
class ModelFigures:
    name: str
    generation: int  # bumped by every write to the model
    vocabulary: int  # distinct tokens counted in at least one trained message
    messages: dict[str, int]  # trained messages by class
    events: dict[str, int]  # all-time activity: trained, forgotten, classified, verdict:<x>, …


def read_model_figures(rt: Runtime) -> list[ModelFigures]:
    """Return the figures of every model, in name order."""
    # So the classification counters include this process's last second; while the disk is
    # full they stay buffered, and the figures are read all the same.
    with suppress(StorageFull, DatabaseUnavailable):
        rt.flush_classifications()
    totals = rt.db.run(read_model_totals, write=False)
    return [
        ModelFigures(
            name=model.name,
            generation=model.generation,
            vocabulary=model.vocabulary,
            messages=dict(zip(model.classes, model.class_docs, strict=True)),
            events=model.events,
        )
        for model in totals
    ]


def read_held_figures(rt: Runtime) -> HeldFigures:
    """What this process holds in memory: models, their estimated bytes, evictions."""
    return rt.models.figures()
