"""Header block -> fields; RFC 2047 decoding; header tokens prefixed by the header name.

The header block is split here, not by the `email` package: the caps of TokenizerLimits
(8 KiB per value, 1 000 fields) apply before any parsing, so a 5 MB Subject, 100 000 fields
or a To of 20 000 addresses cost one linear pass (ROBUSTNESS I16-I18), and the structured
header parser of `policy.default`, quadratic on such input (cpython#136063), never runs.
"""

import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from app.text import defects
from app.text.charsets import decode_bytes, decode_str
from app.text.limits import TokenizerLimits
from app.text.words import normalize_text, text_tokens, word_tokens

# RFC 5322 field name: printable ASCII but colon (obsolete syntax allows blanks before it).
_FIELD_NAME = re.compile(r"([!-9;-~]{1,200})[ \t]*:")
# What a message's first line must look like for the input to have headers at all: a
# conventional name, so that JSON ('{"a": 1') or a PNG is read as body (ROBUSTNESS I06).
_FIRST_FIELD_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,199}[ \t]*:")

# RFC 2047 encoded word. Its parts cannot hold "?" or blanks, so each repeat ends at the
# first "?" and the pattern cannot backtrack ("=?" x 100 000 is linear, ROBUSTNESS I30).
_ENCODED_WORD = re.compile(r"=\?([^?\s]{1,75})\?([bBqQ])\?([^?\s]*)\?=")
_BLANK = re.compile(r"[ \t\n]*")
_QP_HEX = re.compile(r"=([0-9A-Fa-f]{2})")
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/]")


@dataclass
class HeaderBlock:
    """Fields of one header block, raw values unfolded and capped, and the body after it."""

    fields: list[tuple[str, str]]  # (lower-case name, unfolded raw value)
    body: str
    defects: set[str] = field(default_factory=set)


def split_header_block(text: str, limits: TokenizerLimits) -> HeaderBlock:
    """Split LF-terminated `text` into header fields and body.

    A first line that is no field means there are no headers: everything is body. A later
    line that is neither a field nor a continuation ends the headers (SpamAssassin and the
    email package do the same for a missing blank line).
    """
    if not _FIRST_FIELD_NAME.match(text):
        return HeaderBlock(fields=[], body=text)
    end = text.find("\n\n")
    block, body = (text, "") if end < 0 else (text[:end], text[end + 2 :])
    found: set[str] = set()
    fields: list[tuple[str, str]] = []
    name = ""
    pieces: list[str] = []
    size = 0
    max_value = limits.max_header_value_bytes
    lines = block.split("\n")
    for index, line in enumerate(lines):
        if line[:1] in (" ", "\t"):
            if name and size < max_value:
                pieces.append(line)
                size += len(line)
            elif name:
                found.add(defects.TRUNCATED)
            continue
        match = _FIELD_NAME.match(line)
        if match is None:
            found.add(defects.HEADER_PARSE_ERROR)
            rest = "\n".join(lines[index:])
            body = rest + "\n\n" + body if end >= 0 else rest
            break
        if name:
            fields.append(_finish_field(name, pieces, max_value, found))
        if len(fields) >= limits.max_header_fields:
            found.add(defects.TRUNCATED)
            name = ""
            break
        name = match.group(1).lower()
        first = line[match.end() :].lstrip(" \t")
        pieces = [first]
        size = len(first)
    if name:
        fields.append(_finish_field(name, pieces, max_value, found))
    return HeaderBlock(fields=fields, body=body, defects=found)


def _finish_field(name: str, pieces: list[str], max_value: int, found: set[str]) -> tuple[str, str]:
    value = "".join(pieces)
    if len(value) > max_value:
        found.add(defects.TRUNCATED)
        value = value[:max_value]
    return name, value.strip()


def _decode_encoded_word(charset: str, encoding: str, encoded: str) -> tuple[str, bool]:
    """Decode one RFC 2047 word; return its text and whether it was well formed."""
    charset = charset.partition("*")[0]  # RFC 2231 language suffix: "utf-8*en"
    well_formed = True
    if encoding in "bB":
        cleaned = _NOT_BASE64.sub("", encoded)
        if len(cleaned) % 4 == 1:
            cleaned = cleaned[:-1]
            well_formed = False
        data = binascii.a2b_base64(cleaned + "=" * (-len(cleaned) % 4))
    else:
        data = _QP_HEX.sub(lambda m: chr(int(m.group(1), 16)), encoded.replace("_", " ")).encode(
            "latin-1", "replace"
        )
    text, clean = decode_bytes(data, charset)
    return text, well_formed and clean


