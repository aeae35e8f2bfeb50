"""A labelled corpus message, kept free of heavy imports: the CLI reads corpora with it
(`spamsift train` must start fast) and the evaluation use case scores them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LabelledMessage:
    """A corpus message: raw RFC 822 bytes (`raw`) or plain text (`text`), and its label."""

    id: str
    label: str
    raw: bytes | None = None
    text: str | None = None
