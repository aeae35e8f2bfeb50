"""ROBUSTNESS B.3: a Hypothesis state machine over train, mark (feedback), forget, classify and
expire on two models at once, checked after every step against a plain in-memory reference.

It drives the service layer through a `Runtime`, as one server process does, rather than HTTP:
a step costs a few milliseconds instead of a request's worth, so a bounded CI run still walks
hundreds of steps per backend, and the test can reach what HTTP hides — the process's live
in-memory arrays, the classification buffer, and `Runtime.expire()`. The HTTP layer is covered
by tests/api (and schemathesis); the use cases here are the same ones the routes call.

Invariants after every step, for each model:
1. the stored token counts (docs, terms) equal the reference's, and so do the class totals;
2. no stored count is below 0;
3. the ledger holds exactly the reference's messages, each with the reference's class;
4. class totals equal the number of ledger rows per class (and the sum of their terms);
5. classify is deterministic for the same state and writes nothing (checked in its rule);
6. an operation on one model changes no row of the other (checked around every write);
and the process's live arrays, and those of a second runtime that follows the database by its
change feed, equal the stored counts.

Run longer: SPAMSIFT_PROPERTY_EXAMPLES=500 SPAMSIFT_PROPERTY_STEPS=100 pytest tests/properties
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import Table, select, update

from app.config import Settings
from app.errors import MessageNotFound, NotTrained
from app.service.classification import classify
from app.service.messages import Message, message_key, token_digest
from app.service.models import create_model, update_model
from app.service.runtime import Runtime
from app.service.training import apply_feedback, forget, train
from app.store.engine import Database
from app.store.ledger import unpack
from app.store.tables import classifications, metadata, models
from app.text import tokenize_text
from tests.builders import cells_of, model_contents, stored_counts, texts_of
from tests.conftest import empty_postgres
from tests.cores import TOKEN_CORE

EXAMPLES = int(os.environ.get("SPAMSIFT_PROPERTY_EXAMPLES", "12"))
STEPS = int(os.environ.get("SPAMSIFT_PROPERTY_STEPS", "30"))
# With SPAMSIFT_PROPERTY_STATS=<file>, the test writes how often each rule took each branch.
STATS_FILE = os.environ.get("SPAMSIFT_PROPERTY_STATS")
OUTCOMES: Counter[str] = Counter()

# Two models ("tenants"): the default one, and one with three classes (multinomial, since
# robinson-fisher needs exactly ham and spam).
TENANTS: dict[str, tuple[str, ...]] = {"default": ("ham", "spam"), "corp": ("ham", "spam", "news")}

# A small vocabulary, so messages share tokens (any two share at least 4 of their 12+ words).
VOCABULARY = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
]  # fmt: skip
MIN_WORDS = 12  # /train refuses fewer than 11 tokens (ROBUSTNESS "min_tokens")
# Client message ids: none (the id is the content's sha256), or a few shared ones, so that a
# reused Message-ID with other content (I37) and several messages under one id happen often.
MESSAGE_IDS = [None, None, "<a@example.org>", "<b@example.org>", "c/with/slashes"]

# Tables a write on a model must leave alone for every other model; classifications and
# activity are written by the process's buffered flush, so they are checked separately.
PER_MODEL_TABLES = [
    table
    for table in metadata.sorted_tables
    if "model_id" in table.c and table.name not in ("classifications", "activity")
]


@dataclass(frozen=True)
class Mail:
    """A generated message: its words in order (repeats allowed) and the client's id."""

    words: tuple[str, ...]
    client_id: str | None

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def tokens(self) -> Counter[str]:
        # its words, their pairs and its shape tokens, as the tokenizer gives them
        return Counter(tokenize_text(self.text, core=TOKEN_CORE).token_counts)

    @property
    def message_id(self) -> str:
        return self.client_id or f"sha256:{hashlib.sha256(self.text.encode()).hexdigest()}"

    @property
    def key(self) -> str:
        return message_key(self.message_id, token_digest(dict(self.tokens), core=TOKEN_CORE))

    def message(self) -> Message:
        return Message(text=self.text, message_id=self.client_id)


@dataclass
class Entry:
    message_id: str
    class_index: int
    tokens: Counter[str]


@dataclass
class Record:
    message_id: str
    tokens: Counter[str]  # only the tokens the model knew when it classified the message
    order: int


