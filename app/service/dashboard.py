"""Use case: the admin dashboard JSON of SPEC §6.2."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import Connection

from app.bayes.naive_bayes import top_tokens
from app.bayes.vocabulary import select_vocabulary
from app.service.classification import training_warnings
from app.service.runtime import Runtime
from app.store.activity import sum_activity

PERIODS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "all": None}
TOP_TOKENS = 20


def model_stats(rt: Runtime, *, model_name: str) -> dict[str, Any]:
    """Return counts, vocabulary, strongest tokens and activity for one model."""
    rt.flush_classifications()
    live = rt.models.get(model_name)
    rt.models.sync(live)
    with live.lock:
        table = live.table
        config = live.classifier.config
        present = int(np.count_nonzero(table.token_docs.sum(axis=0)))
        effective = int(
            np.count_nonzero(
                select_vocabulary(
                    table,
                    min_df=config.min_df,
                    max_vocab=config.max_vocab,
                    stop_words=config.stop_words,
                )
            )
        )
        classes = {
            label: {"messages": int(docs), "terms": int(terms)}
            for label, docs, terms in zip(
                live.classes, table.class_docs.tolist(), table.class_terms.tolist(), strict=True
            )
        }
        trained = all(n > 0 for n in table.class_docs.tolist())
        strongest = top_tokens(table, config, limit=TOP_TOKENS) if trained else {}
        generation = live.synced_generation
        min_learns = (
            live.config.min_learns if live.config.min_learns is not None else rt.settings.min_learns
        )
        warnings = training_warnings(live.classes, table.class_docs.tolist(), min_learns)

    now = datetime.now(UTC)

    def read(conn: Connection) -> dict[str, Any]:
        return {
            period: _activity(
                sum_activity(conn, live.id, since=None if span is None else now - span),
                live.classes,
            )
            for period, span in PERIODS.items()
        }

    activity = rt.db.run(read, write=False)
    return {
        "model": live.name,
        "generation": generation,
        "event_model": config.event_model,
        "classes": classes,
        "min_learns": min_learns,
        "warnings": list(warnings),
        "vocabulary": {"tokens": present, "effective": effective},
        "top_tokens": {
            label: [{"token": token, "weight": round(float(weight), 4)} for token, weight in ranked]
            for label, ranked in strongest.items()
        },
        "activity": activity,
        "database_bytes": rt.db.size_bytes(),
    }


def _activity(events: dict[str, int], classes: tuple[str, ...]) -> dict[str, Any]:
    # Any model answers "unsure" below its min_learns; a ham/spam model between its thresholds.
    verdict_labels = classes if "unsure" in classes else (*classes, "unsure")
    return {
        "trained": events.get("trained", 0),
        "forgotten": events.get("forgotten", 0),
        "classified": events.get("classified", 0),
        "corrections": events.get("corrections", 0),
        "feedback": events.get("feedback", 0),
        "verdicts": {label: events.get(f"verdict:{label}", 0) for label in verdict_labels},
    }
