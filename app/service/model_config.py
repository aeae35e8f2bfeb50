"""Per-model options (SPEC §4): database data, checked here, turned into the engine's config.

A model stores only the options set for it; reading merges them over the defaults below, so a
model created before a default changed follows the new default unless it chose otherwise.
"""

from __future__ import annotations

import json
from dataclasses import fields
from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo

from app.bayes.naive_bayes import NaiveBayesConfig
from app.bayes.scorers import EventModel as EventModel  # the option's type, for the API
from app.bayes.scorers import fallback, scorer
from app.errors import InvalidConfig
from app.text import load_stop_words
from app.text.families import FAMILIES, FAMILY_PREFIXES, Family, prefixes_left_out

Prior = Literal["mle", "laplace", "uniform"]

DEFAULT_EVENT_MODEL: EventModel = "robinson-fisher"
DEFAULT_CLASSES = ("ham", "spam")


class OptionScope(StrEnum):
    """What an option acts on: `evaluate` measures the scoring and learning options on a
    corpus (`EVALUATED`)."""

    SCORING = "scoring"
    LEARNING = "learning"  # what a trained message adds to the counts
    VERDICT = "verdict"
    TRAINING = "training"
    BACKING = "backing"


def option(
    default: Any,
    *,
    scope: OptionScope,
    description: str,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
) -> Any:
    """One model option's declaration: the API schema, the CLI, the docs table and the
    dashboard's settings form are derived from these fields."""
    return Field(
        default=default,
        description=description,
        json_schema_extra={"x-scope": scope.value},
        gt=gt,
        ge=ge,
        lt=lt,
        le=le,
    )


