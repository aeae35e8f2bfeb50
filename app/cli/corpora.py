"""Readers for labelled corpora: JSON lines (optionally gzip) as in shared/corpora/README.md."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from app.service.corpus import LabelledMessage

CORPUS_SUFFIXES = (".jsonl", ".jsonl.gz")


def is_corpus(path: Path) -> bool:
    return path.name.endswith(CORPUS_SUFFIXES)


def read_jsonl(path: Path) -> Iterator[LabelledMessage]:
    """Yield the messages of a `.jsonl` or `.jsonl.gz` corpus; ValueError at a bad line."""
    with _open_text(path) as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                yield parse_corpus_line(line, f"{path}:{number}")


def parse_corpus_line(line: str | bytes, origin: str) -> LabelledMessage:
    """Read one corpus line; ValueError naming `origin` when it is not one.

    E-mail lines carry `encoding`: `text.encode(encoding)` gives back the exact raw bytes, which
    are what the tokenizer parses. Lines without it (SMS) are plain text.
    """
    try:
        record = json.loads(line)
        label = record["label"]
        message_id = str(record["id"])
        text = record["text"]
        encoding = record.get("encoding")
        if not isinstance(label, str) or not isinstance(text, str):
            raise TypeError("label and text must be strings")
        if encoding:
            raw = text.encode(encoding, "surrogateescape")
            return LabelledMessage(id=message_id, label=label, raw=raw)
    except (json.JSONDecodeError, KeyError, TypeError, LookupError, UnicodeError) as error:
        raise ValueError(f"{origin}: not a corpus line ({error})") from error
    return LabelledMessage(id=message_id, label=label, text=text)


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")
