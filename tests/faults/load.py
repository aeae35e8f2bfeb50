"""Load with a client-side ledger: trainer threads over real HTTP, and the exact comparison of
what the database stores with what the clients were told was done.

Each trainer owns its messages (so its ledger of them is exact), while all messages draw words
from one small shared vocabulary (so every token is incremented by many trainers at once).
An operation counts once it is acknowledged (200). A 5xx or a dropped connection leaves it in
doubt: the trainer records the failure and retries the same operation until it gets a
definite answer, as a mail server's client would (every operation is idempotent by message,
and a forget retried after an in-doubt attempt may answer 404 because the first one landed).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from app.service.messages import Message, prepare
from app.store.engine import Database
from app.store.tables import MAX_TOKEN_BYTES
from app.text import TokenizerLimits
from tests.builders import counts_from_ledger, stored_cells, stored_counts
from tests.cores import TOKEN_CORE
from tests.faults.conftest import LOAD_SECONDS

SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "du", "ba", "zo"]
VOCABULARY = [a + b + c for a in SYLLABLES for b in SYLLABLES[:5] for c in SYLLABLES[:4]]  # 240
REQUEST_TIMEOUT_SECONDS = 30.0
# How long a trainer keeps retrying one operation in doubt (outlasts a database down for a load).
RESOLVE_SECONDS = 30.0 + 1.5 * LOAD_SECONDS
LABELS = ("ham", "spam")


def message_text(rng: random.Random, unique: str) -> str:
    """12-18 words of the shared vocabulary (a few repeated) and one word of its own."""
    words = rng.sample(VOCABULARY, k=rng.randint(12, 18))
    words += rng.choices(words, k=rng.randint(0, 4))
    rng.shuffle(words)
    return " ".join([*words, unique])


@dataclass
class Failure:
    kind: str  # the operation
    status: int | str  # HTTP status, or the transport exception's name
    seconds: float  # how long the failed attempt took
    at: float  # time.monotonic() when it ended


@dataclass
class Op:
    kind: str  # train | batch | relabel | feedback | forget | same
    items: list[tuple[str, str, str]]  # (message_id, text, label)


@dataclass
class TrainerStats:
    acknowledged: Counter[str] = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)  # answers that contradict the ledger
    statuses: Counter[int | str] = field(default_factory=Counter)
    token_increments: int = 0  # (token, class) doc increments the acknowledged ops made


class Trainer(threading.Thread):
    """Trains, batches, relabels, marks by message_id, forgets and re-sends its own messages."""

    def __init__(
        self, index: int, base_url: str, model: str, *, tag: str, stop: threading.Event, seed: int
    ) -> None:
        super().__init__(name=f"trainer-{index}", daemon=True)
        self.index = index
        self.base_url = base_url
        self.model = model
        self.tag = tag
        self.stop_event = stop
        self.rng = random.Random(seed * 7919 + index)
        self.ledger: dict[str, tuple[str, str]] = {}  # message_id -> (text, label), acknowledged
        self.stats = TrainerStats()
        self.error: BaseException | None = None
        self._next = 0

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.base_url, timeout=REQUEST_TIMEOUT_SECONDS) as client:
                while not self.stop_event.is_set():
                    self.perform(client, self.choose())
        except BaseException as error:  # reported by the test, never swallowed
            self.error = error

    def new_item(self) -> tuple[str, str, str]:
        self._next += 1
        message_id = f"<{self.tag}-{self.index}-{self._next}@faults.test>"
        text = message_text(self.rng, f"{self.tag}u{self.index}x{self._next}q")
        return message_id, text, self.rng.choice(LABELS)

    def choose(self) -> Op:
        roll = self.rng.random()
        trained = sorted(self.ledger)
        if not trained or roll < 0.40:
            return Op("train", [self.new_item()])
        if roll < 0.55:
            return Op("batch", [self.new_item() for _ in range(self.rng.randint(2, 4))])
        message_id = self.rng.choice(trained)
        text, label = self.ledger[message_id]
        other = LABELS[1 - LABELS.index(label)]
        if roll < 0.70:
            return Op("relabel", [(message_id, text, other)])
        if roll < 0.80:
            return Op("feedback", [(message_id, text, other)])
        if roll < 0.90:
            return Op("forget", [(message_id, text, label)])
        return Op("same", [(message_id, text, label)])

    def send(self, client: httpx.Client, op: Op) -> httpx.Response:
        model = f"/v1/models/{self.model}"
        if op.kind == "batch":
            items = [{"message_id": m, "text": t, "label": lb} for m, t, lb in op.items]
            return client.post(f"{model}/train/batch", json={"items": items})
        message_id, text, label = op.items[0]
        if op.kind == "feedback":
            return client.post(f"{model}/feedback", json={"message_id": message_id, "label": label})
        if op.kind == "forget":
            return client.delete(f"{model}/messages/{quote(message_id, safe='')}")
        return client.post(
            f"{model}/train", json={"message_id": message_id, "text": text, "label": label}
        )

    def perform(self, client: httpx.Client, op: Op) -> None:
        in_doubt = False
        deadline = time.monotonic() + RESOLVE_SECONDS
        while True:
            started = time.monotonic()
            try:
                response = self.send(client, op)
                status: int | str = response.status_code
            except httpx.TransportError as error:
                response, status = None, type(error).__name__
            self.stats.statuses[status] += 1
            if response is not None and status == 200:
                self.acknowledge(op, response.json(), in_doubt=in_doubt)
                return
            if op.kind == "forget" and status == 404 and in_doubt:
                self.acknowledge(op, None, in_doubt=True)  # the attempt in doubt had landed
                return
            if response is not None and isinstance(status, int) and status < 500:
                self.stats.anomalies.append(f"{op.kind}: {status} {response.text[:200]}")
                return  # refused, so not applied: the ledger stays as it was
            ended = time.monotonic()
            self.stats.failures.append(Failure(op.kind, status, ended - started, ended))
            in_doubt = True
            if time.monotonic() > deadline:
                raise AssertionError(f"{op.kind} still in doubt after {RESOLVE_SECONDS} s")
            time.sleep(self.rng.uniform(0.05, 0.2))

    def acknowledge(self, op: Op, body: dict[str, Any] | None, *, in_doubt: bool) -> None:
        self.stats.acknowledged[op.kind] += 1
        results = body["results"] if body is not None and op.kind == "batch" else [body]
        for (message_id, text, label), result in zip(op.items, results, strict=True):
            before = self.ledger.get(message_id)
            tokens = len(tokens_of(message_id, text))
            if op.kind == "forget":
                del self.ledger[message_id]
                self.stats.token_increments += tokens
                continue
            self.ledger[message_id] = (text, label)
            if before is None:
                self.stats.token_increments += tokens
            elif before[1] != label:
                self.stats.token_increments += 2 * tokens
            if result is None or in_doubt:
                continue  # an answer to a retry may say "already learned"
            expected_change = before is None or before[1] != label
            if result["changed"] != expected_change or result["label"] != label:
                self.stats.anomalies.append(f"{op.kind} {message_id}: {result} after {before}")


class Classifier(threading.Thread):
    """Classifies random messages while the trainers work; records statuses and latencies."""

    def __init__(
        self, index: int, base_url: str, model: str, *, stop: threading.Event, seed: int
    ) -> None:
        super().__init__(name=f"classifier-{index}", daemon=True)
        self.base_url, self.model, self.stop_event = base_url, model, stop
        self.rng = random.Random(seed * 104729 + index)
        self.statuses: Counter[int | str] = Counter()
        self.latencies: list[float] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with httpx.Client(base_url=self.base_url, timeout=REQUEST_TIMEOUT_SECONDS) as client:
                while not self.stop_event.is_set():
                    started = time.monotonic()
                    try:
                        response = client.post(
                            f"/v1/models/{self.model}/classify",
                            json={"text": message_text(self.rng, "probe")},
                        )
                        self.statuses[response.status_code] += 1
                    except httpx.TransportError as error:
                        self.statuses[type(error).__name__] += 1
                    self.latencies.append(time.monotonic() - started)
                    time.sleep(0.01)
        except BaseException as error:
            self.error = error


@dataclass
class LoadResult:
    trainers: int
    seconds: float
    ledger: dict[str, tuple[str, str]]
    acknowledged: Counter[str]
    failures: list[Failure]
    anomalies: list[str]
    statuses: Counter[int | str]
    classify_statuses: Counter[int | str]
    classify_latencies: list[float]
    token_increments: int

    def server_errors(self) -> Counter[int | str]:
        every = self.statuses + self.classify_statuses
        return Counter({s: n for s, n in every.items() if not isinstance(s, int) or s >= 500})

    def summary(self) -> str:
        return (
            f"{self.trainers} trainers x {self.seconds:.1f} s: "
            f"{sum(self.acknowledged.values())} acknowledged operations {dict(self.acknowledged)}, "
            f"{self.token_increments} token increments, {len(self.ledger)} messages trained at "
            f"the end, {len(self.failures)} failed attempts, "
            f"{sum(self.classify_statuses.values())} classifications"
        )


class Load:
    """Trainers (and classifiers) spread over `urls`; start(), then finish() -> LoadResult."""

    def __init__(
        self,
        urls: list[str],
        model: str = "default",
        *,
        trainers: int = 16,
        classifiers: int = 2,
        tag: str = "load",
        seed: int = 1,
    ) -> None:
        self.stop = threading.Event()
        self.trainers = [
            Trainer(i, urls[i % len(urls)], model, tag=tag, stop=self.stop, seed=seed)
            for i in range(trainers)
        ]
        self.classifiers = [
            Classifier(i, urls[i % len(urls)], model, stop=self.stop, seed=seed)
            for i in range(classifiers)
        ]
        self.started = 0.0

    def start(self) -> Load:
        self.started = time.monotonic()
        for thread in [*self.trainers, *self.classifiers]:
            thread.start()
        return self

    def finish(self) -> LoadResult:
        """Stop starting operations; wait until every operation in doubt is resolved."""
        seconds = time.monotonic() - self.started
        self.stop.set()
        for thread in [*self.trainers, *self.classifiers]:
            thread.join(timeout=RESOLVE_SECONDS + 30)
            assert not thread.is_alive(), f"{thread.name} did not finish"
        errors = [t.error for t in [*self.trainers, *self.classifiers] if t.error is not None]
        if errors:
            raise AssertionError(f"load threads failed: {errors!r}") from errors[0]
        ledger: dict[str, tuple[str, str]] = {}
        acknowledged: Counter[str] = Counter()
        statuses: Counter[int | str] = Counter()
        classify_statuses: Counter[int | str] = Counter()
        failures: list[Failure] = []
        anomalies: list[str] = []
        for trainer in self.trainers:
            ledger.update(trainer.ledger)
            acknowledged += trainer.stats.acknowledged
            statuses += trainer.stats.statuses
            failures += trainer.stats.failures
            anomalies += trainer.stats.anomalies
        for classifier in self.classifiers:
            classify_statuses += classifier.statuses
        return LoadResult(
            trainers=len(self.trainers),
            seconds=seconds,
            ledger=ledger,
            acknowledged=acknowledged,
            failures=failures,
            anomalies=anomalies,
            statuses=statuses,
            classify_statuses=classify_statuses,
            classify_latencies=[x for c in self.classifiers for x in c.latencies],
            token_increments=sum(t.stats.token_increments for t in self.trainers),
        )


_TOKENS: dict[tuple[str, str], dict[str, int]] = {}
_TOKENS_LOCK = threading.Lock()


def tokens_of(message_id: str, text: str) -> dict[str, int]:
    """The tokens the server learns from `text` (the same tokenizer, default limits)."""
    key = (message_id, text)
    with _TOKENS_LOCK:
        cached = _TOKENS.get(key)
    if cached is None:
        prepared = prepare(
            Message(text=text, message_id=message_id),
            limits=TokenizerLimits(),
            max_message_bytes=10 * 1024 * 1024,
            core=TOKEN_CORE,
        )
        cached = {
            token: n
            for token, n in prepared.token_counts.items()
            if len(token.encode("utf-8")) <= MAX_TOKEN_BYTES
        }
        with _TOKENS_LOCK:
            _TOKENS[key] = cached
    return cached


def expected_counts(
    ledger: dict[str, tuple[str, str]], classes: tuple[str, ...] = LABELS
) -> tuple[dict[tuple[str, int], tuple[int, int]], dict[int, tuple[int, int]]]:
    """{(token, class): (docs, terms)} and class totals that the acknowledged ledger implies."""
    cells: dict[tuple[str, int], tuple[int, int]] = {}
    totals: dict[int, tuple[int, int]] = {}
    for message_id, (text, label) in ledger.items():
        class_index = classes.index(label)
        tokens = tokens_of(message_id, text)
        for token, n in tokens.items():
            docs, terms = cells.get((token, class_index), (0, 0))
            cells[(token, class_index)] = (docs + 1, terms + n)
        docs, terms = totals.get(class_index, (0, 0))
        totals[class_index] = (docs + 1, terms + sum(tokens.values()))
    return cells, totals


@dataclass
class Comparison:
    cells: int  # (token, class) cells compared
    doc_increments: int  # sum of the docs counts compared
    problems: list[str]


def compare_with_ledger(
    database_url: str,
    ledger: dict[str, tuple[str, str]],
    model: str = "default",
    classes: tuple[str, ...] = LABELS,
) -> Comparison:
    """Compare every stored count of `model` with the acknowledged ledger, exactly."""
    db = Database(database_url)
    try:
        stored = stored_counts(db, model)
        own_cells, own_totals = stored_cells(db, model)
        recomputed = counts_from_ledger(db, model)
    finally:
        db.dispose()
    expected_cells, expected_totals = expected_counts(ledger, classes)
    problems: list[str] = []
    actual_cells = stored.nonzero_counts()
    wrong = sorted(
        (key, actual_cells.get(key), expected_cells.get(key))
        for key in set(actual_cells) | set(expected_cells)
        if actual_cells.get(key) != expected_cells.get(key)
    )
    if wrong:
        problems.append(f"{len(wrong)} token counts differ (stored, ledger): {wrong[:10]}")
    negative = [key for key, value in stored.token_counts.items() if min(value) < 0]
    if negative:
        problems.append(f"negative counts: {negative[:10]}")
    actual_totals = {k: v for k, v in stored.class_totals.items() if v != (0, 0)}
    if actual_totals != expected_totals:
        problems.append(f"class totals {actual_totals} != ledger {expected_totals}")
    trained = {message_id: classes[c] for message_id, c in stored.trained.values()}
    labels = {message_id: label for message_id, (_, label) in ledger.items()}
    if len(trained) != len(stored.trained):
        problems.append("a message_id is stored twice")
    if trained != labels:
        extra = sorted(set(trained.items()) - set(labels.items()))[:10]
        missing = sorted(set(labels.items()) - set(trained.items()))[:10]
        problems.append(f"trained messages differ: stored only {extra}, ledger only {missing}")
    if (own_cells, own_totals) != recomputed:
        problems.append("stored counts differ from the counts recomputed from trained_messages")
    return Comparison(
        cells=len(expected_cells),
        doc_increments=sum(docs for docs, _ in expected_cells.values()),
        problems=problems,
    )
