"""Raw messages as the command line handles them: their Message-ID, and spamsift's own headers.

spamsift marks mail with `X-Spamsift-Verdict` and `X-Spamsift-Probability`, and the SpamAssassin-
style `X-Spam-Flag`, `X-Spam-Status` and `X-Spam-Level` (`classify --add-header`,
app/service/verdict_headers.py). The X-Spamsift-* fields are removed before a message is
classified, trained or reported, so the filter never learns its own verdict (a message filed as
spam would otherwise teach "x-spamsift-verdict:spam"), and a message reported from a mailbox is the
message that was classified. They are removed from the output of `--add-header` too: a sender could
otherwise forge `X-Spamsift-Verdict: ham` for the rules after the filter to trust.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.service.verdict_headers import DEFAULT_SPAM_THRESHOLD, SpamHeaderNames, verdict_headers

OWN_HEADER_PREFIX = b"x-spamsift-"
DEFAULT_NAMES = SpamHeaderNames()

_FIELD_NAME = re.compile(rb"[!-9;-~]+:")  # RFC 5322 field name: printable ASCII but ':'


@dataclass(frozen=True)
class HeaderBlock:
    """A raw message cut in three: an mbox `From ` line (or b""), the header fields (each with
    its continuation lines and line ends, exactly as given), and the rest from the blank line on."""

    envelope: bytes
    fields: list[bytes]
    rest: bytes

    def join(self) -> bytes:
        return self.envelope + b"".join(self.fields) + self.rest


def split_header_block(raw: bytes) -> HeaderBlock:
    """Cut `raw` into envelope line, header fields and rest; byte-exact: join() gives it back."""
    position = 0
    envelope = b""
    if raw.startswith(b"From "):
        end = _line_end(raw, 0)
        envelope, position = raw[:end], end
    fields: list[bytes] = []
    while position < len(raw):
        end = _line_end(raw, position)
        line = raw[position:end]
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1] += line  # a continuation line belongs to the field before it
        elif _FIELD_NAME.match(line):
            fields.append(line)
        else:
            break  # the blank line (or the first line that is no header): the body starts
        position = end
    return HeaderBlock(envelope, fields, raw[position:])


def strip_own_headers(raw: bytes) -> bytes:
    """Return `raw` without any X-Spamsift-* field; every other byte unchanged."""
    block = split_header_block(raw)
    kept = [field for field in block.fields if not _is_own(field)]
    if len(kept) == len(block.fields):
        return raw
    return HeaderBlock(block.envelope, kept, block.rest).join()


def add_verdict_headers(
    raw: bytes,
    *,
    verdict: str,
    probability: float | None,
    names: SpamHeaderNames = DEFAULT_NAMES,
    spam_threshold: float = DEFAULT_SPAM_THRESHOLD,
) -> bytes:
    """Return `raw` with the verdict's header fields (`verdict_headers`: X-Spamsift-Verdict,
    X-Spamsift-Probability, X-Spam-Flag, X-Spam-Status, X-Spam-Level) first in its header
    block (after an mbox `From ` line), in the message's own line ending; any X-Spamsift-*
    field or field of those X-Spam names already there is dropped (a sender's forgery),
    every other byte is kept as it was."""
    block = split_header_block(raw)
    first_line = block.fields[0] if block.fields else raw[: _line_end(raw, 0)]
    newline = b"\r\n" if first_line.endswith(b"\r\n") else b"\n"
    fields = verdict_headers(
        verdict=verdict, probability=probability, spam_threshold=spam_threshold, names=names
    )
    added = [f"{name}: {value}".encode() + newline for name, value in fields]
    replaced = {name.lower().encode() for name in names.all()}
    kept = [
        field
        for field in block.fields
        if not _is_own(field) and field.split(b":", 1)[0].strip().lower() not in replaced
    ]
    rest = block.rest
    if not block.fields and not rest.startswith((b"\r\n", b"\n")):
        rest = newline + rest  # a message without headers: keep its text out of the new block
    return HeaderBlock(block.envelope, added + kept, rest).join()


def _is_own(field: bytes) -> bool:
    return field[: len(OWN_HEADER_PREFIX)].lower() == OWN_HEADER_PREFIX


def _line_end(raw: bytes, start: int) -> int:
    end = raw.find(b"\n", start)
    return len(raw) if end < 0 else end + 1
