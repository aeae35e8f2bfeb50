"""Hourly activity counters behind the dashboard (SPEC §6.2), moved by atomic increments."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import Connection, func, select

from app.store.dialect import upsert
from app.store.tables import activity


def add_activity(
    conn: Connection, model_id: int, *, hour: datetime, events: Mapping[str, int]
) -> None:
    """Add `events` ({"trained": 3, "verdict:spam": 1, …}) to the counters of `hour`."""
    rows = [
        {"model_id": model_id, "hour": hour, "event": event, "count": count}
        for event, count in sorted(events.items())
        if count
    ]
    if not rows:
        return
    statement = upsert(conn, activity)
    statement = statement.on_conflict_do_update(
        index_elements=[activity.c.model_id, activity.c.hour, activity.c.event],
        set_={"count": activity.c.count + statement.excluded.count},
    )
    conn.execute(statement, rows)


def sum_activity(conn: Connection, model_id: int, *, since: datetime | None) -> dict[str, int]:
    """Return event → total over the hours from `since` (all time when None)."""
    query = select(activity.c.event, func.sum(activity.c.count)).where(
        activity.c.model_id == model_id
    )
    if since is not None:
        query = query.where(activity.c.hour >= since)
    return {event: int(total) for event, total in conn.execute(query.group_by(activity.c.event))}
