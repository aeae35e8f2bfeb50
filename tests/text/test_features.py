"""Raw mail's own numeric features (the Gaussian attributes' `mail:` numbers), and the split
of header and body they share with the body digest."""

from __future__ import annotations

import hashlib
import math
import re

from hypothesis import example, given
from hypothesis import strategies as st

from app.service.messages import body_digest
from app.text.features import mail_features

MESSAGE = (
    b"Received: from a.example.org by b.example.org; Mon, 1 Jan 2007 00:00:00 +0000\r\n"
    b"Received: from c.example.org\r\n\tby a.example.org; Mon, 1 Jan 2007 00:00:00 +0000\r\n"
    b"To: alice@example.org,\r\n bob@example.org\r\n"
    b"Cc: Carol <carol@example.net>\r\n"
    b"Subject: see http://not.a.body.link\r\n"
    b"\r\n"
    b"<html><body>Visit http://x.example.com and www.example.com now</body></html>"
)


def test_the_features_of_a_message_are_counted_from_its_header_and_body() -> None:
    features = mail_features(MESSAGE, max_scan_bytes=10_000)
    body = MESSAGE.split(b"\r\n\r\n", 1)[1]
    tags = len(b"<html><body>") + len(b"</body></html>")
    assert features == {
        "mail:html_share": tags / len(body),
        "mail:log_links": math.log2(1 + 2),
        "mail:log_recipients": math.log2(1 + 3),
        "mail:log_size": math.log2(1 + len(MESSAGE)),
        "mail:received_hops": 2.0,
    }


def test_only_the_first_max_scan_bytes_of_the_body_are_read() -> None:
    features = mail_features(MESSAGE, max_scan_bytes=10)
    assert features["mail:log_links"] == 0.0
    assert features["mail:log_size"] == math.log2(1 + len(MESSAGE))


def test_a_message_without_a_body_or_header_has_zero_features_but_its_size() -> None:
    features = mail_features(b"no header here", max_scan_bytes=100)
    assert features["mail:html_share"] == 0.0
    assert features["mail:received_hops"] == 0.0


@given(st.binary(max_size=2000))
def test_any_bytes_give_five_finite_features(raw: bytes) -> None:
    features = mail_features(raw, max_scan_bytes=1000)
    assert len(features) == 5
    assert all(math.isfinite(value) for value in features.values())
    assert 0.0 <= features["mail:html_share"] <= 1.0


# The features' first reading of the header (cut at the first blank line of either kind,
# every field split out), kept as the reference for the faster one that looks only for the
# fields it counts.
_FIELD = re.compile(rb"^([!-9;-~]+):", re.MULTILINE)
_TAG = re.compile(rb"<[a-zA-Z/!][^<>]{0,2000}>")
_ADDRESS = re.compile(rb"[^\s<>,;:\"'@]+@[^\s<>,;:\"'@]+")


def split_reference(raw: bytes) -> tuple[bytes, bytes]:
    ends = [(end, len(blank)) for blank in (b"\n\n", b"\n\r\n") if (end := raw.find(blank)) >= 0]
    if not ends:
        return raw, b""
    end, length = min(ends)
    return raw[:end], raw[end + length :]


def fields_reference(head: bytes) -> list[tuple[bytes, bytes]]:
    starts = list(_FIELD.finditer(head))
    ends = [match.start() for match in starts[1:]] + [len(head)]
    return [
        (match.group(1).lower(), head[match.end() : end])
        for match, end in zip(starts, ends[: len(starts)], strict=True)
    ]


header_pieces = st.sampled_from(
    [
        b"To:",
        b"to: ",
        b"TO:",
        b"Cc:",
        b"cC:",
        b"Received:",
        b"received-by:",
        b"X-To:",
        b"Tox:",
        b"\n",
        b"\r\n",
        b"\r",
        b" ",
        b"\t",
        b":",
        b"a@b",
        b" x@y.z,",
        b"<c@d>",
        b"Subject:",
        b"z",
    ]
)


@given(st.lists(header_pieces, max_size=60).map(b"".join))
@example(b"To: a@b\n\r\n\n<b>x")  # the CRLF blank line first, ending where the LF one starts
def test_the_header_and_body_are_read_as_when_every_field_was_split_out(raw: bytes) -> None:
    features = mail_features(raw, max_scan_bytes=100)
    head, body = split_reference(raw)
    fields = fields_reference(head)
    recipients = sum(
        len(_ADDRESS.findall(value)) for name, value in fields if name in (b"to", b"cc")
    )
    hops = sum(1 for name, _ in fields if name == b"received")
    assert features["mail:received_hops"] == hops
    assert features["mail:log_recipients"] == math.log2(1 + recipients)
    tags = sum(len(tag) for tag in _TAG.findall(body))
    assert features["mail:html_share"] == (tags / len(body) if body else 0.0)


@given(st.lists(header_pieces, max_size=60).map(b"".join))
@example(b"To: a@b\n\r\n\nbody")
def test_the_body_digest_hashes_the_body_after_the_first_empty_line_of_either_kind(
    raw: bytes,
) -> None:
    # No empty line: the whole message is hashed.
    ends = [end + len(blank) for blank in (b"\n\n", b"\n\r\n") if (end := raw.find(blank)) >= 0]
    body = raw[min(ends) :] if ends else raw
    expected = hashlib.sha256(body.replace(b"\r\n", b"\n").rstrip()).hexdigest()
    assert body_digest(raw) == expected