@dataclass
class Reference:
    """What one model should hold: its ledger, vocabulary and recent classifications."""

    classes: tuple[str, ...]
    ledger: dict[str, Entry] = field(default_factory=dict)
    vocabulary: set[str] = field(default_factory=set)
    records: dict[str, Record] = field(default_factory=dict)

    def learn(
        self, key: str, message_id: str, tokens: Counter[str], class_index: int
    ) -> int | None:
        """Train (or relabel) one message; return its previous class.

        The model interns every token of a message it is asked to train, even one already
        learned: that differs from the ledger's tokens only for a message first learned by
        message_id from a classification (which holds the tokens known back then).
        """
        self.vocabulary |= tokens.keys()
        entry = self.ledger.get(key)
        if entry is None:
            self.ledger[key] = Entry(message_id, class_index, tokens)
            return None
        previous = entry.class_index
        entry.class_index = class_index
        return previous

    def keys_of(self, message_id: str) -> list[str]:
        return sorted(key for key, entry in self.ledger.items() if entry.message_id == message_id)

    def latest_record(self, message_id: str) -> tuple[str, Record] | None:
        found = [(r.order, key, r) for key, r in self.records.items() if r.message_id == message_id]
        if not found:
            return None
        _, key, record = max(found)
        return key, record

    def counts(self) -> dict[tuple[str, int], tuple[int, int]]:
        cells: dict[tuple[str, int], tuple[int, int]] = {}
        for entry in self.ledger.values():
            for token, n in entry.tokens.items():
                docs, terms = cells.get((token, entry.class_index), (0, 0))
                cells[(token, entry.class_index)] = (docs + 1, terms + n)
        return cells

    def totals(self) -> dict[int, tuple[int, int]]:
        totals: dict[int, tuple[int, int]] = {}
        for entry in self.ledger.values():
            docs, terms = totals.get(entry.class_index, (0, 0))
            totals[entry.class_index] = (docs + 1, terms + entry.tokens.total())
        return totals

    def untrained(self) -> bool:
        trained = {entry.class_index for entry in self.ledger.values()}
        return len(trained) < len(self.classes)


def rows(db: Database, tables: list[Table], model: str | None = None) -> dict[str, list[Any]]:
    """Every row of `tables` (of one model, or all), in primary-key order."""
    snapshot: dict[str, list[Any]] = {}
    with db.transaction(write=False) as conn:
        model_id = (
            None
            if model is None
            else conn.execute(select(models.c.id).where(models.c.name == model)).scalar_one()
        )
        for table in tables:
            query = select(table).order_by(*table.primary_key.columns)
            if model_id is not None:
                column = table.c.id if table is models else table.c.model_id
                query = query.where(column == model_id)
            snapshot[table.name] = [tuple(row) for row in conn.execute(query)]
    return snapshot


def live_equals_stored(rt: Runtime, db: Database, name: str) -> None:
    """The runtime's in-memory arrays for `name` equal the stored counts, cell by cell."""
    live = rt.models.get(name)
    stored = model_contents(db, name)
    n_tokens = stored.token_ids.size
    # The stored rows come in whatever order the database's plan gives: compare by id.
    texts = dict(zip(stored.token_ids.tolist(), stored.token_texts.strings(), strict=True))
    assert sorted(texts) == list(range(n_tokens))
    assert list(live.table.tokens) == [texts[token_id] for token_id in range(n_tokens)]
    n_classes = len(live.classes)
    docs = np.zeros((n_classes, n_tokens), dtype=np.int64)
    terms = np.zeros((n_classes, n_tokens), dtype=np.int64)
    for (token_id, class_index), (n_docs, n_terms) in cells_of(stored).items():
        docs[class_index, token_id] = n_docs
        terms[class_index, token_id] = n_terms
    np.testing.assert_array_equal(live.table.token_docs, docs)
    np.testing.assert_array_equal(live.table.token_terms, terms)
    np.testing.assert_array_equal(live.table.class_docs, stored.class_docs)
    np.testing.assert_array_equal(live.table.class_terms, stored.class_terms)


mails_strategy = st.builds(
    lambda distinct, repeats, client_id: Mail(tuple(distinct + repeats), client_id),
    st.lists(st.sampled_from(VOCABULARY), min_size=MIN_WORDS, max_size=16, unique=True),
    st.lists(st.sampled_from(VOCABULARY), max_size=4),
    st.sampled_from(MESSAGE_IDS),
)
tenant_names = st.sampled_from(sorted(TENANTS))


