"""Looking a message's token hashes up in a large index, with its hashes sorted first or not:
`python -m bench.lab.lookup_order [runs] [--thresholds 2048,64]`.

Trains the SpamAssassin split's training messages (in batches of 500) into a fresh SQLite
model (about 400,000 tokens), then for each of the 1,178 test messages in turn tokenizes it
and times only `CountTable.vectorize_hashed` of that one message, as a single classify does
right after tokenizing: the index's pages are then as cold as they are in the server. Each
threshold of `app.bayes.tokens._SORT_NEEDLES` (above it, a lookup sorts its hashes before
searching) takes its turn run by run; prints the median and range over the runs, in µs per
message (wall time of the one call, this process alone).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import app.bayes.tokens as tokens
from app.service.classification import prepare_messages
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from bench import data
from bench.versus_bogofilter import TRAIN_BATCH, bench_settings


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.lookup_order", description=__doc__)
    parser.add_argument("runs", nargs="?", type=int, default=5)
    parser.add_argument("--thresholds", default=f"{tokens._SORT_NEEDLES},2048")
    args = parser.parse_args()
    thresholds = [int(value) for value in args.thresholds.split(",")]

    split = data.split("spamassassin")
    folder = tempfile.mkdtemp(prefix="spamsift-lookup-")
    url = f"sqlite:///{folder}/lookup.db"
    db = Database(url)
    upgrade_schema(db)
    db.dispose()
    rt = Runtime(bench_settings(url))
    for start in range(0, len(split.train), TRAIN_BATCH):
        items = [
            (Message(raw=m.raw, text=m.text, message_id=m.id), m.label)
            for m in split.train[start : start + TRAIN_BATCH]
        ]
        train_batch(rt, model_name="default", items=items)
    table = rt.models.get("default").table
    bodies = [m.raw or b"" for m in split.test]

    per_message: dict[int, list[float]] = {threshold: [] for threshold in thresholds}
    for _ in range(args.runs):
        for threshold in thresholds:
            tokens._SORT_NEEDLES = threshold
            spent = 0.0
            for body in bodies:
                prepared = prepare_messages(rt, [Message(raw=body)], "classify")
                started = time.perf_counter()
                table.vectorize_hashed(
                    [(message.tokens.hashes, message.tokens.counts) for message in prepared],
                    lambda row, prepared=prepared: list(prepared[row].token_counts),
                )
                spent += time.perf_counter() - started
            per_message[threshold].append(spent / len(bodies) * 1e6)
    rt.close()
    result = {
        "index_tokens": table.n_tokens,
        "messages": len(bodies),
        "us_per_message": {
            str(threshold): {
                "median": round(statistics.median(figures), 1),
                "min": round(min(figures), 1),
                "max": round(max(figures), 1),
            }
            for threshold, figures in per_message.items()
        },
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
