"""Shape tokens: size, links and share of HTML, as orders of magnitude."""

import base64

from app.text import TokenizerLimits, evidence_count, hash_text, tokenize_raw, tokenize_text
from app.text.shape import magnitude, shape_tokens
from tests.cores import TOKEN_CORE


def test_magnitude_is_the_base_2_order():
    assert [magnitude(n) for n in (0, 1, 2, 3, 4, 1023, 1024, -5)] == [0, 1, 2, 2, 3, 10, 11, 0]


def test_a_text_gets_its_size_and_links_but_no_html_share():
    counts = tokenize_text(
        "see http://a.example.org/ and https://b.example.org/x", core=TOKEN_CORE
    ).token_counts
    assert counts["size:6"] == 1  # 52 bytes
    assert counts["links:2"] == 1  # two url: tokens
    assert not any(token.startswith("html:") for token in counts)


def test_size_counts_utf8_bytes_the_same_for_bytes_and_str():
    text = "caf\u00e9 " * 100  # 600 bytes in UTF-8, 500 characters
    assert tokenize_text(text, core=TOKEN_CORE).token_counts["size:10"] == 1
    raw = f"Subject: x\nContent-Type: text/plain; charset=utf-8\n\n{text}".encode()
    assert (
        tokenize_raw(raw, core=TOKEN_CORE).token_counts["size:10"] == 1
    )  # the text, not the headers
    assert tokenize_raw(raw.decode("utf-8"), core=TOKEN_CORE).token_counts["size:10"] == 1


def shape_of(raw: bytes) -> list[str]:
    return [
        t
        for t in tokenize_raw(raw, core=TOKEN_CORE).token_counts
        if t.startswith(("size:", "links:"))
    ]


def test_size_is_that_of_the_text_whatever_the_transfer_encoding():
    plain = b"Subject: x\n\n" + b"word " * 100
    encoded = b"Subject: x\nContent-Transfer-Encoding: base64\n\n" + base64.encodebytes(
        b"word " * 100
    )
    assert shape_of(plain) == shape_of(encoded) == ["size:9", "links:0"]


def test_html_share_of_mime_mail():
    plain = b"Subject: x\n\nhello"
    html = b"Subject: x\nContent-Type: text/html\n\n<p>hello</p>"
    both = (
        b"Subject: x\nContent-Type: multipart/alternative; boundary=b\n\n--b\n"
        b"Content-Type: text/plain\n\nhello\n--b\nContent-Type: text/html\n\n<p>hello</p>\n--b--\n"
    )
    image = b"Subject: x\nContent-Type: image/png\n\nxx"
    shares = [
        [t for t in tokenize_raw(raw, core=TOKEN_CORE).token_counts if t.startswith("html:")]
        for raw in (plain, html, both, image)
    ]
    assert shares == [["html:0"], ["html:4"], ["html:2"], ["html:none"]]


def test_shape_tokens_are_three_at_most_whatever_the_input():
    assert (
        len(shape_tokens(10**12, ["url:x"] * 100_000, ["text/html"] * 1000, core=TOKEN_CORE)) == 3
    )
    huge = tokenize_raw(b"Subject: x\n\n" + b"http://a.example.org/ " * 200_000, core=TOKEN_CORE)
    # 4.4 MB of links, read up to the 512 KiB scan cap: about 24,000 links
    assert [t for t in huge.token_counts if t.startswith(("size:", "links:"))] == [
        "size:20",
        "links:15",
    ]


def test_no_shape_token_once_the_deadline_has_passed():
    limits = TokenizerLimits(deadline=0.0, clock=lambda: 0.0)
    assert tokenize_text("some words", limits=limits, core=TOKEN_CORE).token_counts == {}


def test_a_message_without_any_other_token_gets_no_shape_token():
    assert tokenize_text("", core=TOKEN_CORE).token_counts == {}
    assert tokenize_text(" \n\t ", core=TOKEN_CORE).token_counts == {}
    assert tokenize_raw(b"", core=TOKEN_CORE).token_counts == {}


def test_links_count_every_url_token_with_either_core(token_core):
    # URLs of the body text and HTML link targets, one of them twice.
    raw = (
        b"Subject: x\nContent-Type: text/html\n\n"
        b'<a href="http://a.example.org/">http://b.example.org/</a> www.c.example.org'
        b' <a href="http://b.example.org/">again</a>'
    )
    counts = tokenize_raw(raw, core=token_core).token_counts
    urls = sum(count for token, count in counts.items() if token.startswith("url:"))
    assert urls == 4
    assert "links:3" in counts  # 4 has order of magnitude 3


def test_evidence_leaves_out_pairs_and_shape_with_either_core(token_core):
    tokens = hash_text("cheap pills today", core=token_core)
    assert evidence_count(tokens, core=token_core) == 3  # cheap, pills, today; not 2 pairs, 2 shape
    assert len(tokens) == 7
