"""Model management and the admin dashboard."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from app.api.auth import AUTH_ERRORS, may_read, request_key, requires
from app.api.deps import (
    CreateModelInput,
    ModelName,
    RuntimeDep,
    UpdateModelInput,
    json_body_openapi,
)
from app.api.error_responses import error_responses
from app.api.schemas import ModelList
from app.errors import NotConfirmed
from app.service.dashboard import model_stats
from app.service.model_config import option_defaults
from app.service.models import (
    MAX_PAGE,
    ModelInfo,
    create_model,
    delete_model,
    get_model,
    list_models,
    update_model,
)

router = APIRouter(
    prefix="/v1/models", tags=["models"], dependencies=[requires("admin")], responses=AUTH_ERRORS
)


@router.post(
    "",
    status_code=201,
    responses=error_responses(409, 415, 422, 503),
    openapi_extra=json_body_openapi("CreateModelRequest"),
)
def create(body: CreateModelInput, rt: RuntimeDep, request: Request) -> ModelInfo:
    """Create a named filter (one per domain, per user …) with its classes and options.
    `backed_by` names a model this API key may use, else it is refused as a missing one."""
    info = create_model(
        rt,
        name=body.name,
        classes=body.classes,
        config=body.options(),
        relation=body.relation(),
        may_read=may_read(request),
    )
    return info


@router.get("", responses=error_responses(422, 503))
def list_all(
    rt: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    after: Annotated[str | None, Query(max_length=64)] = None,
) -> ModelList:
    """List models by name with their options and message counts, `limit` at a time; pass the
    answer's `next` as `after` for the next page."""
    page = list_models(rt, after=after, limit=limit)
    return ModelList(models=list(page.models), next=page.next)


@router.get("/{name}", responses=error_responses(404, 422, 503))
def read(name: ModelName, rt: RuntimeDep, request: Request) -> ModelInfo:
    """Read one model's options, each option's default, and its message counts."""
    info = get_model(rt, name=name, may_read=may_read(request))
    defaults = option_defaults(
        info.classes,
        min_learns=rt.settings.min_learns,
        min_train_tokens=rt.settings.min_train_tokens,
        max_tokens=rt.settings.max_tokens_per_model,
    )
    return replace(info, defaults=defaults)


@router.patch(
    "/{name}",
    responses=error_responses(404, 415, 422, 503),
    openapi_extra=json_body_openapi("UpdateModelRequest"),
)
def change(name: ModelName, body: UpdateModelInput, rt: RuntimeDep, request: Request) -> ModelInfo:
    """Change options (thresholds, event model, alpha …); `null` resets one to its default.
    Counts are kept: no retraining is needed. `backed_by` sets or (`null`) clears the model
    backing this one: a model this API key may use, else it is refused as a missing one."""
    return update_model(
        rt,
        name=name,
        changes=body.options(),
        relation=body.relation(),
        may_read=may_read(request),
    )


ENDED_KEYS_HEADER = "Spamsift-Ended-Keys"


@router.delete(
    "/{name}",
    status_code=204,
    responses={
        204: {
            "description": "Deleted",
            "headers": {
                ENDED_KEYS_HEADER: {
                    "description": "The ids of the API keys this ended (limited to this model "
                    "alone), comma-separated; absent when none",
                    "schema": {"type": "string"},
                }
            },
        },
        **error_responses(404, 409, 422, 503),
    },
)
def remove(
    name: ModelName,
    rt: RuntimeDep,
    request: Request,
    confirm: Annotated[
        str | None,
        Query(description="the model's name again: deleting cannot be undone"),
    ] = None,
) -> Response:
    """Delete a model and everything learned in it. Needs `?confirm=<name>`, since it cannot
    be undone (take a `spamsift backup` or `spamsift export` first). API keys limited to it
    alone are revoked (a key limited to several models loses this one); a model made later
    under the same name is another model, which no old key may use. A model that backs
    others is not deleted (409 `model_backs_others`, naming them)."""
    if confirm != name:
        raise NotConfirmed(
            f"deleting model {name!r} drops everything it learned; "
            f"repeat its name as ?confirm={name} to delete it"
        )
    ended = delete_model(rt, name=name, may_read=may_read(request))
    request.app.state.key_guard.invalidate()
    headers = {ENDED_KEYS_HEADER: ",".join(ended)} if ended else None
    return Response(status_code=204, headers=headers)


@router.get("/{name}/stats", responses=error_responses(404, 422, 503))
def stats(name: ModelName, rt: RuntimeDep, request: Request) -> dict[str, Any]:
    """Dashboard JSON: per-class counts, vocabulary, strongest tokens, activity, and the size
    of the whole database (`database_bytes`), which a key limited to some models is not shown:
    it would tell the volume of the other models."""
    answer = model_stats(rt, model_name=name)
    key = request_key(request)
    if key is not None and key.models is not None:
        del answer["database_bytes"]
        answer["backs"] = [backed for backed in answer.get("backs", []) if key.may_use(backed)]
    return answer
