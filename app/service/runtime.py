"""What one spamsift process is built of: settings, the database, and the process's rooms.

`Runtime` only wires them: the live models (`app.live.models.LiveModels`, within the memory
budget) and the buffer of classification records (`app.live.records.ClassificationLog`) live
in their own room, and every change to a model goes through `app.live.write.ModelWrite`.

Each kind of process assembles one: the server in app/main.py (with its background
scheduler, app/service/scheduler.py), a local CLI command through `open_command_runtime`
(app/cli/targets.py). Only `spamsift serve` and `spamsift db upgrade` migrate the schema
(app/serving.py); a command finds it current or stops, naming `spamsift db upgrade`.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import fields, replace
from datetime import datetime
from typing import Any, Literal

from app.bayes.naive_bayes import NaiveBayesConfig
from app.config import Settings
from app.errors import DatabaseUnavailable, SpamsiftError, StorageFull
from app.live.group_commit import GroupCommit
from app.live.models import LiveModels
from app.live.records import ClassificationLog
from app.live.write import TokenLimits
from app.message_caps import MessageCaps
from app.service.messages import Message, PreparedMessage, prepare
from app.service.model_config import max_tokens_of, parse_config
from app.service.stats_cache import StatsCache
from app.store.engine import Database as Database  # named by the CLI through its root
from app.store.ledger import ClassificationRecord
from app.store.schema_version import schema_state
from app.text import TokenizerLimits
from app.text.core import TokenCore, resolve

log = logging.getLogger(__name__)


def tokenizer_limits(settings: Settings) -> TokenizerLimits:
    """The message-level caps of `settings`, as the text room takes them (no time budget)."""
    return TokenizerLimits(**{cap.name: getattr(settings, cap.name) for cap in fields(MessageCaps)})


def token_limits(settings: Settings) -> TokenLimits:
    """The bounds on new tokens of `settings` and of each model's own `max_tokens`, for
    training (`TokenLimits` says how far past its maximum a model may grow between two
    expiry runs)."""
    return TokenLimits(
        new_per_write=settings.max_new_tokens_per_request,
        maximum_of=lambda live: max_tokens_of(
            live.options, live.classes, server=settings.max_tokens_per_model
        ),
    )


def with_time_budget(limits: TokenizerLimits, seconds: float) -> TokenizerLimits:
    # Per message, not per request: a batch of a thousand messages must not have its last ones
    # cut (or refused) because the first ones took the time; each message is bounded by the
    # caps anyway, so a batch's time stays proportional to its size.
    return replace(limits, deadline=time.monotonic() + seconds, clock=time.monotonic)


def engine_config(options: dict[str, Any], classes: tuple[str, ...]) -> NaiveBayesConfig:
    """The engine's config of a model with stored `options` (checked by ModelConfig)."""
    return parse_config(options, classes=classes).to_engine()


class Runtime:
    def __init__(self, settings: Settings, db: Database | None = None) -> None:
        self.settings = settings
        # This process's token core, passed to every text call: CoreUnavailable if not built.
        self.core: TokenCore = resolve(settings.tokenizer)
        self.token_core = self.core.name
        self.db = db or open_database(settings)
        self.models = LiveModels(
            self.db,
            sync_interval_seconds=settings.sync_interval_seconds,
            engine_config=engine_config,
            max_bytes=int(settings.live_models_max_mb * 1024 * 1024),
        )
        self.log = ClassificationLog(
            self.db,
            retention_days=settings.retention_days,
            max_records=settings.max_buffered_records,
            max_records_per_key=settings.max_records_per_key,
        )
        self.limits = tokenizer_limits(settings)
        self.token_limits = token_limits(settings)
        # Concurrent writes to one model share a transaction (a burst of feedback clicks).
        self.group_commit = GroupCommit(self.db, self.models, limits=self.token_limits)
        self.stats = StatsCache()  # the dashboard's figures, per model generation

    def prepare(
        self, message: Message, budget: Literal["classify", "train"] | None = None
    ) -> PreparedMessage:
        """Check and tokenize `message`, within the time budget of a classify or a train."""
        limits = self.limits if budget is None else self.budgeted_limits(budget)
        return prepare(
            message,
            limits=limits,
            max_message_bytes=self.settings.max_message_bytes,
            core=self.core,
            # Raw mail's own numbers: always learned; a classification adds them only for a
            # model that scores them (`messages.with_features`).
            features=budget != "classify",
        )

    def budget_seconds(self, kind: Literal["classify", "train"]) -> float:
        if kind == "classify":
            return self.settings.classify_time_budget_seconds
        return self.settings.train_time_budget_seconds

    def budgeted_limits(self, kind: Literal["classify", "train"]) -> TokenizerLimits:
        """The tokenizer limits for one message, its time budget starting now."""
        return with_time_budget(self.limits, self.budget_seconds(kind))

    def retention_start(self) -> datetime | None:
        """The oldest classification time still kept, or None when nothing is kept."""
        return self.log.retention_start()

    def record_classifications(
        self,
        model_id: int,
        records: list[ClassificationRecord],
        events: Counter[str],
        *,
        key_id: str | None = None,
    ) -> None:
        """Keep `records` for feedback (within `key_id`'s quota, for a tenant's key)."""
        self.log.record(model_id, records, events, key_id=key_id)

    def flush_classifications(self, model_id: int | None = None) -> None:
        """Write buffered classification records and counters (only `model_id`'s records)."""
        self.log.flush(model_id)

    def expire(self) -> int:
        """Delete classification records past the retention period, in small chunks."""
        return self.log.prune()

    def close(self) -> None:
        """Write what is still buffered and let the database go (the server stops its
        scheduler first)."""
        try:
            self.log.flush()
        except (DatabaseUnavailable, StorageFull):
            log.warning("could not write the last classification records: database unavailable")
        self.db.dispose()


class SchemaNotCurrent(SpamsiftError):
    """The database's schema is not this version's, and the command may not migrate it."""

    code = "schema_not_current"


def open_database(settings: Settings) -> Database:
    return Database(settings.database_url, lock_timeout_seconds=settings.lock_timeout_seconds)


def open_command_database(settings: Settings) -> Database:
    """The database of a local command, its schema found current: a command never migrates,
    so that procmail's `spamsift classify` of every message never takes the write lock to
    look. SchemaNotCurrent naming what to do otherwise; DatabaseUnavailable when unusable."""
    db = open_database(settings)
    try:
        state = schema_state(db)
    except BaseException:
        db.dispose()
        raise
    if state == "current":
        return db
    db.dispose()
    if state == "behind":
        raise SchemaNotCurrent(
            "the database's schema is older than this spamsift: run `spamsift db upgrade` "
            "(or start `spamsift serve`, which upgrades it)"
        )
    raise SchemaNotCurrent(
        "the database's schema is newer than this spamsift: it was upgraded by a later "
        "version; run that version"
    )


def open_command_runtime(settings: Settings) -> Runtime:
    """A local command's process: the Runtime on its checked database (as open_command_database)."""
    return Runtime(settings, open_command_database(settings))
