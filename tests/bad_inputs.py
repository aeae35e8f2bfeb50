"""Generators of the bad messages of ROBUSTNESS.md B.1 (I01, I06-I33), shared by the tokenizer
tests and the HTTP tests.

Each `BadInput` names its catalogue row and builds its bytes on demand (some are 10 MiB), once
per run. `defects` lists the codes the answer must carry for it (the tokenizer may note more).
"""

from __future__ import annotations

import base64
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial

FROM = b"From: a@example.org\n"
HEADERS = FROM + b"Subject: test\n"


def multipart(boundary: bytes, *parts: bytes, close: bool = True) -> bytes:
    body = b"".join(b"--" + boundary + b"\n" + part + b"\n" for part in parts)
    return body + (b"--" + boundary + b"--\n" if close else b"")


def mixed_line_endings(message: bytes) -> bytes:
    lines = message.split(b"\n")
    endings = [b"\r\n", b"\n", b"\r"]
    return b"".join(line + endings[i % 3] for i, line in enumerate(lines[:-1])) + lines[-1]


LINE_ENDINGS_MESSAGE = (
    b"From: a@example.org\nSubject: =?utf-8?Q?caf=C3=A9?=\n continued\n"
    b"Content-Type: multipart/alternative; boundary=b\n\n"
    + multipart(
        b"b",
        b"Content-Type: text/plain\nContent-Transfer-Encoding: quoted-printable\n\n"
        b"soft=\nbreak and some more words to learn from",
        b"Content-Type: text/html\n\n<p>html\nwords</p>",
    )
)


def line_ending_variants(message: bytes = LINE_ENDINGS_MESSAGE) -> dict[str, bytes]:
    """The same message with LF, CRLF, CR-only and mixed line endings (I09)."""
    return {
        "lf": message,
        "crlf": message.replace(b"\n", b"\r\n"),
        "cr": message.replace(b"\n", b"\r"),
        "mixed": mixed_line_endings(message),
    }


