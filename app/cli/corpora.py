"""Readers for labelled corpora: JSON lines (optionally gzip) as in shared/corpora/README.md."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from app.service.evaluation import LabelledMessage


def read_jsonl(path: Path) -> Iterator[LabelledMessage]:
    """Yield the messages of a `.jsonl` or `.jsonl.gz` corpus.

    E-mail lines carry `encoding`: `text.encode(encoding)` gives back the exact raw bytes, which
    are what the tokenizer parses. Lines without it (SMS) are plain text.
    """
    with _open_text(path) as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                label = record["label"]
                message_id = str(record["id"])
                text = record["text"]
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a corpus line ({error})") from error
            encoding = record.get("encoding")
            if encoding:
                yield LabelledMessage(
                    id=message_id, label=label, raw=text.encode(encoding, "surrogateescape")
                )
            else:
                yield LabelledMessage(id=message_id, label=label, text=text)


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")
