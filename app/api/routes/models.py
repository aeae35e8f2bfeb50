"""Model management and the admin dashboard."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from app.api.auth import AUTH_ERRORS, requires
from app.api.deps import ModelName, RuntimeDep
from app.api.error_responses import error_responses
from app.api.schemas import CreateModelRequest, ModelList, ModelResponse, UpdateModelRequest
from app.errors import NotConfirmed
from app.service.dashboard import model_stats
from app.service.models import create_model, delete_model, get_model, list_models, update_model

router = APIRouter(
    prefix="/v1/models", tags=["models"], dependencies=[requires("admin")], responses=AUTH_ERRORS
)


@router.post("", status_code=201, responses=error_responses(409, 422, 503))
def create(body: CreateModelRequest, rt: RuntimeDep) -> ModelResponse:
    """Create a named filter (one per domain, per user …) with its classes and options."""
    info = create_model(rt, name=body.name, classes=body.classes, config=body.options())
    return ModelResponse.of(info)


@router.get("", responses=error_responses(503))
def list_all(rt: RuntimeDep) -> ModelList:
    """List every model with its options and message counts."""
    return ModelList(models=[ModelResponse.of(info) for info in list_models(rt)])


@router.get("/{name}", responses=error_responses(404, 422, 503))
def read(name: ModelName, rt: RuntimeDep) -> ModelResponse:
    """Read one model's options and message counts."""
    return ModelResponse.of(get_model(rt, name=name))


@router.patch("/{name}", responses=error_responses(404, 422, 503))
def change(name: ModelName, body: UpdateModelRequest, rt: RuntimeDep) -> ModelResponse:
    """Change options (thresholds, event model, alpha …); `null` resets one to its default.
    Counts are kept: no retraining is needed."""
    return ModelResponse.of(update_model(rt, name=name, changes=body.options()))


@router.delete("/{name}", status_code=204, responses=error_responses(404, 422, 503))
def remove(
    name: ModelName,
    rt: RuntimeDep,
    confirm: Annotated[
        str | None,
        Query(description="the model's name again: deleting cannot be undone"),
    ] = None,
) -> Response:
    """Delete a model and everything learned in it. Needs `?confirm=<name>`, since it cannot
    be undone (take a `spamsift backup` or `spamsift export` first)."""
    if confirm != name:
        raise NotConfirmed(
            f"deleting model {name!r} drops everything it learned; "
            f"repeat its name as ?confirm={name} to delete it"
        )
    delete_model(rt, name=name)
    return Response(status_code=204)


@router.get("/{name}/stats", responses=error_responses(404, 422, 503))
def stats(name: ModelName, rt: RuntimeDep) -> dict[str, Any]:
    """Dashboard JSON: per-class counts, vocabulary, strongest tokens, activity, database size."""
    return model_stats(rt, model_name=name)