def random_bytes(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def zip_bomb(expanded_bytes: int) -> bytes:
    """A small zip archive of one file of zeros that expands to `expanded_bytes`."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(1024 * 1024)
    data = b"".join(compressor.compress(chunk) for _ in range(expanded_bytes // len(chunk)))
    data += compressor.flush()
    crc = 0
    for _ in range(expanded_bytes // len(chunk)):
        crc = zlib.crc32(chunk, crc)
    name = b"zeros.bin"
    local = (
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00\x00\x00\x00\x00"
        + crc.to_bytes(4, "little")
        + len(data).to_bytes(4, "little")
        + expanded_bytes.to_bytes(4, "little")
        + len(name).to_bytes(2, "little")
        + b"\x00\x00"
        + name
    )
    central = (
        b"PK\x01\x02\x14\x00\x14\x00\x00\x00\x08\x00\x00\x00\x00\x00"
        + crc.to_bytes(4, "little")
        + len(data).to_bytes(4, "little")
        + expanded_bytes.to_bytes(4, "little")
        + len(name).to_bytes(2, "little")
        + b"\x00" * 12
        + (0).to_bytes(4, "little")
        + name
    )
    end = (
        b"PK\x05\x06\x00\x00\x00\x00\x01\x00\x01\x00"
        + len(central).to_bytes(4, "little")
        + (len(local) + len(data)).to_bytes(4, "little")
        + b"\x00\x00"
    )
    return local + data + central + end


def nested_multiparts(depth: int, innermost: bytes = b"deepest") -> bytes:
    nested = b"".join(
        b"Content-Type: multipart/mixed; boundary=b%d\n\n--b%d\n" % (i, i) for i in range(depth)
    )
    return HEADERS + nested + b"\n" + innermost + b"\n"


def nested_messages(depth: int) -> bytes:
    return HEADERS + b"Content-Type: message/rfc822\n\n" * depth + b"Subject: deep\n\ndeepest"


def parts_with_content_type(count: int, content_type: bytes) -> bytes:
    raw = HEADERS + b"Content-Type: multipart/mixed; boundary=z\n\n"
    part = b"--z\nContent-Type: " + content_type + b"\n\nw%d\n"
    return raw + b"".join(part % i for i in range(count)) + b"--z--\n"


def many_parts(count: int) -> bytes:
    raw = HEADERS + b"Content-Type: multipart/mixed; boundary=z\n\n"
    return raw + b"".join(b"--z\n\nw%d\n" % i for i in range(count)) + b"--z--\n"


def dictionary_words(size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    words: list[bytes] = []
    total = 0
    while total < size:
        word = b"w%d" % rng.randrange(10**9)
        words.append(word)
        total += len(word) + 1
    return b" ".join(words)


def with_body(body: bytes, headers: bytes = HEADERS) -> bytes:
    return headers + b"\n" + body


def repeated(unit: bytes, count: int, prefix: bytes) -> bytes:
    return prefix + unit * count


REGEX_KILLERS = {
    "a50k-bang": b"a" * 50_000 + b"!",
    "url-dots": b"http://" + b"a." * 50_000,
    "at-signs": b"@" * 100_000,
    "encoded-word-openers": b"=?" * 100_000,
    "angle-brackets": b"<" * 100_000,
}

UNICODE_TRICKS = [
    "v\u200biagra",
    "p\u0430ypal",
    "\uff56\uff49\uff41\uff47\uff52\uff41",
    "v\u0301iagra",
    "\u202eviagra",
    "vi\u00adagra",
]


@dataclass(frozen=True)
class BadInput:
    row: str  # catalogue row, "I06"
    name: str
    make: Callable[[], bytes] = field(repr=False, compare=False)
    defects: frozenset[str] = frozenset()  # codes the answer must carry

    @property
    def id(self) -> str:
        return f"{self.row}-{self.name}"

    def build(self) -> bytes:
        return _build(self)


@cache
def _build(bad: BadInput) -> bytes:
    return bad.make()


def _b(row: str, name: str, make: Callable[[], bytes], *defects: str) -> BadInput:
    return BadInput(row, name, make, frozenset(defects))


def catalogue() -> list[BadInput]:
    """Every message-shaped input of B.1 (I02-I05 and I26's HTTP part are wire-level)."""
    inputs = [
        _b("I01", "empty", lambda: b""),
        _b("I06", "random-10MiB", lambda: random_bytes(10 * 1024 * 1024, 6), "no_headers"),
        _b(
            "I06",
            "png",
            lambda: b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random_bytes(4096, 7),
            "no_headers",
        ),
        _b(
            "I06",
            "json-document",
            lambda: b'{"subject": "hello", "to": ["x@example.org"], "n": [1, 2, 3]}',
            "no_headers",
        ),
        _b("I07", "headers-only", lambda: b"From: a@example.org\nSubject: only headers here"),
        _b(
            "I08",
            "mbox-from-line",
            lambda: b"From somebody Mon Jan 1 00:00:00 2024\nhello there, body only",
            "no_headers",
        ),
        *(_b("I09", ending, partial(bytes, raw)) for ending, raw in line_ending_variants().items()),
        _b(
            "I10",
            "nul-bytes",
            lambda: b"Subj\x00ect: a\x00b\nTo: x\x00@example.org\n\nbo\x00dy words \x00 here",
        ),
        _b("I10", "all-byte-values", lambda: with_body(bytes(range(256)) * 100)),
        _b("I11", "latin-1-subject", lambda: b"Subject: caf\xe9 cr\xe8me br\xfbl\xe9e\n\nx"),
        _b(
            "I11", "shift-jis-subject", lambda: b"Subject: " + "会議".encode("shift_jis") + b"\n\nx"
        ),
        _b("I11", "gb2312-subject", lambda: b"Subject: " + "发票".encode("gb2312") + b"\n\nx"),
        *(
            _b(
                "I12",
                f"charset-{charset.decode()}",
                partial(
                    with_body,
                    b"caf\xc3\xa9 ok xn--caf",
                    HEADERS + b"Content-Type: text/plain; charset=" + charset + b"\n",
                ),
                "bad_charset",
            )
            for charset in (b"x-bogus", b"rot13", b"zlib", b"idna")
        ),
        *(
            _b(
                "I13",
                name,
                partial(with_body, body, HEADERS + b"Content-Transfer-Encoding: base64\n"),
            )
            for name, body in [
                ("vfvf-600-lines", b"vfvf" * 60 * 600),
                ("starts-with-equals", b"=" + b"aGVsbG8="),
                ("missing-padding", b"aGVsbG8"),
                ("bad-padding", b"aGVsbG8gd29ybGQ===x"),
                ("truncated-utf8", base64.b64encode("été".encode())[:-2]),
            ]
        ),
        _b(
            "I14",
            "broken-quoted-printable",
            lambda: (
                HEADERS + b"Content-Transfer-Encoding: quoted-printable\n\nsoft=\r\nbreak =ZZ end="
            ),
        ),
        *(
            _b("I15", name, partial(with_body, b"x", b"Subject: " + subject + b"\n"))
            for name, subject in [
                ("unterminated", b"=?ISO-8859-1?Q?unterminated"),
                ("badly-folded", b"=?utf-8?B?YWJj\n folded?="),
                ("invalid", b"=?  invalid ?="),
                ("unknown-charset", b"=?x-unknown?Q?abc?="),
                ("bad-base64", b"=?utf-8?B?#####?="),
                ("bad-qp", b"=?utf-8?Q?=ZZ=?="),
            ]
        ),
        _b(
            "I16",
            "5MB-subject",
            lambda: b"Subject: " + b"spam " * 1_000_000 + b"\n\nbody",
            "truncated",
        ),
        _b(
            "I17",
            "100k-header-fields",
            lambda: b"".join(b"To: u%d@example.org\n" % i for i in range(100_000)) + b"\nbody",
            "truncated",
        ),
        _b(
            "I18",
            "to-20k-addresses",
            lambda: (
                b"To: "
                + b", ".join(b"user%d@example%d.org" % (i, i) for i in range(20_000))
                + b"\n\nbody"
            ),
        ),
        _b(
            "I18",
            "subject-8k-encoded-words",
            lambda: b"Subject: " + b" ".join([b"=?utf-8?B?dGVzdA==?="] * 8000) + b"\n\nbody",
        ),
        *(
            # The email package split a value's parameters in time quadratic in its semicolons
            # (a real spam's `text/html ; ; ; ...` took 0.1 s a part): 100 parts of such values
            _b("I18", name, partial(parts_with_content_type, 100, value))
            for name, value in [
                ("content-type-8k-semicolons-x100-parts", b"text/plain" + b" ;" * 4000),
                ("content-type-quoted-semicolons-x100-parts", b'text/plain; a="' + b";" * 8000),
            ]
        ),
        _b(
            "I18",
            "content-type-8k-params",
            lambda: (
                b"Content-Type: text/plain; "
                + b"; ".join(b"p%d=v" % i for i in range(8000))
                + b"\n\nbody"
            ),
        ),
        *(
            _b("I19", name, partial(with_body, b"body words", HEADERS + header + b"\n"))
            for name, header in [
                ("message-id-brackets", b"Message-ID: <[ABCDEF====@microsoft.com]>"),
                ("to-quote", b'To: "'),
                ("to-comment-colon", b"To: (c):"),
                ("cc-trailing-comma", b"Cc: a@b,"),
            ]
        ),
        *(
            _b("I20", name, partial(with_body, b"body", HEADERS + header + b"\n"))
            for name, header in [
                ("name-star", b"Content-Type: text/plain; name*"),
                ("name-star-0-star", b"Content-Type: text/plain; name*0*=utf-8''a%ZZ; name*1*=b"),
                (
                    "filename-star-pieces",
                    b"Content-Disposition: attachment; filename*0*=''; filename*=x'y'",
                ),
            ]
        ),
        _b(
            "I21",
            "two-boundaries",
            lambda: (
                HEADERS
                + b'Content-Type: multipart/mixed; boundary="one"; boundary="two"\n\n'
                + multipart(b"one", b"\nfirst")
                + multipart(b"two", b"\nsecond")
            ),
        ),
        _b(
            "I21",
            "no-boundary",
            lambda: HEADERS + b"Content-Type: multipart/mixed\n\n--x\n\nhello\n--x--\n",
            "bad_mime",
        ),
        _b(
            "I21",
            "start-boundary-missing",
            lambda: HEADERS + b"Content-Type: multipart/mixed; boundary=b\n\nhello\n--b--\n",
            "bad_mime",
        ),
        _b(
            "I21",
            "closing-boundary-missing",
            lambda: (
                HEADERS
                + b"Content-Type: multipart/mixed; boundary=b\n\n"
                + multipart(b"b", b"\nlast", close=False)
            ),
            "bad_mime",
        ),
        _b(
            "I22",
            "100k-not-the-boundary",
            lambda: (
                HEADERS
                + b"Content-Type: multipart/mixed; boundary=b\n\n--b\n\nhello\n"
                + b"--not-the-boundary--\n" * 100_001
                + b"--b--\n"
            ),
        ),
        _b("I23", "10100-parts", lambda: many_parts(10_100), "truncated"),
        _b("I23", "600k-parts", lambda: many_parts(600_000), "truncated"),
        _b("I24", "multipart-x3000", lambda: nested_multiparts(3000), "mime_depth"),
        _b("I24", "rfc822-x5000", lambda: nested_messages(5000), "mime_depth"),
        _b("I24", "rfc822-x100k", lambda: nested_messages(100_000), "mime_depth"),
        _b(
            "I24",
            "nested-pkcs7",
            lambda: (
                HEADERS
                + b"Content-Type: application/pkcs7-mime\nContent-Transfer-Encoding: base64\n\n"
                + base64.encodebytes(b"Content-Type: application/pkcs7-mime\n\n" * 1000)
            ),
        ),
        _b(
            "I25",
            "9MB-base64-attachment",
            lambda: (
                HEADERS
                + b"Content-Type: multipart/mixed; boundary=z\n\n"
                + multipart(
                    b"z",
                    b"\nhi",
                    b"Content-Type: application/octet-stream\n"
                    b"Content-Transfer-Encoding: base64\n\n"
                    + base64.encodebytes(random_bytes(6_600_000, 25)),  # 9 MB encoded
                )
            ),
        ),
        _b(
            "I26",
            "zip-bomb-attachment",
            lambda: (
                HEADERS
                + b"Content-Type: multipart/mixed; boundary=z\n\n"
                + multipart(
                    b"z",
                    b"\nsee the attachment",
                    b"Content-Type: application/zip; name=bomb.zip\n"
                    b"Content-Transfer-Encoding: base64\n\n"
                    + base64.encodebytes(zip_bomb(1024 * 1024 * 1024)),
                )
            ),
        ),
        *(
            _b(
                "I27",
                name,
                partial(repeated, html, count, HEADERS + b"Content-Type: text/html\n\n"),
            )
            for name, html, count in [
                ("5MB-unclosed-tags", b"<div ", 1_000_000),
                ("unclosed-href", b"<a href='x ", 500_000),
                ("b-i-nesting", b"<b>" * 20_000 + b"<i>" * 20_000 + b"x</b>" * 20_000, 1),
                ("cdata-100k", b"<![CDATA[", 100_000),
                ("comments-100k", b"<!--", 100_000),
            ]
        ),
        _b("I28", "10MB-no-whitespace", lambda: with_body(b"A" * 10_000_000), "truncated"),
        _b("I28", "1MB-url", lambda: with_body(b"http://" + b"a" * 1_000_000 + b".com/x")),
        _b(
            "I29", "5MB-dictionary", lambda: with_body(dictionary_words(5_000_000, 29)), "truncated"
        ),
        *(
            _b("I30", f"body-{name}", partial(with_body, text))
            for name, text in REGEX_KILLERS.items()
        ),
        *(
            _b(
                "I30",
                f"subject-{name}",
                partial(with_body, b"body", FROM + b"Subject: " + text + b"\n"),
            )
            for name, text in REGEX_KILLERS.items()
        ),
        _b(
            "I31",
            "unicode-tricks",
            lambda: (
                b"Subject: "
                + " ".join(UNICODE_TRICKS).encode()
                + b"\nContent-Type: text/plain; charset=utf-8\n\n"
                + "\n".join(UNICODE_TRICKS).encode()
            ),
        ),
        *(
            _b(
                "I32",
                name,
                partial(
                    with_body,
                    b"ok " + bad + b" ok",
                    FROM + b"Subject: x" + bad + b"\nContent-Type: text/plain; charset=utf-8\n",
                ),
            )
            for name, bad in [
                ("overlong-nul", b"\xc0\x80"),
                ("above-10ffff", b"\xf4\x90\x80\x80"),
                ("surrogate-bytes", b"\xed\xa0\x80"),
            ]
        ),
        _b(
            "I33",
            "date-50-years-ahead",
            lambda: HEADERS + b"Date: Tue, 21 Nov 2076 09:30:00 +0000\n\nhello from the future",
        ),
        _b("I33", "date-garbage", lambda: HEADERS + b"Date: yesterday-ish (\x01)\n\nhello"),
    ]
    return inputs
