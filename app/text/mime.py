"""Raw RFC 822 message -> ParsedMessage: decoded header values, part texts, links, attachments.

The MIME tree is walked with an explicit stack, never by recursion, so 3 000 nested
multiparts or 100 000 nested message/rfc822 cost no Python stack (ROBUSTNESS I24; the email
package's feed parser recurses once per level and raised RecursionError near 3 000). Parts
are cut at their boundary lines with `str.find`, so the walk is linear in the message size,
and it stops after max_mime_parts parts and max_scan_bytes of decoded text (I22, I23, I25).
The `email` package still reads the Content-Type and Content-Disposition parameters
(RFC 2231 continuations included), on values already capped at max_header_value_bytes.
"""

import binascii
import email.message
import email.utils
import re
from dataclasses import dataclass, field
from functools import lru_cache

from app.text import defects
from app.text.charsets import decode_bytes, decode_str, lookup_codec
from app.text.core import TokenCore
from app.text.html import html_to_text
from app.text.limits import TokenizerLimits

# Text parts that are read; every other leaf is an attachment (type and extension only).
_TEXT_TYPES = frozenset({"text/plain", "text/html", "text/enriched", "text/richtext"})
_MESSAGE_TYPES = frozenset({"message/rfc822", "message/global"})
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/=\s]")
_BASE64_DROP = re.compile(r"[^A-Za-z0-9+/]")
_EXTENSION = re.compile(r"\.([a-z0-9]{1,10})\s*$")
_MBOX_FROM = re.compile(r"From [^\n]*\n")

# The email package's parameter parsing has raised these on hostile values (IndexError on
# `name*`, cpython#151857; ValueError and TypeError on RFC 2231 pieces). The value is then
# ignored and HEADER_PARSE_ERROR noted.
_PARAMETER_ERRORS = (IndexError, ValueError, TypeError, LookupError, UnicodeError, AttributeError)


@dataclass(frozen=True)
class Attachment:
    """A non-text leaf part: what it claims to be, never its content."""

    content_type: str
    filename_extension: str | None  # lower-case, without the dot; None when absent


@dataclass
class ParsedMessage:
    """What the tokenizer reads from one message."""

    headers: list[tuple[str, str]]  # top-level (lower-case name, decoded value), in order
    texts: list[str] = field(default_factory=list)  # visible text of each text part, in order
    hidden_texts: list[str] = field(default_factory=list)  # HTML styles, scripts, comments
    links: list[str] = field(default_factory=list)  # href/src targets of HTML parts
    part_types: list[str] = field(default_factory=list)  # type of every part with headers
    attachments: list[Attachment] = field(default_factory=list)
    defects: set[str] = field(default_factory=set)

    @property
    def subject(self) -> str:
        """Return the decoded Subject, or "" when there is none."""
        return next((value for name, value in self.headers if name == "subject"), "")


@dataclass
class _Part:
    fields: list[tuple[str, str]]
    body: str
    depth: int
    default_type: str


@dataclass
class _ContentInfo:
    content_type: str
    charset: str | None
    boundary: str | None
    transfer_encoding: str
    extension: str | None
    is_attachment: bool


