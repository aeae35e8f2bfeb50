"""What interning from bytes could save a writer: `python -m bench.lab.interning [runs]`.

A writer gives a message's tokens their ids today from texts: the tokenizer's `HashedTokens`
makes a `str` per distinct token (`token_counts`), and `TokenIndex.lookup(texts, exact=True)`
hashes each again and compares the texts of the tokens it finds. By hash, the same ids come
from `TokenIndex.lookup_hashes` on the hashes the tokenizer already made, and only the new
tokens need their texts (to be stored).

An index holding the tokens of the SpamAssassin training split's first WARM messages (as a
model trained on them holds it); the next MESSAGES messages, tokenized beforehand (twice, so
that neither path finds the other's texts made already), are looked up each way; CPU time of
the process (`time.process_time`), median and min-max over the runs, in µs per message:

- texts: making the texts (`token_counts`) alone;
- by text: texts, then `lookup(texts, exact=True)` (what `ModelWrite.token_ids` does);
- by hash: `lookup_hashes(hashes)` alone (the texts only of tokens whose hash is collided).

Also prints how many of a message's distinct tokens are new to the index (the texts a writer
by hash would still make, to store them). Both paths are checked to give the same ids.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import numpy as np

from app.bayes.tokens import TokenIndex
from app.service.messages import Message
from bench import data
from bench.train_path import prepare_all

WARM = 2000
MESSAGES = 500


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    runs = int(args[0]) if args else 5
    split = data.split("spamassassin")
    messages = [(Message(raw=m.raw, text=m.text), m.label) for m in split.train]
    warm = prepare_all(messages[:WARM])
    index = TokenIndex()
    for prepared, _ in warm:
        index.intern(list(prepared.token_counts))
    index.merge()
    times: dict[str, list[float]] = {"texts": [], "by text": [], "by hash": []}
    new_share: list[float] = []
    for _ in range(runs):
        by_text = [p.tokens for p, _ in prepare_all(messages[WARM : WARM + MESSAGES])]
        texts_only = [p.tokens for p, _ in prepare_all(messages[WARM : WARM + MESSAGES])]
        by_hash = [p.tokens for p, _ in prepare_all(messages[WARM : WARM + MESSAGES])]
        started = time.process_time()
        for hashed in texts_only:
            list(hashed.token_counts)
        times["texts"].append(time.process_time() - started)
        started = time.process_time()
        text_ids = [index.lookup(list(hashed.token_counts), exact=True) for hashed in by_text]
        times["by text"].append(time.process_time() - started)
        started = time.process_time()
        hash_ids = [
            index.lookup_hashes(
                hashed.hashes,
                lambda positions, hashed=hashed: [
                    list(hashed.token_counts)[i] for i in positions.tolist()
                ],
            )
            for hashed in by_hash
        ]
        times["by hash"].append(time.process_time() - started)
        for a, b in zip(text_ids, hash_ids, strict=True):
            if not np.array_equal(a, b):
                raise AssertionError("the two lookups gave different ids")
        new_share = [float(np.mean(ids < 0)) for ids in text_ids]
    report = {
        name: {
            "median_us": round(statistics.median(values) / MESSAGES * 1e6, 1),
            "min_us": round(min(values) / MESSAGES * 1e6, 1),
            "max_us": round(max(values) / MESSAGES * 1e6, 1),
        }
        for name, values in times.items()
    }
    report["new_token_share"] = {"mean": round(float(np.mean(new_share)), 3)}
    report["index_tokens"] = {"count": len(index)}
    report["load"] = {"average": round(os.getloadavg()[0], 1)}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
