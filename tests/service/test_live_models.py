"""The process's room: the one write path, running totals, memory budget, the record buffer."""

from __future__ import annotations

import gc
import threading
import weakref
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import select

from app.bayes.scorers import EventModel
from app.config import Settings
from app.errors import DatabaseUnavailable
from app.live.held import LiveModel
from app.live.records import ClassificationLog
from app.service.bogofilter import import_bogofilter, read_wordlist
from app.service.classification import classify
from app.service.messages import Message
from app.service.model_figures import read_model_figures
from app.service.models import create_model, list_models, update_model
from app.service.runtime import Runtime
from app.service.training import apply_feedback, forget, train
from app.store.engine import Database
from app.store.ledger import ClassificationRecord
from app.store.models import find_model
from app.store.tables import classifications
from tests.builders import ham_text, model_contents, spam_text, train_examples


def vocabulary_in_rows(db: Database, model: str = "default") -> int:
    """The tokens some trained message counts (docs > 0 in some class), from the stored counts."""
    contents = model_contents(db, model)
    return int(np.unique(contents.count_token_ids[contents.count_docs > 0]).size)


def stored_vocabulary(db: Database, model: str = "default") -> int:
    with db.transaction(write=False) as conn:
        return find_model(conn, model).vocabulary


@pytest.fixture
def second_runtime(settings: Settings) -> Iterator[Runtime]:
    rt = Runtime(settings)
    yield rt
    rt.close()


def test_the_stored_vocabulary_follows_train_relabel_and_forget_exactly(runtime: Runtime) -> None:
    trained = train_examples(runtime, 4, 4)
    assert stored_vocabulary(runtime.db) == vocabulary_in_rows(runtime.db) > 0
    first = trained[0]
    apply_feedback(runtime, model_name="default", label="ham", message_id=first.message_id,
                   message=None)  # fmt: skip
    assert stored_vocabulary(runtime.db) == vocabulary_in_rows(runtime.db)
    for example in trained:
        forget(runtime, model_name="default", message_id=example.message_id)
        assert stored_vocabulary(runtime.db) == vocabulary_in_rows(runtime.db)
    assert stored_vocabulary(runtime.db) == 0


def test_two_processes_writing_in_turn_keep_the_vocabulary_exact(
    runtime: Runtime, second_runtime: Runtime
) -> None:
    for i in range(6):
        rt = runtime if i % 2 else second_runtime
        train(rt, model_name="default", message=Message(text=spam_text(i)), label="spam")
        train(rt, model_name="default", message=Message(text=ham_text(i)), label="ham")
    extra = train(second_runtime, model_name="default", message=Message(text=spam_text(40)),
                  label="spam")  # fmt: skip
    forget(runtime, model_name="default", message_id=extra.message_id)
    assert stored_vocabulary(runtime.db) == vocabulary_in_rows(runtime.db)


def test_metrics_figures_and_the_model_list_load_no_model(
    runtime: Runtime, second_runtime: Runtime
) -> None:
    for name in ("a.example", "b.example", "c.example"):
        create_model(second_runtime, name=name, classes=None, config={})
        train_examples(second_runtime, 3, 2, model=name)

    figures = {figure.name: figure for figure in read_model_figures(runtime)}
    first = list_models(runtime, limit=2)
    rest = list_models(runtime, after=first.next, limit=2)

    assert runtime.models.figures().models == 0  # nothing was read into memory
    live = second_runtime.models.get("b.example")
    assert figures["b.example"].vocabulary == int(
        np.count_nonzero(live.table.token_docs.sum(axis=0))
    )
    assert figures["b.example"].messages == {"ham": 2, "spam": 3}
    assert figures["b.example"].generation == live.synced_generation
    assert figures["b.example"].events["trained"] == 5
    assert [m.name for m in first.models] == ["a.example", "b.example"]
    assert first.next == "b.example"
    assert [m.name for m in rest.models] == ["c.example", "default"]
    assert rest.next is None
    assert rest.models[0].messages == {"ham": 2, "spam": 3}
    assert rest.models[0].trained_messages == 5


