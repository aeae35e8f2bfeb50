"""A report finds the verdict of the message a mail server classified, whatever header fields
were added after it (Received, Return-Path, Delivered-To), and a repeated report counts nothing.

Each report also leaves one access log line with its message_id and what it did.
"""

from __future__ import annotations

import hashlib
import logging

import pytest
from sqlalchemy import func, select

from app.errors import MessageNotFound
from app.service.classification import classify
from app.service.dashboard import model_stats
from app.service.messages import Message, body_digest
from app.service.runtime import Runtime
from app.service.training import apply_feedback
from app.store.tables import trained_messages
from tests.builders import (
    counts_from_ledger,
    ham_message,
    spam_message,
    stored_cells,
    stored_counts,
    train_examples,
)

DELIVERY_HEADERS = (
    "Return-Path: <promo@lottery.biz>\n"
    "Delivered-To: bob@example.net\n"
    "X-Original-To: bob@example.net\n"
    "Received: from mx.example.net (localhost [127.0.0.1])\n"
    "\tby mail.example.net (Postfix) with ESMTP id 4F1A2B3C4D\n"
    "\tfor <bob@example.net>; Thu, 26 Nov 2026 03:00:00 +0000 (UTC)\n"
    "X-Spam-Flag: YES\n"
)


def delivered_copy(raw: str) -> str:
    """`raw` as a Maildir holds it after delivery: more header fields first, LF line ends."""
    return DELIVERY_HEADERS + raw.replace("\r\n", "\n")


def activity(rt: Runtime) -> dict[str, int]:
    figures = model_stats(rt, model_name="default")["activity"]["all"]
    return {name: int(figures[name]) for name in ("trained", "feedback", "corrections")}


def trained_rows(rt: Runtime) -> int:
    with rt.db.transaction(write=False) as conn:
        return int(conn.execute(select(func.count()).select_from(trained_messages)).scalar_one())


def report(rt: Runtime, raw: str | None, label: str, message_id: str | None = None) -> object:
    message = None if raw is None else Message(raw=raw)
    return apply_feedback(
        rt, model_name="default", label=label, message_id=message_id, message=message
    )


def test_the_body_digest_ignores_added_header_fields_and_line_ends() -> None:
    raw = spam_message(1, message_id="<d@x>")
    assert body_digest(raw.encode()) == body_digest(delivered_copy(raw).encode())
    assert body_digest(raw.encode()) != body_digest(spam_message(2, message_id="<d@x>").encode())


def test_a_report_of_the_delivered_copy_finds_the_classification(runtime: Runtime) -> None:
    train_examples(runtime, 6, 6)
    raw = spam_message(40, message_id="<delivered@example.org>")
    assert classify(runtime, model_name="default", message=Message(raw=raw)).verdict == "spam"
    before = activity(runtime)

    result = report(runtime, delivered_copy(raw), "ham")

    assert (result.changed, result.previous_label) == (True, None)
    after = activity(runtime)
    assert after["corrections"] == before["corrections"] + 1  # the verdict was spam
    assert after["feedback"] == before["feedback"] + 1
    assert counts_from_ledger(runtime) == stored_cells(runtime)


def test_a_repeated_report_of_the_same_label_counts_nothing(runtime: Runtime) -> None:
    train_examples(runtime, 6, 6)
    raw = spam_message(41, message_id="<twice@example.org>")
    classify(runtime, model_name="default", message=Message(raw=raw))
    report(runtime, delivered_copy(raw), "ham")
    once, counts, rows = activity(runtime), stored_counts(runtime), trained_rows(runtime)

    again = report(runtime, delivered_copy(raw), "ham")  # a second click
    other_copy = report(runtime, "Delivered-To: carol@example.net\n" + raw, "ham")
    by_id = report(runtime, None, "ham", message_id="<twice@example.org>")

    assert [again.changed, other_copy.changed, by_id.changed] == [False, False, False]
    assert activity(runtime) == once
    assert stored_counts(runtime) == counts
    assert trained_rows(runtime) == rows


def test_a_report_of_the_other_label_relabels_the_message_reported_before(
    runtime: Runtime,
) -> None:
    train_examples(runtime, 6, 6)
    raw = ham_message(42, message_id="<flip@example.org>")
    classify(runtime, model_name="default", message=Message(raw=raw))
    report(runtime, delivered_copy(raw), "spam")
    rows = trained_rows(runtime)

    result = report(runtime, "Delivered-To: carol@example.net\n" + raw, "ham")

    assert (result.changed, result.previous_label) == (True, "spam")
    assert trained_rows(runtime) == rows  # the same message moved, not a second one trained
    assert counts_from_ledger(runtime) == stored_cells(runtime)


def test_a_reused_message_id_with_another_body_is_another_message(runtime: Runtime) -> None:
    train_examples(runtime, 6, 6)
    classify(
        runtime, model_name="default", message=Message(raw=spam_message(43, message_id="<re@x>"))
    )
    before = activity(runtime)

    result = report(runtime, delivered_copy(ham_message(44, message_id="<re@x>")), "ham")

    assert result.changed
    # Not the classified message: its spam verdict is no correction of this one.
    assert activity(runtime)["corrections"] == before["corrections"]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_each_report_leaves_a_log_line_with_its_outcome_and_no_message_id(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    train_examples(runtime, 6, 6)
    raw = spam_message(45, message_id="<logged@example.org>")
    classify(runtime, model_name="default", message=Message(raw=raw))
    caplog.set_level(logging.INFO, logger="spamsift.report")

    report(runtime, delivered_copy(raw), "spam")
    report(runtime, raw, "spam")
    report(runtime, None, "ham", message_id="<logged@example.org>")
    with pytest.raises(MessageNotFound):
        report(runtime, None, "ham", message_id="<nobody@example.org>")

    lines = [
        (entry.fields["message_id_sha256"], entry.fields["outcome"])  # type: ignore[attr-defined]
        for entry in caplog.records
        if entry.name == "spamsift.report" and entry.getMessage() == "report"
    ]
    logged, nobody = (
        hashlib.sha256(message_id.encode()).hexdigest()[:16]
        for message_id in ("<logged@example.org>", "<nobody@example.org>")
    )
    assert lines == [
        (logged, "trained"),
        (logged, "already known"),
        (logged, "relabelled"),
        (nobody, "not found"),
    ]
    everything = [entry.getMessage() + str(vars(entry)) for entry in caplog.records]
    assert not any("WINNER" in line or "example.org" in line for line in everything)
