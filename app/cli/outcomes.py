"""What a command's target answers beside results: a message trained (`Trained`), a message
refused (`Refused`, which a caller may skip), or the command stopped (`CommandError`), alike
for the local database (app/cli/targets.py) and a server (app/cli/remote.py).
"""

from __future__ import annotations

from dataclasses import dataclass

# Errors that refuse the message, not the whole command (a caller may skip it).
REFUSING_CODES = frozenset({"time_budget_exceeded"})


@dataclass(frozen=True)
class Trained:
    """What training (or feedback) did to one message."""

    message_id: str
    label: str
    previous_label: str | None
    changed: bool


class Refused(Exception):
    """The message (or a batch holding it) was refused; the reason says why."""

    def __init__(self, reason: str, *, code: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code  # the error code the API answers, e.g. "unknown_label"


class CommandError(Exception):
    """The command cannot go on; the message says why."""


class BadArgument(CommandError):
    """An option, value or name the command cannot take: exit status 2, as argparse's."""
