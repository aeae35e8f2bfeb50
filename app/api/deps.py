"""Request dependencies: the process runtime, and message bodies as JSON or message/rfc822."""

from __future__ import annotations

from typing import Annotated, TypeVar

from fastapi import Depends, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

from app.api.schemas import ClassifyRequest, FeedbackRequest, TrainRequest
from app.errors import InvalidInput, MessageTooLarge
from app.service.messages import Message
from app.service.model_config import EventModel
from app.service.models import MODEL_NAME_PATTERN
from app.service.runtime import Runtime

RFC822 = "message/rfc822"
JSON = "application/json"

Schema = TypeVar("Schema", bound=BaseModel)

# The body ended early: the client closed the connection, or the server refused its framing
# (e.g. a malformed chunk). No answer reaches it; this one keeps the log free of a traceback.
_GONE = HTTPException(400, "the request body ended early (client disconnected)")


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
ModelName = Annotated[str, Path(pattern=MODEL_NAME_PATTERN, description="Model name")]
ModelQuery = Annotated[
    str, Query(alias="model", pattern=MODEL_NAME_PATTERN, description="Model name")
]


async def _read(request: Request) -> tuple[str, bytes]:
    media_type = request.headers.get("content-type", JSON).split(";")[0].strip().lower()
    if media_type not in (JSON, RFC822):
        raise HTTPException(415, f"send {JSON} or {RFC822}, not {media_type!r}")
    if media_type == RFC822:
        # The body is the message: refuse it by Content-Length before reading, and stop reading
        # a chunked one as soon as it passes the limit.
        runtime = get_runtime(request)
        limit = runtime.settings.max_message_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise MessageTooLarge(f"message is {declared} bytes; the limit is {limit}")
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise MessageTooLarge(f"message is over the limit of {limit} bytes")
                chunks.append(chunk)
        except ClientDisconnect:
            raise _GONE from None
        body = b"".join(chunks)
    else:
        try:
            body = await request.body()
        except ClientDisconnect:
            raise _GONE from None
    if not body:
        raise InvalidInput("the request body is empty")
    return media_type, body


def parse_json(schema: type[Schema], body: bytes) -> Schema:
    try:
        return schema.model_validate_json(body)
    except ValidationError as error:
        raise RequestValidationError(error.errors(include_url=False)) from error


async def train_input(
    request: Request,
    label: Annotated[str | None, Query(description="With a message/rfc822 body")] = None,
    message_id: Annotated[str | None, Query(description="With a message/rfc822 body")] = None,
) -> tuple[Message, str]:
    media_type, body = await _read(request)
    if media_type == RFC822:
        if not label:
            raise InvalidInput("a message/rfc822 body needs ?label=")
        return Message(raw=body, message_id=message_id), label
    payload = parse_json(TrainRequest, body)
    return payload.to_message(), payload.label


async def classify_input(
    request: Request,
    event_model: Annotated[EventModel | None, Query(description="With message/rfc822")] = None,
    explain: Annotated[bool, Query(description="With a message/rfc822 body")] = False,
    message_id: Annotated[str | None, Query(description="With a message/rfc822 body")] = None,
) -> ClassifyRequest | tuple[Message, EventModel | None, bool]:
    media_type, body = await _read(request)
    if media_type == RFC822:
        return Message(raw=body, message_id=message_id), event_model, explain
    return parse_json(ClassifyRequest, body)


async def feedback_input(
    request: Request,
    label: Annotated[str | None, Query(description="With a message/rfc822 body")] = None,
    message_id: Annotated[str | None, Query(description="With a message/rfc822 body")] = None,
) -> tuple[str, str | None, Message | None]:
    media_type, body = await _read(request)
    if media_type == RFC822:
        if not label:
            raise InvalidInput("a message/rfc822 body needs ?label=")
        return label, message_id, Message(raw=body, message_id=message_id)
    payload = parse_json(FeedbackRequest, body)
    return payload.label, payload.message_id, payload.to_message()


TrainInput = Annotated[tuple[Message, str], Depends(train_input)]
ClassifyInput = Annotated[
    ClassifyRequest | tuple[Message, EventModel | None, bool], Depends(classify_input)
]
FeedbackInput = Annotated[tuple[str, str | None, Message | None], Depends(feedback_input)]


def message_body_openapi(schema: str) -> dict[str, object]:
    """Document a body that is JSON (`schema`) or a raw message/rfc822."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                JSON: {"schema": {"$ref": f"#/components/schemas/{schema}"}},
                RFC822: {"schema": {"type": "string", "format": "binary"}},
            },
        }
    }
