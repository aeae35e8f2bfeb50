"""Token texts with characters COPY's text format escapes are stored and read back as they
were, on SQLite and PostgreSQL."""

from __future__ import annotations

from app.service.runtime import Runtime
from app.store.counts import insert_tokens, read_token_texts
from app.store.models import find_model, lock_model_row

TEXTS = ["back\\slash", "tab\there", "new\nline", "carriage\rreturn", "\\.", "\\N", "naïve 日本"]


def test_texts_with_copy_escapes_come_back_as_they_were(runtime: Runtime) -> None:
    with runtime.db.transaction() as conn:
        model = find_model(conn, "default")
        row = lock_model_row(conn, model.id, created_at=model.created_at)
        generation = row.generation
        first = row.allocate_token_ids(len(TEXTS) + 1)
        insert_tokens(conn, model.id, first_id=first, texts=TEXTS, generation=generation)
        insert_tokens(
            conn, model.id, first_id=first + len(TEXTS), texts=["plain"], generation=generation
        )
        row.save(conn)

    with runtime.db.transaction(write=False) as conn:
        stored = read_token_texts(conn, model.id, list(range(first, first + len(TEXTS) + 1)))
    assert stored == dict(enumerate([*TEXTS, "plain"], start=first))
