"""Raw mail's own numeric features (the Gaussian attributes' `mail:` numbers), and the split
of header and body they share with the body digest."""

from __future__ import annotations

import math

from hypothesis import example, given
from hypothesis import strategies as st

from app.service.messages import body_digest
from app.text.features import mail_features
from tests.text.features_oracle import body_digest_before, mail_features_before

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
        b"<b>",
        b"http://",
        b"WWW.",
    ]
)


@given(st.lists(header_pieces, max_size=60).map(b"".join))
@example(b"To: a@b\n\r\n\n<b>x")  # the CRLF blank line first, ending where the LF one starts
def test_the_features_are_those_of_every_field_split_out(raw: bytes) -> None:
    for scan in (3, 100):
        assert mail_features(raw, max_scan_bytes=scan) == mail_features_before(
            raw, max_scan_bytes=scan
        )


@given(st.lists(header_pieces, max_size=60).map(b"".join))
@example(b"To: a@b\n\r\n\nbody")
def test_the_body_digest_hashes_the_body_after_the_first_empty_line_of_either_kind(
    raw: bytes,
) -> None:
    assert body_digest(raw) == body_digest_before(raw)
