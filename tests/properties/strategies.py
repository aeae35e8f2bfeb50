"""Hypothesis strategies for raw `message/rfc822` bodies: the bad inputs of ROBUSTNESS B.1.

Three sources, mixed by `raw_messages()`:
- `catalogue_messages()`: every message-shaped row of tests/bad_inputs.py (I01, I06-I33) at
  its full size (up to 10 MiB); against a small `max_message_bytes` the big ones are refused
  with 413 before they are read;
- `scaled_messages()`: `SCALED`, one body per content row I01-I32 scaled down to under 512 KiB,
  so that those big rows are also parsed, tokenized and trained in a fuzzing run: each still
  crosses the limit it is about (header fields past 1,000, MIME parts past 1,000, depth past
  20, a token past 40 characters, 20,000 distinct tokens ...);
- `generated_messages()`: assembled by Hypothesis from bad header lines and bodies, random
  bytes, NUL and 8-bit bytes, an mbox line, CR/LF/CRLF line endings;
and `oversized()`, one byte past the limit (I02). The HTTP-level rows I02-I05 and I38 are
tested on the wire by tests/api/test_request_limits.py and tests/api/test_bad_inputs*.
"""

from __future__ import annotations

import base64
import io
import random
import zipfile
from collections.abc import Callable

from hypothesis import strategies as st

from tests.bad_inputs import catalogue

HEADERS = b"From: a@example.org\nTo: b@example.net\nSubject: test message\n"
# The words make the message long enough to train (min_train_tokens).
WORDS = b"cheap watches casino prize winner lottery claim bonus offer urgent credit loan today"


def multipart(boundary: bytes, *parts: bytes, close: bool = True) -> bytes:
    body = b"".join(b"--" + boundary + b"\n" + part + b"\n" for part in parts)
    return body + (b"--" + boundary + b"--\n" if close else b"")


def _zip_bomb() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("zeros.bin", b"\0" * 2_000_000)
    return buffer.getvalue()


def _dictionary(n: int) -> bytes:
    rng = random.Random(29)
    return b" ".join(b"w%d" % rng.randrange(10**9) for _ in range(n))


def _line_endings(message: bytes, ending: bytes) -> bytes:
    return message.replace(b"\r\n", b"\n").replace(b"\n", ending)


BASE = (
    HEADERS
    + b"Content-Type: multipart/alternative; boundary=b\n\n"
    + multipart(
        b"b",
        b"Content-Type: text/plain\nContent-Transfer-Encoding: quoted-printable\n\n"
        + WORDS
        + b" soft=\nbreak",
        b"Content-Type: text/html\n\n<p>" + WORDS + b"</p>",
    )
)

