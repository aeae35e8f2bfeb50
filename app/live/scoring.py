"""The scoring view of a model for some messages: held, read cold, or blended with its backing
model (see `app.live.view`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection

from app.errors import ModelNotFound
from app.live.blend import read_blend
from app.live.held import LiveModel
from app.live.models import LiveModels
from app.live.view import ScoringView
from app.store.models import ModelRow, find_model_by_id

# A model's personal_weight from its stored options and classes (the service judges options).
PersonalWeight = Callable[[dict[str, Any], tuple[str, ...]], int]


def scoring_view(
    models: LiveModels,
    name: str,
    texts: Callable[[], Sequence[str]],
    *,
    event_model: str | None,
    personal_weight: PersonalWeight,
    messages: int = 1,
) -> ScoringView:
    """The view of model `name` for `messages` messages made of `texts()` (called only where
    rows are read by text). A model this process does not hold is scored from its messages'
    rows alone where its scorer allows, else loaded (within the memory budget); its row is
    read in the same transaction as those rows (ModelNotFound there): one read, not two. A
    model backed by another of the same classes is scored on both models' counts summed."""
    live = models.held(name)
    if live is not None:
        live = models.get(name)  # synced if due
    partial = None
    if live is None:
        partial = models.read_partial(name, texts(), event_model=event_model, messages=messages)
        live = models.get(name) if partial is None else partial.live
    if live.backed_by is not None:
        backing_id = live.backed_by
        backing: LiveModel | ModelRow | None = models.held_by_id(backing_id)
        if backing is None:
            backing = models.db.run(lambda conn: find_backing(conn, backing_id), write=False)
        if backing is not None and backing.classes == live.classes:
            return read_blend(
                models,
                partial if partial is not None else live,
                backing,
                texts,
                event_model=event_model,
                personal_weight=personal_weight(live.options, live.classes),
                messages=messages,
            )
    if partial is not None:
        return ScoringView.of(partial.live, partial.token_ids)
    return ScoringView.of(live)


class NeedsDatabase(Exception):
    """Scoring the model now would read the database (see `held_view`)."""


def held_view(models: LiveModels, name: str) -> ScoringView:
    """The view `scoring_view` gives a model it holds and need not sync now, if the model is
    backed by no other; NeedsDatabase where the view would read the database (a load, a
    sync, a partial read or a backing model's rows). Reads nothing itself."""
    live = models.in_memory(name)
    if live is None or live.backed_by is not None:
        raise NeedsDatabase(name)
    return ScoringView.of(live)


def find_backing(conn: Connection, model_id: int) -> ModelRow | None:
    """The backing model's row; None if it is gone (a relation this process read earlier)."""
    try:
        return find_model_by_id(conn, model_id)
    except ModelNotFound:
        return None