def test_models_beyond_the_memory_budget_are_evicted_and_still_classify(
    settings: Settings,
) -> None:
    writer = Runtime(settings)
    names = [f"user{i}.example" for i in range(4)]
    for name in names:  # a max_vocab cut ranks every token: scoring loads the whole model
        config = {"event_model": "multinomial", "max_vocab": 10_000}
        create_model(writer, name=name, classes=None, config=config)
        train_examples(writer, 4, 4, model=name)
    expected = {
        name: classify(writer, model_name=name, message=Message(text=spam_text(50))).probabilities
        for name in names
    }
    one_model = writer.models.get(names[0]).size_bytes()
    writer.close()
    budget_mb = 2.5 * one_model / 1024 / 1024  # two models fit, not three
    rt = Runtime(settings.model_copy(update={"live_models_max_mb": budget_mb}))
    try:
        for _ in range(2):
            for name in names:
                result = classify(rt, model_name=name, message=Message(text=spam_text(50)))
                assert result.probabilities == pytest.approx(expected[name])
        held = rt.models.figures()
        assert held.models == 2
        assert held.bytes <= held.max_bytes
        assert held.evictions == 6  # every use after the second loads one and evicts one
        assert held.loads == 8
        assert rt.models.held(names[-1]) is not None  # the most recently used stay
        assert rt.models.held(names[0]) is None
    finally:
        rt.close()


def test_an_evicted_model_is_freed_at_once_not_by_the_cyclic_collector(
    settings: Settings,
) -> None:
    """A model that referred to itself through its parts (the classifier and its scorings)
    was freed only by the garbage collector's rare full passes: a server loading and evicting
    many models held hundreds of MB of them beyond its budget."""
    writer = Runtime(settings)
    names = [f"user{i}.example" for i in range(3)]
    for name in names:
        create_model(writer, name=name, classes=None, config={})
        train_examples(writer, 4, 4, model=name)
    one_model = writer.models.get(names[0]).size_bytes()
    writer.close()
    rt = Runtime(settings.model_copy(update={"live_models_max_mb": 1.5 * one_model / 2**20}))
    gc.collect()
    gc.disable()  # what the collector would free is then still there to see
    try:
        parts = []
        for name in names:
            live = rt.models.get(name)
            classify(rt, model_name=name, message=Message(text=spam_text(50)))  # its scorings
            parts.append((weakref.ref(live.classifier), weakref.ref(live.table)))
            del live
        assert rt.models.figures().evictions == 2
        assert [classifier() is None for classifier, _ in parts] == [True, True, False]
        assert [table() is None for _, table in parts] == [True, True, False]
    finally:
        gc.enable()
        rt.close()


@pytest.mark.parametrize("explain", [False, True])
def test_a_model_not_held_scores_robinson_fisher_from_the_messages_rows_alone(
    runtime: Runtime, second_runtime: Runtime, explain: bool
) -> None:
    train_examples(second_runtime, 8, 8)
    messages = [Message(text=spam_text(70)), Message(text=ham_text(71), message_id="<h>")]
    held = [classify(second_runtime, model_name="default", message=m, explain=explain)
            for m in messages]  # fmt: skip

    cold = [classify(runtime, model_name="default", message=m, explain=explain) for m in messages]

    assert runtime.models.figures().models == 0
    assert runtime.models.figures().partial_reads == 2
    for warm, partial in zip(held, cold, strict=True):
        assert partial.probabilities == pytest.approx(warm.probabilities)
        assert partial.verdict == warm.verdict
        assert partial.tokens == warm.tokens
        assert partial.clues == warm.clues
    # The record kept for feedback by message_id holds the model's token ids: feedback on it
    # trains exactly what feedback on the held model's record would.
    runtime.flush_classifications()
    second_runtime.flush_classifications()
    result = apply_feedback(runtime, model_name="default", label="ham", message_id="<h>",
                            message=None)  # fmt: skip
    assert result.tokens == held[1].tokens