# One body per catalogue row (several for some rows), named by the row, under 512 KiB.
SCALED: dict[str, Callable[[], bytes]] = {
    "I01 empty": lambda: b"",
    "I06 random bytes": lambda: random.Random(6).randbytes(64 * 1024),
    "I06 png": lambda: b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random.Random(7).randbytes(4096),
    "I06 json": lambda: b'{"subject": "hello", "to": ["x@example.org"], "text": "' + WORDS + b'"}',
    "I07 headers only": lambda: HEADERS + b"X-Words: " + WORDS,
    "I08 mbox line, no headers": lambda: b"From somebody Mon Jan 1 00:00:00 2024\n" + WORDS,
    "I09 crlf": lambda: _line_endings(BASE, b"\r\n"),
    "I09 cr": lambda: _line_endings(BASE, b"\r"),
    "I10 nul bytes": lambda: (
        b"Subj\x00ect: a\x00b\nTo: x\x00@example.org\n\n\x00" + WORDS + bytes(range(256)) * 4
    ),
    "I11 8-bit headers": lambda: (
        b"Subject: caf\xe9 cr\xe8me " + "会議".encode("shift_jis") + b"\n\n" + WORDS
    ),
    "I12 bogus charsets": lambda: (
        HEADERS
        + b"Content-Type: multipart/mixed; boundary=c\n\n"
        + multipart(
            b"c",
            *[
                b"Content-Type: text/plain; charset=" + charset + b"\n\n" + WORDS + b" caf\xc3\xa9"
                for charset in (b"x-bogus", b"rot13", b"zlib", b"idna", b"base64", b"utf-32")
            ],
        )
    ),
    "I13 invalid base64": lambda: (
        HEADERS + b"Content-Transfer-Encoding: base64\n\n" + b"vfvf!\n" * 600 + b"=aGVsbG8===x"
    ),
    "I14 broken quoted-printable": lambda: (
        HEADERS
        + b"Content-Transfer-Encoding: quoted-printable\n\n"
        + WORDS
        + b" soft=\r\nbreak =ZZ end="
    ),
    "I15 broken encoded words": lambda: (
        b"Subject: =?ISO-8859-1?Q?unterminated =?  invalid ?= "
        + b"=?x-unknown?Q?abc?= =?utf-8?B?#####?= =?utf-8?B?YWJj\n folded?=\n\n"
        + WORDS
    ),
    "I16 long header line": lambda: b"Subject: " + b"spam " * 40_000 + b"\n\n" + WORDS,
    "I17 many header fields": lambda: (
        b"".join(b"To: u%d@example.org\n" % i for i in range(3000)) + b"\n" + WORDS
    ),
    "I18 huge address list": lambda: (
        b"To: "
        + b", ".join(b"user%d@example%d.org" % (i, i) for i in range(5000))
        + b"\nSubject: "
        + b" ".join([b"=?utf-8?B?dGVzdA==?="] * 2000)
        + b"\nContent-Type: text/plain; "
        + b"; ".join(b"p%d=v" % i for i in range(2000))
        + b"\n\n"
        + WORDS
    ),
    "I19 headers that broke the email package": lambda: (
        HEADERS
        + b'Message-ID: <[ABCDEF====@microsoft.com]>\nTo: "\nCc: (c):\nBcc: a@b,\n\n'
        + WORDS
    ),
    "I20 name* parameters": lambda: (
        HEADERS
        + b"Content-Type: text/plain; name*; name*0*=utf-8''a%ZZ; name*1*=b; charset*=utf-8''%E2\n"
        + b"Content-Disposition: attachment; filename*0*=''; filename*=x'y'\n\n"
        + WORDS
    ),
    "I21 two boundaries": lambda: (
        HEADERS
        + b'Content-Type: multipart/mixed; boundary="one"; boundary="two"\n\n'
        + multipart(b"one", b"\n" + WORDS)
        + multipart(b"two", b"\nsecond")
    ),
    "I21 no closing boundary": lambda: (
        HEADERS
        + b"Content-Type: multipart/mixed; boundary=b\n\n"
        + multipart(b"b", b"\n" + WORDS, close=False)
    ),
    "I21 no boundary parameter": lambda: (
        HEADERS + b"Content-Type: multipart/mixed\n\n--x\n\n" + WORDS
    ),
    "I22 not the boundary": lambda: (
        HEADERS
        + b"Content-Type: multipart/mixed; boundary=b\n\n--b\n\n"
        + WORDS
        + b"\n"
        + b"--not-the-boundary--\n" * 10_000
        + b"--b--\n"
    ),
    "I23 many parts": lambda: (
        HEADERS
        + b"Content-Type: multipart/mixed; boundary=z\n\n"
        + b"".join(b"--z\n\nw%d\n" % i for i in range(1100))
        + b"--z--\n"
    ),
    "I24 deep multipart": lambda: (
        HEADERS
        + b"".join(
            b"Content-Type: multipart/mixed; boundary=b%d\n\n--b%d\n" % (i, i) for i in range(500)
        )
        + b"\n"
        + WORDS
    ),
    "I24 deep message/rfc822": lambda: (
        HEADERS + b"Content-Type: message/rfc822\n\n" * 2000 + b"Subject: deep\n\n" + WORDS
    ),
    "I24 nested pkcs7": lambda: (
        HEADERS
        + b"Content-Type: application/pkcs7-mime\nContent-Transfer-Encoding: base64\n\n"
        + base64.encodebytes(b"Content-Type: application/pkcs7-mime\n\n" * 200)
    ),
    "I25 base64 attachment": lambda: (
        HEADERS
        + b"Content-Type: multipart/mixed; boundary=z\n\n"
        + multipart(
            b"z",
            b"\n" + WORDS,
            b"Content-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n\n"
            + base64.encodebytes(random.Random(25).randbytes(96 * 1024)),
        )
    ),
    "I26 zip bomb": lambda: (
        HEADERS
        + b"Content-Type: multipart/mixed; boundary=z\n\n"
        + multipart(
            b"z",
            b"\n" + WORDS,
            b"Content-Type: application/zip\nContent-Transfer-Encoding: base64\n\n"
            + base64.encodebytes(_zip_bomb()),
        )
    ),
    "I27 html bomb": lambda: (
        HEADERS
        + b"Content-Type: text/html\n\n"
        + b"<b>" * 5000
        + b"<i>" * 5000
        + b"x</b>" * 5000
        + b"<![CDATA[" * 5000
        + b"<a href='x " * 5000
    ),
    "I28 no whitespace": lambda: HEADERS + b"\n" + b"A" * 200_000 + b" http://" + b"a" * 50_000,
    "I29 dictionary attack": lambda: HEADERS + b"\n" + _dictionary(25_000),
    "I30 regex killers": lambda: (
        HEADERS
        + b"Subject: "
        + b"=?" * 20_000
        + b"\n\n"
        + b"a" * 20_000
        + b"! http://"
        + b"a." * 20_000
        + b" "
        + b"@" * 20_000
        + b" "
        + b"<" * 20_000
    ),
    "I31 unicode tricks": lambda: (
        HEADERS
        + b"Content-Type: text/plain; charset=utf-8\n\n"
        + "v\u200biagra \uff56\uff49\uff41\uff47\uff52\uff41 vi\u00adagra \u202eviagra p\u0430ypal "
        "v\u0301iagra ".encode()
        + WORDS
    ),
    "I32 invalid utf-8": lambda: (
        b"Subject: x\xc0\x80\xed\xa0\x80\n"
        + b"Content-Type: text/plain; charset=utf-8\n\n"
        + WORDS
        + b" \xc0\x80 \xf4\x90\x80\x80 \xed\xa0\x80 \xff\xfe ok"
    ),
}

