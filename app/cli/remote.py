"""A spamsift server as a command's target (`--url`), over its HTTP API with httpx: imported
only when a command is given --url, so that a local command does not load an HTTP client.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx

from app.cli.outcomes import REFUSING_CODES, BadArgument, CommandError, Refused, Trained
from app.service.messages import Message

RFC822 = "message/rfc822"
# Answers that refuse the message or the batch, not the whole command: the caller may split a
# batch to find the message at fault (a batch is one transaction: all of it or none).
REFUSING_STATUSES = frozenset({413, 422})
MAX_ATTEMPTS = 5  # for 503 (database busy or down), with the server's Retry-After between


class RemoteTarget:
    """A spamsift server, over its HTTP API, with httpx.

    A single message goes as `message/rfc822`, byte for byte. A training batch goes as JSON to
    `…/train/batch` (one transaction on the server); a message whose bytes are not UTF-8 cannot
    travel in JSON unchanged (not `batchable`), so it is trained alone, as `message/rfc822`.
    """

    def __init__(self, url: str, *, model: str, api_key: str | None, timeout: float) -> None:
        self.model = model
        self.url = url.rstrip("/")
        self.client = _client(self.url, api_key=api_key, timeout=timeout)
        self.base = _path(model)

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


class RemoteAdmin:
    """A spamsift server's models, as `spamsift models … --url` manages them."""

    def __init__(self, url: str, *, api_key: str | None) -> None:
        self.url = url.rstrip("/")
        self.client = _client(self.url, api_key=api_key, timeout=30.0)

    def all(self) -> list[dict[str, Any]]:
        models: list[dict[str, Any]] = self._send("GET", "/v1/models")["models"]
        return models

    def create(self, name: str, classes: list[str] | None, options: dict[str, Any]) -> Any:
        body = {"name": name, **options, **({"classes": classes} if classes else {})}
        return self._send("POST", "/v1/models", json=body)

    def show(self, name: str) -> dict[str, Any]:
        model: dict[str, Any] = self._send("GET", _path(name))
        return model

    def change(self, name: str, options: dict[str, Any]) -> dict[str, Any]:
        model: dict[str, Any] = self._send("PATCH", _path(name), json=options)
        return model

    def delete(self, name: str) -> None:
        self._send("DELETE", _path(name), params={"confirm": name})

    def stats(self, name: str) -> dict[str, Any]:
        stats: dict[str, Any] = self._send("GET", f"{_path(name)}/stats")
        return stats

    def close(self) -> None:
        self.client.close()

    def _send(self, method: str, path: str, **options: Any) -> Any:
        try:
            response = self.client.request(method, path, **options)
        except httpx.HTTPError as error:
            raise CommandError(f"cannot reach {self.url}: {error}") from error
        if response.is_success:
            return response.json() if response.content else None
        try:
            detail = response.json()["error"]
            reason = f"{detail['code']}: {detail['message']}"
        except (ValueError, KeyError, TypeError):
            reason = response.text[:200]
        failure = BadArgument if response.status_code == 422 else CommandError
        raise failure(f"{self.url} answered {response.status_code} {reason}")


def _client(url: str, *, api_key: str | None, timeout: float) -> httpx.Client:
    headers = {"User-Agent": "spamsift-cli"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return httpx.Client(base_url=url, headers=headers, timeout=timeout)


def _path(name: str) -> str:
    return f"/v1/models/{quote(name, safe='')}"
