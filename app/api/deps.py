"""Request dependencies: the process runtime, and request bodies as JSON or message/rfc822.

Every body is read here, in a dependency, never by FastAPI before the route's dependencies
run: the API key, its scope and its model are checked from the request head first (each route
lists `requires(...)` before its body), so a client without a fitting key costs no body read.
A body must say what it is (`Content-Type: application/json`, or `message/rfc822` where a
route takes a raw message); anything else, a missing Content-Type included, is 415, so a web
page cannot post a "simple request" (no preflight) to a server on localhost.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Annotated, TypeVar, get_args

import msgspec
from fastapi import Depends, HTTPException, Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from app.api.schemas import (
    ClassifyBatchRequest,
    ClassifyRequest,
    CreateModelRequest,
    FeedbackRequest,
    TrainBatchRequest,
    TrainRequest,
    UpdateModelRequest,
)
from app.errors import BatchTooLarge, InvalidInput, MessageTooLarge
from app.service.messages import Message
from app.service.model_config import EventModel
from app.service.models import MODEL_NAME_PATTERN
from app.service.runtime import Runtime

RFC822 = "message/rfc822"
JSON = "application/json"

Schema = TypeVar("Schema", bound=BaseModel)

# JSON bodies this large or larger are parsed in the thread pool, so that the event loop (every
# other request of the process: /healthz, other tenants) never waits for one. Measured
# (parse_json, on a loaded 2-core machine): under 64 KiB a body parses in well under 1 ms,
# about the cost of the hop; a 270 KB batch took 3.7 ms, 1 MB 14 ms, and a 73 MB one of 1,000
# items 1.2 s (0.4 s counting its items, 0.9 s validating them), stalling the whole process.
# Three 62 MB batches at once made /healthz wait up to 2.96 s; parsed here, 0.7-0.75 s (the
# GIL taken in turns with the parsing threads; `python -m bench.edge` measures it).
OFF_LOOP_JSON_BYTES = 64 * 1024

# The body ended early: the client closed the connection, or the server refused its framing
# (e.g. a malformed chunk). No answer reaches it; this one keeps the log free of a traceback.
_GONE = HTTPException(400, "the request body ended early (client disconnected)")


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def _runtime(request: Request) -> Runtime:
    # async: FastAPI runs a sync dependency in the thread pool, a hop per request for an
    # attribute read.
    return get_runtime(request)


RuntimeDep = Annotated[Runtime, Depends(_runtime)]
ModelName = Annotated[str, Path(pattern=MODEL_NAME_PATTERN, description="Model name")]
ModelQuery = Annotated[
    str, Query(alias="model", pattern=MODEL_NAME_PATTERN, description="Model name")
]


def _media_type(request: Request, accepted: tuple[str, ...]) -> str:
    declared = request.headers.get("content-type")
    media_type = (declared or "").split(";")[0].strip().lower()
    if media_type not in accepted:
        wanted = " or ".join(accepted)
        got = "no Content-Type" if declared is None else "another Content-Type"
        raise HTTPException(415, f"send Content-Type: {wanted}; this request has {got}")
    return media_type


async def _read(request: Request, accepted: tuple[str, ...] = (JSON, RFC822)) -> tuple[str, bytes]:
    media_type = _media_type(request, accepted)
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


_counted: ContextVar[list[int]] = ContextVar("_counted")  # [items seen, limit]


class _Item(msgspec.Struct):
    """Stands for one batch item while `count_batch_items` counts them: msgspec skips its
    fields without building them, and counts it here."""

    def __post_init__(self) -> None:
        counted = _counted.get()
        counted[0] += 1
        if counted[0] > counted[1]:
            raise ValueError("too many items")


class _Batch(msgspec.Struct):
    items: list[_Item]


def count_batch_items(body: bytes, limit: int) -> int | None:
    """Return how many `items` the JSON batch `body` has; raise BatchTooLarge as soon as the
    count passes `limit`. None when the body is no batch of objects (pydantic then says why).

    msgspec walks the JSON, skipping each item's fields, and stops at item `limit` + 1: a
    1,000,000-item batch (32 MB) is refused in about 1 ms, where building it with pydantic
    first took 8.6 s and 1 GB of memory (measured in docs/security.md). A 73 MB batch of 1,000
    items is counted in 0.13 s (0.38 s when each item was built and handed to a hook).
    """
    counted = [0, limit]
    token = _counted.set(counted)
    try:
        msgspec.json.decode(body, type=_Batch)
    except msgspec.ValidationError:
        if counted[0] > limit:
            message = f"a batch carries at most {limit} messages; this one has more"
            raise BatchTooLarge(message) from None
        return None
    except (msgspec.DecodeError, RecursionError):
        return None  # nested past msgspec's depth limit too: no count, pydantic names it
    finally:
        _counted.reset(token)
    return counted[0]


async def parse_json_off_loop(
    schema: type[Schema], body: bytes, *, max_items: int | None = None
) -> Schema:
    """`parse_json`, or `parse_batch` with `max_items`, in the thread pool for a body of
    OFF_LOOP_JSON_BYTES or more."""
    if max_items is not None:
        if len(body) < OFF_LOOP_JSON_BYTES:
            return parse_batch(schema, body, max_items)
        return await run_in_threadpool(parse_batch, schema, body, max_items)
    if len(body) < OFF_LOOP_JSON_BYTES:
        return parse_json(schema, body)
    return await run_in_threadpool(parse_json, schema, body)


def parse_batch(schema: type[Schema], body: bytes, max_items: int) -> Schema:
    """Parse a JSON batch (`schema` has `items`) after counting its items, one item at a time.

    pydantic holds the GIL while it validates a body: a 73 MB batch in one call kept every
    other thread of the process, the event loop too, waiting 0.9 s. Item by item, the longest
    wait is one item's validation, or msgspec's split of the body (0.12 s for 73 MB)."""
    count = count_batch_items(body, max_items)
    if count is None:
        return parse_json(schema, body)  # not a batch of objects: pydantic names what is wrong
    try:
        fields = msgspec.json.decode(body, type=dict[str, msgspec.Raw])
        raw_items = msgspec.json.decode(fields.pop("items"), type=list[msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError):
        return parse_json(schema, body)
    item_schema = get_args(schema.model_fields["items"].annotation)[0]
    items = []
    for index, raw in enumerate(raw_items):
        try:
            items.append(item_schema.model_validate_json(bytes(raw)))
        except ValidationError as error:
            raise RequestValidationError(
                [{**e, "loc": ("items", index, *e["loc"])} for e in error.errors(include_url=False)]
            ) from error
    # The other fields (and the item count's bounds) validated as JSON, with one item standing
    # for all of them.
    fields["items"] = msgspec.Raw(b"[" + bytes(raw_items[0]) + b"]" if raw_items else b"[]")
    batch = parse_json(schema, msgspec.json.encode(fields))
    return batch.model_copy(update={"items": items})


async def json_body(request: Request, schema: type[Schema]) -> Schema:
    """Read and parse a JSON body; in a dependency that runs after the key is checked."""
    _, body = await _read(request, (JSON,))
    return await parse_json_off_loop(schema, body)


async def _batch_body(request: Request, schema: type[Schema]) -> Schema:
    _, body = await _read(request, (JSON,))
    max_items = get_runtime(request).settings.max_batch_items
    return await parse_json_off_loop(schema, body, max_items=max_items)


async def train_batch_input(request: Request) -> TrainBatchRequest:
    return await _batch_body(request, TrainBatchRequest)


async def classify_batch_input(request: Request) -> ClassifyBatchRequest:
    return await _batch_body(request, ClassifyBatchRequest)


async def create_model_input(request: Request) -> CreateModelRequest:
    return await json_body(request, CreateModelRequest)


async def update_model_input(request: Request) -> UpdateModelRequest:
    return await json_body(request, UpdateModelRequest)


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
    payload = await parse_json_off_loop(TrainRequest, body)
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
    return await parse_json_off_loop(ClassifyRequest, body)


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
    payload = await parse_json_off_loop(FeedbackRequest, body)
    return payload.label, payload.message_id, payload.to_message()


TrainInput = Annotated[tuple[Message, str], Depends(train_input)]
ClassifyInput = Annotated[
    ClassifyRequest | tuple[Message, EventModel | None, bool], Depends(classify_input)
]
FeedbackInput = Annotated[tuple[str, str | None, Message | None], Depends(feedback_input)]
TrainBatchInput = Annotated[TrainBatchRequest, Depends(train_batch_input)]
ClassifyBatchInput = Annotated[ClassifyBatchRequest, Depends(classify_batch_input)]
CreateModelInput = Annotated[CreateModelRequest, Depends(create_model_input)]
UpdateModelInput = Annotated[UpdateModelRequest, Depends(update_model_input)]


def json_body_openapi(schema: str) -> dict[str, object]:
    """Document a JSON body (`schema`) that a dependency reads after the key is checked."""
    return {
        "requestBody": {
            "required": True,
            "content": {JSON: {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
        }
    }


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


_route_queries: dict[int, frozenset[str]] = {}


async def reject_unknown_query(request: Request) -> None:
    """An app-wide dependency: a query parameter the operation does not take is a 422, as an
    unknown body field is, rather than silently ignored (a misspelt `?lable=spam` must not
    look like it worked). async: it runs on every request and does no I/O, so it needs no
    hop to the thread pool."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.query_params:
        return
    known = _route_queries.get(id(route))
    if known is None:
        known = _route_queries[id(route)] = frozenset(_query_names(route.dependant))
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        takes = ", ".join(sorted(known)) or "none"
        raise InvalidInput(
            f"unknown query parameter {unknown[0][:64]!r}; this operation takes: {takes}"
        )


def _query_names(dependant: Dependant) -> set[str]:
    """The query parameters an operation takes: its own and its dependencies'."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names
