"""Bounds on the work done for one message (SPEC §5, ROBUSTNESS "suggested starting limits")."""

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenizerLimits:
    """Caps that keep tokenizing any input linear in its size and bounded in output.

    Each cap, when hit, adds a defect code to the result (see `app.text.defects`).
    """

    max_scan_bytes: int = 512 * 1024  # decoded text tokenized per message
    max_header_value_bytes: int = 8 * 1024  # longer header values truncated ("truncated")
    max_header_fields: int = 1000  # further fields ignored ("truncated")
    max_mime_depth: int = 20  # deeper parts not walked ("mime_depth")
    max_mime_parts: int = 1000  # further parts not tokenized ("truncated")
    max_token_chars: int = 40  # longer words become a bounded "skip:" token
    max_distinct_tokens: int = 20_000  # first N distinct tokens in emission order kept


DEFAULT_LIMITS = TokenizerLimits()