class ModelMachine(RuleBasedStateMachine):
    """Set `fresh` (a function giving Settings for an empty database) before running."""

    fresh: Callable[[], Settings]
    mails = Bundle("mails")

    def __init__(self) -> None:
        super().__init__()
        config = self.fresh()
        self.rt = Runtime(config)
        # A second process's view: it syncs through the change feed before every read.
        self.observer = Runtime(config.model_copy(update={"sync_interval_seconds": 1e-9}))
        # Both models learn every token of what they are trained with (the reference's
        # model); what a model leaves out once it is sure of a message has its own tests
        # (tests/api/test_pairs_when_unsure.py).
        every_token = {"pairs_until_log_odds": 0}
        update_model(self.rt, name="default", changes=every_token)
        create_model(self.rt, name="corp", classes=list(TENANTS["corp"]), config=every_token)
        self.refs = {name: Reference(classes) for name, classes in TENANTS.items()}
        self.order = itertools.count()
        OUTCOMES["examples"] += 1

    def teardown(self) -> None:
        self.rt.close()
        self.observer.close()

    # -- helpers ---------------------------------------------------------------------------

    @contextmanager
    def others_unchanged(self, tenant: str) -> Iterator[None]:
        """No row of any other model changes while the block runs on `tenant`."""
        others = [name for name in TENANTS if name != tenant]
        before = {name: rows(self.rt.db, [models, *PER_MODEL_TABLES], name) for name in others}
        yield
        after = {name: rows(self.rt.db, [models, *PER_MODEL_TABLES], name) for name in others}
        assert after == before

    @contextmanager
    def nothing_changes(self) -> Iterator[None]:
        """A refused operation leaves every model's rows as they were (generation included)."""
        before = rows(self.rt.db, [models, *PER_MODEL_TABLES])
        yield
        assert rows(self.rt.db, [models, *PER_MODEL_TABLES]) == before

    def label(self, data: st.DataObject, tenant: str) -> tuple[str, int]:
        classes = TENANTS[tenant]
        index = data.draw(st.integers(0, len(classes) - 1), label="class")
        return classes[index], index

    def check_result(self, result: Any, tenant: str, previous: int | None, index: int) -> None:
        classes = TENANTS[tenant]
        assert result.label == classes[index]
        assert result.previous_label == (None if previous is None else classes[previous])
        assert result.changed == (previous != index)

    # -- rules -----------------------------------------------------------------------------

    @initialize(target=mails, data=st.data())
    def seed(self, data: st.DataObject) -> MultipleResults[Mail]:
        """Train one message per class of each model, so classify has something to do."""
        seeded = []
        shifts = itertools.count(0, 3)
        for tenant, classes in TENANTS.items():
            for index, label in enumerate(classes):
                # Distinct word sets (drawn ones often coincide), with drawn repeats.
                shift = next(shifts)
                words = (VOCABULARY[shift:] + VOCABULARY[:shift])[:MIN_WORDS]
                repeats = data.draw(st.lists(st.sampled_from(words), max_size=4), label="repeats")
                mail = Mail(tuple(words + repeats), None)
                previous = self.refs[tenant].learn(mail.key, mail.message_id, mail.tokens, index)
                result = train(self.rt, model_name=tenant, message=mail.message(), label=label)
                self.check_result(result, tenant, previous, index)
                seeded.append(mail)
        return multiple(*seeded)

    @rule(target=mails, mail=mails_strategy)
    def write(self, mail: Mail) -> Mail:
        return mail

    @rule(tenant=tenant_names, mail=mails, data=st.data())
    def train(self, tenant: str, mail: Mail, data: st.DataObject) -> None:
        label, index = self.label(data, tenant)
        with self.others_unchanged(tenant):
            result = train(self.rt, model_name=tenant, message=mail.message(), label=label)
        assert result.message_id == mail.message_id
        assert result.tokens == len(mail.tokens)
        previous = self.refs[tenant].learn(mail.key, mail.message_id, mail.tokens, index)
        self.check_result(result, tenant, previous, index)
        OUTCOMES[
            "train:" + ("new" if previous is None else "same" if previous == index else "moved")
        ] += 1

    @rule(tenant=tenant_names, mail=mails, data=st.data())
    def mark_with_message(self, tenant: str, mail: Mail, data: st.DataObject) -> None:
        """ "Mark as spam / ham" sending the message along: trains it, or moves it."""
        label, index = self.label(data, tenant)
        with self.others_unchanged(tenant):
            result = apply_feedback(
                self.rt,
                model_name=tenant,
                label=label,
                message_id=mail.client_id,
                message=mail.message(),
            )
        previous = self.refs[tenant].learn(mail.key, mail.message_id, mail.tokens, index)
        self.check_result(result, tenant, previous, index)
        OUTCOMES["mark_with_message"] += 1

    @rule(tenant=tenant_names, mail=mails, data=st.data())
    def mark_by_message_id(self, tenant: str, mail: Mail, data: st.DataObject) -> None:
        """ "Mark as spam / ham" by message_id alone: relabels every trained message with that
        id, else trains what the model knew of the latest classification with that id."""
        label, index = self.label(data, tenant)
        ref = self.refs[tenant]
        keys = ref.keys_of(mail.message_id)
        record = ref.latest_record(mail.message_id)
        if not keys and record is None:
            with self.nothing_changes(), pytest.raises(MessageNotFound):
                apply_feedback(
                    self.rt,
                    model_name=tenant,
                    label=label,
                    message_id=mail.message_id,
                    message=None,
                )
            OUTCOMES["mark_by_id:not_found"] += 1
            return
        with self.others_unchanged(tenant):
            result = apply_feedback(
                self.rt, model_name=tenant, label=label, message_id=mail.message_id, message=None
            )
        assert result.message_id == mail.message_id
        if keys:
            previous = [ref.learn(key, mail.message_id, Counter(), index) for key in keys]
            self.check_result(result, tenant, previous[0], index)
            OUTCOMES[f"mark_by_id:trained_x{len(keys)}"] += 1
        else:
            assert record is not None
            key, classified = record
            previous_one = ref.learn(key, mail.message_id, Counter(classified.tokens), index)
            self.check_result(result, tenant, previous_one, index)
            OUTCOMES["mark_by_id:classified"] += 1

    @rule(tenant=tenant_names, mail=mails, data=st.data())
    def classify_then_mark_by_message_id(
        self, tenant: str, mail: Mail, data: st.DataObject
    ) -> None:
        """The mail server classifies, then the user clicks "spam" / "not spam"."""
        self.classify(tenant, mail)
        self.mark_by_message_id(tenant, mail, data)

    @rule(tenant=tenant_names, mail=mails)
    def forget(self, tenant: str, mail: Mail) -> None:
        ref = self.refs[tenant]
        keys = ref.keys_of(mail.message_id)
        if not keys:
            with self.nothing_changes(), pytest.raises(MessageNotFound):
                forget(self.rt, model_name=tenant, message_id=mail.message_id)
            OUTCOMES["forget:not_found"] += 1
            return
        with self.others_unchanged(tenant):
            result = forget(self.rt, model_name=tenant, message_id=mail.message_id)
        labels = [TENANTS[tenant][ref.ledger.pop(key).class_index] for key in keys]
        assert result.forgotten == len(keys)
        assert result.labels == labels  # in message_key order
        OUTCOMES[f"forget:x{len(keys)}"] += 1

    @rule(tenant=tenant_names, mail=mails)
    def classify(self, tenant: str, mail: Mail) -> None:
        ref = self.refs[tenant]
        everything = [*metadata.sorted_tables]
        before = rows(self.rt.db, everything)
        if ref.untrained():
            with pytest.raises(NotTrained):
                classify(self.rt, model_name=tenant, message=mail.message())
            assert rows(self.rt.db, everything) == before
            OUTCOMES["classify:not_trained"] += 1
            return
        first = classify(self.rt, model_name=tenant, message=mail.message())
        second = classify(self.rt, model_name=tenant, message=mail.message())
        assert first == second
        assert first.message_id == mail.message_id
        assert sum(first.probabilities.values()) == pytest.approx(1.0)
        assert rows(self.rt.db, everything) == before  # classifying writes nothing
        known = Counter({t: n for t, n in mail.tokens.items() if t in ref.vocabulary})
        ref.records[mail.key] = Record(mail.message_id, known, next(self.order))
        OUTCOMES["classify"] += 1

    @precondition(lambda self: any(ref.records for ref in self.refs.values()))
    @rule(age=st.booleans())
    def expire(self, age: bool) -> None:
        """Retention: records older than `retention_days` go; with `age`, time has passed."""
        self.rt.flush_classifications()
        self.check_classification_records()
        if age:
            nine_days_ago = datetime.now(UTC) - timedelta(days=9)
            with self.rt.db.transaction() as conn:
                conn.execute(update(classifications).values(classified_at=nine_days_ago))
        expected = sum(len(ref.records) for ref in self.refs.values()) if age else 0
        assert self.rt.expire() == expected
        if age:
            for ref in self.refs.values():
                ref.records.clear()
        self.check_classification_records()
        OUTCOMES[f"expire:{'aged' if age else 'recent'}:{expected}"] += 1

    def check_classification_records(self) -> None:
        """The flushed classification log holds, per model, what the reference recorded."""
        for name, ref in self.refs.items():
            stored = rows(self.rt.db, [classifications], name)
            texts = texts_of(model_contents(self.rt.db, name))
            found = {
                row[1]: (
                    row[2],
                    Counter(
                        {
                            texts[token_id]: n
                            for token_id, n in zip(
                                unpack(row[3]).tolist(), unpack(row[4]).tolist(), strict=True
                            )
                        }
                    ),
                )
                for row in stored["classifications"]
            }
            assert found == {k: (r.message_id, r.tokens) for k, r in ref.records.items()}

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def stored_state_equals_the_reference(self) -> None:
        for name, ref in self.refs.items():
            stored = stored_counts(self.rt.db, name)
            # 1. counts and totals; 2. nothing negative
            assert stored.nonzero_counts() == ref.counts()
            assert all(docs >= 0 and terms >= 0 for docs, terms in stored.token_counts.values())
            assert all(docs >= 0 and terms >= 0 for docs, terms in stored.class_totals.values())
            nonzero_totals = {c: v for c, v in stored.class_totals.items() if v != (0, 0)}
            assert nonzero_totals == ref.totals()
            # 3. the ledger: each message once, with its class
            assert stored.trained == {
                key: (entry.message_id, entry.class_index) for key, entry in ref.ledger.items()
            }
            # 4. class totals count the ledger rows
            per_class = Counter(class_index for _, class_index in stored.trained.values())
            assert {c: docs for c, (docs, _) in stored.class_totals.items() if docs} == per_class
            # the model's vocabulary is its own
            assert {text for text, _ in stored.token_counts} <= ref.vocabulary

    @invariant()
    def live_models_equal_the_stored_counts(self) -> None:
        OUTCOMES["checked_steps"] += 1
        for name in TENANTS:
            live_equals_stored(self.rt, self.rt.db, name)
            live_equals_stored(self.observer, self.rt.db, name)
            stored_tokens = model_contents(self.rt.db, name).token_texts.strings()
            assert set(stored_tokens) == self.refs[name].vocabulary


