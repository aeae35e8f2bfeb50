""" "Mark as spam / not spam": by message_id within the retention period, or with the message."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update

from app.config import Settings
from app.errors import MessageNotFound
from app.service.classification import classify
from app.service.dashboard import model_stats
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import apply_feedback, train
from app.store.tables import classifications
from tests.builders import (
    counts_from_ledger,
    spam_message,
    spam_text,
    stored_cells,
    stored_counts,
    train_examples,
)

SPAM, HAM = 1, 0


def corrections(rt: Runtime) -> int:
    return int(model_stats(rt, model_name="default")["activity"]["all"]["corrections"])


@pytest.fixture
def forgetful_runtime(settings: Settings) -> Iterator[Runtime]:
    rt = Runtime(settings.model_copy(update={"retention_days": 0}))
    yield rt
    rt.close()


def test_feedback_by_message_id_alone_trains_a_classified_message(runtime: Runtime) -> None:
    train_examples(runtime, 6, 6)
    message = Message(raw=spam_message(50), message_id="<classified@example.org>")
    verdict = classify(runtime, model_name="default", message=message).verdict
    assert verdict == "spam"
    before = stored_counts(runtime)

    result = apply_feedback(
        runtime,
        model_name="default",
        label="ham",
        message_id="<classified@example.org>",
        message=None,
    )

    assert result.changed
    assert result.previous_label is None
    after = stored_counts(runtime)
    assert after.class_totals[HAM][0] == before.class_totals[HAM][0] + 1
    assert ("<classified@example.org>", HAM) in after.trained.values()
    assert counts_from_ledger(runtime) == stored_cells(runtime)
    assert corrections(runtime) == 1  # the verdict was spam, the user said ham


def test_feedback_agreeing_with_the_verdict_is_no_correction(runtime: Runtime) -> None:
    train_examples(runtime, 6, 6)
    message = Message(raw=spam_message(51), message_id="<agree@example.org>")
    assert classify(runtime, model_name="default", message=message).verdict == "spam"

    apply_feedback(
        runtime, model_name="default", label="spam", message_id="<agree@example.org>", message=None
    )

    assert corrections(runtime) == 0
    assert model_stats(runtime, model_name="default")["activity"]["all"]["feedback"] == 1


def test_feedback_by_message_id_relabels_a_trained_message(runtime: Runtime) -> None:
    train_examples(runtime, 2, 2)
    train(
        runtime,
        model_name="default",
        message=Message(text=spam_text(60), message_id="m60"),
        label="spam",
    )

    result = apply_feedback(
        runtime, model_name="default", label="ham", message_id="m60", message=None
    )

    assert result.previous_label == "spam"
    assert ("m60", HAM) in stored_counts(runtime).trained.values()
    assert corrections(runtime) == 1
    assert counts_from_ledger(runtime) == stored_cells(runtime)


def test_feedback_with_the_message_trains_it_without_a_classification(runtime: Runtime) -> None:
    result = apply_feedback(
        runtime,
        model_name="default",
        label="spam",
        message_id=None,
        message=Message(raw=spam_message(61)),
    )

    assert result.changed
    assert result.message_id.startswith("sha256:")
    assert stored_counts(runtime).class_totals[SPAM][0] == 1


def test_feedback_on_an_unknown_message_id_is_not_found_and_changes_nothing(
    runtime: Runtime,
) -> None:
    train_examples(runtime, 2, 2)
    before = stored_counts(runtime)

    with pytest.raises(MessageNotFound):
        apply_feedback(
            runtime, model_name="default", label="spam", message_id="<nobody>", message=None
        )

    assert stored_counts(runtime) == before


def test_with_zero_retention_feedback_by_message_id_alone_is_not_found(
    forgetful_runtime: Runtime,
) -> None:
    rt = forgetful_runtime
    train_examples(rt, 3, 3)
    classify(rt, model_name="default", message=Message(text=spam_text(70), message_id="kept?"))
    rt.flush_classifications()

    with rt.db.transaction(write=False) as conn:
        assert conn.execute(select(func.count()).select_from(classifications)).scalar() == 0
    with pytest.raises(MessageNotFound):
        apply_feedback(rt, model_name="default", label="ham", message_id="kept?", message=None)


def test_a_classification_older_than_the_retention_period_is_not_usable(runtime: Runtime) -> None:
    train_examples(runtime, 3, 3)
    classify(runtime, model_name="default", message=Message(text=spam_text(71), message_id="old"))
    runtime.flush_classifications()
    eight_days_ago = datetime.now(UTC) - timedelta(days=8)
    with runtime.db.transaction() as conn:
        conn.execute(update(classifications).values(classified_at=eight_days_ago))
    before = stored_counts(runtime)

    with pytest.raises(MessageNotFound):
        apply_feedback(runtime, model_name="default", label="ham", message_id="old", message=None)

    assert runtime.expire() == 1
    assert stored_counts(runtime) == before


def test_expiry_keeps_classifications_within_the_retention_period(runtime: Runtime) -> None:
    train_examples(runtime, 3, 3)
    classify(runtime, model_name="default", message=Message(text=spam_text(72), message_id="new"))
    runtime.flush_classifications()

    assert runtime.expire() == 0
    result = apply_feedback(
        runtime, model_name="default", label="ham", message_id="new", message=None
    )
    assert result.changed
