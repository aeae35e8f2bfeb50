"""`spamsift feedback --label spam|ham [FILE|-|--message-id ID]`: "report spam / not spam".

What an IMAP hook calls when a user moves mail into or out of the Junk folder: with the message
(FILE, or standard input), it is relabelled if it was trained, else trained; with only
`--message-id`, a message trained before or classified within the retention period is.
Exit status 0 when the feedback was applied, 1 when it could not be.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.cli.outcomes import CommandError, Refused
from app.cli.sources import to_message
from app.cli.targets import add_target_arguments, open_target
from app.config import Settings
from app.service.messages import Message


def add_feedback_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    feedback = commands.add_parser(
        "feedback",
        help='"mark as spam / not spam": relabel or train one message',
        description="Mark the message in FILE (or standard input, or the one named by "
        "--message-id) as --label: relabelled if trained, trained otherwise.",
    )
    feedback.add_argument(
        "file", nargs="?", default=None, metavar="FILE", help="the message; - for stdin"
    )
    feedback.add_argument("--label", required=True, help="the class it belongs to: spam or ham")
    feedback.add_argument(
        "--message-id",
        help="a message classified within the retention period or trained before; with FILE, "
        "the id to give the message instead of its Message-ID header",
    )
    add_target_arguments(feedback)
    feedback.set_defaults(run=run_feedback)


def run_feedback(args: argparse.Namespace) -> int:
    message: Message | None = None
    if args.file is not None or args.message_id is None:
        try:
            raw = (
                sys.stdin.buffer.read()
                if args.file in (None, "-")
                else Path(args.file).read_bytes()
            )
        except OSError as error:
            print(f"spamsift feedback: cannot read {args.file}: {error.strerror}", file=sys.stderr)
            return 2 if isinstance(error, FileNotFoundError) else 1
        if not raw.strip():
            print("spamsift feedback: the message is empty", file=sys.stderr)
            return 1
        limit = Settings().max_message_bytes
        if len(raw) > limit:
            print(f"spamsift feedback: the message is over {limit} bytes", file=sys.stderr)
            return 1
        message = to_message(raw)
    message_id = args.message_id or (message.message_id if message is not None else None)
    try:
        target = open_target(args)
        try:
            result = target.feedback(label=args.label, message_id=message_id, message=message)
        finally:
            target.close()
    except (CommandError, Refused) as error:
        print(f"spamsift feedback: {error}", file=sys.stderr)
        # A label the model does not have is a bad argument, as in train: status 2.
        return 2 if isinstance(error, Refused) and error.code == "unknown_label" else 1
    if not result.changed:
        what = "already known"
    elif result.previous_label is None:
        what = "trained"
    else:
        what = f"relabelled from {result.previous_label}"
    print(f"{result.message_id}: {result.label}, {what}")
    return 0
