"""A message's identity as it was read before it was made faster (commit 980aa9f): the
Message-ID from the raw header and the SHA-256 of a message's token lines. The tests hold the
faster code to these answers; the hot-path study (`python -m bench.lab.hot_path`) times them
as its baseline."""

from __future__ import annotations

import hashlib
import re

from app.service.messages import MAX_MESSAGE_ID_CHARS

_FIELD_NAME = re.compile(rb"[!-9;-~]+:")


def digest_before(token_counts: dict[str, int]) -> str:
    lines = [f"{token}\t{token_counts[token]}\n" for token in sorted(token_counts)]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def message_id_before(raw: bytes) -> str | None:
    header: list[bytes] = []
    current = b""
    for line in raw.split(b"\n"):
        if line.startswith(b"From ") and not header and not current:
            continue
        if line[:1] in (b" ", b"\t") and current:
            current += line
            continue
        if current:
            header.append(current)
        if not _FIELD_NAME.match(line):
            current = b""
            break
        current = line
    if current:
        header.append(current)
    for field in header:
        name, _, value = field.partition(b":")
        if name.strip().lower() == b"message-id":
            text = " ".join(value.decode("utf-8", "replace").split())
            if text and len(text) <= MAX_MESSAGE_ID_CHARS and text.isprintable():
                return text
            return None
    return None
