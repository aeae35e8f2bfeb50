"""Mail on disk as users keep it: .eml folders, mbox files, Maildirs and .jsonl corpora."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.builders import ham_message, spam_message


def spam_bytes(i: int) -> bytes:
    return spam_message(i, message_id=f"<spam{i}@lottery.example>").encode()


def ham_bytes(i: int) -> bytes:
    return ham_message(i, message_id=f"<ham{i}@example.org>").encode()


def latin1_ham(i: int) -> bytes:
    """A ham message whose body is Latin-1 bytes (not UTF-8): it cannot travel in JSON as is."""
    body = f"Caf\xe9 cr\xe8me meeting agenda quarterly report review number {i} budget team"
    return (
        f"From: bob@example.org\r\nTo: alice@example.org\r\nSubject: r\xe9union {i}\r\n"
        f"Message-ID: <latin{i}@example.org>\r\nMIME-Version: 1.0\r\n"
        'Content-Type: text/plain; charset="iso-8859-1"\r\n\r\n'
        f"{body}\r\n"
    ).encode("latin-1")


def write_eml_folder(folder: Path, messages: list[bytes]) -> Path:
    """One message per file, some in a nested folder, a hidden file that is skipped."""
    (folder / "nested").mkdir(parents=True)
    for i, raw in enumerate(messages):
        target = folder / "nested" if i % 2 else folder
        (target / f"{i:03d}.eml").write_bytes(raw)
    (folder / ".DS_Store").write_bytes(b"\x00\x01 not mail")
    return folder


def write_mbox(path: Path, messages: list[bytes]) -> Path:
    chunks = []
    for i, raw in enumerate(messages):
        chunks.append(f"From sender{i}@example.org Sat Nov 21 09:30:00 2026\n".encode())
        chunks.append(raw.replace(b"\r\n", b"\n").rstrip(b"\n") + b"\n\n")
    path.write_bytes(b"".join(chunks))
    return path


def write_maildir(folder: Path, messages: list[bytes]) -> Path:
    """Messages in cur/ and new/, a half-delivered one in tmp/ and a sub-folder: both skipped."""
    for box in ("cur", "new", "tmp"):
        (folder / box).mkdir(parents=True)
    for i, raw in enumerate(messages):
        box = "cur" if i % 2 else "new"
        (folder / box / f"1732180000.M{i}P1.host{':2,S' if box == 'cur' else ''}").write_bytes(raw)
    (folder / "tmp" / "1732180000.M999P1.host").write_bytes(spam_bytes(999))
    (folder / ".Junk" / "cur").mkdir(parents=True)
    (folder / ".Junk" / "cur" / "1732180000.M998P1.host:2,S").write_bytes(spam_bytes(998))
    return folder


def write_corpus(path: Path, records: list[dict[str, str]]) -> Path:
    lines = "".join(json.dumps(record) + "\n" for record in records)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as file:
            file.write(lines)
    else:
        path.write_text(lines, encoding="utf-8")
    return path
