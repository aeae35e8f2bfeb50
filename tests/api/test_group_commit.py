"""A burst of "mark as spam" clicks on one model, over real HTTP to a uvicorn server: the
writes share transactions (group commit), yet each click is answered only once its training is
committed (another connection reads it in the ledger as soon as the answer comes), the counts
stay exactly what the ledger sums to, and one click refused in the burst fails alone."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import uvicorn
from sqlalchemy import select

from app.config import Settings
from app.main import create_app
from app.service.messages import Message
from app.service.runtime import Runtime
from app.store.engine import Database
from app.store.tables import trained_messages
from tests.builders import counts_from_ledger, ham_text, spam_text, stored_cells
from tests.servers import in_thread

CLICKS = 50
FLOOD = " ".join(f"word{i}x{i * 7}" for i in range(60))  # many tokens the model never saw


def flood_limit(settings: Settings) -> int:
    """A bound on one request's new tokens that FLOOD passes, by less than twice (so it is
    refused inside the write, not before it)."""
    rt = Runtime(settings)
    try:
        return len(rt.prepare(Message(text=FLOOD), "train").token_counts) * 3 // 4
    finally:
        rt.close()


@pytest.fixture
def server(database_url: str) -> Iterator[str]:
    settings = Settings(database_url=database_url, _env_file=None)  # type: ignore[call-arg]
    settings = settings.model_copy(update={"max_new_tokens_per_request": flood_limit(settings)})
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=0, log_level="warning")
    with in_thread(config) as (host, port):
        yield f"http://{host}:{port}"


@pytest.mark.slow  # 8-10 s on two shared cores
def test_a_burst_of_clicks_is_answered_each_after_its_commit(
    server: str, database_url: str
) -> None:
    reader = Database(database_url)

    def in_ledger(message_id: str) -> bool:
        with reader.transaction(write=False) as conn:
            found = conn.execute(
                select(trained_messages.c.message_id).where(
                    trained_messages.c.message_id == message_id
                )
            ).first()
        return found is not None

    def click(index: int) -> tuple[int, str, bool]:
        message_id = f"<click-{index}@test>"
        text = FLOOD if index == CLICKS // 2 else spam_text(index)
        answer = httpx.post(
            f"{server}/v1/models/default/feedback",
            json={"label": "spam", "text": text, "message_id": message_id},
            timeout=60,
        )
        return answer.status_code, answer.text, in_ledger(message_id)

    try:
        httpx.post(
            f"{server}/v1/models/default/train", json={"label": "ham", "text": ham_text(0)}
        ).raise_for_status()
        with ThreadPoolExecutor(CLICKS) as pool:
            answers = list(pool.map(click, range(CLICKS)))
    finally:
        reader.dispose()

    refused = answers.pop(CLICKS // 2)
    assert refused[0] == 413
    assert "too_many_new_tokens" in refused[1]
    assert not refused[2]
    assert [(status, committed) for status, _, committed in answers] == [(200, True)] * (CLICKS - 1)
    db = Database(database_url)
    try:
        assert stored_cells(db) == counts_from_ledger(db)
        with db.transaction(write=False) as conn:
            clicked = conn.execute(
                select(trained_messages.c.message_id).where(
                    trained_messages.c.message_id.like("<click-%")
                )
            ).scalars()
            assert len(set(clicked)) == CLICKS - 1
    finally:
        db.dispose()
