"""The scorers (event models), by name: the one list every other list of them derives from.

A new event model is a module of this package with a `SCORER` (see `base.Scorer`) and its line
below. Order matters once: a model whose default scorer does not fit its classes falls back to
the first that does (`fallback`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from app.bayes.scorers import bernoulli, multinomial, robinson_fisher
from app.bayes.scorers.base import Reads, Scorer, VocabularyTotals

__all__ = ["EVENT_MODELS", "SCORERS", "EventModel", "Reads", "Scorer", "VocabularyTotals"]

SCORERS: dict[str, Scorer] = {
    scorer.name: scorer
    for scorer in (
        multinomial.SCORER,
        bernoulli.SCORER,
        robinson_fisher.SCORER,
    )
}
EVENT_MODELS: tuple[str, ...] = tuple(SCORERS)

if TYPE_CHECKING:
    EventModel = str
else:
    # For pydantic (the API's enum, hence OpenAPI and the dashboard's choices): the names above.
    EventModel = Literal[EVENT_MODELS]


def scorer(name: str) -> Scorer:
    """The scorer named `name`; ValueError naming the choices if there is none."""
    try:
        return SCORERS[name]
    except KeyError:
        raise ValueError(f"event_model must be one of {list(EVENT_MODELS)}, got {name!r}") from None


def fallback(classes: Sequence[str]) -> str:
    """The first scorer that can score a model of `classes`."""
    return next(
        name for name, candidate in SCORERS.items() if candidate.unfit_reason(classes) is None
    )
