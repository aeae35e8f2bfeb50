"""Bounds on the work done for one message (SPEC §5, ROBUSTNESS "suggested starting limits")."""

from collections.abc import Callable
from dataclasses import dataclass

from app.text import defects


@dataclass(frozen=True)
class TokenizerLimits:
    """Caps that keep tokenizing any input linear in its size and bounded in output.

    Each cap, when hit, adds a defect code to the result (see `app.text.defects`).

    The time budget is a `deadline` on the caller's `clock` (the text room reads no clock of
    its own): tokenizing checks it between MIME parts and between texts, and once it has
    passed stops, keeps what it has and notes TIME_BUDGET. Without a clock there is no budget.
    """

    max_scan_bytes: int = 512 * 1024  # decoded text tokenized per message
    max_header_value_bytes: int = 8 * 1024  # longer header values truncated ("truncated")
    max_header_fields: int = 1000  # further fields ignored ("truncated")
    max_mime_depth: int = 20  # deeper parts not walked ("mime_depth")
    max_mime_parts: int = 1000  # further parts not tokenized ("truncated")
    max_token_chars: int = 40  # longer words become a bounded "skip:" token
    max_distinct_tokens: int = 20_000  # first N distinct tokens in emission order kept
    deadline: float = 0.0  # on `clock`; tokenizing stops once clock() >= deadline
    clock: Callable[[], float] | None = None  # None: no time budget

    def out_of_time(self, found: set[str]) -> bool:
        """Return whether the deadline has passed, noting TIME_BUDGET in `found` if so."""
        if self.clock is None or self.clock() < self.deadline:
            return False
        found.add(defects.TIME_BUDGET)
        return True


DEFAULT_LIMITS = TokenizerLimits()
