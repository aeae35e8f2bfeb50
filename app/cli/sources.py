"""Where `spamsift train` finds messages: files, folders, mbox files, Maildirs and corpora.

- a `.jsonl` / `.jsonl.gz` file is a labelled corpus (each line has its label);
- a file starting with `From ` is an mbox: one message per `From ` line that follows a blank
  line (or starts the file), the `From ` line itself dropped;
- any other file is one message;
- a folder with `cur/` or `new/` is a Maildir: the files of `cur/` and `new/` (not `tmp/`,
  which holds deliveries in progress, and not its sub-folders, which are other mailboxes);
- any other folder is read recursively, in name order, skipping hidden files;
- `-` is standard input: an mbox when it starts with `From `, else one message.

A message's message_id is its Message-ID header, else the corpus line's `id`, else none (the
service then names it `sha256:<hex>` of its bytes). X-Spamsift-* headers are dropped first.
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import BinaryIO, Literal

from app.cli.corpora import is_corpus, parse_corpus_line
from app.cli.mail import strip_own_headers
from app.service.messages import Message, header_message_id

Kind = Literal["corpus", "mbox", "message", "stdin"]
STDIN = Path("-")


@dataclass(frozen=True)
class Item:
    """A message to train; `label` is the corpus line's, or None for the command's --label."""

    message: Message
    label: str | None
    origin: str


@dataclass(frozen=True)
class Unusable:
    """Something found where a message was expected, and why it cannot be trained."""

    origin: str
    reason: str


@dataclass(frozen=True)
class Source:
    path: Path
    kind: Kind
    size_bytes: int


def find_sources(paths: list[Path]) -> tuple[list[Source], list[Unusable]]:
    """Walk `paths` (files and folders) once: what to read, and what cannot be read at all."""
    sources: list[Source] = []
    missing: list[Unusable] = []
    for path in paths:
        if path == STDIN:
            if any(source.kind == "stdin" for source in sources):
                missing.append(Unusable("-", "standard input given twice"))
            else:
                sources.append(Source(path, "stdin", 0))
        elif path.is_dir():
            _walk_folder(path, sources)
        elif path.is_file():
            sources.append(_source(path))
        else:
            missing.append(Unusable(str(path), "no such file or folder"))
    return sources, missing


def read_sources(
    sources: list[Source], *, max_message_bytes: int, advance: Callable[[int], None]
) -> Iterator[Item | Unusable]:
    """Yield every message of `sources` in order; `advance(n)` reports n more bytes read."""
    for source in sources:
        try:
            if source.kind == "corpus":
                yield from _read_corpus(source.path, advance)
            elif source.kind == "mbox":
                with source.path.open("rb") as file:
                    yield from _read_mbox(str(source.path), file, max_message_bytes, advance)
            elif source.kind == "stdin":
                yield from _read_stdin(sys.stdin.buffer, max_message_bytes, advance)
            else:
                yield _read_message(source, max_message_bytes)
                advance(source.size_bytes)
        except OSError as error:
            yield Unusable(str(source.path), f"cannot be read ({error.strerror or error})")


def to_message(raw: bytes, fallback_id: str | None = None) -> Message:
    """A raw message as spamsift takes it: own headers dropped, Message-ID as message_id."""
    raw = strip_own_headers(raw)
    return Message(raw=raw, message_id=header_message_id(raw) or fallback_id)


def _walk_folder(folder: Path, sources: list[Source]) -> None:
    if (folder / "cur").is_dir() or (folder / "new").is_dir():
        for box in ("cur", "new"):
            if (folder / box).is_dir():
                for path in sorted((folder / box).iterdir()):
                    if path.is_file() and not path.name.startswith("."):
                        sources.append(Source(path, "message", path.stat().st_size))
        return
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            continue
        if path.is_dir():
            _walk_folder(path, sources)
        elif path.is_file():
            sources.append(_source(path))


def _source(path: Path) -> Source:
    size = path.stat().st_size if path.is_file() else 0
    if is_corpus(path):
        return Source(path, "corpus", size)
    if path.is_file():
        with path.open("rb") as file:
            if file.read(5) == b"From ":
                return Source(path, "mbox", size)
    return Source(path, "message", size)


def _read_message(source: Source, max_message_bytes: int) -> Item | Unusable:
    if source.size_bytes > max_message_bytes:
        return Unusable(str(source.path), f"over the message size limit ({max_message_bytes} B)")
    raw = source.path.read_bytes()
    if not raw.strip():
        return Unusable(str(source.path), "empty file")
    return Item(to_message(raw), None, str(source.path))


def _read_stdin(
    stream: BinaryIO, max_message_bytes: int, advance: Callable[[int], None]
) -> Iterator[Item | Unusable]:
    """Standard input as an mbox (it starts with `From `) or as one message."""
    first = stream.readline(max_message_bytes + 1)
    if first.startswith(b"From "):
        yield from _read_mbox("-", chain([first], stream), max_message_bytes, advance)
        return
    raw = first + stream.read(max_message_bytes + 1 - len(first))
    advance(len(raw))
    if len(raw) > max_message_bytes:
        yield Unusable("-", f"over the message size limit ({max_message_bytes} B)")
    elif not raw.strip():
        yield Unusable("-", "empty input")
    else:
        yield Item(to_message(raw), None, "-")


def _read_mbox(
    name: str, lines: Iterable[bytes], max_message_bytes: int, advance: Callable[[int], None]
) -> Iterator[Item | Unusable]:
    """Split an mbox on `From ` lines that follow a blank line, reading it line by line."""
    number = 0
    message: list[bytes] = []
    size = 0
    too_large = False

    def finish() -> Item | Unusable | None:
        if number == 0:
            return None
        origin = f"{name}:{number}"
        if too_large:
            return Unusable(origin, f"over the message size limit ({max_message_bytes} B)")
        body = message[:-1] if message and message[-1].strip() == b"" else message  # separator
        raw = b"".join(body)
        if not raw.strip():
            return Unusable(origin, "empty message")
        return Item(to_message(raw), None, origin)

    previous_blank = True
    for line in lines:
        advance(len(line))
        if previous_blank and line.startswith(b"From "):
            done = finish()
            if done is not None:
                yield done
            number += 1
            message, size, too_large = [], 0, False
        else:
            size += len(line)
            if size > max_message_bytes:
                too_large, message = True, []
            elif not too_large:
                message.append(line)
        previous_blank = line.strip() == b""
    done = finish()
    if done is not None:
        yield done


def _read_corpus(path: Path, advance: Callable[[int], None]) -> Iterator[Item | Unusable]:
    with path.open("rb") as raw_file:
        lines: Iterable[bytes] = (
            gzip.GzipFile(fileobj=raw_file) if path.suffix == ".gz" else raw_file
        )
        position = 0
        for number, line in enumerate(lines, start=1):
            now = raw_file.tell()
            advance(now - position)
            position = now
            if not line.strip():
                continue
            origin = f"{path}:{number}"
            try:
                record = parse_corpus_line(line, origin)
            except ValueError as error:
                yield Unusable(origin, str(error).removeprefix(f"{origin}: "))
                continue
            if record.raw is not None:
                message = to_message(record.raw, fallback_id=record.id)
            else:
                message = Message(text=record.text, message_id=record.id)
            yield Item(message, record.label, origin)
