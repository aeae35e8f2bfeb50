"""The ledger's newest trained messages, as pair probation reads them: their token ids
gathered a chunk of messages at a time, or None where the ledger holds fewer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.service.runtime import Runtime
from app.store import ledger
from app.store.ledger import StoredMessage, insert_trained, newest_trained_token_ids
from app.store.models import find_model


def test_the_newest_messages_token_ids_in_chunks(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = runtime.db
    monkeypatch.setattr(ledger, "LOOKUP_CHUNK", 2)  # several chunks for a handful of messages
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with db.transaction() as conn:
        model_id = find_model(conn, "default").id
        for n in range(7):  # message n has tokens n and 100 + n, trained n minutes in
            ids = np.array([n, 100 + n], dtype=np.int64)
            stored = StoredMessage(f"{n:064d}", f"m{n}", 0, ids, np.ones(2, np.int64), None, {})
            insert_trained(conn, model_id, [stored], trained_at=start + timedelta(minutes=n))

    with db.transaction(write=False) as conn:
        newest = newest_trained_token_ids(conn, model_id, messages=5)
        all_seven = newest_trained_token_ids(conn, model_id, messages=7)
        too_many = newest_trained_token_ids(conn, model_id, messages=8)

    assert newest is not None
    assert newest.tolist() == [2, 3, 4, 5, 6, 102, 103, 104, 105, 106]
    assert all_seven is not None
    assert all_seven.size == 14
    assert too_many is None