# Header lines and bodies for generated messages (from the rows above, small).
HEADER_LINES = [
    b"From: a@example.org",
    b"To: b@example.net",
    b"Subject: " + WORDS,
    b"Subject: =?utf-8?B?YWJj\n folded?=",
    b"Subject: =?ISO-8859-1?Q?unterminated",
    b"Subject: caf\xe9",
    b"Message-ID: <[ABCDEF====@microsoft.com]>",
    b"Message-ID: <x@example.org>",
    b'To: "',
    b"Cc: a@b,",
    b"Date: Mon, 1 Jan 2076 00:00:00 +0000",
    b"Date: garbage",
    b"Content-Type: text/plain; charset=x-bogus",
    b"Content-Type: text/plain; name*",
    b"Content-Type: text/html",
    b"Content-Type: multipart/mixed; boundary=b",
    b"Content-Type: message/rfc822",
    b"Content-Transfer-Encoding: base64",
    b"Content-Transfer-Encoding: quoted-printable",
    b"X-Null: a\x00b",
    b"no colon in this line",
    b" continuation without a field",
]
BODIES = [
    WORDS,
    b"vfvf" * 100,
    b"=ZZ soft=\nbreak end=",
    b"--b\n\n" + WORDS + b"\n--b--\n",
    b"<b><i>" * 200 + WORDS,
    b"A" * 2000,
    bytes(range(256)),
    "v\u200biagra \uff56\uff49\uff41\uff47\uff52\uff41".encode(),
]


@st.composite
def generated_messages(draw: st.DrawFn) -> bytes:
    """A message assembled from bad header lines and bodies, or random bytes."""
    headers = draw(st.lists(st.sampled_from(HEADER_LINES), max_size=8))
    body = draw(st.one_of(st.sampled_from(BODIES), st.binary(max_size=512)))
    extra = draw(st.binary(max_size=64))
    separator = draw(st.sampled_from([b"\n\n", b"\n", b""]))
    ending = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    mbox = b"From somebody Mon Jan 1 00:00:00 2024\n" if draw(st.booleans()) else b""
    message = mbox + b"\n".join(headers) + separator + body + extra
    return _line_endings(message, ending)


def catalogue_messages() -> st.SearchStrategy[bytes]:
    """The rows of tests/bad_inputs.py at full size, each built once per process."""
    return st.sampled_from(catalogue()).map(lambda bad: bad.build())


def scaled_messages() -> st.SearchStrategy[bytes]:
    """The `SCALED` bodies, built once each, by name."""
    return st.sampled_from(sorted(SCALED)).map(lambda name: _cached(name))


_CACHE: dict[str, bytes] = {}


def _cached(name: str) -> bytes:
    if name not in _CACHE:
        _CACHE[name] = SCALED[name]()
    return _CACHE[name]


def oversized(limit: int) -> st.SearchStrategy[bytes]:
    """A body one byte past `limit` (I02 at a small limit)."""
    return st.just(HEADERS + b"\n" + b"x" * (limit + 1 - len(HEADERS) - 1))


def raw_messages(*, max_message_bytes: int | None = None) -> st.SearchStrategy[bytes]:
    """Any raw message body. Out of ten draws: four catalogue rows at full size, three scaled
    ones, two generated, and one past `max_message_bytes` when it is given (else generated)."""
    sources = [catalogue_messages()] * 4 + [scaled_messages()] * 3 + [generated_messages()] * 2
    sources.append(
        generated_messages() if max_message_bytes is None else oversized(max_message_bytes)
    )
    return st.integers(0, 9).flatmap(lambda n: sources[n])