class ModelConfig(BaseModel):
    """The options of one model, each checked with a message naming the field."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    event_model: EventModel = option(
        DEFAULT_EVENT_MODEL,
        scope=OptionScope.SCORING,
        description="scorer: `robinson-fisher` (bogofilter's chi-square combining, ham/spam "
        "models only), `multinomial` or `bernoulli` naive Bayes; a classify request may pick "
        "another",
    )
    alpha: float = option(
        1.0,
        scope=OptionScope.SCORING,
        description="additive smoothing of naive Bayes, > 0 (1.0: Laplace)",
        gt=0,
        le=1e6,
    )
    prior: Prior = option(
        "mle",
        scope=OptionScope.SCORING,
        description="class prior of naive Bayes: `mle` (the trained share of each class), "
        "`laplace`, or `uniform`",
    )
    min_df: int = option(
        1,
        scope=OptionScope.SCORING,
        description="tokens seen in fewer trained messages are ignored when scoring",
        ge=1,
    )
    max_vocab: int | None = option(
        None,
        scope=OptionScope.SCORING,
        description="score with only this many tokens, those in most trained messages "
        "(`null`: no limit)",
        ge=1,
    )
    stop_words: Literal["english", "none"] | list[str] = option(
        "english",
        scope=OptionScope.SCORING,
        description="words ignored when scoring: `english`, `none`, or a list; changing it "
        "needs no retraining",
    )
    # The derived token families (app.text.families), one option each, named as the family.
    word_pairs: bool = option(
        True,
        scope=OptionScope.SCORING,
        description="store and score word pairs (`pair:cheap pills`: two adjacent body words, "
        "English stop words skipped); off, none is stored and those stored while on are "
        "ignored, so changing it needs no retraining",
    )
    shape_tokens: bool = option(
        True,
        scope=OptionScope.SCORING,
        description="store and score the message's shape (`size:`, `links:` and, for raw "
        "mail, `html:` tokens); off, none is stored and those stored while on are ignored, so "
        "changing it needs no retraining",
    )
    # Most word pairs never recur (three quarters of a message's new tokens are pairs). Learned
    # only until the model is 20 nats sure of a message, a model holds 0.31-0.96x the tokens it
    # holds with every pair, and ranks better on 9 of 12 streams (trec07p-early in delivery
    # order: FNR at FPR <= 0.1 % 2.72 -> 1.77 %), worse on enron4 (1.21x) and within 5 %
    # on two more (`python -m bench.lab.families_study`, docs/accuracy.md).
    pairs_until_log_odds: float = option(
        20.0,
        scope=OptionScope.LEARNING,
        description="store a trained message's word pairs only while the model is less sure "
        "of its label than this, in log odds (nats) just before training (0: always store "
        "them); its words and shape are always stored, and a model that cannot weigh the "
        "classes yet (below min_learns) stores them all. Acts on the messages trained after "
        "it changes",
        ge=0,
        le=1e6,
    )
    spam_threshold: float = option(
        0.9,
        scope=OptionScope.VERDICT,
        description="ham/spam models: verdict `spam` at spam_probability >= this",
        gt=0,
        le=1,
    )
    ham_threshold: float = option(
        0.1,
        scope=OptionScope.VERDICT,
        description="ham/spam models: verdict `ham` at spam_probability <= this; between the "
        "two, `unsure`",
        ge=0,
        lt=1,
    )
    # Robinson-Fisher, chosen by the best worst case over every shared corpus view, batch split
    # and online (`python -m bench.accuracy --limit 2000 --set ...`, docs/accuracy.md): s=0.03,
    # x=0.5, min_dev=0 is at worst 1.63x bogofilter; bogofilter's own s=0.0178, x=0.52,
    # min_dev=0.375 is at worst 13.7x (online 1-ROCA % spamassassin text-only 0.80 -> 1.41,
    # csdmc2010 text-only 0.058 -> 0.198), min_dev=0.1 at worst 1.78-1.85x.
    rf_strength: float = option(
        0.03,
        scope=OptionScope.SCORING,
        description="robinson-fisher: pull of a rare token's probability toward rf_assumed (s)",
        gt=0,
        le=1000,
    )
    rf_assumed: float = option(
        0.5,
        scope=OptionScope.SCORING,
        description="robinson-fisher: spam probability assumed for an unseen token (x)",
        gt=0,
        lt=1,
    )
    rf_min_dev: float = option(
        0.0,
        scope=OptionScope.SCORING,
        description="robinson-fisher: tokens whose probability is nearer 0.5 than this are ignored",
        ge=0,
        lt=0.5,
    )
    # Correlated tokens (a word and its pairs, a long newsletter's related words) add up without
    # bound under Fisher's independence assumption; Brown's correction reads a message of m > k
    # tokens as k independent ones. k = 300 halves 1-ROCA on trec07p-early in delivery order and
    # leaves every shuffled view within its noise (`python -m bench.lab.overconfidence`,
    # docs/accuracy.md "Overconfident evidence: the bound").
    rf_evidence_cap: int = option(
        300,
        scope=OptionScope.SCORING,
        description="robinson-fisher: a message's voting tokens count as at most this many "
        "independent ones (their mean evidence, this many times); a message with fewer is "
        "scored by Fisher's method alone",
        ge=1,
        le=1_000_000,
    )
    gaussian_attributes: bool = option(
        False,
        scope=OptionScope.SCORING,
        description="score the messages' numeric `attributes` with their tokens, as a "
        "Gaussian per class and attribute (scikit-learn's GaussianNB, var_smoothing 1e-9); "
        "they are learned either way, so changing it needs no retraining",
    )
    # Per model, because short texts (SMS: 43 % have fewer than 11) need a lower floor than mail.
    min_train_tokens: int | None = option(
        None,
        scope=OptionScope.TRAINING,
        description="fewest distinct tokens a message needs to be trained (`null`: the "
        "server's SPAMSIFT_MIN_TRAIN_TOKENS for raw mail, 1 for plain `text`)",
        ge=1,
        le=10_000,
    )
    # Per model, because one server holds models of every size: a shared model may keep a
    # million tokens where each of thousands of personal ones should stay small.
    max_tokens: int | None = option(
        None,
        scope=OptionScope.TRAINING,
        description="tokens the model keeps at most: token expiry deletes the least recently "
        "seen and least informative past it (`null`: the server's "
        "SPAMSIFT_MAX_TOKENS_PER_MODEL, where one is set)",
        ge=1,
        le=2**53,
    )
    # Most word pairs are counted in one message and never recur. Deleted once 2,000 newer
    # messages have been trained, a model holds a median 0.57x the default's tokens at
    # 0.97-1.18x its 1-ROCA (worst: trec07p-early in delivery order; `python -m
    # bench.lab.pair_budget`, docs/accuracy.md "Pair probation"): off by default.
    pair_probation: int | None = option(
        None,
        scope=OptionScope.TRAINING,
        description="token expiry deletes a word pair counted in one trained message only "
        "once this many newer messages have been trained (`null`: pairs are kept); counted "
        "in the messages the ledger remembers",
        ge=1,
        le=1_000_000,  # the keys of that many ledger entries are read at once (64 MB)
    )
    # SPAMSIFT_MIN_LEARNS is 200, as SpamAssassin and rspamd.
    min_learns: int | None = option(
        None,
        scope=OptionScope.VERDICT,
        description="trained messages of each class before verdicts are trusted (below it "
        "every verdict is `unsure`, with a warning; `null`: the server's SPAMSIFT_MIN_LEARNS)",
        ge=0,
        le=1_000_000,
    )
    # 1: the two models' counts are summed as they are, DSPAM's merge.
    personal_weight: int = option(
        1,
        scope=OptionScope.BACKING,
        description="with backed_by: each message trained in this model counts this many "
        "times against the backing model's when classify sums their counts",
        ge=1,
        le=1000,
    )

    @model_validator(mode="after")
    def _thresholds_in_order(self) -> Self:
        if self.ham_threshold > self.spam_threshold:
            raise ValueError(
                f"ham_threshold ({self.ham_threshold}) must not exceed "
                f"spam_threshold ({self.spam_threshold})"
            )
        return self

    def max_tokens_within(self, server: int) -> int | None:
        """The tokens this model keeps at most: its own `max_tokens`, else the server's
        maximum `server` (0: none); None for no maximum."""
        return self.max_tokens or server or None

    def token_families(self) -> frozenset[Family]:
        """The derived token families that are on: made, stored and scored."""
        return frozenset(family for family in FAMILIES if getattr(self, family))

    def to_engine(self) -> NaiveBayesConfig:
        """The engine's config: every option of the same name, the stop words loaded, and
        the prefixes of the token families that are off left out of the vocabulary."""
        engine = {field.name for field in fields(NaiveBayesConfig)}
        options = self.model_dump(include=engine & set(type(self).model_fields))
        return NaiveBayesConfig(
            **{
                **options,
                "stop_words": load_stop_words(self.stop_words),
                "excluded_prefixes": prefixes_left_out(self.token_families()),
                "sure_left_out": FAMILY_PREFIXES["word_pairs"] if self.word_pairs else (),
                "sure_log_odds": self.pairs_until_log_odds or None,  # 0: no bound
            }
        )


def options_of(scope: OptionScope) -> dict[str, FieldInfo]:
    """The declarations of the options of `scope`, in declaration order."""
    return {
        name: field for name, field in ModelConfig.model_fields.items() if scope_of(field) is scope
    }


EVALUATED = (OptionScope.SCORING, OptionScope.LEARNING)


def evaluated_options() -> dict[str, FieldInfo]:
    """The options `spamsift evaluate` and the benchmarks measure on a corpus."""
    return {name: field for scope in EVALUATED for name, field in options_of(scope).items()}


def scope_of(field: FieldInfo) -> OptionScope:
    extra = field.json_schema_extra
    assert isinstance(extra, dict)
    return OptionScope(str(extra["x-scope"]))


def shown_default(value: Any) -> str:
    """A default as the docs and the CLI show it: `english`, `1.0`, `null`."""
    return f"`{value}`" if isinstance(value, str) else f"`{json.dumps(value)}`"


CONFIG_FIELDS = frozenset(ModelConfig.model_fields)


def option_defaults(
    classes: tuple[str, ...], *, min_learns: int, min_train_tokens: int, max_tokens: int
) -> dict[str, Any]:
    """The value each option of a model of `classes` takes when it is not set: the server's
    own (`min_learns`, `min_train_tokens`, `max_tokens`: 0 for none) where the model's
    default is the server's."""
    defaults = parse_config({}, classes=classes).model_dump(mode="json")
    return {
        **defaults,
        "min_learns": min_learns,
        "min_train_tokens": min_train_tokens,
        "max_tokens": max_tokens or None,
    }


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


def max_tokens_of(options: dict[str, Any], classes: tuple[str, ...], *, server: int) -> int | None:
    """The tokens a model of stored `options` keeps at most: its own `max_tokens`, else the
    server's maximum `server` (0: none); None for no maximum. What token expiry keeps and
    what bounds a write's growth."""
    return parse_config(options, classes=classes).max_tokens_within(server)


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
