"""Hourly activity counters behind the dashboard (SPEC §6.2), moved by atomic increments."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum

from sqlalchemy import Connection, func, select

from app.store.dialect import PrebuiltUpsert
from app.store.models import as_utc
from app.store.tables import activity


class Event(StrEnum):
    """What the activity counters count, per model and hour. Two are counted per label:
    `verdict_event` (classified with that verdict) and `correction_event` (feedback that
    corrected a message to that label)."""

    CLASSIFIED = "classified"
    TRAINED = "trained"  # trained or relabelled: the training changed the counts
    FEEDBACK = "feedback"
    CORRECTIONS = "corrections"  # feedback that changed a label or a verdict
    FORGOTTEN = "forgotten"


def verdict_event(verdict: str) -> str:
    return f"verdict:{verdict}"


def correction_event(label: str) -> str:
    return f"correction:{label}"


def add_activity(
    conn: Connection, model_id: int, *, hour: datetime, events: Mapping[str, int]
) -> None:
    """Add `events` ({Event.TRAINED: 3, verdict_event("spam"): 1, …}) to the counters of
    `hour`."""
    rows = [
        {"model_id": model_id, "hour": hour, "event": str(event), "count": count}
        for event, count in sorted(events.items())
        if count
    ]
    if not rows:
        return
    conn.execute(_ADD_ACTIVITY(conn), rows)


_ADD_ACTIVITY = PrebuiltUpsert(
    activity,
    ("model_id", "hour", "event"),
    lambda statement: {"count": activity.c.count + statement.excluded.count},
)


def sum_activity(conn: Connection, model_id: int, *, since: datetime | None) -> dict[str, int]:
    """Return event → total over the hours from `since` (all time when None)."""
    query = select(activity.c.event, func.sum(activity.c.count)).where(
        activity.c.model_id == model_id
    )
    if since is not None:
        query = query.where(activity.c.hour >= since)
    return {event: int(total) for event, total in conn.execute(query.group_by(activity.c.event))}


def read_activity_hours(
    conn: Connection, model_id: int, *, since: datetime
) -> list[tuple[datetime, str, int]]:
    """Return (hour, event, count) rows from `since` on, oldest first."""
    query = (
        select(activity.c.hour, activity.c.event, activity.c.count)
        .where(activity.c.model_id == model_id, activity.c.hour >= since)
        .order_by(activity.c.hour, activity.c.event)
    )
    return [(as_utc(hour), event, int(count)) for hour, event, count in conn.execute(query)]


def last_event_hour(conn: Connection, model_id: int, event: Event) -> datetime | None:
    """Return the latest hour with a count of `event`, or None when it never happened."""
    query = select(func.max(activity.c.hour)).where(
        activity.c.model_id == model_id, activity.c.event == event, activity.c.count > 0
    )
    hour = conn.execute(query).scalar_one_or_none()
    return None if hour is None else as_utc(hour)
