"""The caps on one message's tokenizing, declared once: the tokenizer (`app.text.limits`) and
the server's settings (`app.config`, SPAMSIFT_MAX_SCAN_BYTES, ...) both take them from here.
A module of its own because settings import no room and the text room imports no other."""

from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge, Gt, Le


@dataclass(frozen=True)
class MessageCaps:
    """The caps on one message's tokenizing, each declared once, with its bounds: the server's
    settings (SPAMSIFT_MAX_SCAN_BYTES, ...) take them from here. A message over one is still
    handled, as far as the cap, and the defect code its result carries says so."""

    max_scan_bytes: Annotated[int, Gt(0)] = 512 * 1024  # decoded text tokenized: "truncated"
    max_header_value_bytes: Annotated[int, Gt(0)] = 8 * 1024  # longer cut: "truncated"
    max_header_fields: Annotated[int, Gt(0)] = 1000  # further fields ignored: "truncated"
    max_mime_depth: Annotated[int, Ge(1)] = 20  # deeper parts not walked: "mime_depth"
    max_mime_parts: Annotated[int, Gt(0)] = 1000  # further parts not tokenized: "truncated"
    # Longer words become one "skip:<first letter> <length bucket>" token. At most 46, so that
    # every token (13-character prefix, 4 bytes a character) fits the 200-byte token column.
    max_token_chars: Annotated[int, Ge(1), Le(46)] = 40
    # The first N distinct tokens in emission order are kept: "truncated".
    max_distinct_tokens: Annotated[int, Gt(0)] = 20_000
