"""Model management and the admin dashboard."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from app.api.auth import AUTH_ERRORS, requires
from app.api.deps import ModelName, RuntimeDep
from app.api.error_responses import error_responses
from app.api.schemas import CreateModelRequest, ModelList, ModelResponse, UpdateModelRequest
from app.service.dashboard import model_stats
from app.service.models import (
    MAX_PAGE,
    create_model,
    delete_model,
    get_model,
    list_models,
    update_model,
)

router = APIRouter(
    prefix="/v1/models", tags=["models"], dependencies=[requires("admin")], responses=AUTH_ERRORS
)


@router.post("", status_code=201, responses=error_responses(409, 422, 503))
def create(body: CreateModelRequest, rt: RuntimeDep) -> ModelResponse:
    """Create a named filter (one per domain, per user …) with its classes and options."""
    info = create_model(rt, name=body.name, classes=body.classes, config=body.options())
    return ModelResponse.of(info)


@router.get("", responses=error_responses(422, 503))
def list_all(
    rt: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    after: Annotated[str | None, Query(max_length=64)] = None,
) -> ModelList:
    """List models by name with their options and message counts, `limit` at a time; pass the
    answer's `next` as `after` for the next page."""
    page = list_models(rt, after=after, limit=limit)
    return ModelList(models=[ModelResponse.of(info) for info in page.models], next=page.next)


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
def remove(name: ModelName, rt: RuntimeDep) -> Response:
    """Delete a model and everything learned in it."""
    delete_model(rt, name=name)
    return Response(status_code=204)


@router.get("/{name}/stats", responses=error_responses(404, 422, 503))
def stats(name: ModelName, rt: RuntimeDep) -> dict[str, Any]:
    """Dashboard JSON: per-class counts, vocabulary, strongest tokens, activity, database size."""
    return model_stats(rt, model_name=name)
