"""Plain builders for tests: messages, training sets, and the stored counts to compare.

Every builder takes keyword overrides and returns plain values; nothing here mocks anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import Connection, inspect, select
from sqlalchemy import text as sql

from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import train
from app.store.counts import CountChanges, TokenAges, read_changes, read_token_ages
from app.store.engine import Database
from app.store.ledger import unpack
from app.store.tables import models, trained_messages
from app.token_texts import EncodedTexts

SPAM_WORDS = [
    "viagra", "casino", "lottery", "winner", "prize", "bitcoin", "investment", "guaranteed",
    "discount", "pharmacy", "replica", "watches", "loan", "credit", "unsecured", "bonus",
    "jackpot", "offer", "limited", "urgent", "inheritance", "beneficiary", "wire", "claim",
]  # fmt: skip
HAM_WORDS = [
    "meeting", "agenda", "quarterly", "report", "lunch", "project", "deadline", "review",
    "invoice", "attached", "schedule", "tomorrow", "minutes", "budget", "team", "release",
    "conference", "draft", "feedback", "weekend", "family", "dinner", "birthday", "holiday",
]  # fmt: skip
SHARED_WORDS = ["please", "today", "account", "information", "click", "free", "thanks", "call"]


def make_message(
    *,
    subject: str = "Hello",
    body: str = "Just a short note.",
    sender: str = "alice@example.org",
    to: str = "bob@example.net",
    html: str | None = None,
    message_id: str | None = None,
    date: datetime | None = None,
) -> str:
    """Return an RFC 822 message: plain text, or multipart/alternative when `html` is given."""
    headers = [
        f"From: {sender}",
        f"To: {to}",
        f"Subject: {subject}",
        f"Date: {format_datetime(date or datetime(2026, 11, 21, 9, 30, tzinfo=UTC))}",
        "MIME-Version: 1.0",
    ]
    if message_id is not None:
        headers.append(f"Message-ID: {message_id}")
    if html is None:
        headers.append('Content-Type: text/plain; charset="utf-8"')
        return "\r\n".join(headers) + "\r\n\r\n" + body + "\r\n"
    boundary = "=_spamsift_test_boundary"
    headers.append(f'Content-Type: multipart/alternative; boundary="{boundary}"')
    parts = [
        f"--{boundary}",
        'Content-Type: text/plain; charset="utf-8"',
        "",
        body,
        f"--{boundary}",
        'Content-Type: text/html; charset="utf-8"',
        "",
        html,
        f"--{boundary}--",
        "",
    ]
    return "\r\n".join(headers) + "\r\n\r\n" + "\r\n".join(parts)


def _pick(words: list[str], i: int, n: int) -> list[str]:
    return [words[(i * 7 + k * 5) % len(words)] for k in range(n)]


def spam_text(i: int) -> str:
    """Return the `i`-th spam-like plain text; distinct for every i, vocabularies overlap."""
    words = _pick(SPAM_WORDS, i, 6) + _pick(SHARED_WORDS, i, 2)
    return f"{' '.join(words)} offer number {i} code{i}x"


def ham_text(i: int) -> str:
    """Return the `i`-th ham-like plain text; distinct for every i, vocabularies overlap."""
    words = _pick(HAM_WORDS, i, 6) + _pick(SHARED_WORDS, i + 3, 2)
    return f"{' '.join(words)} ticket number {i} ref{i}y"


def spam_message(i: int, **overrides: Any) -> str:
    """Return the `i`-th spam as RFC 822 (with an HTML part and a link)."""
    fields: dict[str, Any] = {
        "subject": f"You are a WINNER {i}",
        "body": spam_text(i),
        "sender": f"promo{i}@lottery-{i % 3}.biz",
        "html": f'<p>{spam_text(i)} <a href="http://claim-{i % 4}.example.biz/x">claim</a></p>',
    }
    return make_message(**(fields | overrides))


def ham_message(i: int, **overrides: Any) -> str:
    """Return the `i`-th ham as RFC 822."""
    fields: dict[str, Any] = {
        "subject": f"Project update {i}",
        "body": ham_text(i),
        "sender": f"colleague{i % 5}@example.org",
    }
    return make_message(**(fields | overrides))


@dataclass(frozen=True)
class Trained:
    message_id: str
    label: str
    text: str


def train_examples(
    target: TestClient | Runtime, n_spam: int, n_ham: int, *, model: str = "default"
) -> list[Trained]:
    """Train `n_spam` spam and `n_ham` ham texts through the API or the service."""
    trained: list[Trained] = []
    examples = [("spam", spam_text(i)) for i in range(n_spam)]
    examples += [("ham", ham_text(i)) for i in range(n_ham)]
    for label, text in examples:
        if isinstance(target, TestClient):
            response = target.post(f"/v1/models/{model}/train", json={"label": label, "text": text})
            assert response.status_code == 200, response.text
            message_id = response.json()["message_id"]
        else:
            result = train(target, model_name=model, message=Message(text=text), label=label)
            message_id = result.message_id
        trained.append(Trained(message_id, label, text))
    return trained


def database_of(target: TestClient | Runtime | Database) -> Database:
    if isinstance(target, Database):
        return target
    if isinstance(target, TestClient):
        runtime: Runtime = target.app.state.runtime  # type: ignore[attr-defined]
        return runtime.db
    return target.db


def model_contents(target: TestClient | Runtime | Database, model: str = "default") -> CountChanges:
    """A model's tokens, count rows and class totals in one snapshot, as the store gives a
    process loading the model (`read_changes` from the start): what the tests compare, read
    through the store whatever layout keeps the counts."""
    with database_of(target).transaction(write=False) as conn:
        return _contents(conn, model)


def _contents(conn: Connection, model: str) -> CountChanges:
    # The model's id and classes alone: the migration tests read databases of older schemas.
    model_id, classes = conn.execute(
        select(models.c.id, models.c.classes).where(models.c.name == model)
    ).one()
    if "count_chunks" not in inspect(conn).get_table_names():
        return _rows_before_chunks(conn, model_id, len(classes))
    return read_changes(
        conn, model_id, since_generation=-1, held_tokens=0, generation=0, n_classes=len(classes)
    )


def _rows_before_chunks(conn: Connection, model_id: int, n_classes: int) -> CountChanges:
    """A model of a database before schema revision 0009 (a `token_counts` row per token and
    class), as the store reads one today: the count cells that hold a count."""
    tokens = conn.execute(
        sql("SELECT token_id, text FROM tokens WHERE model_id = :m ORDER BY token_id"),
        {"m": model_id},
    ).all()
    counts = np.array(
        conn.execute(
            sql(
                "SELECT token_id, class_index, docs, terms FROM token_counts "
                "WHERE model_id = :m AND (docs <> 0 OR terms <> 0) ORDER BY token_id, class_index"
            ),
            {"m": model_id},
        ).all(),
        dtype=np.int64,
    ).reshape(-1, 4)
    totals = {
        index: (docs, terms)
        for index, docs, terms in conn.execute(
            sql("SELECT class_index, docs, terms FROM class_totals WHERE model_id = :m"),
            {"m": model_id},
        )
    }
    return CountChanges(
        generation=0,
        token_ids=np.array([row[0] for row in tokens], dtype=np.int64),
        token_texts=EncodedTexts.from_strings([row[1] for row in tokens]),
        count_token_ids=counts[:, 0].copy(),
        count_class_indices=counts[:, 1].copy(),
        count_docs=counts[:, 2].copy(),
        count_terms=counts[:, 3].copy(),
        class_docs=np.array([totals.get(i, (0, 0))[0] for i in range(n_classes)], np.int64),
        class_terms=np.array([totals.get(i, (0, 0))[1] for i in range(n_classes)], np.int64),
    )


def texts_of(contents: CountChanges) -> dict[int, str]:
    """token id -> text of every token the contents hold."""
    return dict(zip(contents.token_ids.tolist(), contents.token_texts.strings(), strict=True))


def token_ages(target: TestClient | Runtime | Database, model: str = "default") -> TokenAges:
    """Every counted token's cells with the generation that last changed it (as expiry
    reads)."""
    db = database_of(target)
    with db.transaction(write=False) as conn:
        model_id, classes = conn.execute(
            select(models.c.id, models.c.classes).where(models.c.name == model)
        ).one()
        return read_token_ages(conn, model_id, len(classes))


def cells_of(contents: CountChanges) -> dict[tuple[int, int], tuple[int, int]]:
    """{(token id, class): (docs, terms)} of every count row, zeros included."""
    columns = (
        contents.count_token_ids,
        contents.count_class_indices,
        contents.count_docs,
        contents.count_terms,
    )
    return {
        (token_id, class_index): (docs, terms)
        for token_id, class_index, docs, terms in zip(*(c.tolist() for c in columns), strict=True)
    }


@dataclass(frozen=True)
class StoredCounts:
    """Everything a model's counts are, as stored."""

    token_counts: dict[tuple[str, int], tuple[int, int]]  # (token text, class) -> (docs, terms)
    class_totals: dict[int, tuple[int, int]]  # class -> (docs, terms)
    trained: dict[str, tuple[str, int]]  # message_key -> (message_id, class)

    def nonzero_counts(self) -> dict[tuple[str, int], tuple[int, int]]:
        return {key: value for key, value in self.token_counts.items() if value != (0, 0)}


