"""Where a read of a model not held spends its time: `python -m bench.lab.cold_read DATABASE`.

DATABASE is one `python -m bench.many_models sqlite N --database DATABASE` built (models
`user00000` ... of 50 SpamAssassin messages each). Each model, in turn, is read as scoring
one message of a model this process does not hold reads it (`app.live.cold.read_partial_model`,
its steps written out here one by one), for a message of the corpus's last 200 tokenized
beforehand; wall time of each step (`time.perf_counter`), median over the models of the
second pass (the first warms the database's pages and the process):

- begin: opening the read transaction (a connection from the pool, BEGIN);
- find_model: the model's row;
- read_counts: `read_message_counts`, the statement that finds the message's tokens by text
  and their count rows (SQLite's own work, nearly all of it);
- empty / place / set_counts: the partial model made, its tokens named, its counts set;
- commit: the read transaction's end.

    python -m bench.many_models sqlite 300 --database sqlite:////tmp/many300.db
    python -m bench.lab.cold_read sqlite:////tmp/many300.db --models 300

Then (SQLite) the statement of read_counts in parts, each run straight on sqlite3 (no
SQLAlchemy, no Python around it; median over the models of the second pass): the message's
texts alone (`json_each` of the JSON array sent), those texts found in `tokens` by (model,
text), and the whole statement, their count rows joined too.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sqlite3
import statistics
import time
from collections import defaultdict

import numpy as np

from app.config import Settings
from app.live.held import LiveModel
from app.service.messages import Message
from app.service.runtime import Runtime
from app.store.counts import _MESSAGE_ROWS_SQLITE, read_message_counts
from app.store.models import find_model
from bench import data
from bench.many_models import model_names

PASSES = 2


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.cold_read", description=__doc__)
    parser.add_argument("database", help="a database python -m bench.many_models built")
    parser.add_argument("--models", type=int, default=300)
    args = parser.parse_args(argv)
    settings = Settings(database_url=args.database, _env_file=None)  # type: ignore[call-arg]
    rt = Runtime(settings)
    probe = data.load("spamassassin")[-200:]
    names = model_names(args.models)
    texts = [
        list(rt.prepare(Message(raw=m.raw, text=m.text), "classify").token_counts) for m in probe
    ]
    steps: defaultdict[str, list[float]] = defaultdict(list)
    sizes: list[tuple[int, int, int]] = []
    try:
        for run in range(PASSES):
            for i, name in enumerate(names):
                message = texts[i % len(texts)]
                marks = [("", time.perf_counter())]  # (step just ended, when)
                with rt.db.transaction(write=False) as conn:
                    marks.append(("begin", time.perf_counter()))
                    row = find_model(conn, name)
                    marks.append(("find_model", time.perf_counter()))
                    config = rt.models.config_of(row)
                    counts = read_message_counts(conn, row.id, message, n_classes=len(row.classes))
                    marks.append(("read_counts", time.perf_counter()))
                    live = LiveModel.empty(row, rt.models.engine_config, config=config, totals=None)
                    marks.append(("empty", time.perf_counter()))
                    found = np.arange(counts.token_ids.size, dtype=np.int64)
                    live.table.place(found, counts.token_texts)
                    marks.append(("place", time.perf_counter()))
                    token_ids, class_indices, docs, terms = counts.cells()
                    live.table.set_counts(
                        np.searchsorted(counts.token_ids, token_ids), class_indices, docs, terms
                    )
                    marks.append(("set_counts", time.perf_counter()))
                marks.append(("commit", time.perf_counter()))
                times = {step: at - before for (_, before), (step, at) in itertools.pairwise(marks)}
                if run == PASSES - 1:
                    for step, seconds in times.items():
                        steps[step].append(seconds)
                    sizes.append((len(message), counts.token_ids.size, token_ids.size))
    finally:
        rt.close()
    medians = {step: statistics.median(seconds) * 1000 for step, seconds in steps.items()}
    for step, ms in medians.items():
        print(f"{step:12s} {ms:7.3f} ms")
    print(f"{'in all':12s} {sum(medians.values()):7.3f} ms")
    texts_sent, found, rows = (statistics.median(column) for column in zip(*sizes, strict=True))
    print(f"a message: {texts_sent:.0f} texts sent, {found:.0f} found, {rows:.0f} count rows")
    parts = statement_parts(args.database, names, texts) if "sqlite" in args.database else {}
    for part, ms in parts.items():
        print(f"statement: {part:24s} {ms:7.3f} ms")
    print(json.dumps({"median_ms": medians, "statement_ms": parts, "models": len(names)}))


# The statement of `read_message_counts` on SQLite, and its first parts.
_TEXTS_ALONE = "SELECT m.key FROM json_each(:texts) AS m WHERE :model >= 0"
_TEXTS_FOUND = (
    "SELECT t.token_id, m.key FROM json_each(:texts) AS m CROSS JOIN tokens t "
    "ON t.model_id = :model AND t.text = m.value"
)


def statement_parts(database: str, names: list[str], texts: list[list[str]]) -> dict[str, float]:
    """Median ms of each part of the cold read's statement over the models (second pass)."""
    connection = sqlite3.connect(database.removeprefix("sqlite:///"))
    try:
        ids = {
            name: model_id for model_id, name in connection.execute("SELECT id, name FROM models")
        }
        parts = {
            "texts alone": _TEXTS_ALONE,
            "texts found in tokens": _TEXTS_FOUND,
            "with their counts": _MESSAGE_ROWS_SQLITE,
        }
        found: dict[str, float] = {}
        for part, statement in parts.items():
            seconds: list[float] = []
            for run in range(PASSES):
                for i, name in enumerate(names):
                    sent = json.dumps(list(dict.fromkeys(texts[i % len(texts)])))
                    started = time.perf_counter()
                    parameters = {"model": ids[name], "texts": sent, "width": 40}  # 2 classes
                    connection.execute(statement, parameters).fetchall()
                    if run == PASSES - 1:
                        seconds.append(time.perf_counter() - started)
            found[part] = statistics.median(seconds) * 1000
        return found
    finally:
        connection.close()


if __name__ == "__main__":
    main()
