"""Where a command sends its messages: the local database, or a running server (`--url`,
app/cli/remote.py).

Both answer alike: training results as `Trained` (app/cli/outcomes.py), classifications as
the API's JSON object. A message the filter will not take (no tokens, too large, a label
the model lacks) raises `Refused`, which a caller may skip; anything else that stops the work
(unknown model, database or server unavailable, a refused API key) raises `CommandError`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from app.cli.answers import answer_json
from app.cli.outcomes import REFUSING_CODES, CommandError, Refused, Trained
from app.config import Settings
from app.errors import InvalidInput, MessageTooLarge, SpamsiftError
from app.service.messages import Message

if TYPE_CHECKING:  # the runtime and training are imported where a local target uses them
    from app.service.runtime import Database, Runtime
    from app.service.training import TrainResult

API_KEY_VARIABLE = "SPAMSIFT_API_KEY"


class Target(Protocol):
    """What train, classify and feedback need from the database or a server."""

    model: str

    def train_batch(self, items: Sequence[tuple[Message, str]]) -> list[Trained]: ...

    def batchable(self, message: Message) -> bool:
        """Tell whether `message` may share a batch; if not, train it alone."""
        ...

    def classify(self, message: Message) -> dict[str, Any]: ...

    def classes(self) -> list[str] | None:
        """The model's classes; None when the server will not say (a key without admin)."""
        ...

    def feedback(
        self, *, label: str, message_id: str | None, message: Message | None
    ) -> Trained: ...

    def close(self) -> None: ...


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(command_name=parser.prog)  # "spamsift train": names the database
    parser.add_argument("--model", default="default", help="model name (default: default)")
    parser.add_argument(
        "--url",
        help="a running spamsift server (e.g. http://127.0.0.1:8000) instead of the local "
        "database of SPAMSIFT_DATABASE_URL",
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"API key for --url (default: ${API_KEY_VARIABLE}); prefer the variable, since "
        "arguments show in the process list",
    )
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for the server (--url)"
    )


class DatabaseMissing(SpamsiftError):
    """A command that never creates a database found none where it looked."""

    code = "database_missing"


def announce_database(command: str, settings: Settings) -> None:
    """Name the database a command works on, on stderr (password masked); refuse to go on
    when it is a SQLite file that does not exist: only `serve` and `db upgrade` create one,
    so that a command run from the wrong folder never trains or keys a new empty file."""
    from app.serving import describe_database, sqlite_file

    print(f"{command}: database {describe_database(settings.database_url)}", file=sys.stderr)
    path = sqlite_file(settings.database_url)
    if path is not None and not path.exists():
        raise DatabaseMissing(
            f"no database at {path}; point SPAMSIFT_DATABASE_URL at yours "
            "(e.g. sqlite:////var/lib/spamsift/spamsift.db), or create this one with "
            "`spamsift db upgrade`"
        )


def local_runtime(command: str, settings: Settings) -> Runtime:
    """A local command's process, assembled once (app.service.runtime): the database of
    SPAMSIFT_DATABASE_URL, named on stderr, found at this version's schema (only `serve` and
    `db upgrade` migrate it; SchemaNotCurrent says to run the latter), and the service's
    Runtime on it. A database that cannot be used raises DatabaseUnavailable naming the
    driver's cause as `spamsift db upgrade` says it (`database "x" does not exist`, not the
    API's "unreachable … retry later"), so a mistyped URL is named alike by every command."""
    from app.service.runtime import open_command_runtime

    announce_database(command, settings)
    with _described_database_failure(settings):
        return open_command_runtime(settings)


@contextmanager
def local_database(command: str) -> Iterator[Database]:
    """The database of a local command, as `local_runtime` opens it, disposed after."""
    from app.service.runtime import open_command_database

    settings = Settings()
    announce_database(command, settings)
    with _described_database_failure(settings):
        db = open_command_database(settings)
    try:
        yield db
    finally:
        db.dispose()


@contextmanager
def _described_database_failure(settings: Settings) -> Iterator[None]:
    from app.errors import DatabaseUnavailable
    from app.serving import describe_database_failure

    try:
        yield
    except DatabaseUnavailable as error:
        raise DatabaseUnavailable(
            describe_database_failure(error, settings.database_url)
        ) from error


def open_target(args: argparse.Namespace) -> Target:
    """The local database, or the server of --url."""
    if args.url:
        from app.cli.remote import RemoteTarget  # httpx: only for --url

        api_key = args.api_key or os.environ.get(API_KEY_VARIABLE) or None
        return RemoteTarget(args.url, model=args.model, api_key=api_key, timeout=args.timeout)
    return LocalTarget(Settings(), model=args.model, command=args.command_name)


class LocalTarget:
    """The database of SPAMSIFT_DATABASE_URL, through the service as the server uses it."""

    def __init__(self, settings: Settings, *, model: str, command: str = "spamsift") -> None:
        self.model = model
        self.settings = settings
        try:
            self.runtime: Runtime = local_runtime(command, settings)
        except SpamsiftError as error:
            raise CommandError(error.message) from error

    def train_batch(self, items: Sequence[tuple[Message, str]]) -> list[Trained]:
        from app.service.training import train_batch

        with _local_errors():
            results = train_batch(self.runtime, model_name=self.model, items=items)
        return [_trained(result) for result in results]

    def batchable(self, message: Message) -> bool:
        return True

    def classes(self) -> list[str] | None:
        from app.service.models import get_model

        with _local_errors():
            return list(get_model(self.runtime, name=self.model).classes)

    def classify(self, message: Message) -> dict[str, Any]:
        from app.service.classification import classify

        with _local_errors():
            result = classify(self.runtime, model_name=self.model, message=message)
        answer: dict[str, Any] = answer_json(result)
        return answer

    def feedback(self, *, label: str, message_id: str | None, message: Message | None) -> Trained:
        from app.service.training import apply_feedback

        with _local_errors():
            result = apply_feedback(
                self.runtime,
                model_name=self.model,
                label=label,
                message_id=message_id,
                message=message,
            )
        return _trained(result)

    def close(self) -> None:
        self.runtime.close()  # writes the classification records kept for feedback


@contextmanager
def _local_errors() -> Iterator[None]:
    """Turn the service's errors into Refused (this message) or CommandError (stop)."""
    try:
        yield
    except (InvalidInput, MessageTooLarge) as error:
        raise Refused(error.message, code=error.code) from error
    except SpamsiftError as error:
        if error.code in REFUSING_CODES:
            raise Refused(error.message, code=error.code) from error
        raise CommandError(error.message) from error


def _trained(result: TrainResult) -> Trained:
    return Trained(result.message_id, result.label, result.previous_label, result.changed)