def decode_header_value(value: str, charset: str | None, found: set[str]) -> str:
    """Return a header value with raw 8-bit bytes and RFC 2047 encoded words decoded.

    Raw 8-bit values (ROBUSTNESS I11) are read with the message's charset as declared
    charset; blanks between adjacent encoded words are dropped (RFC 2047 §6.2); a broken
    encoded word stays as literal text and is reported as HEADER_PARSE_ERROR (I15).
    """
    if not value.isascii():
        value, clean = decode_str(value, charset)
        if not clean:
            found.add(defects.BAD_CHARSET)
    if "=?" not in value:
        return value
    pieces = _ENCODED_WORD.split(value)
    out = [pieces[0]]
    for index in range(1, len(pieces), 4):
        text, clean = _decode_encoded_word(*pieces[index : index + 3])
        if not clean:
            found.add(defects.HEADER_PARSE_ERROR)
        out.append(text)
        between = pieces[index + 3]
        if not (index + 4 < len(pieces) and _BLANK.fullmatch(between)):
            out.append(between)
    if "=?" in pieces[0] or any("=?" in piece for piece in pieces[4::4]):
        found.add(defects.HEADER_PARSE_ERROR)
    return "".join(out)


def decode_header_values(
    fields: Sequence[tuple[str, str]], charset: str | None, found: set[str]
) -> list[tuple[str, str]]:
    """Return `fields` with each value decoded by `decode_header_value`."""
    return [(name, decode_header_value(value, charset, found)) for name, value in fields]


def content_fields(fields: Sequence[tuple[str, str]]) -> tuple[str | None, str | None, str]:
    """Return the first Content-Type and Content-Disposition values (None where absent) and
    the last Content-Transfer-Encoding, stripped and lower-case ("7bit" where absent)."""
    content_type: str | None = None
    disposition: str | None = None
    transfer_encoding = "7bit"
    for name, value in fields:
        if name == "content-type":
            content_type = value if content_type is None else content_type
        elif name == "content-disposition":
            disposition = value if disposition is None else disposition
        elif name == "content-transfer-encoding":
            transfer_encoding = value.strip().lower()
    return content_type, disposition, transfer_encoding


# Headers whose addresses give domain tokens ("from:example.org").
ADDRESS_HEADERS = frozenset(
    {"from", "to", "cc", "reply-to", "sender", "return-path", "errors-to", "delivered-to"}
)
# Every other header's words are evidence ("subject:prize", "received:relay", "date:tue",
# "message-id:outlook"), as bogofilter reads every header: relays, time zones and id formats
# tell senders apart. Measured on spamassassin (2,000 messages, docs/accuracy.md; 1-ROCA % /
# FNR at FPR <= 0.1 %, batch | online): the former allow-list of nine headers 0.049/4.8 |
# 0.251/24.9; every header 0.076/4.0 | 0.421/24.2; every header but these denied name
# prefixes 0.043/4.8 | 0.222/24.6. Mailing-list machinery (List-Unsubscribe, List-Post, ...)
# and site-specific X- headers repeat one list's or one installation's identity in dozens of
# words per message: correlated evidence that Robinson-Fisher counts as independent. Their
# names still count ("header:list-post"). Only spamassassin has headers worth measuring (the
# others are judged text-only), so this list rests on one corpus.
DENIED_WORD_HEADER_PREFIXES = ("list-", "x-")
# Header names spelled like the tokenizer's own prefixes would give tokens that collide with
# another family's ("header:x" from a "Header: x" field, "digits:4" from "Digits: 4"), or set
# the tokens spamsift derives itself (word pairs, the message's shape: "size:1" from "Size: 1").
DENIED_WORD_HEADERS = frozenset(
    {
        "header",
        "url",
        "urlpath",
        "email",
        "digits",
        "hidden",
        "skip",
        "attachment",
        "filename",
        "pair",
        "size",
        "links",
        "html",
    }
)
ADDRESS_DOMAIN = re.compile(r"@\[?([a-z0-9][a-z0-9-]{0,62}(?:\.[a-z0-9-]{1,63}){0,8})")


# spamsift's own marks (`spamsift classify --add-header`): a marked message must be the same
# message as before it was marked (same tokens, same identity for feedback), and the filter
# must never learn its own verdicts.
OWN_HEADER_PREFIX = "x-spamsift-"


def header_tokens(headers: Sequence[tuple[str, str]], limits: TokenizerLimits) -> list[str]:
    """Return header tokens, each prefixed by its lower-case header name."""
    max_chars = limits.max_token_chars
    seen_names: set[str] = set()
    tokens: list[str] = []
    for name, value in headers:
        if name.startswith(OWN_HEADER_PREFIX):
            continue
        if name not in seen_names and len(name) <= max_chars:
            seen_names.add(name)
            tokens.append(f"header:{name}")
        if name in ADDRESS_HEADERS:
            normalized = normalize_text(value)
            for domain in ADDRESS_DOMAIN.findall(normalized):
                tokens.append(f"{name}:{domain[:max_chars]}")
            if name == "from":
                # Display-name words; the address itself already gave its domain.
                display = " ".join(p for p in normalized.partition("<")[0].split() if "@" not in p)
                tokens.extend(map("from:word:".__add__, word_tokens(display, max_chars)))
        elif (
            not name.startswith(DENIED_WORD_HEADER_PREFIXES)
            and name not in DENIED_WORD_HEADERS
            and len(name) <= max_chars
        ):
            normalized = normalize_text(value)
            tokens.extend(map(f"{name}:".__add__, text_tokens(normalized, max_chars)))
    return tokens
