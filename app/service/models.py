"""Use cases on models themselves: create, list, read, change config, delete."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.errors import InvalidConfig, InvalidInput
from app.service.model_config import (
    CONFIG_FIELDS,
    DEFAULT_CLASSES,
    ModelConfig,
    check_classes,
    parse_config,
)
from app.service.runtime import Runtime
from app.store import keys as store_keys
from app.store import ledger
from app.store import models as store
from app.store.counts import read_class_totals

log = logging.getLogger(__name__)

MODEL_NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"


@dataclass(frozen=True)
class ModelInfo:
    name: str
    classes: tuple[str, ...]
    config: ModelConfig
    generation: int
    created_at: datetime
    messages: dict[str, int]
    trained_messages: int


def create_model(
    rt: Runtime, *, name: str, classes: list[str] | None, config: dict[str, Any]
) -> ModelInfo:
    """Create a model; ModelExists if the name is taken, InvalidConfig for bad options."""
    checked_classes = check_classes(classes) if classes is not None else DEFAULT_CLASSES
    _check_fields(config)
    parse_config(config, classes=checked_classes)  # refuse bad values before storing them
    rt.db.run(
        lambda conn: store.insert_model(conn, name=name, classes=checked_classes, config=config)
    )
    return get_model(rt, name=name)


@dataclass(frozen=True)
class ModelPage:
    models: list[ModelInfo]
    next: str | None  # the name to list after for the next page; None on the last page


MAX_PAGE = 1000


def list_models(rt: Runtime, *, after: str | None = None, limit: int = 100) -> ModelPage:
    """List up to `limit` models whose names sort after `after`, in one query; no model is
    loaded into memory."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
    found = rt.db.run(
        lambda conn: store.page_models(conn, after=after, limit=limit + 1), write=False
    )
    models = [
        ModelInfo(
            name=totals.name,
            classes=totals.classes,
            config=parse_config(totals.row.config, classes=totals.classes),
            generation=totals.generation,
            created_at=totals.row.created_at,
            messages=dict(zip(totals.classes, totals.class_docs, strict=True)),
            trained_messages=totals.trained_messages,
        )
        for totals in found[:limit]
    ]
    return ModelPage(models=models, next=models[-1].name if len(found) > limit else None)


def get_model(rt: Runtime, *, name: str) -> ModelInfo:
    def read(conn: Any) -> ModelInfo:
        row = store.find_model(conn, name)
        class_docs, _ = read_class_totals(conn, row.id, len(row.classes))
        return ModelInfo(
            name=row.name,
            classes=row.classes,
            config=parse_config(row.config, classes=row.classes),
            generation=row.generation,
            created_at=row.created_at,
            messages=dict(zip(row.classes, class_docs.tolist(), strict=True)),
            trained_messages=ledger.count_trained(conn, row.id),
        )

    return rt.db.run(read, write=False)


def update_model(rt: Runtime, *, name: str, changes: dict[str, Any]) -> ModelInfo:
    """Change some config options; `None` resets an option to its default."""
    _check_fields(changes)

    def work(conn: Any) -> None:
        row = store.find_model(conn, name)
        merged = {
            key: value for key, value in {**row.config, **changes}.items() if value is not None
        }
        parse_config(merged, classes=row.classes)
        store.update_model_config(conn, row.id, merged)

    rt.db.run(work)
    rt.models.forget(name)
    return get_model(rt, name=name)


def delete_model(rt: Runtime, *, name: str) -> list[str]:
    """Delete a model and all it learned; end the API keys limited to it alone. Return the
    ids of the keys ended."""

    def work(conn: Any) -> list[str]:
        model_id = store.find_model(conn, name).id
        ended = store_keys.end_model_keys(conn, model_id)
        store.delete_model(conn, model_id)
        return ended

    ended = rt.db.run(work)
    rt.models.forget(name)
    if ended:
        log.warning(
            "deleting the model %r ended the API keys limited to it: %s", name, ", ".join(ended)
        )
    return ended


def _check_fields(config: dict[str, Any]) -> None:
    unknown = sorted(set(config) - CONFIG_FIELDS)
    if unknown:
        raise InvalidConfig(
            unknown[0], f"unknown option; known: {', '.join(sorted(CONFIG_FIELDS))}"
        )
