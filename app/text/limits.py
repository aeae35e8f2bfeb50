"""Bounds on the work done for one message (SPEC §5, ROBUSTNESS "suggested starting limits")."""

from collections.abc import Callable
from dataclasses import dataclass

from app.message_caps import MessageCaps
from app.text import defects


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
