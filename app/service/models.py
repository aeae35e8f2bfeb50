"""Use cases on models themselves: create, list, read, change config, delete."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from pydantic import ConfigDict, Field

from app.errors import (
    InvalidBacking,
    InvalidConfig,
    InvalidInput,
    ModelBacksOthers,
    ModelNotFound,
)
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
# The pattern in words, for messages (a regular expression is no answer to give a person).
MODEL_NAME_RULE = (
    "1-64 characters: lowercase letters, digits, '.', '_' and '-', starting with a letter or "
    "digit (e.g. default, example.org, alice)"
)


def check_model_name(name: str) -> None:
    """InvalidInput unless `name` can name a model."""
    if not re.fullmatch(MODEL_NAME_PATTERN, name):
        raise InvalidInput(f"a model name is {MODEL_NAME_RULE}; got {name!r}")


@dataclass(frozen=True)
class ModelInfo:
    # The answer always has every field: OpenAPI says so (required), defaults or not.
    __pydantic_config__ = ConfigDict(json_schema_serialization_defaults_required=True)

    name: str
    classes: tuple[str, ...]
    config: ModelConfig
    generation: int
    created_at: datetime
    messages: dict[str, int]
    trained_messages: int
    backed_by: Annotated[
        str | None, Field(description="the model whose counts classify sums with this one's")
    ] = None
    feedback_trains_backing: bool = False
    backs: Annotated[
        tuple[str, ...],
        Field(description="the models this one backs (in a model list: not given, empty)"),
    ] = ()
    defaults: Annotated[
        dict[str, Any] | None,
        Field(
            description="the value each option takes when not set (the server's own for "
            "min_learns and min_train_tokens); given when one model is read"
        ),
    ] = None


# The fields of the backing relation a create or a change may give.
RELATION_FIELDS = frozenset({"backed_by", "feedback_trains_backing"})

# Which models the caller's API key may read, by name (every one without a key limited to
# models). A model the key may not read is, to it, a model that does not exist: naming it as
# `backed_by` is refused as a missing model would be, and no answer names it.
MayRead = Callable[[str], bool]


def every_model(_: str) -> bool:
    return True


def create_model(
    rt: Runtime,
    *,
    name: str,
    classes: list[str] | None,
    config: dict[str, Any],
    relation: dict[str, Any] | None = None,
    may_read: MayRead = every_model,
) -> ModelInfo:
    """Create a model; ModelExists if the name is taken, InvalidConfig for bad options,
    InvalidBacking for a backing relation that cannot be (see `set_relation`)."""
    checked_classes = check_classes(classes) if classes is not None else DEFAULT_CLASSES
    _check_fields(config)
    parse_config(config, classes=checked_classes)  # refuse bad values before storing them

    def work(conn: Any) -> None:
        row = store.insert_model(conn, name=name, classes=checked_classes, config=config)
        if relation:
            set_relation(conn, row, relation, may_read=may_read)

    rt.db.run(work)
    return get_model(rt, name=name, may_read=may_read)


def set_relation(
    conn: Any, row: store.ModelRow, relation: dict[str, Any], *, may_read: MayRead = every_model
) -> None:
    """Set or clear the model backing `row` (`backed_by`: a name, or None to clear) and
    whether its feedback also trains that model.

    `backed_by` must be a model the caller may read (`may_read`): backing a model on another
    tenant's would let it read that tenant's counts through the blend. One it may not read is
    refused exactly as a model that does not exist, before anything about it is looked up.

    One level only: a backing model is backed by none, and a model that backs others is
    backed by none, so there is never a chain nor a cycle. Both models have the same classes
    in the same order (their counts are summed class by class)."""
    backed_by = relation.get("backed_by", _UNCHANGED)
    trains = relation.get("feedback_trains_backing")
    if backed_by is not _UNCHANGED and backed_by is not None and not isinstance(backed_by, str):
        raise InvalidBacking(f"backed_by is a model name, got {backed_by!r}")
    if trains is not None and not isinstance(trains, bool):
        raise InvalidBacking(f"feedback_trains_backing is true or false, got {trains!r}")
    if isinstance(backed_by, str) and backed_by != row.name and not may_read(backed_by):
        raise _no_backing_model(backed_by)
    if isinstance(backed_by, str):
        locked = _lock_pair(conn, row.name, backed_by)
    else:
        locked = store.lock_models(conn, [row.name])
    current = locked[row.name]
    if backed_by is _UNCHANGED:
        backing_id = current.backed_by
    elif backed_by is None:
        backing_id = None
    else:
        backing = locked[backed_by]
        if backing.id == current.id:
            raise InvalidBacking(f"model {row.name!r} cannot be backed by itself")
        if backing.backed_by is not None:
            raise InvalidBacking(
                f"model {backed_by!r} is itself backed by another model; a backing model "
                "must stand alone (one level)"
            )
        backs = store.names_backed_by(conn, current.id)
        if backs:
            raise InvalidBacking(
                f"model {row.name!r} backs {_names(backs, may_read)}; a model that backs "
                "others cannot be backed itself (one level)"
            )
        if backing.classes != current.classes:
            raise InvalidBacking(
                f"model {backed_by!r} has the classes {list(backing.classes)}, model "
                f"{row.name!r} {list(current.classes)}; a backing model needs the same classes"
            )
        backing_id = backing.id
    if trains is None:
        trains = current.feedback_trains_backing if backing_id is not None else False
    if trains and backing_id is None:
        raise InvalidBacking("feedback_trains_backing needs backed_by: no model backs this one")
    store.set_backing(conn, current.id, backed_by=backing_id, feedback_trains_backing=trains)


_UNCHANGED: Any = object()


def _lock_pair(conn: Any, name: str, backed_by: str) -> dict[str, store.ModelRow]:
    try:
        return store.lock_models(conn, [name, backed_by])
    except ModelNotFound as error:
        if backed_by == name:
            raise
        raise _no_backing_model(backed_by) from error


def _no_backing_model(name: str) -> InvalidBacking:
    return InvalidBacking(f"backed_by: no model named {name!r}")


def _names(names: list[str], may_read: MayRead) -> str:
    """`names` as an answer may show them: those the caller may not read only counted."""
    shown = [name for name in names if may_read(name)]
    hidden = len(names) - len(shown)
    if hidden:
        shown.append(f"{hidden} model{'s' if hidden > 1 else ''} this API key may not read")
    return ", ".join(shown)


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

    def read(conn: Any) -> tuple[list[store.ModelTotals], dict[int, str]]:
        page = store.page_models(conn, after=after, limit=limit + 1)
        backing = [totals.row.backed_by for totals in page if totals.row.backed_by is not None]
        return page, store.model_names(conn, backing)

    found, names = rt.db.run(read, write=False)
    models = [
        ModelInfo(
            name=totals.name,
            classes=totals.classes,
            config=parse_config(totals.row.config, classes=totals.classes),
            generation=totals.generation,
            created_at=totals.row.created_at,
            messages=dict(zip(totals.classes, totals.class_docs, strict=True)),
            trained_messages=totals.trained_messages,
            backed_by=None if totals.row.backed_by is None else names.get(totals.row.backed_by),
            feedback_trains_backing=totals.row.feedback_trains_backing,
        )
        for totals in found[:limit]
    ]
    return ModelPage(models=models, next=models[-1].name if len(found) > limit else None)


def get_model(rt: Runtime, *, name: str, may_read: MayRead = every_model) -> ModelInfo:
    """Read one model; `backs` names only the models the caller may read."""

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
            backed_by=None
            if row.backed_by is None
            else store.model_names(conn, [row.backed_by]).get(row.backed_by),
            feedback_trains_backing=row.feedback_trains_backing,
            backs=tuple(name for name in store.names_backed_by(conn, row.id) if may_read(name)),
        )

    return rt.db.run(read, write=False)


def update_model(
    rt: Runtime,
    *,
    name: str,
    changes: dict[str, Any],
    relation: dict[str, Any] | None = None,
    may_read: MayRead = every_model,
) -> ModelInfo:
    """Change some config options; `None` resets an option to its default. `relation` sets
    (`backed_by`: a name the caller `may_read`) or clears (`backed_by`: None) the backing
    model, or `feedback_trains_backing`."""
    _check_fields(changes)

    def work(conn: Any) -> None:
        row = store.find_model(conn, name)
        if changes:
            merged = {
                key: value for key, value in {**row.config, **changes}.items() if value is not None
            }
            parse_config(merged, classes=row.classes)
            store.update_model_config(conn, row.id, merged)
        if relation:
            set_relation(conn, row, relation, may_read=may_read)

    rt.db.run(work)
    rt.models.forget(name)
    return get_model(rt, name=name, may_read=may_read)


def delete_model(rt: Runtime, *, name: str, may_read: MayRead = every_model) -> list[str]:
    """Delete a model and all it learned; end the API keys limited to it alone. Return the
    ids of the keys ended."""

    def work(conn: Any) -> list[str]:
        model_id = store.lock_models(conn, [name])[name].id
        backed = store.names_backed_by(conn, model_id)
        if backed:
            raise ModelBacksOthers(name, _names(backed, may_read))
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