@pytest.mark.parametrize(
    ("config", "event_model"),
    [
        ({"event_model": "bernoulli"}, None),  # english stop words
        ({"event_model": "multinomial"}, None),
        ({"event_model": "bernoulli", "stop_words": "none"}, None),
        ({"event_model": "multinomial", "stop_words": ["zzz", "the", "viagra"]}, None),
        ({"event_model": "bernoulli", "alpha": 0.5, "min_df": 2}, None),
        ({"event_model": "multinomial", "alpha": 0.1, "min_df": 2, "prior": "uniform"}, None),
        ({}, "bernoulli"),  # a Robinson-Fisher model asked for another scorer
    ],
)
def test_a_model_not_held_scores_naive_bayes_from_its_rows_and_vocabulary_sums(
    runtime: Runtime,
    second_runtime: Runtime,
    config: dict[str, object],
    event_model: EventModel | None,
) -> None:
    create_model(second_runtime, name="nb", classes=None, config=config)
    train_examples(second_runtime, 8, 6, model="nb")
    messages = [Message(text=spam_text(70)), Message(text=ham_text(71)), Message(text="zzz")]

    for generation in range(3):
        held = [classify(second_runtime, model_name="nb", message=m, explain=True,
                         event_model=event_model) for m in messages]  # fmt: skip
        for _ in range(2):  # the second time from the vocabulary sums kept for this generation
            cold = [classify(runtime, model_name="nb", message=m, explain=True,
                             event_model=event_model) for m in messages]  # fmt: skip
            for warm, partial in zip(held, cold, strict=True):
                assert partial.probabilities == pytest.approx(warm.probabilities, rel=1e-9)
                assert partial.verdict == warm.verdict
                assert partial.tokens == warm.tokens
                assert partial.clues == warm.clues
        # A write (a new generation) changes N_c and the sums: they are read again.
        train(second_runtime, model_name="nb", message=Message(text=ham_text(200 + generation)),
              label="ham")  # fmt: skip

    assert runtime.models.figures().models == 0
    assert runtime.models.figures().partial_reads == 3 * 2 * len(messages)
    assert runtime.models.figures().totals_reads == 3


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli", "robinson-fisher"])
def test_families_turned_off_after_training_are_left_out_held_or_not(
    runtime: Runtime, second_runtime: Runtime, event_model: EventModel
) -> None:
    # Trained with word pairs and shape tokens, then both turned off: held or read partially,
    # the model scores as one that never had them (the same messages trained with them off).
    families_off = {"word_pairs": False, "shape_tokens": False}
    create_model(second_runtime, name="on", classes=None, config={"event_model": event_model})
    create_model(
        second_runtime,
        name="never",
        classes=None,
        config={"event_model": event_model, **families_off},
    )
    for name in ("on", "never"):
        train_examples(second_runtime, 8, 6, model=name)
    update_model(second_runtime, name="on", changes=families_off)
    messages = [Message(text=spam_text(70)), Message(text=ham_text(71)), Message(text="zzz")]

    never = [classify(second_runtime, model_name="never", message=m) for m in messages]
    held = [classify(second_runtime, model_name="on", message=m) for m in messages]
    cold = [classify(runtime, model_name="on", message=m) for m in messages]

    assert runtime.models.figures().models == 0
    for expected, warm, partial in zip(never, held, cold, strict=True):
        assert warm.probabilities == pytest.approx(expected.probabilities, rel=1e-9)
        assert partial.probabilities == pytest.approx(expected.probabilities, rel=1e-9)
        assert warm.tokens == partial.tokens == expected.tokens
    assert all(result.tokens for result in never[:2])


