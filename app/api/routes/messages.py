"""Training, classification, feedback and forgetting: per model, and the short forms for
mail servers (`POST /train`, `/classify`, `/feedback` with `?model=`, default `default`)."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter
from starlette.concurrency import run_in_threadpool

from app.api.auth import AUTH_ERRORS, request_key, requires
from app.api.deps import (
    JSON,
    ClassifyBatchInput,
    ClassifyInput,
    FeedbackInput,
    ModelName,
    ModelQuery,
    RuntimeDep,
    TrainBatchInput,
    TrainInput,
    json_body_openapi,
    message_body_openapi,
)
from app.api.error_responses import error_responses
from app.api.schemas import ClassifyBatchResponse, TrainBatchResponse
from app.service.classification import (
    Classification,
    NeedsDatabase,
    classify,
    classify_batch,
)
from app.service.runtime import Runtime
from app.service.training import (
    ForgetResult,
    TrainResult,
    apply_feedback,
    forget,
    train,
    train_batch,
)

router = APIRouter(prefix="/v1/models/{name}", tags=["messages"], responses=AUTH_ERRORS)
short_forms = APIRouter(tags=["mail servers"], responses=AUTH_ERRORS)

# The scope each route needs (app/api/auth.py); the short forms name their model in ?model=.
TRAIN = [requires("train")]
CLASSIFY = [requires("classify")]
TRAIN_SHORT = [requires("train", model_query=True)]
CLASSIFY_SHORT = [requires("classify", model_query=True)]

WRITE_ERRORS = error_responses(404, 413, 415, 422, 503, 507)
CLASSIFY_ERRORS = error_responses(404, 409, 413, 415, 422, 503)

CLASSIFICATION = TypeAdapter(Classification)
CLASSIFY_BATCH_RESPONSE = TypeAdapter(ClassifyBatchResponse)

# A message up to this size is classified on the event loop when that reads nothing from the
# database: the thread pool's hop costs about 0.1 ms of a single classify's 1.2 ms of server
# CPU, while a message of 16 KiB classifies in about 1 ms (a SpamAssassin test message's
# median cost by size: 0.4 ms at 4 KiB, 0.9 ms at 16 KiB, 2.5 ms at 64 KiB; 96 % of them are
# 16 KiB or less), a wait the loop's other requests share.
CLASSIFY_ON_LOOP_BYTES = 16 * 1024


def _answer(result: Classification) -> Response:
    """A classification as its JSON answer: its adapter's JSON-mode dump, by alias, encoded as
    JSONResponse encodes (floats as Python writes them, `1.2e-05`; the bytes this route has
    always sent, where FastAPI 0.165's own encoding of a response model would write
    `0.000012`), without FastAPI validating the dataclass again first: 0.025 ms a
    classification against 0.14-0.16 ms (`python -m bench.lab.http_floor`)."""
    content = CLASSIFICATION.dump_python(result, mode="json", by_alias=True)
    return JSONResponse(content)


def _batch_answer(results: list[Classification]) -> Response:
    """Classifications as the batch route's JSON answer, byte for byte what FastAPI sends for
    its response model (pydantic's JSON dump of a ClassifyBatchResponse, FastAPI's way for a
    route without a response class; floats as pydantic writes them, `0.000012` where `_answer`
    writes `1.2e-05`), without FastAPI validating the results again into a new
    ClassifyBatchResponse first, in the thread pool for a sync route."""
    answer = ClassifyBatchResponse.model_construct(results=results)
    return Response(CLASSIFY_BATCH_RESPONSE.dump_json(answer, by_alias=True), media_type=JSON)


def _train(rt: Runtime, name: str, body: TrainInput) -> TrainResult:
    message, label = body
    return train(rt, model_name=name, message=message, label=label)


def _record_as(request: Request) -> str | None:
    """The key whose quota of classification records this request's count against: a key
    limited to models (a tenant's); None for a key for every model, or no key."""
    key = request_key(request)
    return key.key_id if key is not None and key.models is not None else None


async def _classify(
    rt: Runtime, name: str, body: ClassifyInput, request: Request
) -> Classification:
    """Classify on the event loop where that reads nothing from the database and the message
    is small, else in the thread pool (a load, a sync or a read of rows waits there, and a
    long message does not hold up the loop's other requests)."""
    if isinstance(body, tuple):
        message, event_model, explain = body
    else:
        message, event_model, explain = body.to_message(), body.event_model, body.explain
    work = partial(
        classify,
        rt,
        model_name=name,
        message=message,
        event_model=event_model,
        explain=explain,
        record_as=_record_as(request),
    )
    if message.size_bytes() <= CLASSIFY_ON_LOOP_BYTES:
        try:
            return work(memory_only=True)
        except NeedsDatabase:
            pass
    return await run_in_threadpool(work)


def _feedback(rt: Runtime, name: str, body: FeedbackInput, request: Request) -> TrainResult:
    label, message_id, message = body
    key = request_key(request)

    def may_train(model_name: str) -> bool:
        """Whether the request's key may train `model_name` (feedback on a personal model may
        also train the model backing it, but a key limited to the personal one may not)."""
        return key is None or (key.allows("train") and key.may_use(model_name))

    return apply_feedback(
        rt,
        model_name=name,
        label=label,
        message_id=message_id,
        message=message,
        may_train=may_train,
    )


@router.post(
    "/train",
    dependencies=TRAIN,
    responses=WRITE_ERRORS,
    openapi_extra=message_body_openapi("TrainRequest"),
)
def train_message(name: ModelName, body: TrainInput, rt: RuntimeDep) -> TrainResult:
    """Train one message as `label`. Training the same message again changes nothing; a new
    label moves it and reports `previous_label`. A raw message may be posted as
    `message/rfc822` with `?label=`."""
    return _train(rt, name, body)


@router.post(
    "/train/batch",
    dependencies=TRAIN,
    responses=WRITE_ERRORS,
    openapi_extra=json_body_openapi("TrainBatchRequest"),
)
def train_messages(name: ModelName, body: TrainBatchInput, rt: RuntimeDep) -> TrainBatchResponse:
    """Train several messages in one transaction: all are learned, or none."""
    results = train_batch(
        rt, model_name=name, items=[(item.to_message(), item.label) for item in body.items]
    )
    return TrainBatchResponse(results=results)


@router.post(
    "/classify",
    dependencies=CLASSIFY,
    responses=CLASSIFY_ERRORS,
    response_model=Classification,
    openapi_extra=message_body_openapi("ClassifyRequest"),
)
async def classify_message(
    name: ModelName, body: ClassifyInput, rt: RuntimeDep, request: Request
) -> Response:
    """Score one message: verdict (spam / ham / unsure), class probabilities and, with
    `explain`, the tokens that moved the verdict most."""
    return _answer(await _classify(rt, name, body, request))


@router.post(
    "/classify/batch",
    dependencies=CLASSIFY,
    responses=CLASSIFY_ERRORS,
    response_model=ClassifyBatchResponse,
    openapi_extra=json_body_openapi("ClassifyBatchRequest"),
)
def classify_messages(
    name: ModelName, body: ClassifyBatchInput, rt: RuntimeDep, request: Request
) -> Response:
    """Score several messages in one pass; results in the order sent."""
    results = classify_batch(
        rt,
        model_name=name,
        messages=[item.to_message() for item in body.items],
        event_model=body.event_model,
        explain=body.explain,
        record_as=_record_as(request),
    )
    return _batch_answer(results)


@router.post(
    "/feedback",
    dependencies=TRAIN,
    responses=WRITE_ERRORS,
    openapi_extra=message_body_openapi("FeedbackRequest"),
)
def give_feedback(
    name: ModelName, body: FeedbackInput, rt: RuntimeDep, request: Request
) -> TrainResult:
    """ "Mark as spam / not spam". With only a `message_id`, works for messages classified
    within the retention period (or trained before); otherwise send the message too. On a
    model backed by another, trains that model too when its `feedback_trains_backing` is set
    and the API key may train it (`models` lists what was trained)."""
    return _feedback(rt, name, body, request)


@router.delete(
    "/messages/{message_id:path}", dependencies=TRAIN, responses=error_responses(404, 422, 503, 507)
)
def forget_message(name: ModelName, message_id: str, rt: RuntimeDep) -> ForgetResult:
    """Forget a trained message: subtract exactly what training it added."""
    return forget(rt, model_name=name, message_id=message_id)


@short_forms.post(
    "/train",
    dependencies=TRAIN_SHORT,
    responses=WRITE_ERRORS,
    openapi_extra=message_body_openapi("TrainRequest"),
)
def train_short(body: TrainInput, rt: RuntimeDep, model: ModelQuery = "default") -> TrainResult:
    """Train one message in the model `?model=` (default `default`)."""
    return _train(rt, model, body)


@short_forms.post(
    "/classify",
    dependencies=CLASSIFY_SHORT,
    responses=CLASSIFY_ERRORS,
    response_model=Classification,
    openapi_extra=message_body_openapi("ClassifyRequest"),
)
async def classify_short(
    body: ClassifyInput, rt: RuntimeDep, request: Request, model: ModelQuery = "default"
) -> Response:
    """Classify one message with the model `?model=` (default `default`)."""
    return _answer(await _classify(rt, model, body, request))


@short_forms.post(
    "/feedback",
    dependencies=TRAIN_SHORT,
    responses=WRITE_ERRORS,
    openapi_extra=message_body_openapi("FeedbackRequest"),
)
def feedback_short(
    body: FeedbackInput, rt: RuntimeDep, request: Request, model: ModelQuery = "default"
) -> TrainResult:
    """Mark a message as spam or ham in the model `?model=` (default `default`)."""
    return _feedback(rt, model, body, request)
