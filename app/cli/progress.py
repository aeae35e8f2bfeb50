"""The progress bar of a long command (train, import, export): tqdm on stderr, drawn only on
a terminal, so that cron mail, logs and pipes get the summary line alone."""

from __future__ import annotations

import os
import sys
from typing import Any

from tqdm import tqdm


def progress_bar(
    desc: str, *, unit: str, total: float | None = None, hidden: bool = False, **options: Any
) -> tqdm[Any]:
    """A bar counting `unit`s towards `total` (None: a count and a rate), shown on stderr when
    it is a terminal and not `hidden` (e.g. --no-progress); erased when closed."""
    on_terminal = not hidden and sys.stderr.isatty()
    # A terminal that tells no size (0 x 0, e.g. a fresh pty) still gets a bar.
    size = os.get_terminal_size(sys.stderr.fileno()) if on_terminal else None
    return tqdm(
        total=total,
        unit=unit,
        desc=desc,
        disable=not on_terminal,
        leave=False,
        ncols=(size.columns or 80) if size else None,
        nrows=(size.lines or 24) if size else None,
        **options,
    )
