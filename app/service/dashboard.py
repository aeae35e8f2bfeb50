"""Use cases of the admin dashboard: the stats JSON of SPEC §6.2 and activity as a time series."""

from __future__ import annotations

from contextlib import suppress
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from app.errors import DatabaseUnavailable, StorageFull
from app.live.held import LiveModel
from app.live.scoring import find_backing
from app.service.classification import min_learns_of, training_warnings
from app.service.runtime import Runtime
from app.service.stats_cache import DatabaseFigures
from app.store import Connection
from app.store.activity import (
    Event,
    correction_event,
    last_event_hour,
    read_activity_hours,
    sum_activity,
    verdict_event,
)
from app.store.counts import read_class_totals
from app.store.models import names_backed_by

PERIODS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "all": None}
TOP_TOKENS = 20
# The ranges of the activity series: how many buckets of which width, the last one now's.
ActivityRange = Literal["24h", "7d", "30d"]
RANGES: dict[str, tuple[Literal["hour", "day"], int]] = {
    "24h": ("hour", 24),
    "7d": ("day", 7),
    "30d": ("day", 30),
}


def model_stats(rt: Runtime, *, model_name: str) -> dict[str, Any]:
    """Return counts, vocabulary, strongest tokens and activity for one model.

    While the database cannot be written (full) or read (down), the answer still comes, from
    the model held in memory and the database figures last read (`database.read_at`), with
    `database.status` saying so: "storage_full" or "unavailable" ("ok" otherwise). Only a
    model this process has not read yet is then 503.
    """
    with suppress(StorageFull, DatabaseUnavailable):  # the records stay buffered meanwhile
        rt.flush_classifications()
    from_memory = False
    try:
        live = rt.models.get(model_name)
        rt.models.sync(live)
    except DatabaseUnavailable:
        held = rt.models.held(model_name)
        if held is None:
            raise
        live, from_memory = held, True
    tokens = rt.stats.token_figures(live, limit=TOP_TOKENS)
    with live.lock:
        config = live.classifier.config
        class_docs = live.table.class_docs.tolist()
        class_terms = live.table.class_terms.tolist()
        generation = live.synced_generation
    classes = {
        label: {"messages": int(docs), "terms": int(terms)}
        for label, docs, terms in zip(live.classes, class_docs, class_terms, strict=True)
    }
    min_learns = min_learns_of(rt, live)
    try:
        database = _read_database_figures(rt, live)
    except DatabaseUnavailable:
        kept = rt.stats.database_figures(live.name)
        if kept is None or kept.model_id != live.id:
            raise
        database, from_memory = kept, True
    blend = database.figures["blend"]
    # The floor applies to the counts classify uses: the blend's, for a backed model.
    class_messages = class_docs if blend is None else list(blend["messages"].values())
    return {
        "model": live.name,
        "generation": generation,
        "event_model": config.event_model,
        "classes": classes,
        "min_learns": min_learns,
        "warnings": list(training_warnings(live.classes, class_messages, min_learns)),
        "vocabulary": {"tokens": tokens.tokens, "effective": tokens.effective},
        "top_tokens": {
            label: [{"token": token, "weight": round(float(weight), 4)} for token, weight in ranked]
            for label, ranked in tokens.top.items()
        },
        **database.figures,
        "database": {
            "status": "unavailable" if from_memory else rt.db.condition,
            "read_at": database.read_at.isoformat(),
        },
    }


def _read_database_figures(rt: Runtime, live: LiveModel) -> DatabaseFigures:
    """Read the model's activity, relations and the database's size, and keep them."""
    now = datetime.now(UTC)

    def read(conn: Connection) -> dict[str, Any]:
        activity = {
            period: _activity(
                sum_activity(conn, live.id, since=None if span is None else now - span),
                live.classes,
            )
            for period, span in PERIODS.items()
        }
        last_trained = last_event_hour(conn, live.id, Event.TRAINED)
        return {
            "activity": activity,
            "last_trained_hour": None if last_trained is None else last_trained.isoformat(),
            **_relation(conn, live),
        }

    figures = rt.db.run(read, write=False)
    figures["database_bytes"] = rt.db.size_bytes()
    kept = DatabaseFigures(model_id=live.id, read_at=now, figures=figures)
    rt.stats.keep_database_figures(live.name, kept)
    return kept


