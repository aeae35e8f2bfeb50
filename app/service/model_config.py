"""Per-model options (SPEC §4): database data, checked here, turned into the engine's config.

A model stores only the options set for it; reading merges them over the defaults below, so a
model created before a default changed follows the new default unless it chose otherwise.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from app.bayes.naive_bayes import NaiveBayesConfig
from app.bayes.scorers import EventModel as EventModel  # the option's type, for the API
from app.bayes.scorers import fallback, scorer
from app.errors import InvalidConfig
from app.text import load_stop_words

Prior = Literal["mle", "laplace", "uniform"]

DEFAULT_EVENT_MODEL: EventModel = "robinson-fisher"
DEFAULT_CLASSES = ("ham", "spam")


class ModelConfig(BaseModel):
    """The options of one model, each checked with a message naming the field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    event_model: EventModel = DEFAULT_EVENT_MODEL
    alpha: float = Field(default=1.0, gt=0, le=1e6)
    prior: Prior = "mle"
    min_df: int = Field(default=1, ge=1)
    max_vocab: int | None = Field(default=None, ge=1)
    stop_words: Literal["english", "none"] | list[str] = "english"
    spam_threshold: float = Field(default=0.9, gt=0, le=1)
    ham_threshold: float = Field(default=0.1, ge=0, lt=1)
    # Robinson-Fisher, chosen by the best worst case over every shared corpus view, batch split
    # and online (`python -m bench.accuracy --limit 2000 --set ...`, docs/accuracy.md): s=0.03,
    # x=0.5, min_dev=0 is at worst 1.63x bogofilter; bogofilter's own s=0.0178, x=0.52,
    # min_dev=0.375 is at worst 13.7x (online 1-ROCA % spamassassin text-only 0.80 -> 1.41,
    # csdmc2010 text-only 0.058 -> 0.198), min_dev=0.1 at worst 1.78-1.85x.
    rf_strength: float = Field(default=0.03, gt=0, le=1000)
    rf_assumed: float = Field(default=0.5, gt=0, lt=1)
    rf_min_dev: float = Field(default=0.0, ge=0, lt=0.5)
    # Fewest distinct tokens a message needs to be trained; None: SPAMSIFT_MIN_TRAIN_TOKENS.
    # Per model, because short texts (SMS: 43 % have fewer than 11) need a lower floor than mail.
    min_train_tokens: int | None = Field(default=None, ge=1, le=10_000)
    # Fewest trained messages of each class before verdicts are trusted; below it every verdict
    # is "unsure" with a warning. None: SPAMSIFT_MIN_LEARNS (200, as SpamAssassin and rspamd).
    min_learns: int | None = Field(default=None, ge=0, le=1_000_000)
    # A model backed by another: each of its trained messages counts this many times against
    # the backing model's when their counts are summed (1: summed as they are, DSPAM's merge).
    personal_weight: int = Field(default=1, ge=1, le=1000)

    @model_validator(mode="after")
    def _thresholds_in_order(self) -> Self:
        if self.ham_threshold > self.spam_threshold:
            raise ValueError(
                f"ham_threshold ({self.ham_threshold}) must not exceed "
                f"spam_threshold ({self.spam_threshold})"
            )
        return self

    def to_engine(self) -> NaiveBayesConfig:
        return NaiveBayesConfig(
            event_model=self.event_model,
            alpha=self.alpha,
            prior=self.prior,
            min_df=self.min_df,
            max_vocab=self.max_vocab,
            stop_words=load_stop_words(self.stop_words),
            rf_strength=self.rf_strength,
            rf_assumed=self.rf_assumed,
            rf_min_dev=self.rf_min_dev,
            spam_threshold=self.spam_threshold,
            ham_threshold=self.ham_threshold,
        )


CONFIG_FIELDS = frozenset(ModelConfig.model_fields)


def option_defaults(
    classes: tuple[str, ...], *, min_learns: int, min_train_tokens: int
) -> dict[str, Any]:
    """The value each option of a model of `classes` takes when it is not set: the server's
    own (`min_learns`, `min_train_tokens`) where the model's default is the server's."""
    defaults = parse_config({}, classes=classes).model_dump(mode="json")
    return {**defaults, "min_learns": min_learns, "min_train_tokens": min_train_tokens}


def parse_config(stored: dict[str, Any], *, classes: tuple[str, ...]) -> ModelConfig:
    """Merge `stored` over the defaults and check the result; InvalidConfig names the field."""
    try:
        config = ModelConfig.model_validate(stored)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "config"
        raise InvalidConfig(field, first["msg"]) from error
    unfit = scorer(config.event_model).unfit_reason(classes)
    if unfit is not None:
        if "event_model" in stored:
            raise InvalidConfig("event_model", unfit)
        # Not chosen explicitly: a K-class model falls back to naive Bayes.
        config = config.model_copy(update={"event_model": fallback(classes)})
    return config


def check_classes(classes: list[str]) -> tuple[str, ...]:
    """Check a model's class labels: 2..64 distinct, short, printable."""
    if not 2 <= len(classes) <= 64:
        raise InvalidConfig("classes", f"a model needs 2 to 64 classes, got {len(classes)}")
    if len(set(classes)) != len(classes):
        raise InvalidConfig("classes", "class labels must be distinct")
    for label in classes:
        if not label or len(label) > 64 or not label.isprintable():
            raise InvalidConfig("classes", f"a label is 1-64 printable characters, got {label!r}")
    return tuple(classes)
