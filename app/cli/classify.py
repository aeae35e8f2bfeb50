"""`spamsift classify [FILE|-]`: the verdict as text, JSON, exit status, or added headers.

Exit status, as bogofilter's: 0 spam, 1 ham, 2 unsure (or another class of a model that is not
ham/spam), 3 error. `--add-header` makes it a mail filter (procmail, maildrop, a Postfix pipe): it
prints the message unchanged but for `X-Spamsift-Verdict`, `X-Spamsift-Probability` and the
SpamAssassin-style `X-Spam-Flag` (spam only), `X-Spam-Status` and `X-Spam-Level` first in its
header block (names set by SPAMSIFT_SPAM_*_HEADER). A filter's caller often takes any status but 0
as a failure (procmail `fw`, Postfix pipe), hence `--exit-zero`: 0 for every verdict, 3 still on
error. On an error in filter mode the message is printed unchanged, so mail keeps flowing when the
filter cannot answer (fail open), and the status is 3.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from app.cli.mail import add_verdict_headers
from app.cli.outcomes import CommandError, Refused
from app.cli.sources import to_message
from app.cli.targets import add_target_arguments, open_target
from app.config import Settings
from app.service.verdict_headers import SpamHeaderNames

EXIT_SPAM, EXIT_HAM, EXIT_UNSURE, EXIT_ERROR = 0, 1, 2, 3


def add_classify_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    classify = commands.add_parser(
        "classify",
        help="classify one message: prints the verdict; exit 0 spam, 1 ham, 2 unsure, 3 error",
        description="Classify the message in FILE (or standard input). Exit status: 0 spam, "
        "1 ham, 2 unsure, 3 error.",
    )
    classify.add_argument("file", nargs="?", default="-", metavar="FILE", help="default: stdin")
    output = classify.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the whole result as JSON")
    output.add_argument(
        "--add-header",
        action="store_true",
        help="print the message with X-Spamsift-Verdict, X-Spamsift-Probability, X-Spam-Flag, "
        "X-Spam-Status and X-Spam-Level added (a mail filter); on error the message unchanged",
    )
    classify.add_argument(
        "--exit-zero",
        action="store_true",
        help="exit 0 whatever the verdict (3 only on error), for callers that take any other "
        "status as a failure",
    )
    add_target_arguments(classify)
    classify.set_defaults(run=run_classify)


def run_classify(args: argparse.Namespace) -> int:
    try:
        raw = _read(args.file)
    except OSError as error:
        print(f"spamsift classify: cannot read {args.file}: {error.strerror}", file=sys.stderr)
        return EXIT_ERROR
    try:
        result = _classify(args, raw)
    except (CommandError, Refused) as error:
        print(f"spamsift classify: {error}", file=sys.stderr)
        if args.add_header:
            _write(raw)  # fail open: the mail goes on unmarked
        return EXIT_ERROR
    verdict = str(result["verdict"])
    probability = _probability(result)
    if args.add_header:
        names = SpamHeaderNames.of(Settings())
        _write(add_verdict_headers(raw, verdict=verdict, probability=probability, names=names))
    elif args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(verdict if probability is None else f"{verdict} {probability:.6f}")
    if args.exit_zero:
        return 0
    return {"spam": EXIT_SPAM, "ham": EXIT_HAM}.get(verdict, EXIT_UNSURE)


def _classify(args: argparse.Namespace, raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        raise CommandError("the message is empty")
    limit = Settings().max_message_bytes
    if len(raw) > limit:
        raise CommandError(f"the message is {len(raw)} bytes; the limit is {limit}")
    target = open_target(args)
    try:
        return target.classify(to_message(raw))
    finally:
        target.close()


def _probability(result: dict[str, Any]) -> float | None:
    """The spam probability, or for a model without `spam` that of the verdict's class."""
    if result.get("spam_probability") is not None:
        return float(result["spam_probability"])
    probability = result.get("probabilities", {}).get(result["verdict"])
    return None if probability is None else float(probability)


def _read(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    return Path(name).read_bytes()


def _write(raw: bytes) -> None:
    sys.stdout.buffer.write(raw)
    sys.stdout.buffer.flush()
