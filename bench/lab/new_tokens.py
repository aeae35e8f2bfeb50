"""New tokens per message and per batch when a fresh model is trained on a corpus in order:
what SPAMSIFT_MAX_NEW_TOKENS_PER_REQUEST must never refuse.

    python -m bench.lab.new_tokens spamassassin csdmc2010

Per corpus: the mean, p99 and largest number of tokens a message adds to the model trained
on every message before it, and the most a batch of SPAMSIFT_MAX_BATCH_ITEMS consecutive
messages adds (the first batch, into an empty model, adds nearly the most).
"""

from __future__ import annotations

import argparse
import json
import sys

from app.config import Settings
from app.service.messages import Message, prepare
from app.service.runtime import tokenizer_limits
from app.text.core import resolve
from bench import data


def measure(name: str, settings: Settings) -> dict[str, object]:
    limits = tokenizer_limits(settings)
    core = resolve(settings.tokenizer)
    seen: set[str] = set()
    per_message: list[int] = []
    batches = [0]
    for message in data.load(name):
        tokens = prepare(
            Message(raw=message.raw, text=message.text),
            limits=limits,
            max_message_bytes=settings.max_message_bytes,
            core=core,
        ).token_counts
        new = [token for token in tokens if token not in seen]
        seen.update(new)
        per_message.append(len(new))
        if len(per_message) % settings.max_batch_items == 1 and len(per_message) > 1:
            batches.append(0)
        batches[-1] += len(new)
    ordered = sorted(per_message)
    return {
        "corpus": name,
        "messages": len(ordered),
        "mean_new_per_message": round(sum(ordered) / len(ordered), 1),
        "p99_new_per_message": ordered[int(0.99 * len(ordered))],
        "max_new_per_message": ordered[-1],
        "max_new_per_batch": max(batches),
        "batch_items": settings.max_batch_items,
        "vocabulary": len(seen),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpora", nargs="+")
    args = parser.parse_args(argv)
    settings = Settings()
    for name in args.corpora:
        json.dump(measure(name, settings), sys.stdout)
        print()


if __name__ == "__main__":
    main()
