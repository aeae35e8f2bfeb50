"""Where a command sends its messages: the local database, or a running server (`--url`).

Both answer alike: training results as the service's `TrainResult`, classifications as the
API's JSON object (SPEC §6.1). A message the filter will not take (no tokens, too large, a label
the model lacks) raises `Refused`, which a caller may skip; anything else that stops the work
(unknown model, database or server unavailable, a refused API key) raises `CommandError`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

import httpx

from app.cli.answers import answer_json
from app.config import Settings
from app.errors import InvalidInput, MessageTooLarge, SpamsiftError
from app.service.messages import Message

if TYPE_CHECKING:  # the local stack (numpy, scipy, SQLAlchemy) loads only when used: a
    # `classify --url` in a mail filter starts in a fraction of the time
    from app.service.runtime import Database, Runtime
    from app.service.training import TrainResult

API_KEY_VARIABLE = "SPAMSIFT_API_KEY"
RFC822 = "message/rfc822"
# Answers that refuse the message or the batch, not the whole command: the caller may split a
# batch to find the message at fault (a batch is one transaction: all of it or none).
REFUSING_STATUSES = frozenset({413, 422})
REFUSING_CODES = frozenset({"time_budget_exceeded"})
MAX_ATTEMPTS = 5  # for 503 (database busy or down), with the server's Retry-After between


@dataclass(frozen=True)
class Trained:
    """What training (or feedback) did to one message."""

    message_id: str
    label: str
    previous_label: str | None
    changed: bool


class Refused(Exception):
    """The message (or a batch holding it) was refused; the reason says why."""

    def __init__(self, reason: str, *, code: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code  # the error code of SPEC §6, e.g. "unknown_label"


class CommandError(Exception):
    """The command cannot go on; the message says why."""


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


class RemoteTarget:
    """A spamsift server, over its HTTP API (SPEC §6), with httpx.

    A single message goes as `message/rfc822`, byte for byte. A training batch goes as JSON to
    `…/train/batch` (one transaction on the server); a message whose bytes are not UTF-8 cannot
    travel in JSON unchanged (not `batchable`), so it is trained alone, as `message/rfc822`.
    """

    def __init__(self, url: str, *, model: str, api_key: str | None, timeout: float) -> None:
        self.model = model
        headers = {"User-Agent": "spamsift-cli"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.url = url.rstrip("/")
        self.client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        self.base = f"/v1/models/{quote(model, safe='')}"

    def train_batch(self, items: Sequence[tuple[Message, str]]) -> list[Trained]:
        if len(items) == 1 and not self.batchable(items[0][0]):
            return [self._train_one_raw(*items[0])]
        batch = []
        for message, label in items:
            body = _json_message(message)
            if body is None:
                raise ValueError("a message that is not UTF-8 is trained alone (batchable)")
            batch.append({**body, "label": label})
        answer = self._send("POST", f"{self.base}/train/batch", json={"items": batch})
        return [_train_result(result) for result in answer["results"]]

    def batchable(self, message: Message) -> bool:
        """Tell whether the message can travel in a JSON batch unchanged (its bytes are UTF-8)."""
        return _json_message(message) is not None

    def classes(self) -> list[str] | None:
        try:
            answer = self._send("GET", self.base)
        except CommandError as error:
            if " answered 401 " in str(error) or " answered 403 " in str(error):
                return None  # reading a model needs the admin scope; training will tell
            raise
        return [str(label) for label in answer["classes"]]

    def _train_one_raw(self, message: Message, label: str) -> Trained:
        params = {"label": label, **_id_param(message)}
        return _train_result(
            self._send(
                "POST", f"{self.base}/train", params=params, content=_raw_bytes(message), raw=True
            )
        )

    def classify(self, message: Message) -> dict[str, Any]:
        if message.raw is not None:
            return self._send(
                "POST",
                f"{self.base}/classify",
                params=_id_param(message),
                content=_raw_bytes(message),
                raw=True,
            )
        return self._send("POST", f"{self.base}/classify", json=_json_message(message))

    def feedback(self, *, label: str, message_id: str | None, message: Message | None) -> Trained:
        if message is not None and message.raw is not None:
            params = {"label": label, **({"message_id": message_id} if message_id else {})}
            answer = self._send(
                "POST",
                f"{self.base}/feedback",
                params=params,
                content=_raw_bytes(message),
                raw=True,
            )
        else:
            body: dict[str, Any] = {"label": label}
            if message_id:
                body["message_id"] = message_id
            if message is not None:
                body["text"] = message.text
            answer = self._send("POST", f"{self.base}/feedback", json=body)
        return _train_result(answer)

    def close(self) -> None:
        self.client.close()

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json: Any = None,
        content: bytes | None = None,
        raw: bool = False,
    ) -> dict[str, Any]:
        headers = {"Content-Type": RFC822} if raw else None
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                response = self.client.request(
                    method, path, params=params, json=json, content=content, headers=headers
                )
            except httpx.HTTPError as error:
                raise CommandError(f"cannot reach {self.url}: {error}") from error
            if response.status_code == 503 and attempt < MAX_ATTEMPTS:
                code, _ = _error_of(response)
                if code not in REFUSING_CODES:
                    time.sleep(_retry_after(response, attempt))
                    continue
            if response.is_success:
                answer: dict[str, Any] = response.json()
                return answer
            code, text = _error_of(response)
            if response.status_code in REFUSING_STATUSES or code in REFUSING_CODES:
                raise Refused(text, code=code)
            raise CommandError(f"{self.url} answered {response.status_code} {code}: {text}")
        raise AssertionError("unreachable")


def _train_result(answer: dict[str, Any]) -> Trained:
    return Trained(
        message_id=answer["message_id"],
        label=answer["label"],
        previous_label=answer.get("previous_label"),
        changed=bool(answer["changed"]),
    )


def _trained(result: TrainResult) -> Trained:
    return Trained(result.message_id, result.label, result.previous_label, result.changed)


def _json_message(message: Message) -> dict[str, Any] | None:
    """The message as JSON fields, or None when its raw bytes are not UTF-8."""
    body: dict[str, Any] = {}
    if message.message_id:
        body["message_id"] = message.message_id
    if message.raw is None:
        return {**body, "text": message.text}
    try:
        text = _raw_bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return {**body, "raw": text}


def _raw_bytes(message: Message) -> bytes:
    raw = message.raw
    assert raw is not None
    return raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogateescape")


def _id_param(message: Message) -> dict[str, str]:
    return {"message_id": message.message_id} if message.message_id else {}


def _error_of(response: httpx.Response) -> tuple[str, str]:
    try:
        error = response.json()["error"]
        return str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        return "error", response.text[:200] or response.reason_phrase


def _retry_after(response: httpx.Response, attempt: int) -> float:
    try:
        seconds = float(response.headers.get("Retry-After", ""))
        return min(seconds, 10.0)
    except ValueError:
        return min(0.5 * 2.0**attempt, 10.0)
