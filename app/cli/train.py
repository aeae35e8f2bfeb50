"""`spamsift train --label spam|ham PATH…`: bulk training, in batches, with a summary.

Each batch is one transaction (the service's train_batch, or the server's `…/train/batch`), so
an interrupted run leaves whole batches trained and running it again trains only the rest
(training is idempotent by message). A batch refused because of one message (no tokens, too
large, an unknown label) is split in halves until the message at fault stands alone; it is
reported, and every other message of the batch is trained.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from app.cli.outcomes import CommandError, Refused, Trained
from app.cli.progress import progress_bar
from app.cli.sources import Item, Unusable, find_sources, read_sources
from app.cli.targets import Target, add_target_arguments, open_target
from app.config import Settings

BATCH_ITEMS = 500
BATCH_BYTES = 8 * 1024 * 1024  # well inside the server's 64 MiB request limit, JSON escapes too
EXAMPLES_PER_REASON = 5
_ITEM = re.compile(r"items\[(?P<index>\d+)\]: ")


def add_train_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    train = commands.add_parser(
        "train",
        help="train messages from files, folders, mbox files, Maildirs and .jsonl[.gz] corpora",
        description="Train every message found under PATH… as --label. Folders are read "
        "recursively; a folder with cur/ or new/ is a Maildir; a file starting with 'From ' "
        "is an mbox; .jsonl and .jsonl.gz corpora carry their own labels; - is standard "
        "input (an mbox or one message).",
    )
    train.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="a message file, a folder of them, an mbox, a Maildir or a .jsonl[.gz] corpus",
    )
    train.add_argument(
        "--label", help="the class of the messages (needed unless every PATH is a corpus)"
    )
    add_target_arguments(train)
    train.add_argument(
        "--batch-size",
        type=int,
        default=BATCH_ITEMS,
        help=f"messages per transaction (default {BATCH_ITEMS})",
    )
    train.add_argument(
        "--no-progress", action="store_true", help="no progress bar, even on a terminal"
    )
    train.set_defaults(run=run_train)


@dataclass
class Summary:
    """What a training run did, message by message."""

    trained: int = 0
    already_known: int = 0
    relabelled: int = 0
    refused: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    reasons: dict[str, str] = field(default_factory=dict)  # the first reason given per kind

    @property
    def messages(self) -> int:
        return self.trained + self.already_known + self.relabelled + self.refused_count

    @property
    def refused_count(self) -> int:
        return sum(len(origins) for origins in self.refused.values())

    def add(self, result: Trained) -> None:
        if not result.changed:
            self.already_known += 1
        elif result.previous_label is None:
            self.trained += 1
        else:
            self.relabelled += 1

    def refuse(self, origin: str, reason: str, *, code: str | None = None) -> None:
        """Count a message refused; refusals group by error code (or by reason without one)."""
        kind = code or reason
        self.refused[kind].append(origin)
        self.reasons.setdefault(kind, reason)

    def print(self, *, model: str, seconds: float) -> None:
        rate = self.messages / seconds if seconds > 0 else 0.0
        print(
            f"model {model}: {self.messages} messages in {seconds:.1f} s ({rate:,.0f} messages/s)"
        )
        print(f"  trained        {self.trained}")
        print(f"  already known  {self.already_known}")
        print(f"  relabelled     {self.relabelled}")
        print(f"  refused        {self.refused_count}")
        for kind, origins in sorted(self.refused.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            reason = self.reasons[kind]
            label = reason if kind == reason else f"{kind}, e.g. {reason}"
            shown = ", ".join(origins[:EXAMPLES_PER_REASON])
            more = len(origins) - EXAMPLES_PER_REASON
            print(f"    {len(origins)} {label}: {shown}{f', and {more} more' if more > 0 else ''}")


def run_train(args: argparse.Namespace) -> int:
    sources, missing = find_sources(args.paths)
    if not args.label and any(source.kind != "corpus" for source in sources):
        print(
            "spamsift train: --label spam|ham is needed for messages that are not in a "
            ".jsonl corpus",
            file=sys.stderr,
        )
        return 2
    if args.batch_size < 1:
        print("spamsift train: --batch-size must be at least 1", file=sys.stderr)
        return 2
    if missing:  # a typo in a path: say so before reading anything (a cron job sees status 2)
        for unusable in missing:
            print(f"spamsift train: {unusable.origin}: {unusable.reason}", file=sys.stderr)
        return 2
    summary = Summary()
    started = time.monotonic()
    try:
        target = open_target(args)
        classes = target.classes()
    except CommandError as error:
        print(f"spamsift train: {error}", file=sys.stderr)
        return 1
    if args.label and classes is not None and args.label not in classes:
        print(
            f"spamsift train: --label {args.label!r} is not a class of model {args.model} "
            f"({', '.join(classes)})",
            file=sys.stderr,
        )
        target.close()
        return 2
    from_stdin = any(source.kind == "stdin" for source in sources)
    bar = progress_bar(
        "training",
        unit="B",
        unit_scale=True,
        total=None if from_stdin else sum(source.size_bytes for source in sources),
        hidden=args.no_progress,
    )
    status = 0

    def advance(size: int) -> None:
        bar.update(size)

    try:
        batch: list[tuple[Item, str]] = []
        batch_bytes = 0
        for entry in read_sources(
            sources, max_message_bytes=Settings().max_message_bytes, advance=advance
        ):
            if isinstance(entry, Unusable):
                summary.refuse(entry.origin, entry.reason)
                continue
            label = entry.label or args.label
            if not target.batchable(entry.message):
                train_batch(target, [(entry, label)], summary)
                continue
            batch.append((entry, label))
            batch_bytes += entry.message.size_bytes()
            if len(batch) >= args.batch_size or batch_bytes >= BATCH_BYTES:
                train_batch(target, batch, summary)
                batch, batch_bytes = [], 0
                _show_rate(bar, summary, started)
        if batch:
            train_batch(target, batch, summary)
    except CommandError as error:
        print(f"spamsift train: {error}", file=sys.stderr)
        status = 1
    finally:
        bar.close()
        target.close()
    summary.print(model=args.model, seconds=time.monotonic() - started)
    return status


def train_batch(target: Target, batch: Sequence[tuple[Item, str]], summary: Summary) -> None:
    """Train `batch` in one transaction; when it is refused, find the messages at fault.

    The service names the first message it refuses (`items[i]: …`): the messages before it
    passed, so they are trained together; the rest is split in halves and tried again, as is a
    batch refused without naming a message (a server's 413 for the whole request). A batch is
    all or nothing, so nothing is trained twice or half.
    """
    try:
        results = target.train_batch([(item.message, label) for item, label in batch])
    except Refused as refusal:
        index, reason = _refused_item(refusal.reason, len(batch))
        same_label = len({label for _, label in batch}) == 1
        if len(batch) == 1 or (refusal.code == "unknown_label" and same_label):
            for item, _ in batch:
                summary.refuse(item.origin, reason, code=refusal.code)
            return
        rest = list(batch)
        if index is not None:
            summary.refuse(batch[index][0].origin, reason, code=refusal.code)
            if index:
                train_batch(target, batch[:index], summary)
            rest = rest[index + 1 :]
        middle = len(rest) // 2
        for half in (rest[:middle], rest[middle:]):
            if half:
                train_batch(target, half, summary)
        return
    for result in results:
        summary.add(result)


def _refused_item(reason: str, size: int) -> tuple[int | None, str]:
    """Read `items[i]: why` as (i, why); (None, reason) when no message is named."""
    match = _ITEM.match(reason)
    if match is None or int(match["index"]) >= size:
        return None, reason
    return int(match["index"]), reason[match.end() :]


def _show_rate(bar: tqdm[Any], summary: Summary, started: float) -> None:
    if not bar.disable:
        seconds = max(time.monotonic() - started, 1e-9)
        bar.set_postfix_str(
            f"{summary.messages} messages, {summary.messages / seconds:,.0f} messages/s"
        )