def _relation(conn: Connection, live: LiveModel) -> dict[str, Any]:
    """The model's backing relation both ways, and the messages per class of its blend."""
    backing = None if live.backed_by is None else find_backing(conn, live.backed_by)
    blend = None
    if backing is not None:
        own, _ = read_class_totals(conn, live.id, len(live.classes))
        theirs, _ = read_class_totals(conn, backing.id, len(backing.classes))
        blend = {
            "models": [live.name, backing.name],
            "messages": dict(zip(live.classes, (own + theirs).tolist(), strict=True)),
        }
    return {
        "backed_by": None if backing is None else backing.name,
        "feedback_trains_backing": live.feedback_trains_backing and backing is not None,
        "backs": names_backed_by(conn, live.id),
        "blend": blend,
    }


def model_activity(rt: Runtime, *, model_name: str, span: ActivityRange) -> dict[str, Any]:
    """Return the model's activity over `span` in buckets (hours for 24h, UTC days else), with
    totals and the correction rates: corrections per classified message, and on a ham/spam
    model false positives (corrected to ham) and false negatives (corrected to spam)."""
    rt.flush_classifications()
    live = rt.models.get(model_name)
    unit, count = RANGES[span]
    now = datetime.now(UTC)
    if unit == "hour":
        width = timedelta(hours=1)
        last = now.replace(minute=0, second=0, microsecond=0)
    else:
        width = timedelta(days=1)
        last = now.replace(hour=0, minute=0, second=0, microsecond=0)
    first = last - (count - 1) * width
    rows = rt.db.run(lambda conn: read_activity_hours(conn, live.id, since=first), write=False)
    bucket_events: list[dict[str, int]] = [{} for _ in range(count)]
    for hour, event, n in rows:
        index = min(int((hour - first) / width), count - 1)
        if index >= 0:
            bucket_events[index][event] = bucket_events[index].get(event, 0) + n
    totals: dict[str, int] = {}
    for events in bucket_events:
        for event, n in events.items():
            totals[event] = totals.get(event, 0) + n
    summed = _activity(totals, live.classes)
    classified = summed[Event.CLASSIFIED]

    def rate(n: int) -> float | None:
        return None if classified == 0 else n / classified

    rates: dict[str, float | None] = {"corrections": rate(summed[Event.CORRECTIONS])}
    if _is_ham_spam(live.classes):
        rates["false_positives"] = rate(summed["false_positives"])
        rates["false_negatives"] = rate(summed["false_negatives"])
    return {
        "model": live.name,
        "range": span,
        "bucket": unit,
        "classes": list(live.classes),
        "buckets": [
            {"start": (first + i * width).isoformat(), **_activity(events, live.classes)}
            for i, events in enumerate(bucket_events)
        ],
        "totals": summed,
        "rates": rates,
    }


def _is_ham_spam(classes: tuple[str, ...]) -> bool:
    return set(classes) == {"ham", "spam"}


def _activity(events: dict[str, int], classes: tuple[str, ...]) -> dict[str, Any]:
    # Any model answers "unsure" below its min_learns; a ham/spam model between its thresholds.
    verdict_labels = classes if "unsure" in classes else (*classes, "unsure")
    summed: dict[str, Any] = {
        **{
            event.value: events.get(event, 0)
            for event in (
                Event.TRAINED,
                Event.FORGOTTEN,
                Event.CLASSIFIED,
                Event.CORRECTIONS,
                Event.FEEDBACK,
            )
        },
        "verdicts": {label: events.get(verdict_event(label), 0) for label in verdict_labels},
        # Corrections by the label users gave (counted so since the dashboard page; older
        # corrections are in `corrections` only).
        "corrected_to": {label: events.get(correction_event(label), 0) for label in classes},
    }
    if _is_ham_spam(classes):
        summed["false_positives"] = summed["corrected_to"]["ham"]
        summed["false_negatives"] = summed["corrected_to"]["spam"]
    return summed
