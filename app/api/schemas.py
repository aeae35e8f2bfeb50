"""Request and response bodies of the HTTP API (SPEC §6)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    create_model,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from app.service.classification import Classification
from app.service.messages import (
    ATTRIBUTE_NAME_PATTERN,
    MAX_ATTRIBUTE_NAME_CHARS,
    MAX_ATTRIBUTES,
    MAX_MESSAGE_ID_CHARS,
    Message,
)
from app.service.model_config import EventModel, ModelConfig
from app.service.models import MODEL_NAME_PATTERN, RELATION_FIELDS, ModelInfo
from app.service.training import TrainResult

MessageId = Field(
    default=None,
    min_length=1,
    max_length=MAX_MESSAGE_ID_CHARS,
    description="The client's id, e.g. the Message-ID header; "
    "default sha256:<hex> of the message bytes",
)


AttributeName = Annotated[str, StringConstraints(pattern=ATTRIBUTE_NAME_PATTERN)]
Attributes = Annotated[
    dict[AttributeName, Annotated[float, Field(allow_inf_nan=False)]] | None,
    Field(
        default=None,
        max_length=MAX_ATTRIBUTES,
        description=f"Numeric attributes the text does not hold, {{name: number}}: what a mail "
        "server knows (SPF/DKIM/DMARC results, RBL hits, another engine's score). Learned per "
        "model as a Gaussian per class; scored where the model's `gaussian_attributes` is on. "
        f"At most {MAX_ATTRIBUTES}; names 1-{MAX_ATTRIBUTE_NAME_CHARS} printable ASCII "
        "characters without spaces; finite numbers",
        examples=[{"spf_pass": 1, "rbl_hits": 0, "rspamd_score": -2.5}],
    ),
]


class Strict(BaseModel):
    # strict: a value of another JSON type is refused, not coerced ("min_df": true was taken
    # as 1, "alpha": "0.5" as 0.5; found by schemathesis). An integer still passes as a number.
    model_config = ConfigDict(extra="forbid", strict=True)


class MessageBody(Strict):
    """Exactly one of `raw` (an RFC 822 message) and `text` (plain text)."""

    raw: str | None = Field(default=None, description="The whole RFC 822 message, headers first")
    text: str | None = Field(default=None, description="Plain text, e.g. an SMS")
    message_id: str | None = MessageId
    attributes: Attributes = None

    @model_validator(mode="after")
    def _exactly_one_of_raw_and_text(self) -> Self:
        if (self.raw is None) == (self.text is None):
            raise ValueError("give exactly one of 'raw' and 'text'")
        return self

    def to_message(self) -> Message:
        return Message(
            raw=self.raw, text=self.text, message_id=self.message_id, attributes=self.attributes
        )


BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _settable(name: str, field: FieldInfo) -> Any:
    """An option as a request sets it: omitted keeps it, `null` resets it to the default
    that the schema shows. The bounds are shown, and checked by the service's ModelConfig,
    whose refusal names the option."""
    declared = ModelConfig.model_json_schema()["properties"][name]
    shown = {"default": to_jsonable_python(field.default)}
    for one in [declared, *declared.get("anyOf", [])]:
        shown |= {bound: one[bound] for bound in BOUNDS if bound in one}
    annotation: Any = field.annotation
    return (
        annotation | None,
        Field(default=None, description=field.description, json_schema_extra=shown),
    )


if TYPE_CHECKING:
    ModelOptions = Strict
else:
    ModelOptions = create_model(
        "ModelOptions",
        __base__=Strict,
        **{name: _settable(name, field) for name, field in ModelConfig.model_fields.items()},
    )


class ConfigFields(ModelOptions):
    """The model options (their declaration: ModelConfig) and the backing relation's
    fields; omitted ones keep their values."""

    backed_by: str | None = Field(
        default=None,
        pattern=MODEL_NAME_PATTERN,
        description="the model backing this one (e.g. a global model behind a personal one): "
        "classify sums both models' counts; `null` clears it; same classes, one level",
    )
    feedback_trains_backing: bool | None = Field(
        default=None,
        description="feedback on this model also trains its backing model, when the API key "
        "may train that model (`false`: feedback trains this model alone)",
    )

    def options(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True, exclude={"name", "classes", *RELATION_FIELDS})

    def relation(self) -> dict[str, Any]:
        """The backing relation's fields given (`backed_by` null: clear the backing)."""
        return self.model_dump(exclude_unset=True, include=set(RELATION_FIELDS))


class CreateModelRequest(ConfigFields):
    name: str = Field(pattern=MODEL_NAME_PATTERN, examples=["default", "example.org"])
    classes: list[str] | None = Field(default=None, examples=[["ham", "spam"]])


class UpdateModelRequest(ConfigFields):
    """Options to change; `null` resets an option to its default."""


class ModelList(BaseModel):
    models: list[ModelInfo]
    next: str | None = Field(
        default=None, description="pass as `after` for the next page; null on the last page"
    )


class TrainRequest(MessageBody):
    label: str = Field(min_length=1, max_length=64, examples=["spam"])


class TrainBatchRequest(Strict):
    items: list[TrainRequest] = Field(min_length=1)


class TrainBatchResponse(BaseModel):
    results: list[TrainResult]


class ClassifyRequest(MessageBody):
    event_model: EventModel | None = Field(
        default=None, description="Score with this event model instead of the model's own"
    )
    explain: bool = Field(default=False, description="Also return the strongest clues")


class ClassifyBatchItem(MessageBody):
    pass


class ClassifyBatchRequest(Strict):
    items: list[ClassifyBatchItem] = Field(min_length=1)
    event_model: EventModel | None = None
    explain: bool = False


class ClassifyBatchResponse(BaseModel):
    results: list[Classification]


class FeedbackRequest(Strict):
    """'Mark as spam / not spam': a message_id classified recently, or the message itself."""

    label: str = Field(min_length=1, max_length=64, examples=["spam"])
    message_id: str | None = MessageId
    raw: str | None = None
    text: str | None = None
    attributes: Attributes = None

    @model_validator(mode="after")
    def _message_or_id(self) -> Self:
        if self.raw is not None and self.text is not None:
            raise ValueError("give at most one of 'raw' and 'text'")
        if self.raw is None and self.text is None and self.message_id is None:
            raise ValueError("give a message_id, or the message as 'raw' or 'text'")
        return self

    def to_message(self) -> Message | None:
        if self.raw is None and self.text is None:
            return None
        return Message(
            raw=self.raw, text=self.text, message_id=self.message_id, attributes=self.attributes
        )


class Health(BaseModel):
    status: str


class Liveness(Health):
    token_core: Literal["python", "compiled"] = Field(
        description="the tokenizer this process runs: the compiled core or the pure-Python one"
    )
    database: Literal["ok", "unavailable", "storage_full"] = Field(
        description="what this process's last transaction met (no query is made): ok, "
        "unavailable (unreachable, or locked beyond the budget) or storage_full (writes are "
        "refused with 507, reads go on); /readyz asks the database itself"
    )
