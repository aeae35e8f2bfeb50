"""`spamsift db upgrade` in a process of its own, with Alembic's log on stderr (each migration
step it runs is a "Running upgrade" line), for the F15 tests.

With FAULTS_PAUSE_ON=<SQL fragment>, the process stops for good right after executing the first
statement containing it, inside the migration transaction, and says PAUSED on stdout: the test
then kills it mid-migration. Prints READY before it starts on the database.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from app.cli.main import main


def pause_after(fragment: str) -> None:
    def after_execute(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if fragment in statement:
            print("PAUSED", flush=True)  # noqa: T201
            time.sleep(600)

    event.listen(Engine, "after_cursor_execute", after_execute)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    if os.environ.get("FAULTS_PAUSE_ON"):
        pause_after(os.environ["FAULTS_PAUSE_ON"])
    print("READY", flush=True)  # noqa: T201
    sys.exit(main(["db", "upgrade"]))