def normalize_newlines(text: str) -> str:
    """Return `text` with CRLF and lone CR turned into LF (ROBUSTNESS I09)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def parse_message(raw: str | bytes, *, limits: TokenizerLimits, core: TokenCore) -> ParsedMessage:
    """Parse a raw message; never raise, note what was wrong in `defects`.

    Bytes are read as Latin-1 (one character per byte) and each part is decoded with its
    own declared charset later; a str is taken as already decoded where it holds characters
    above U+00FF. `core` runs the header loops.
    """
    text = raw.decode("latin-1") if isinstance(raw, bytes) else raw
    text = normalize_newlines(text)
    if text.startswith("From "):
        match = _MBOX_FROM.match(text)
        text = text[match.end() :] if match else ""
    block = core.split_header_block(text, limits)
    message = ParsedMessage(headers=[], defects=set(block.defects))
    if not block.fields:
        message.defects.add(defects.NO_HEADERS)
    top = _content_info(block.fields, "text/plain", message.defects, core)
    message.headers = core.decode_header_values(block.fields, top.charset, message.defects)
    _walk(_Part(block.fields, block.body, 0, "text/plain"), message, limits, core)
    return message


def _walk(root: _Part, message: ParsedMessage, limits: TokenizerLimits, core: TokenCore) -> None:
    """Walk the MIME tree depth first in document order, filling `message`."""
    stack = [root]
    parts = 0
    scan_left = limits.max_scan_bytes
    while stack:
        if limits.out_of_time(message.defects):
            return
        part = stack.pop()
        parts += 1
        if parts > limits.max_mime_parts:
            message.defects.add(defects.TRUNCATED)
            return
        info = _content_info(part.fields, part.default_type, message.defects, core)
        if part.fields:
            message.part_types.append(info.content_type)
        if info.content_type.startswith("multipart/"):
            children = _split_multipart(part, info, message, limits, core)
            stack.extend(reversed(children))
        elif info.content_type in _MESSAGE_TYPES and not info.is_attachment:
            if part.depth >= limits.max_mime_depth:
                message.defects.add(defects.MIME_DEPTH)
                continue
            inner = core.split_header_block(part.body, limits)
            message.defects |= inner.defects
            stack.append(_Part(inner.fields, inner.body, part.depth + 1, "text/plain"))
        elif info.content_type in _TEXT_TYPES and not (info.is_attachment and info.extension):
            if scan_left <= 0:
                message.defects.add(defects.TRUNCATED)
                continue
            text = _decode_body(part.body, info, scan_left, message.defects)
            if len(text) > scan_left:
                message.defects.add(defects.TRUNCATED)
                text = text[:scan_left]
            scan_left -= len(text)
            if info.content_type == "text/html":
                visible = html_to_text(text)
                message.texts.append(visible.text)
                message.links.extend(visible.links)
                if visible.hidden:
                    message.hidden_texts.append(visible.hidden)
            else:
                message.texts.append(text)
        else:
            message.attachments.append(Attachment(info.content_type, info.extension))


def _split_multipart(
    part: _Part,
    info: _ContentInfo,
    message: ParsedMessage,
    limits: TokenizerLimits,
    core: TokenCore,
) -> list[_Part]:
    """Return the child parts of a multipart, or the body read as text when it has none.

    Delimiter lines are "--boundary" alone on a line, optionally followed by "--" (the
    close) and blanks; the first boundary parameter wins (ROBUSTNESS I21). Many mailers
    (and most trec06c ham) declare multipart over a flat body: without a delimiter line, the
    body is read as text/plain.
    """
    as_text = [_Part([], part.body, part.depth, "text/plain")]
    if part.depth >= limits.max_mime_depth:
        message.defects.add(defects.MIME_DEPTH)
        return []
    if not info.boundary:
        message.defects.add(defects.BAD_MIME)
        return as_text
    body = part.body
    delimiter = "--" + info.boundary
    child_default = "message/rfc822" if info.content_type == "multipart/digest" else "text/plain"
    children: list[_Part] = []
    part_start = -1  # start of the current child, -1 before the first delimiter
    position = 0
    closed = False
    while True:
        found = body.find(delimiter, position)
        if found < 0:
            break
        line_end = body.find("\n", found)
        if line_end < 0:
            line_end = len(body)
        if found > 0 and body[found - 1] != "\n":
            position = line_end
            continue
        rest = body[found + len(delimiter) : line_end]
        closing = rest.startswith("--")
        if (rest[2:] if closing else rest).strip(" \t"):
            position = line_end  # a longer boundary sharing this prefix
            continue
        if part_start >= 0:
            children.append(
                _child(
                    body[part_start : max(found - 1, part_start)], part, child_default, limits, core
                )
            )
            if len(children) >= limits.max_mime_parts:
                message.defects.add(defects.TRUNCATED)
                return children
        if closing:
            closed = True
            break
        part_start = line_end + 1
        position = line_end
    if part_start < 0:
        message.defects.add(defects.BAD_MIME)
        return as_text
    if not closed:
        message.defects.add(defects.BAD_MIME)
        children.append(_child(body[part_start:], part, child_default, limits, core))
    return children


def _child(
    text: str, parent: _Part, default_type: str, limits: TokenizerLimits, core: TokenCore
) -> _Part:
    if text.startswith("\n"):
        return _Part([], text[1:], parent.depth + 1, default_type)
    # Part headers are capped like top-level ones; their defects are not reported (a part
    # without headers is normal).
    block = core.split_header_block(text, limits)
    return _Part(block.fields, block.body, parent.depth + 1, default_type)


def _content_info(
    fields: list[tuple[str, str]], default_type: str, found: set[str], core: TokenCore
) -> _ContentInfo:
    """Read Content-Type, -Transfer-Encoding and -Disposition of one part."""
    content_type, disposition, transfer_encoding = core.content_fields(fields)
    if len(content_type or "") + len(disposition or "") <= _CACHED_VALUE_CHARS:
        parameters = _cached_parameters(content_type, disposition, default_type)
    else:
        parameters = _parameters(content_type, disposition, default_type)
    found |= parameters.defects
    return _ContentInfo(
        content_type=parameters.content_type,
        charset=parameters.charset,
        boundary=parameters.boundary,
        transfer_encoding=transfer_encoding,
        extension=parameters.extension,
        is_attachment=parameters.is_attachment,
    )


@dataclass(frozen=True)
class _Parameters:
    content_type: str
    charset: str | None
    boundary: str | None
    extension: str | None
    is_attachment: bool
    defects: frozenset[str]


def _parameters(
    content_type: str | None, disposition: str | None, default_type: str
) -> _Parameters:
    """Read the parameters of a part's Content-Type and Content-Disposition values."""
    headers = email.message.Message()
    if content_type is not None:
        headers["content-type"] = content_type
    if disposition is not None:
        headers["content-disposition"] = disposition
    if default_type == "message/rfc822":
        headers.set_default_type("message/rfc822")
    found: set[str] = set()
    try:
        kind = headers.get_content_type()
        charset, boundary, filename = read_parameters(headers)
        attachment = headers.get_content_disposition() == "attachment"
    except _PARAMETER_ERRORS:
        found.add(defects.HEADER_PARSE_ERROR)
        kind, charset, boundary, filename, attachment = default_type, None, None, None, False
    if len(kind) > 100:
        kind = "invalid/invalid"
    extension = None
    if filename:
        match = _EXTENSION.search(filename.lower())
        extension = match.group(1) if match else ""
    if charset is not None and lookup_codec(charset) is None:
        found.add(defects.BAD_CHARSET)
    return _Parameters(kind, charset, boundary, extension, attachment, frozenset(found))