def test_loading_a_model_does_not_stall_other_models(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_model(runtime, name="slow.example", classes=None, config={})
    runtime.models.get("default")
    runtime.models.forget("default")
    loading, release = threading.Event(), threading.Event()
    original = LiveModel.load

    def slow_load(db: Database, name: str, engine_config: object) -> LiveModel:
        if name == "slow.example":
            loading.set()
            assert release.wait(30)
        return original(db, name, engine_config)  # type: ignore[arg-type]

    monkeypatch.setattr(LiveModel, "load", staticmethod(slow_load))
    slow = threading.Thread(target=runtime.models.get, args=("slow.example",))
    slow.start()
    try:
        assert loading.wait(30)
        assert runtime.models.get("default").name == "default"  # while the other one loads
    finally:
        release.set()
        slow.join(30)
    assert runtime.models.held("slow.example") is not None


def record(key: str, when: datetime) -> ClassificationRecord:
    ids = np.arange(3, dtype=np.int64)
    return ClassificationRecord(key, f"<{key}>", ids, ids + 1, "spam", when)


def test_the_record_buffer_is_capped_per_process_not_per_model(tmp_path: object) -> None:
    db = Database(f"sqlite:///{tmp_path}/missing-dir/none.db")
    log = ClassificationLog(db, retention_days=7, max_records=5)
    now = datetime.now(UTC)
    for model_id in (1, 2, 3):
        log.record(model_id, [record(f"m{model_id}-{i}", now) for i in range(4)], Counter())
    assert log.buffered() == 5
    assert log.dropped == 7
    with pytest.raises(DatabaseUnavailable):
        log.flush()
    assert log.buffered() == 5  # kept for the next attempt, still within the cap
    log.record(4, [record("m4-0", now)], Counter())
    assert log.buffered() == 5
    db.dispose()


def classification_keys(db: Database) -> set[str]:
    with db.transaction(write=False) as conn:
        return set(conn.execute(select(classifications.c.message_id)).scalars())


def test_feedback_by_id_writes_only_its_own_models_records(runtime: Runtime) -> None:
    create_model(runtime, name="other.example", classes=None, config={})
    train_examples(runtime, 3, 3)
    train_examples(runtime, 3, 3, model="other.example")
    runtime.flush_classifications()
    classify(runtime, model_name="default", message=Message(text=spam_text(60), message_id="<a>"))
    classify(runtime, model_name="other.example",
             message=Message(text=spam_text(61), message_id="<b>"))  # fmt: skip

    apply_feedback(runtime, model_name="default", label="spam", message_id="<a>", message=None)

    assert classification_keys(runtime.db) == {"<a>"}
    assert runtime.log.buffered() == 1  # the other model's record waits for the flusher
    runtime.flush_classifications()
    assert classification_keys(runtime.db) == {"<a>", "<b>"}


def test_pruning_deletes_expired_records_in_chunks_and_keeps_recent_ones(
    runtime: Runtime,
) -> None:
    model_id = runtime.models.get("default").id
    old = datetime.now(UTC) - timedelta(days=30)
    runtime.record_classifications(model_id, [record(f"old{i}", old) for i in range(11)], Counter())
    runtime.record_classifications(model_id, [record("new", datetime.now(UTC))], Counter())
    runtime.flush_classifications()

    assert runtime.log.prune(chunk_rows=3) == 11
    assert classification_keys(runtime.db) == {"<new>"}


def test_a_bogofilter_import_updates_the_live_model_it_wrote_to(runtime: Runtime) -> None:
    train_examples(runtime, 2, 2)
    dump = [b".MSG_COUNT 3 4", b"prize 3 0", b"meeting 0 4", b"Free 2 1", b"free 1 0"]
    wordlist = read_wordlist(dump)
    for name in ("default", "new.example"):
        import_bogofilter(runtime.db, model_name=name, wordlist=wordlist, models=runtime.models)
        live = runtime.models.held(name)
        assert live is not None
        with runtime.db.transaction(write=False) as conn:
            row = find_model(conn, name)
        assert live.synced_generation == row.generation  # applied in place, no feed read
        assert row.vocabulary == vocabulary_in_rows(runtime.db, name)
        with live.lock:
            docs = live.table.token_docs[:, live.table.lookup(["free"], exact=True)]
        spam = live.classes.index("spam")
        assert int(docs[spam, 0]) >= 3
