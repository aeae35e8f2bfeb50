"""Domain errors of spamsift. Each carries the machine `code` the API returns; none knows HTTP.

SpamsiftError
├── InvalidInput            the request asks for something impossible ("invalid_input")
│   ├── InvalidConfig       a model config value is out of range ("invalid_config")
│   ├── InvalidMessage      a message cannot be used as given ("invalid_message")
│   │   └── TooFewTokens    fewer tokens than min_train_tokens to train ("too_few_tokens")
│   ├── UnknownLabel        a label that is not one of the model's classes ("unknown_label")
│   ├── NotConfirmed        a destructive call without its confirmation ("confirmation_required")
│   └── InvalidBacking      a backing relation that cannot be ("invalid_backing")
├── NotFound                ("not_found")
│   ├── ModelNotFound       ("model_not_found")
│   └── MessageNotFound     ("message_not_found")
├── Conflict                ("conflict")
│   ├── ModelExists         ("model_exists")
│   ├── NotTrained          ("not_trained")
│   ├── ModelBacksOthers    deleting a model other models are backed by ("model_backs_others")
│   └── LastAdminKey        revoking the key that alone can manage the others ("last_admin_key")
├── MessageTooLarge         ("message_too_large")
├── BatchTooLarge           ("batch_too_large")
├── TooManyNewTokens        a write would add more tokens than allowed ("too_many_new_tokens")
├── Unauthorized            no API key, or an unknown or revoked one ("unauthorized")
├── Forbidden               a valid API key without the scope or the model ("forbidden")
├── TooManyFailures         a client that failed authentication too often ("too_many_failures")
├── TooManyRequests         an API key over its share of the server ("too_many_requests")
├── TimeBudgetExceeded      training ran out of its time budget ("time_budget_exceeded")
├── DatabaseUnavailable     ("database_unavailable")
└── StorageFull             the database's disk or quota is full ("storage_full")
"""

from __future__ import annotations


class SpamsiftError(Exception):
    """Base of every error spamsift raises on purpose."""

    code = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(SpamsiftError):
    code = "invalid_input"


class InvalidConfig(InvalidInput):
    code = "invalid_config"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class InvalidMessage(InvalidInput):
    code = "invalid_message"


class TooFewTokens(InvalidMessage):
    code = "too_few_tokens"  # rspamd's min_tokens: too little evidence to learn from


class UnknownLabel(InvalidInput):
    code = "unknown_label"


class NotConfirmed(InvalidInput):
    code = "confirmation_required"  # e.g. deleting a model without ?confirm=<its name>


class InvalidBacking(InvalidInput):
    code = "invalid_backing"  # self-backing, a chain, other classes, or no such model


class NotFound(SpamsiftError):
    code = "not_found"


class ModelNotFound(NotFound):
    code = "model_not_found"


class MessageNotFound(NotFound):
    code = "message_not_found"


class Conflict(SpamsiftError):
    code = "conflict"


class ModelExists(Conflict):
    code = "model_exists"


class NotTrained(Conflict):
    code = "not_trained"  # some class of the model has no trained message yet


class ModelBacksOthers(Conflict):
    code = "model_backs_others"

    def __init__(self, name: str, backed: str) -> None:
        super().__init__(
            f"model {name!r} backs the models {backed}: clear their backed_by "
            "(or delete them) first"
        )


class LastAdminKey(Conflict):
    code = "last_admin_key"


class MessageTooLarge(SpamsiftError):
    code = "message_too_large"


class BatchTooLarge(SpamsiftError):
    code = "batch_too_large"


class TooManyNewTokens(SpamsiftError):
    """A write would add more new tokens than one request may, or grow the model past its
    bound; nothing was written. A vocabulary flood (random words) is refused so; ordinary
    mail never comes near either bound (docs/security.md)."""

    code = "too_many_new_tokens"


class Unauthorized(SpamsiftError):
    code = "unauthorized"


class Forbidden(SpamsiftError):
    code = "forbidden"


class TooManyFailures(SpamsiftError):
    code = "too_many_failures"

    def __init__(self, message: str, *, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class TooManyRequests(SpamsiftError):
    """An API key has as many requests in progress as it may have (per process); retry."""

    code = "too_many_requests"

    def __init__(self, message: str, *, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class TimeBudgetExceeded(SpamsiftError):
    """Tokenizing a message to train ran past the request's time budget; nothing was applied.

    Training on the part read in time would depend on the machine's load, so it is refused;
    with the message-level caps no message needs the budget on an idle server, so the client
    should retry later (503 with Retry-After).
    """

    code = "time_budget_exceeded"


class DatabaseUnavailable(SpamsiftError):
    code = "database_unavailable"  # connection lost, server down, or a lock wait beyond the budget


class StorageFull(SpamsiftError):
    """The database could not grow (disk, file system or quota full): the write was rolled
    back whole. Unlike DatabaseUnavailable it does not pass by itself; an operator must act."""

    code = "storage_full"
