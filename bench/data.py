"""What the benchmarks run on: the shared corpora with the `spamsift evaluate` split."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from app.cli.corpora import read_jsonl
from app.service.corpus import LabelledMessage
from app.service.evaluation import is_test_message, stream_order

CORPUS_NAMES = ("spamassassin", "trec06c-subset", "sms-spam-collection")


def corpora_dir() -> Path:
    """Return $SPAMSIFT_CORPORA, else ../shared/corpora beside the repository."""
    configured = os.environ.get("SPAMSIFT_CORPORA")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "shared" / "corpora"


def corpus_path(name: str) -> Path:
    return corpora_dir() / name / "messages.jsonl.gz"


def load(name: str, *, limit: int | None = None) -> list[LabelledMessage]:
    """Return the messages of a shared corpus (`limit` of them, evenly spread)."""
    return spread(list(read_jsonl(corpus_path(name))), limit)


def spread(messages: list[LabelledMessage], limit: int | None) -> list[LabelledMessage]:
    """Return at most `limit` messages taken at even steps (corpora are sorted by folder, so a
    prefix would hold one label only)."""
    if limit is None or len(messages) <= limit:
        return messages
    if limit <= 0:
        return []
    step = len(messages) / limit
    return [messages[int(i * step)] for i in range(limit)]


@dataclass(frozen=True)
class Split:
    train: list[LabelledMessage]
    test: list[LabelledMessage]


TRAIN_SHUFFLE_SEED = 0  # the accuracy harness's fixed shuffle


def split(name: str, *, train_limit: int | None = None, test_limit: int | None = None) -> Split:
    """`split_of` a shared corpus, by name."""
    return split_of(corpus_path(name), train_limit=train_limit, test_limit=test_limit)


def split_of(path: Path, *, train_limit: int | None = None, test_limit: int | None = None) -> Split:
    """Return the training and test messages of `spamsift evaluate`'s fixed split, the
    training messages in the accuracy harness's fixed shuffle: the corpora are sorted by
    folder (all of spamassassin's ham before its spam), and a model trained on one class
    first is never sure of a message, so it would learn every word pair
    (`pairs_until_log_odds`) where mail as it arrives, both classes mixed, does not."""
    train: list[LabelledMessage] = []
    test: list[LabelledMessage] = []
    for message in read_jsonl(path):
        (test if is_test_message(message.id) else train).append(message)
    mixed = stream_order(spread(train, train_limit), TRAIN_SHUFFLE_SEED)
    return Split(train=mixed, test=spread(test, test_limit))


def raw_text(message: LabelledMessage) -> str:
    """Return the message as the str a client sends in JSON `raw` (bytes read as UTF-8, else
    Latin-1, as the corpus stored them)."""
    if message.raw is None:
        return message.text or ""
    try:
        return message.raw.decode("utf-8")
    except UnicodeDecodeError:
        return message.raw.decode("latin-1")


def size_bytes(message: LabelledMessage) -> int:
    if message.raw is not None:
        return len(message.raw)
    return len((message.text or "").encode("utf-8"))
