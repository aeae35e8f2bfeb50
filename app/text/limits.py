"""Bounds on the work done for one message (SPEC §5, ROBUSTNESS "suggested starting limits")."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge, Gt, Le

from app.text import defects


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


@dataclass(frozen=True)
class TokenizerLimits(MessageCaps):
    """Caps that keep tokenizing any input linear in its size and bounded in output.

    Each cap, when hit, adds a defect code to the result (see `app.text.defects`).

    The time budget is a `deadline` on the caller's `clock` (the text room reads no clock of
    its own): tokenizing checks it between MIME parts and between texts, and once it has
    passed stops, keeps what it has and notes TIME_BUDGET. Without a clock there is no budget.
    """

    deadline: float = 0.0  # on `clock`; tokenizing stops once clock() >= deadline
    clock: Callable[[], float] | None = None  # None: no time budget

    def out_of_time(self, found: set[str]) -> bool:
        """Return whether the deadline has passed, noting TIME_BUDGET in `found` if so."""
        if self.clock is None or self.clock() < self.deadline:
            return False
        found.add(defects.TIME_BUDGET)
        return True


DEFAULT_LIMITS = TokenizerLimits()
