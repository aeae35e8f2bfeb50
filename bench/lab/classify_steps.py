"""Four steps of classifying a batch, before and after: `python -m bench.lab.classify_steps [runs]`.

CPU milliseconds, in one process. Every token of the SpamAssassin split's training messages is
interned into a token index (about 600,000 tokens; a model trained from them keeps about
400,000); its test messages are tokenized. Each step as it was before (the code below, as it
stood at 404ccc6) against the way it is now; the variants take turns run by run, medians of
`runs` (default 5), and each pair is checked to give the same answer:

- where a batch's hashes are in the index's sorted hashes (`tokens._positions`), for batches
  of 1, 10, 100 and 1,000 messages: the hashes sorted by one argsort first, against ordered
  by their top 16 bits (a radix sort);
- the batch's CSR matrix (`CountTable._term_matrix`) at the same sizes: one argsort of the
  (row, id) keys, against each row's ids sorted in place by scipy;
- the Message-ID read from raw mail (`header_message_id`) per message, over the test split
  and trec07p-early's first 1,500 messages: a Python loop over the header's lines, against
  one regular expression;
- `cut_urls` per text holding a URL, in the same messages: findall and then sub, against one
  split;
- the classification records' insert (`insert_classifications`), per record, a batch of one
  record per test message into a fresh SQLite database in one transaction (new message keys
  each time): SQLAlchemy's executemany, against plain tuples through the driver.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import scipy.sparse
from sqlalchemy import Connection, delete, insert

from app.bayes.counts import CountTable
from app.bayes.tokens import _positions
from app.service.messages import MAX_MESSAGE_ID_CHARS, header_message_id
from app.store.engine import Database
from app.store.ledger import ClassificationRecord, insert_classifications, pack
from app.store.migrate import upgrade_schema
from app.store.models import insert_model
from app.store.tables import classifications
from app.text import core, hash_raw, mime, words
from app.text.limits import TokenizerLimits
from bench import data

LIMITS = TokenizerLimits()
BATCHES = (1, 10, 100, 1000)

# -- the steps as they were (404ccc6) ----------------------------------------------------------


def positions_before(sorted_hashes: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    if hashes.size <= 64 or sorted_hashes.size <= 64 * 8:
        positions = np.searchsorted(sorted_hashes, hashes)
    else:
        order = np.argsort(hashes)
        positions = np.empty_like(order)
        positions[order] = np.searchsorted(sorted_hashes, hashes[order])
    np.minimum(positions, sorted_hashes.size - 1, out=positions)
    return positions


def term_matrix_before(
    n_tokens: int, lengths: np.ndarray, ids: np.ndarray, counts: np.ndarray
) -> scipy.sparse.csr_array:
    n_messages = lengths.size
    rows = np.repeat(np.arange(n_messages, dtype=np.int64), lengths)
    keep = (ids >= 0) & (counts > 0)
    rows, ids, counts = rows[keep], ids[keep], counts[keep]
    width = max(n_tokens, 1)
    order = np.argsort(rows * width + ids)
    indptr = np.zeros(n_messages + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_messages), out=indptr[1:])
    return scipy.sparse.csr_array((counts[order], ids[order], indptr), shape=(n_messages, n_tokens))


_FIELD_NAME = re.compile(rb"[!-9;-~]+:")


def message_id_before(raw: bytes) -> str | None:
    blank_line = raw.find(b"\n\n")
    head = raw if blank_line < 0 else raw[:blank_line]
    if b"message-id:" not in head.lower():
        return None
    in_header = False
    value: bytes | None = None
    for line in head.split(b"\n"):
        if line.startswith(b"From ") and not in_header:
            continue
        if line[:1] in (b" ", b"\t") and in_header:
            if value is not None:
                value += line
            continue
        if value is not None or not _FIELD_NAME.match(line):
            break
        in_header = True
        name, _, rest = line.partition(b":")
        if name.lower() == b"message-id":
            value = rest
    if value is None:
        return None
    text = " ".join(value.decode("utf-8", "replace").split())
    if text and len(text) <= MAX_MESSAGE_ID_CHARS and text.isprintable():
        return text
    return None


def cut_urls_before(text: str) -> tuple[str, list[str]]:
    urls = words._URL.findall(text)
    return (words._URL.sub(" ", text) if urls else text), urls


def insert_classifications_before(
    conn: Connection, model_id: int, records: Sequence[ClassificationRecord]
) -> None:
    latest = {record.message_key: record for record in records}
    keys = sorted(latest)
    for start in range(0, len(keys), 900):
        conn.execute(
            delete(classifications).where(
                classifications.c.model_id == model_id,
                classifications.c.message_key.in_(keys[start : start + 900]),
            )
        )
    conn.execute(
        insert(classifications),
        [
            {
                "model_id": model_id,
                "message_key": key,
                "message_id": latest[key].message_id,
                "token_ids": pack(latest[key].token_ids),
                "token_terms": pack(latest[key].token_terms),
                "verdict": latest[key].verdict,
                "classified_at": latest[key].classified_at,
                "body_digest": latest[key].body_digest,
            }
            for key in keys
        ],
    )


# -- the measurement ----------------------------------------------------------------------


def cpu_ms(work: Callable[[], object]) -> float:
    started = time.process_time()
    work()
    return (time.process_time() - started) * 1000


def same_matrix(a: scipy.sparse.csr_array, b: scipy.sparse.csr_array) -> bool:
    return all(
        np.array_equal(getattr(a, part), getattr(b, part)) for part in ("indptr", "indices", "data")
    )


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    token_core = core.COMPILED or core.PYTHON
    split = data.split("spamassassin")
    table = CountTable(["ham", "spam"])
    for message in split.train:
        table.intern(list(hash_raw(message.raw or b"", core=token_core).token_counts))
    index_hashes = np.sort(table.tokens._hashes)  # the merged level: nearly all of them
    probes = [hash_raw(message.raw or b"", core=token_core) for message in split.test]
    raws = [m.raw or b"" for m in split.test] + [
        m.raw or b"" for m in data.load("trec07p-early", limit=1500)
    ]
    texts = [
        text.casefold()
        for raw in raws
        for text in mime.parse_message(raw, limits=LIMITS, core=core.PYTHON).texts
        if "://" in text or "www." in text
    ]

    # (step, per, before, now): a run's milliseconds divided by `per` (the repeats, messages
    # or texts of one run).
    steps: list[tuple[str, float, Callable[[], object], Callable[[], object]]] = []
    for size in BATCHES:
        batch = probes[:size]
        hashes = np.concatenate([p.hashes for p in batch]).astype(np.int64)
        counts = np.concatenate([p.counts for p in batch]).astype(np.int64)
        lengths = np.array([p.hashes.size for p in batch], dtype=np.int64)
        ids = table.tokens.lookup_hashes(hashes, lambda at: [])
        if not np.array_equal(
            positions_before(index_hashes, hashes), _positions(index_hashes, hashes)
        ):
            raise AssertionError("the positions differ")
        if not same_matrix(
            term_matrix_before(table.n_tokens, lengths, ids, counts),
            table._term_matrix(lengths, ids, counts),
        ):
            raise AssertionError("the matrices differ")
        repeat = max(1, 1000 // size)
        steps.append(
            (
                f"hashes' places in the index, a batch of {size} ({hashes.size} hashes)",
                repeat,
                lambda h=hashes, r=repeat: [positions_before(index_hashes, h) for _ in range(r)],
                lambda h=hashes, r=repeat: [_positions(index_hashes, h) for _ in range(r)],
            )
        )
        steps.append(
            (
                f"the batch's matrix, a batch of {size}",
                repeat,
                lambda a=(lengths, ids, counts), r=repeat: [
                    term_matrix_before(table.n_tokens, *a) for _ in range(r)
                ],
                lambda a=(lengths, ids, counts), r=repeat: [
                    table._term_matrix(*a) for _ in range(r)
                ],
            )
        )
    if any(message_id_before(raw) != header_message_id(raw) for raw in raws):
        raise AssertionError("the Message-IDs differ")
    if any(cut_urls_before(text) != words.cut_urls(text) for text in texts):
        raise AssertionError("the URLs cut differ")
    steps.append(
        (
            f"Message-ID of raw mail, per message ({len(raws)})",
            len(raws),
            lambda: [message_id_before(raw) for raw in raws],
            lambda: [header_message_id(raw) for raw in raws],
        )
    )
    steps.append(
        (
            f"cut_urls, per text holding a URL ({len(texts)})",
            len(texts),
            lambda: [cut_urls_before(text) for text in texts],
            lambda: [words.cut_urls(text) for text in texts],
        )
    )

    folder = tempfile.TemporaryDirectory(prefix="spamsift-steps-")
    db = Database(f"sqlite:///{folder.name}/records.db")
    upgrade_schema(db)
    with db.transaction() as conn:
        model_id = insert_model(conn, name="records", classes=("ham", "spam"), config={}).id
    written = iter(range(1 << 30))

    def records_writer(
        write: Callable[[Connection, int, Sequence[ClassificationRecord]], None],
    ) -> Callable[[], object]:
        def run() -> None:
            batch = next(written)
            now = datetime.now(UTC)
            records = [
                ClassificationRecord(
                    message_key=f"{batch}-{row}",
                    message_id=f"<{batch}-{row}@example.org>",
                    token_ids=np.sort(p.hashes % table.n_tokens),
                    token_terms=p.counts,
                    verdict="spam",
                    classified_at=now,
                    body_digest="0" * 64,
                )
                for row, p in enumerate(probes)
            ]
            db.run(lambda conn: write(conn, model_id, records))

        return run

    steps.append(
        (
            f"classification records inserted, per record (batches of {len(probes)})",
            len(probes),
            records_writer(insert_classifications_before),
            records_writer(insert_classifications),
        )
    )

    figures: dict[str, dict[str, list[float]]] = {
        name: {"before": [], "now": []} for name, *_ in steps
    }
    for _ in range(runs):
        for name, per, before, now in steps:
            figures[name]["before"].append(cpu_ms(before) / per)
            figures[name]["now"].append(cpu_ms(now) / per)
    print(f"index of {index_hashes.size} hashes; CPU ms, median of {runs} (min-max)")
    print("| step | before | now | now / before |")
    print("|---|---:|---:|---:|")
    result: dict[str, Any] = {}
    for name, values in figures.items():
        before, now = (statistics.median(values[k]) for k in ("before", "now"))
        result[name] = {k: round(statistics.median(v), 4) for k, v in values.items()}
        print(
            f"| {name} | {_cell(values['before'])} | {_cell(values['now'])} | {now / before:.2f} |"
        )
    result["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result, indent=1))
    db.dispose()
    folder.cleanup()


def _cell(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.4f} ({min(values):.4f}-{max(values):.4f})"


if __name__ == "__main__":
    main()