# A `;` outside a quoted string ends a parameter; a `"` not after a backslash opens or closes
# one (the email package's rule: the parity of quotes less backslash-quotes since the
# parameter's start).
_PARAMETER_MARK = re.compile(r'\\"|"|;')

RawParameter = str | tuple[str | None, str | None, str]


def _split_parameters(value: str) -> list[tuple[str, str]]:
    """The (name, value) pairs `email.message.Message._get_params_preserve` makes of
    `_parseparam(value)`, in one pass: the parts between the `;` outside quoted strings, each
    split at its first `=`, both sides stripped and the name lowercased (a part without `=`:
    itself, stripped and not lowercased, and ""). The email package counts the
    quotes again from a part's start at every `;` it meets inside one, and copies the rest of
    the value at every part: quadratic, 0.1-0.2 s for one 8 KiB value of semicolons (a real
    spam's Content-Type, `text/html ; ; ; ...`), seconds for a message of such parts."""
    if '"' not in value:  # nothing quoted: every `;` ends a part
        parts = value.split(";")
    else:
        parts = []
        start = 0
        quoted = False
        for mark in _PARAMETER_MARK.finditer(value):
            if mark.group() == '"':
                quoted = not quoted
            elif mark.group() == ";" and not quoted:
                parts.append(value[start : mark.start()])
                start = mark.end()
        parts.append(value[start:])
    pairs = []
    for part in parts:
        name, equals, raw = part.partition("=")
        pairs.append((name.strip().lower(), raw.strip()) if equals else (part.strip(), ""))
    return pairs


