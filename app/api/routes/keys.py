"""API keys over HTTP: who am I, and (admin) list, create and revoke keys, as `spamsift keys`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, Field, field_validator

from app.api.auth import AUTH_ERRORS, any_key, requires
from app.api.deps import RuntimeDep, json_body, json_body_openapi
from app.api.error_responses import error_responses
from app.api.schemas import Strict
from app.service.keys import MAX_NAME_CHARS, ApiKey, Scope, create_key, list_keys, revoke_key

router = APIRouter(prefix="/v1/keys", tags=["keys"], responses=AUTH_ERRORS)


class KeyList(BaseModel):
    keys: list[ApiKey]


class CreateKeyRequest(Strict):
    scopes: list[Scope] = Field(min_length=1, max_length=3, examples=[["classify"]])
    models: list[str] | None = Field(
        default=None, max_length=1000, description="Limit the key to these models; null: all"
    )
    name: str = Field(default="", max_length=MAX_NAME_CHARS, description="A note: who uses it")

    @field_validator("name")
    @classmethod
    def _printable(cls, name: str) -> str:
        # A NUL would reach the SQL driver (PostgreSQL refuses it); a name is a note for people.
        if not name.isprintable():
            raise ValueError("a key name is printable characters")
        return name


@dataclass(frozen=True)
class CreatedKey(ApiKey):
    key: Annotated[str, Field(description="The secret key: shown this once, stored only hashed")]


class Identity(BaseModel):
    development_mode: bool = Field(description="No key exists: every endpoint is open")
    key: ApiKey | None = Field(description="The key of this request; null in development")


@router.get("/me", responses=error_responses(503))
def whoami(key: Annotated[ApiKey | None, any_key()]) -> Identity:
    """Tell which key this request carries: its scopes and the models it may use. Any valid
    key may ask; the dashboard uses it to show what the key can do."""
    return Identity(development_mode=key is None, key=key)


@router.get("", dependencies=[requires("admin")], responses=error_responses(503))
def list_all(rt: RuntimeDep) -> KeyList:
    """List every API key, revoked ones too, without their secrets."""
    return KeyList(keys=list_keys(rt))


async def _create_key_input(request: Request) -> CreateKeyRequest:
    return await json_body(request, CreateKeyRequest)


@router.post(
    "",
    status_code=201,
    dependencies=[requires("admin")],
    responses=error_responses(404, 409, 415, 422, 503),
    openapi_extra=json_body_openapi("CreateKeyRequest"),
)
def create(
    body: Annotated[CreateKeyRequest, Depends(_create_key_input)], rt: RuntimeDep, request: Request
) -> CreatedKey:
    """Make a key with scopes (admin implies train and classify), optionally limited to some
    existing models. The answer holds the secret key, shown this once. While no admin key for
    every model exists (development mode), only such a key is made (409 `last_admin_key`
    otherwise): any other would lock its maker out."""
    secret, key = create_key(
        rt, scopes=body.scopes, models=body.models, name=body.name, over_http=True
    )
    request.app.state.key_guard.invalidate()  # this process knows the new key at once
    return CreatedKey(**asdict(key), key=secret)


@router.delete(
    "/{key_id}", dependencies=[requires("admin")], responses=error_responses(404, 409, 422, 503)
)
def revoke(
    key_id: Annotated[str, Path(pattern=r"^x?[0-9a-f]{11,12}$", description="The key's id")],
    rt: RuntimeDep,
    request: Request,
) -> ApiKey:
    """Revoke a key by its id: refused at once by this server, within a second by others.
    The last admin key for every model is not revoked (409 `last_admin_key`): make another
    first, so that someone can still manage keys."""
    revoked = revoke_key(rt, key=key_id, over_http=True)
    request.app.state.key_guard.invalidate()
    return revoked
