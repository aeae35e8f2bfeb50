"""Token expiry: at most max_tokens per model, dead tokens first, then oldest and weakest;
forget and relabel stay exact afterwards, other processes read the model again."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from app.config import Settings
from app.errors import InvalidConfig
from app.service.classification import classify
from app.service.expiry import expire_all, expire_tokens
from app.service.messages import Message
from app.service.models import create_model, update_model
from app.service.runtime import Runtime
from app.service.scheduler import periodic_work
from app.service.training import apply_feedback, forget, train
from app.store.engine import Database
from app.store.models import find_model
from tests.builders import ham_text, model_contents, spam_text, token_ages, train_examples


def table_figures(db: Database, model: str = "default") -> dict[str, int]:
    contents = model_contents(db, model)
    docs, terms = contents.count_docs, contents.count_terms
    with db.transaction(write=False) as conn:
        vocabulary = find_model(conn, model).vocabulary
    return {
        "tokens": int(contents.token_ids.size),
        "negative": int(np.count_nonzero((docs < 0) | (terms < 0))),  # count rows
        "positive": int(np.count_nonzero((docs > 0) | (terms > 0))),
        "class_docs": int(contents.class_docs.sum()),
        "class_terms": int(contents.class_terms.sum()),
        "terms_in_rows": int(terms.sum()),
        "vocabulary": vocabulary,
    }


@pytest.fixture
def second_runtime(settings: Settings) -> Iterator[Runtime]:
    rt = Runtime(settings)
    yield rt
    rt.close()


def test_expiry_keeps_at_most_max_tokens_and_the_totals_agree(runtime: Runtime) -> None:
    train_examples(runtime, 8, 8)
    before = table_figures(runtime.db)

    result = expire_tokens(runtime, model_name="default", max_tokens=40)

    after = table_figures(runtime.db)
    assert before["tokens"] > 40
    assert result.kept == after["tokens"] == after["vocabulary"] == 40
    assert result.removed == before["tokens"] - 40
    assert after["class_docs"] == before["class_docs"]  # messages stay counted
    assert after["class_terms"] == after["terms_in_rows"]  # terms leave with their tokens
    verdict = classify(runtime, model_name="default", message=Message(text=spam_text(90)))
    assert verdict.tokens <= 40


def test_the_least_recently_seen_tokens_go_first(runtime: Runtime) -> None:
    train(runtime, model_name="default", message=Message(text="old " * 3 + spam_text(1)),
          label="spam")  # fmt: skip
    train(runtime, model_name="default", message=Message(text=ham_text(2)), label="ham")
    recent = runtime.models.get("default").table.n_tokens
    train(runtime, model_name="default", message=Message(text=spam_text(3)), label="spam")
    ages = token_ages(runtime)
    last = set(ages.token_ids[ages.generations == ages.generations.max()].tolist())

    expire_tokens(runtime, model_name="default", max_tokens=len(last))

    kept = set(model_contents(runtime).token_ids.tolist())
    assert kept == last
    assert recent > 0


def test_forget_and_relabel_after_expiry_are_exact_and_never_negative(
    runtime: Runtime, second_runtime: Runtime
) -> None:
    trained = train_examples(runtime, 10, 10)
    second_runtime.models.get("default")  # another process holds the model meanwhile
    expire_tokens(runtime, model_name="default", max_tokens=30)

    # The other process notices the expiry (its copy is stale) and writes exactly.
    apply_feedback(second_runtime, model_name="default", label="ham",
                   message_id=trained[0].message_id, message=None)  # fmt: skip
    figures = table_figures(runtime.db)
    assert figures["negative"] == 0
    assert figures["class_terms"] == figures["terms_in_rows"]
    later = train(second_runtime, model_name="default", message=Message(text=spam_text(95)),
                  label="spam")  # fmt: skip
    figures = table_figures(runtime.db)
    assert figures["class_terms"] == figures["terms_in_rows"]  # re-seen tokens counted whole
    for example in trained:
        forget(runtime, model_name="default", message_id=example.message_id)
    forget(second_runtime, model_name="default", message_id=later.message_id)

    figures = table_figures(runtime.db)
    assert figures["negative"] == 0
    assert figures["positive"] == 0
    assert figures["class_docs"] == 0
    assert figures["class_terms"] == 0
    assert figures["vocabulary"] == 0
    live = second_runtime.models.get("default")
    assert not live.table.token_docs.any()
    assert not live.table.class_docs.any()
    # Nothing but dead tokens is left, and expiry removes them.
    assert expire_tokens(runtime, model_name="default", max_tokens=1000).kept == 0
    assert table_figures(runtime.db)["tokens"] == 0


def test_a_stream_with_periodic_expiry_levels_off_at_the_maximum(settings: Settings) -> None:
    """Train a stream; the server's periodic work (run here by hand, as its scheduler does
    every five minutes) keeps the tokens at the maximum while the stream goes on."""
    rt = Runtime(settings.model_copy(update={"max_tokens_per_model": 60}))
    try:
        work = periodic_work(rt)
        assert len(work) == 2  # expiry, then giving freed space back (SQLite)
        sizes = []
        for round_ in range(5):
            for i in range(6):
                n = round_ * 6 + i
                train(rt, model_name="default", message=Message(text=spam_text(n)),
                      label="spam")  # fmt: skip
                train(rt, model_name="default", message=Message(text=ham_text(n)), label="ham")
            grown = table_figures(rt.db)["tokens"]
            for step in work:
                step()
            figures = table_figures(rt.db)
            sizes.append(figures["tokens"])
            assert grown > 60
            assert figures["tokens"] == figures["vocabulary"] == 60
            assert figures["class_terms"] == figures["terms_in_rows"]
            assert figures["negative"] == 0
        assert sizes == [60] * 5
    finally:
        rt.close()


def test_the_servers_expiry_reads_no_model_under_the_maximum(settings: Settings) -> None:
    """Expiring a model loads it: the server's run every five minutes expires only the models
    whose trained tokens are past the maximum (their rows say so), so a server of many small
    models does not read every one of them each time. A model under the maximum keeps its
    dead tokens until `spamsift expire`, which goes through every model."""
    bounded = settings.model_copy(update={"max_tokens_per_model": 60})
    trainer = Runtime(bounded)
    try:
        for name in ("small", "tiny"):
            create_model(trainer, name=name, classes=None, config={})
        for n in range(12):
            train(trainer, model_name="default", message=Message(text=spam_text(n)), label="spam")
            train(trainer, model_name="default", message=Message(text=ham_text(n)), label="ham")
        train(trainer, model_name="tiny", message=Message(text="lunch agenda"), label="ham")
        train(trainer, model_name="small", message=Message(text=ham_text(0)), label="ham")
        gone = train(trainer, model_name="small", message=Message(text=spam_text(1)), label="spam")
        forget(trainer, model_name="small", message_id=gone.message_id)
        small_before = table_figures(trainer.db, "small")
        assert table_figures(trainer.db)["vocabulary"] > 60
    finally:
        trainer.close()
    assert small_before["tokens"] > small_before["vocabulary"]  # the forgotten one's are dead

    server = Runtime(bounded)  # a server process: it holds no model yet
    try:
        for step in periodic_work(server):
            step()
        assert server.models.held("small") is None
        assert server.models.held("tiny") is None
        assert table_figures(server.db)["tokens"] == 60
        assert table_figures(server.db, "small") == small_before

        by_hand = expire_all(server, max_tokens=60)  # what `spamsift expire` runs
        assert [result.model for result in by_hand] == ["default", "small", "tiny"]
        small_after = table_figures(server.db, "small")
        assert small_after["tokens"] == small_after["vocabulary"] == small_before["vocabulary"]
    finally:
        server.close()


@pytest.mark.parametrize("server_maximum", [0, 60])
def test_each_model_is_kept_to_its_own_maximum_else_the_servers(
    settings: Settings, server_maximum: int
) -> None:
    """A model's `max_tokens` option bounds it where the server sets no maximum, and replaces
    the server's where both are set; the server's run and `spamsift expire` both follow it."""
    rt = Runtime(settings.model_copy(update={"max_tokens_per_model": server_maximum}))
    try:
        for name in ("small", "large"):
            create_model(rt, name=name, classes=None, config={})
        update_model(rt, name="small", changes={"max_tokens": 30})
        update_model(rt, name="large", changes={"max_tokens": 90})
        for model in ("default", "small", "large"):
            for n in range(12):
                train(rt, model_name=model, message=Message(text=spam_text(n)), label="spam")
                train(rt, model_name=model, message=Message(text=ham_text(n)), label="ham")
        grown = table_figures(rt.db, "default")["tokens"]
        assert grown > 90
        for step in periodic_work(rt):
            step()
        assert table_figures(rt.db, "small")["tokens"] == 30
        assert table_figures(rt.db, "large")["tokens"] == 90
        assert table_figures(rt.db, "default")["tokens"] == (server_maximum or grown)
        by_hand = expire_all(rt)  # what `spamsift expire` runs: nothing more to do
        assert [result.removed for result in by_hand] == [0, 0, 0]
        assert expire_all(rt, max_tokens=20)[1].kept == 20  # --max-tokens: one for all
    finally:
        rt.close()


def test_a_maximum_below_one_token_is_refused_naming_the_option(runtime: Runtime) -> None:
    with pytest.raises(InvalidConfig) as refused:
        update_model(runtime, name="default", changes={"max_tokens": 0})
    assert refused.value.field == "max_tokens"


def test_the_servers_run_ends_pair_probation_once_a_model_has_grown(settings: Settings) -> None:
    """A model with `pair_probation` is expired by the server's run once its tokens grew by
    a tenth since the run first saw it (or last expired it): a server does not read every such
    model every five minutes, and a restart does not read them all at once."""
    trainer = Runtime(settings)
    server = Runtime(settings)  # another process: it holds no model yet
    try:
        update_model(trainer, name="default", changes={"pair_probation": 4})
        for n in range(6):
            train(trainer, model_name="default", message=Message(text=spam_text(n)), label="spam")
            train(trainer, model_name="default", message=Message(text=ham_text(n)), label="ham")
        work = periodic_work(server)
        before = table_figures(server.db)

        for step in work:  # first sight: the model's size is noted, nothing read
            step()
        assert server.models.held("default") is None
        assert table_figures(server.db) == before

        for n in range(6, 12):  # more than a tenth more tokens
            train(trainer, model_name="default", message=Message(text=spam_text(n)), label="spam")
            train(trainer, model_name="default", message=Message(text=ham_text(n)), label="ham")
        grown = table_figures(server.db)
        for step in work:
            step()
        expired = table_figures(server.db)
        assert expired["tokens"] < grown["tokens"]
        assert expired["class_terms"] == expired["terms_in_rows"]

        server.models.forget("default")  # as if evicted: a run that expired it would load it
        for step in work:  # not grown since: the model is left alone
            step()
        assert server.models.held("default") is None
        assert table_figures(server.db) == expired
        assert expire_all(server)[0].removed == 0  # `spamsift expire`: nothing more to end
    finally:
        trainer.close()
        server.close()


def test_a_pair_probation_below_one_message_is_refused_naming_the_option(
    runtime: Runtime,
) -> None:
    with pytest.raises(InvalidConfig) as refused:
        update_model(runtime, name="default", changes={"pair_probation": 0})
    assert refused.value.field == "pair_probation"