MACHINE_SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def machine_settings(database_url: str) -> Settings:
    """Settings for one example: a process that never re-reads the database on its own
    (so its arrays show only its own writes), and no minimum token count to train."""
    values: dict[str, Any] = {"database_url": database_url, "sync_interval_seconds": 3600.0}
    if "min_train_tokens" in Settings.model_fields:
        values["min_train_tokens"] = 1  # feedback by id trains the known part of a message
    return Settings(**values, _env_file=None)


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_settings(
    request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path
) -> Iterator[Callable[[], Settings]]:
    """A function that empties a database and returns Settings for it, once per example."""
    if request.param == "sqlite":
        numbers = itertools.count()

        def fresh_sqlite() -> Settings:
            path = tmp_path / f"example-{next(numbers)}.db"
            shutil.copy(sqlite_template, path)
            return machine_settings(f"sqlite:///{path}")

        yield fresh_sqlite
        return
    db: Database = request.getfixturevalue("postgres_database")

    def fresh_postgres() -> Settings:
        empty_postgres(db)
        return machine_settings(db.url)

    yield fresh_postgres
    empty_postgres(db)


def test_model_state_machine(fresh_settings: Callable[[], Settings]) -> None:
    machine = type("Machine", (ModelMachine,), {"fresh": staticmethod(fresh_settings)})
    run_state_machine_as_test(machine, settings=MACHINE_SETTINGS)
    if STATS_FILE:
        with open(STATS_FILE, "a") as out:
            out.write(json.dumps(dict(sorted(OUTCOMES.items()))) + "\n")
    OUTCOMES.clear()
