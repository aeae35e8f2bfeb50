"""A service result printed as the HTTP API answers it: the result types are the API's
response models, so both serialize them the same way."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter


def answer_json(result: Any) -> Any:
    """`result` as JSON data, field names as the API spells them (`class`)."""
    kind = type(result)
    adapter = _ADAPTERS.get(kind) or _ADAPTERS.setdefault(kind, TypeAdapter(kind))
    return adapter.dump_python(result, mode="json", by_alias=True)


_ADAPTERS: dict[type, TypeAdapter[Any]] = {}
