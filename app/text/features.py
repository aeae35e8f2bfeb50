"""A raw message's own numeric features, for Gaussian attributes (the continuous twin of the
`size:`/`links:`/`html:` shape tokens, which discretize the same kind of numbers).

Read from the raw bytes alone, without the MIME parse the tokenizer makes, so they cost one
pass of a few regular expressions over at most `max_scan_bytes` of the message:

- `mail:log_size`: log2(1 + bytes of the whole message);
- `mail:log_links`: log2(1 + links), links being `http(s)://` and `www.` in the body;
- `mail:html_share`: the share of the body's bytes inside HTML tags (0 for plain text);
- `mail:log_recipients`: log2(1 + addresses in To and Cc);
- `mail:received_hops`: the number of Received fields.

Counts are taken in log2 because a Gaussian fits their heavy tails poorly. The names start
with `mail:`, a prefix a client's own attributes may not use.
"""

from __future__ import annotations

import math
import re

FEATURE_PREFIX = "mail:"

_TAG = re.compile(rb"<[a-zA-Z/!][^<>]{0,2000}>")
_FIELD_START = re.compile(rb"^([!-9;-~]+):", re.MULTILINE)
_ADDRESS = re.compile(rb"[^\s<>,;:\"'@]+@[^\s<>,;:\"'@]+")


def mail_features(raw: bytes, *, max_scan_bytes: int) -> dict[str, float]:
    """The message's own features (see the module's docstring); never raise."""
    head, body = _split(raw)
    scanned = body[:max_scan_bytes]
    tags = sum(len(match) for match in _TAG.findall(scanned))
    fields = _fields(head)
    recipients = sum(len(_ADDRESS.findall(value)) for name, value in fields if name in _RECIPIENT)
    hops = sum(1 for name, _ in fields if name == b"received")
    return {
        f"{FEATURE_PREFIX}html_share": tags / len(scanned) if scanned else 0.0,
        f"{FEATURE_PREFIX}log_links": math.log2(1 + _links(scanned)),
        f"{FEATURE_PREFIX}log_recipients": math.log2(1 + recipients),
        f"{FEATURE_PREFIX}log_size": math.log2(1 + len(raw)),
        f"{FEATURE_PREFIX}received_hops": float(hops),
    }


_RECIPIENT = frozenset({b"to", b"cc"})


def _links(body: bytes) -> int:
    """`http://`, `https://` and `www.` in any case: counted in the lowered bytes, 10 times
    faster than a case-blind regular expression (0.011 against 0.11 ms a spamassassin
    message)."""
    lowered = body.lower()
    return lowered.count(b"http://") + lowered.count(b"https://") + lowered.count(b"www.")


def _split(raw: bytes) -> tuple[bytes, bytes]:
    """The header block and the body, at the first empty line (LF or CRLF)."""
    ends = [(end, len(blank)) for blank in (b"\n\n", b"\n\r\n") if (end := raw.find(blank)) >= 0]
    if not ends:
        return raw, b""
    end, length = min(ends)
    return raw[:end], raw[end + length :]


def _fields(head: bytes) -> list[tuple[bytes, bytes]]:
    """(lower-case name, value with its continuation lines) of each header field."""
    starts = list(_FIELD_START.finditer(head))
    ends = [match.start() for match in starts[1:]] + [len(head)]
    return [
        (match.group(1).lower(), head[match.end() : end])
        for match, end in zip(starts, ends[: len(starts)], strict=True)
    ]
