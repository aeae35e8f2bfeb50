"""`spamsift import-bogofilter FILE --model NAME` (also `import --bogofilter`).

FILE is the output of `bogoutil -d wordlist.db` (or - for stdin); app/service/bogofilter.py says
what carries over and what cannot.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli.targets import local_database
from app.errors import SpamsiftError


def add_bogofilter_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bogofilter = commands.add_parser(
        "import-bogofilter",
        help="add a bogofilter wordlist dump (bogoutil -d) to a model",
        description="Add the token and message counts of a bogofilter wordlist, as printed by "
        "`bogoutil -d wordlist.db`, to a ham/spam model (made if missing). bogofilter counts "
        "presence only and keeps no ledger: imported messages cannot be forgotten or relabelled.",
    )
    bogofilter.add_argument("file", metavar="FILE", help="bogoutil -d output, or - for stdin")
    bogofilter.add_argument("--model", default="default", help="model name (default: default)")
    bogofilter.set_defaults(run=lambda args: import_dump(args.file, model=args.model))


def import_dump(name: str, *, model: str, command: str = "import-bogofilter") -> int:
    from app.service.bogofilter import import_bogofilter, read_wordlist

    try:
        if name == "-":
            wordlist = read_wordlist(sys.stdin.buffer)
        else:
            with Path(name).open("rb") as lines:
                wordlist = read_wordlist(lines)
        with local_database(f"spamsift {command}") as db:
            result = import_bogofilter(db, model_name=model, wordlist=wordlist)
    except SpamsiftError as error:
        print(f"spamsift {command}: {error.message}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"spamsift {command}: cannot read {name}: {error.strerror}", file=sys.stderr)
        return 2 if isinstance(error, FileNotFoundError) else 1
    made = " (created)" if result.created else ""
    print(
        f"model {result.model}{made}: added {result.spam_messages} spam and "
        f"{result.ham_messages} ham messages, {result.tokens} tokens from "
        f"{result.read_lines} dump lines"
    )
    for reason, count in sorted(result.skipped.items()):
        print(f"  skipped {count} tokens: {reason}")
    return 0