def stored_counts(target: TestClient | Runtime | Database, model: str = "default") -> StoredCounts:
    """Read a model's counts by token text, its class totals and its ledger rows in one
    snapshot."""
    with database_of(target).transaction(write=False) as conn:
        contents = _contents(conn, model)
        model_id = select(models.c.id).where(models.c.name == model).scalar_subquery()
        ledger = conn.execute(
            select(
                trained_messages.c.message_key,
                trained_messages.c.message_id,
                trained_messages.c.class_index,
            ).where(trained_messages.c.model_id == model_id)
        ).all()
    texts = texts_of(contents)
    return StoredCounts(
        token_counts={
            (texts[token_id], class_index): value
            for (token_id, class_index), value in cells_of(contents).items()
            if token_id in texts
        },
        class_totals=_class_totals(contents),
        trained={row[0]: (row[1], int(row[2])) for row in ledger},
    )


def _class_totals(contents: CountChanges) -> dict[int, tuple[int, int]]:
    return {
        class_index: (docs, terms)
        for class_index, (docs, terms) in enumerate(
            zip(contents.class_docs.tolist(), contents.class_terms.tolist(), strict=True)
        )
    }


def counts_from_ledger(
    target: TestClient | Runtime | Database, model: str = "default"
) -> tuple[dict[tuple[int, int], tuple[int, int]], dict[int, tuple[int, int]]]:
    """Recompute {(token_id, class): (docs, terms)} and class totals from trained_messages."""
    db = database_of(target)
    with db.transaction(write=False) as conn:
        model_id = conn.execute(select(models.c.id).where(models.c.name == model)).scalar_one()
        rows = conn.execute(
            select(
                trained_messages.c.class_index,
                trained_messages.c.token_ids,
                trained_messages.c.token_terms,
            ).where(trained_messages.c.model_id == model_id)
        ).all()
    cells: dict[tuple[int, int], tuple[int, int]] = {}
    totals: dict[int, tuple[int, int]] = {}
    for class_index, packed_ids, packed_terms in rows:
        ids, terms = unpack(packed_ids), unpack(packed_terms)
        for token_id, n in zip(ids.tolist(), terms.tolist(), strict=True):
            docs, total = cells.get((token_id, class_index), (0, 0))
            cells[(token_id, class_index)] = (docs + 1, total + n)
        docs, total = totals.get(class_index, (0, 0))
        totals[class_index] = (docs + 1, total + int(terms.sum()))
    return cells, totals


def stored_cells(
    target: TestClient | Runtime | Database, model: str = "default"
) -> tuple[dict[tuple[int, int], tuple[int, int]], dict[int, tuple[int, int]]]:
    """Return the stored nonzero {(token_id, class): (docs, terms)} and nonzero class totals."""
    contents = model_contents(target, model)
    cells = {key: value for key, value in cells_of(contents).items() if value != (0, 0)}
    totals = {key: value for key, value in _class_totals(contents).items() if value != (0, 0)}
    return cells, totals
