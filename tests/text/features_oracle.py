"""Raw mail's own numbers and its body digest as they were read before they were made faster
(commit 46203af): the header cut at the first empty line of either kind, looked for through
the whole message, and every header field split out. The tests hold the faster code to these
answers; `python -m bench.lab.per_message_steps` times them as its baseline."""

from __future__ import annotations

import hashlib
import math
import re

_FIELD = re.compile(rb"^([!-9;-~]+):", re.MULTILINE)
_TAG = re.compile(rb"<[a-zA-Z/!][^<>]{0,2000}>")
_ADDRESS = re.compile(rb"[^\s<>,;:\"'@]+@[^\s<>,;:\"'@]+")


def header_end_before(raw: bytes) -> tuple[int, int] | None:
    ends = [(end, len(blank)) for blank in (b"\n\n", b"\n\r\n") if (end := raw.find(blank)) >= 0]
    return min(ends) if ends else None


def mail_features_before(raw: bytes, *, max_scan_bytes: int) -> dict[str, float]:
    end = header_end_before(raw)
    head, body = (raw, b"") if end is None else (raw[: end[0]], raw[sum(end) :])
    scanned = body[:max_scan_bytes]
    tags = sum(len(match) for match in _TAG.findall(scanned))
    starts = list(_FIELD.finditer(head))
    stops = [match.start() for match in starts[1:]] + [len(head)]
    fields = [
        (match.group(1).lower(), head[match.end() : stop])
        for match, stop in zip(starts, stops[: len(starts)], strict=True)
    ]
    recipients = sum(len(_ADDRESS.findall(v)) for name, v in fields if name in (b"to", b"cc"))
    lowered = scanned.lower()
    links = lowered.count(b"http://") + lowered.count(b"https://") + lowered.count(b"www.")
    return {
        "mail:html_share": tags / len(scanned) if scanned else 0.0,
        "mail:log_links": math.log2(1 + links),
        "mail:log_recipients": math.log2(1 + recipients),
        "mail:log_size": math.log2(1 + len(raw)),
        "mail:received_hops": float(sum(1 for name, _ in fields if name == b"received")),
    }


def body_digest_before(raw: bytes) -> str:
    end = header_end_before(raw)
    body = raw if end is None else raw[sum(end) :]  # no empty line: the whole message
    return hashlib.sha256(body.replace(b"\r\n", b"\n").rstrip()).hexdigest()
