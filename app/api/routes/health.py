"""Liveness and readiness probes."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.api.deps import RuntimeDep
from app.api.schemas import Health, Liveness
from app.service.database import database_condition, database_ready

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz(rt: RuntimeDep) -> Liveness:
    """Liveness: the process answers (it does not touch the database), its token core, and
    the database's condition as the process last met it."""
    return Liveness(status="ok", token_core=rt.token_core, database=database_condition(rt))


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
def readyz(rt: RuntimeDep) -> Health | JSONResponse:
    """Readiness: the database answers a query."""
    if database_ready(rt):
        return Health(status="ready")
    return JSONResponse(
        status_code=503, content={"status": "database unavailable"}, headers={"Retry-After": "1"}
    )
