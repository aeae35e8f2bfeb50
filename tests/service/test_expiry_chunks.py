"""Token expiry deletes in chunks, each its own short write, so trainers of the model go on
meanwhile and none waits past its lock timeout (no 503). Real threads, both databases."""

from __future__ import annotations

import threading

from app.errors import SpamsiftError
from app.service import expiry
from app.service.expiry import expire_tokens
from app.service.messages import Message
from app.service.runtime import Runtime
from app.service.training import train, train_batch
from app.store.models import find_model
from tests.builders import ham_text, spam_text
from tests.service.test_expiry import table_figures


def words(seed: int, count: int = 200) -> str:
    return " ".join(f"e{seed}x{i}q" for i in range(count))


def test_expiry_deletes_in_chunks_while_trainers_go_on_without_a_503(runtime: Runtime) -> None:
    # About 8,000 tokens to delete: four chunks.
    for start in range(0, 20, 10):
        train_batch(
            runtime,
            model_name="default",
            items=[(Message(text=words(seed)), "spam") for seed in range(start, start + 10)],
        )
    before = table_figures(runtime.db)["tokens"]
    generation = runtime.db.run(lambda conn: find_model(conn, "default").generation)
    # Trainers' writes are grouped (several messages may share one commit): count commits.
    commits = runtime.group_commit.commits
    errors: list[BaseException] = []
    trained: list[int] = []
    stop = threading.Event()

    def trainer(number: int) -> None:
        n = 0
        while not stop.is_set() and n < 200:
            text = spam_text(1000 * number + n) if n % 2 else ham_text(1000 * number + n)
            try:
                train(
                    runtime,
                    model_name="default",
                    message=Message(text=text),
                    label="spam" if n % 2 else "ham",
                )
                trained.append(1)
            except SpamsiftError as error:  # a 503 (lock wait past its budget) among them
                errors.append(error)
            n += 1

    threads = [threading.Thread(target=trainer, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    try:
        result = expire_tokens(runtime, model_name="default", max_tokens=100)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
    figures = table_figures(runtime.db)
    writes = runtime.db.run(lambda conn: find_model(conn, "default").generation) - generation
    trainer_commits = runtime.group_commit.commits - commits

    assert errors == []
    assert before > 3 * expiry.EXPIRY_CHUNK_TOKENS
    assert result.removed >= before - 100 - len(trained) * 40
    assert 0 < trainer_commits <= len(trained)
    assert writes >= result.removed // expiry.EXPIRY_CHUNK_TOKENS + trainer_commits
    assert figures["class_terms"] == figures["terms_in_rows"]
    assert figures["negative"] == 0