def read_parameters(headers: email.message.Message) -> tuple[str | None, str | None, str | None]:
    """`headers.get_content_charset()`, `get_boundary()` and `get_filename()`, each
    parameter list split in one pass (`_split_parameters`) and decoded once."""
    type_parameters = _decoded_parameters(headers.get("content-type"))
    disposition_parameters = _decoded_parameters(headers.get("content-disposition"))
    charset = _charset(type_parameters)
    boundary = _parameter(type_parameters, "boundary")
    if boundary is not None:
        boundary = email.utils.collapse_rfc2231_value(boundary).rstrip()
    filename = _parameter(disposition_parameters, "filename")
    if filename is None:
        filename = _parameter(type_parameters, "name")
    if filename is not None:
        filename = email.utils.collapse_rfc2231_value(filename).strip()
    return charset, boundary, filename


def _decoded_parameters(value: object) -> list[tuple[str, RawParameter]] | None:
    """`email.message.Message._get_params_preserve` of a header's `value` (None: no such
    header): (name, value) pairs, RFC 2231 decoded."""
    if value is None:
        return None
    # str: a value with surrogates is a Header. A parameter without a name (`; ;`) is never
    # looked up and never decoded (RFC 2231 names are words): left out, but the first, which
    # decode_params keeps as it is.
    first, *rest = _split_parameters(str(value))
    return email.utils.decode_params([first, *(pair for pair in rest if pair[0])])


def _parameter(parameters: list[tuple[str, RawParameter]] | None, name: str) -> RawParameter | None:
    """`Message.get_param(name)`: the first parameter of that name, unquoted; None: none."""
    for key, raw in parameters or ():
        if key.lower() == name:
            if isinstance(raw, tuple):
                return raw[0], raw[1], email.utils.unquote(raw[2])
            return email.utils.unquote(raw)
    return None


def _charset(parameters: list[tuple[str, RawParameter]] | None) -> str | None:
    """`Message.get_content_charset()` of the Content-Type's parameters."""
    charset = _parameter(parameters, "charset")
    if charset is None:
        return None
    if isinstance(charset, tuple):  # RFC 2231: decoded, and it had better be ASCII
        try:
            charset = str(charset[2].encode("raw-unicode-escape"), charset[0] or "us-ascii")
        except (LookupError, UnicodeError):
            charset = charset[2]
    if not charset.isascii():
        return None
    return charset.lower()


# The email package's parameter parsing took 13 % of tokenizing; most parts repeat a handful
# of values ("text/plain; charset=us-ascii"), so short values are parsed once per process.
_CACHED_VALUE_CHARS = 256
_cached_parameters = lru_cache(maxsize=2048)(_parameters)


def _decode_body(body: str, info: _ContentInfo, max_bytes: int, found: set[str]) -> str:
    """Decode the transfer encoding and charset of a text part, reading at most ~max_bytes."""
    encoding = info.transfer_encoding
    if encoding in ("base64", "quoted-printable"):
        # At most 4 base64 or 3 quoted-printable characters per byte, plus line breaks.
        encoded = body[: max_bytes * (2 if encoding == "base64" else 3) + 1024]
        data = _decode_transfer(encoded, encoding, found)
        if len(data) > max_bytes or len(encoded) < len(body):
            found.add(defects.TRUNCATED)
            data = data[:max_bytes]
    else:
        if len(body) > max_bytes:
            found.add(defects.TRUNCATED)
        text, clean = decode_str(body[:max_bytes], info.charset)
        if not clean:
            found.add(defects.BAD_CHARSET)
        return text
    text, clean = decode_bytes(data, info.charset)
    if not clean:
        found.add(defects.BAD_CHARSET)
    return text


def _decode_transfer(encoded: str, encoding: str, found: set[str]) -> bytes:
    """Decode base64 or quoted-printable leniently, noting BAD_BASE64."""
    if encoding == "base64":
        if _NOT_BASE64.search(encoded):
            found.add(defects.BAD_BASE64)
        cleaned = _BASE64_DROP.sub("", encoded)
        if len(cleaned) % 4 == 1:
            found.add(defects.BAD_BASE64)
            cleaned = cleaned[:-1]
        return binascii.a2b_base64(cleaned + "=" * (-len(cleaned) % 4))
    try:
        raw = encoded.encode("latin-1")
    except UnicodeEncodeError:
        raw = encoded.encode("utf-8", "replace")
    return binascii.a2b_qp(raw)
