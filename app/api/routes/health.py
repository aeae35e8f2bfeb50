"""Liveness and readiness probes."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.api.deps import RuntimeDep
from app.api.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> Health:
    """Liveness: the process answers (it does not touch the database)."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
def readyz(rt: RuntimeDep) -> Health | JSONResponse:
    """Readiness: the database answers a query."""
    if rt.db.ping():
        return Health(status="ready")
    return JSONResponse(
        status_code=503, content={"status": "database unavailable"}, headers={"Retry-After": "1"}
    )
