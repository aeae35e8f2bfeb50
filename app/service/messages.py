"""A message as clients send it, and the identity spamsift gives it.

A prepared message keeps its tokens as the tokenizer hashed them (`HashedTokens`): scoring a
model held in memory needs nothing else. The token -> count dict is made from them on first
use, for what works on texts: training, the partial read of a model not held, blends over
whole tables' texts, `spamsift evaluate`. The message key's digest is the one the tokenizer
computed.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from app.errors import InvalidMessage, MessageTooLarge
from app.text import HashedTokens, TokenizerLimits, hash_raw, hash_text
from app.text import token_digest as token_digest  # the key's digest, for callers of this module
from app.text.core import TokenCore
from app.text.features import FEATURE_PREFIX, header_end, mail_features

MAX_MESSAGE_ID_CHARS = 255
# A message's numeric attributes (`Message.attributes`): at most this many, each name 1-64
# printable ASCII characters without spaces (the name column holds 64), each value finite.
MAX_ATTRIBUTES = 32
MAX_ATTRIBUTE_NAME_CHARS = 64
ATTRIBUTE_NAME_PATTERN = rf"^[!-~]{{1,{MAX_ATTRIBUTE_NAME_CHARS}}}$"
_ATTRIBUTE_NAME = re.compile(ATTRIBUTE_NAME_PATTERN)
# The header up to its first Message-ID field, read in one match from the message's start:
# mbox envelope lines ("From ..."), then fields (an RFC 5322 name: printable ASCII but ':',
# then the line, then its continuation lines), the fewest that reach a Message-ID field; its
# value with its continuation lines is the group. A line that is neither (the empty line
# before the body, say) ends the header, so the match fails there. Each line can be read only
# one way, so a failed match costs one pass over the header.
_FIELDS_TO_MESSAGE_ID = re.compile(
    rb"(?:(?-i:From )[^\n]*\n)*"  # an envelope line starts "From " exactly
    rb"(?:[!-9;-~]+:[^\n]*\n(?:[ \t][^\n]*\n)*)*?"
    rb"message-id:([^\n]*(?:\n[ \t][^\n]*)*)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Message:
    """Exactly one of `raw` (RFC 822) and `text` (plain text), the client's id if any, and
    numeric attributes the text does not hold (an SPF result, another engine's score)."""

    raw: bytes | str | None = None
    text: str | None = None
    message_id: str | None = None
    attributes: Mapping[str, float] | None = None

    def size_bytes(self) -> int:
        if self.raw is not None:
            return (
                len(self.raw)
                if isinstance(self.raw, bytes)
                else len(self.raw.encode("utf-8", "surrogatepass"))
            )
        return len((self.text or "").encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class PreparedMessage:
    """A tokenized message with its identity.

    `message_key` joins the client's message_id with a digest of the tokens, so a reused or
    forged Message-ID with other content is another message, not a block on training.
    """

    message_id: str
    message_key: str
    tokens: HashedTokens
    # Raw mail's body digest (see `body_digest`): how a report of a copy that a mail server
    # delivered with more header fields finds the classification of the message. None for text.
    body_digest: str | None = None
    # Plain `text` (an SMS, a chat line) trains with any token; raw mail needs the server's
    # min_train_tokens. A model's own min_train_tokens overrides both.
    from_text: bool = False
    # Numeric attributes, name -> finite value (checked by `check_attributes`).
    attributes: Mapping[str, float] = field(default_factory=dict)

    @property
    def token_counts(self) -> dict[str, int]:
        """token -> count in first-emission order (made from the hashed tokens once)."""
        return self.tokens.token_counts

    @property
    def defects(self) -> tuple[str, ...]:
        return self.tokens.defects


def prepare(
    message: Message,
    *,
    limits: TokenizerLimits,
    max_message_bytes: int,
    core: TokenCore,
    features: bool = True,
) -> PreparedMessage:
    """Check and tokenize `message` with the token `core`; derive its message_id and key.
    With `features`, raw mail's own numbers join its attributes (a classification adds them
    later, with `with_features`, only for a model that scores them)."""
    if (message.raw is None) == (message.text is None):
        raise InvalidMessage("give exactly one of 'raw' and 'text'")
    size = message.size_bytes()
    if size > max_message_bytes:
        raise MessageTooLarge(f"message is {size} bytes; the limit is {max_message_bytes}")
    if message.raw is not None:
        raw = message.raw
        content = raw if isinstance(raw, bytes) else _raw_bytes(raw)
        tokens = hash_raw(raw, limits=limits, core=core)
    else:
        assert message.text is not None
        content = message.text.encode("utf-8", "surrogatepass")
        tokens = hash_text(message.text, limits=limits, core=core)
    message_id = (
        message.message_id
        or (header_message_id(content) if message.raw is not None else None)
        or f"sha256:{hashlib.sha256(content).hexdigest()}"
    )
    check_message_id(message_id)
    attributes = check_attributes(message.attributes or {})
    if features and message.raw is not None:  # raw mail's own numbers, as attributes
        attributes = mail_features(content, max_scan_bytes=limits.max_scan_bytes) | attributes
    return PreparedMessage(
        message_id=message_id,
        message_key=message_key(message_id, tokens.digest),
        tokens=tokens,
        body_digest=body_digest(content) if message.raw is not None else None,
        from_text=message.raw is None,
        attributes=attributes,
    )


def with_features(
    prepared: PreparedMessage, message: Message, *, max_scan_bytes: int
) -> PreparedMessage:
    """`prepared` (made without features) with raw mail's own numbers among its attributes."""
    if message.raw is None:
        return prepared
    raw = message.raw if isinstance(message.raw, bytes) else _raw_bytes(message.raw)
    found = mail_features(raw, max_scan_bytes=max_scan_bytes)
    return replace(prepared, attributes=found | dict(prepared.attributes))


def _raw_bytes(raw: str) -> bytes:
    """The bytes a raw message given as text stands for (its sha256 is the default id).

    Lone surrogates from a JSON "\ud800" are no bytes of any message: they are encoded as
    they are (surrogatepass) rather than raising; the tokenizer drops them.
    """
    try:
        return raw.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return raw.encode("utf-8", "surrogatepass")


def header_message_id(raw: bytes) -> str | None:
    """Return the Message-ID header's value (unfolded, trimmed) if it is a usable message_id.

    The same rule in the API, the CLI and every hook: a message classified by a mail server
    and reported later by its Message-ID is found under that id.
    """
    found = _FIELDS_TO_MESSAGE_ID.match(raw)
    if found is None:
        return None
    value = found.group(1)
    text = " ".join(value.decode("utf-8", "replace").split())
    if text and len(text) <= MAX_MESSAGE_ID_CHARS and text.isprintable():
        return text
    return None


def body_digest(raw: bytes) -> str:
    """sha256 of the body of raw mail (after its first empty line), line ends made LF and
    trailing blanks dropped.

    A mail server delivering a message adds header fields (Received, Return-Path,
    Delivered-To, the filters' marks) and may turn CRLF into LF, but leaves the body as it
    was: the message's Message-ID with this digest finds its classification in the copy a
    user reports, where the digest of all its tokens (the message key) differs.
    """
    end, length = header_end(raw)
    body = raw if end < 0 else raw[end + length :]  # no empty line: the whole message
    return hashlib.sha256(body.replace(b"\r\n", b"\n").rstrip()).hexdigest()


def check_message_id(message_id: str) -> None:
    if not message_id or len(message_id) > MAX_MESSAGE_ID_CHARS or not message_id.isprintable():
        raise InvalidMessage(f"message_id must be 1-{MAX_MESSAGE_ID_CHARS} printable characters")


def check_attributes(attributes: Mapping[str, float]) -> dict[str, float]:
    """The attributes as floats, sorted by name; InvalidMessage naming what is wrong."""
    if len(attributes) > MAX_ATTRIBUTES:
        raise InvalidMessage(
            f"a message has at most {MAX_ATTRIBUTES} attributes, got {len(attributes)}"
        )
    checked: dict[str, float] = {}
    for name in sorted(attributes):
        value = attributes[name]
        if not isinstance(name, str) or not _ATTRIBUTE_NAME.match(name):
            raise InvalidMessage(
                f"an attribute name is 1-{MAX_ATTRIBUTE_NAME_CHARS} printable ASCII characters "
                f"without spaces, got {name!r}"
            )
        if name.startswith(FEATURE_PREFIX):
            raise InvalidMessage(
                f"attribute names starting with {FEATURE_PREFIX!r} are raw mail's own "
                f"features, got {name!r}"
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidMessage(f"attribute {name!r} must be a number, got {value!r}")
        number = float(value)
        if not math.isfinite(number):
            raise InvalidMessage(f"attribute {name!r} must be a finite number, got {value!r}")
        checked[name] = number
    return checked


def message_key(message_id: str, digest: str) -> str:
    return hashlib.sha256(f"{message_id}\n{digest}".encode("utf-8", "surrogatepass")).hexdigest()
