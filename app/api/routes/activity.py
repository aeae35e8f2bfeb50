"""A model's activity as a time series, for the dashboard's charts."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from app.api.auth import AUTH_ERRORS, requires
from app.api.deps import ModelName, RuntimeDep
from app.api.error_responses import error_responses
from app.service.dashboard import ActivityRange, model_activity

router = APIRouter(
    prefix="/v1/models", tags=["models"], dependencies=[requires("admin")], responses=AUTH_ERRORS
)


@router.get("/{name}/activity", responses=error_responses(404, 422, 503))
def activity(
    name: ModelName,
    rt: RuntimeDep,
    span: Annotated[
        ActivityRange, Query(alias="range", description="24h (by hour), 7d, 30d (by UTC day)")
    ] = "7d",
) -> dict[str, Any]:
    """Classifications by verdict, trainings, forgets, feedback and corrections per hour (24h)
    or per UTC day (7d, 30d), with totals and correction rates: `false_positives` is the share
    of classified mail users corrected to ham, `false_negatives` to spam (ham/spam models)."""
    return model_activity(rt, model_name=name, span=span)
