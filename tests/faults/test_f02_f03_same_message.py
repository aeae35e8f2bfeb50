"""F02: the same message sent to /train by 8 clients at once is applied exactly once; the other 7
hear "already learned" (`changed: false`), and no one gets a 500 (no unique violation).
F03: "train as spam" and "mark as ham" of the same message at once, many rounds: the final state
is one of the two serial orders, the answers agree with that order, no count goes negative.

One server with `--workers 2`, so the racing requests also come from two processes.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.faults.conftest import FULL_LOAD_SECONDS, LOAD_SECONDS, StartServer
from tests.faults.load import compare_with_ledger, message_text

CLIENTS = 8
PAIRS = 4  # F03: pairs of racing clients at once, each pair on its own messages
FULL_RUN = LOAD_SECONDS >= FULL_LOAD_SECONDS
F02_ROUNDS = 100 if FULL_RUN else 10
F03_ROUNDS = 1000 if FULL_RUN else 48  # the catalogue's 1 000 rounds in the full run


def test_f02_same_message_from_eight_clients_is_applied_once(
    any_url: str, start_server: StartServer
) -> None:
    server = start_server(any_url, workers=2)
    rounds = F02_ROUNDS
    rng = random.Random(2)
    barrier = threading.Barrier(CLIENTS)
    clients = [httpx.Client(base_url=server.url, timeout=30) for _ in range(CLIENTS)]
    ledger: dict[str, tuple[str, str]] = {}
    statuses: Counter[int] = Counter()
    wrong: list[str] = []

    def send(client: httpx.Client, body: dict[str, str]) -> httpx.Response:
        barrier.wait(timeout=30)
        return client.post("/v1/models/default/train", json=body)

    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            for r in range(rounds):
                message_id = f"<f02-{r}@faults.test>"
                body = {
                    "message_id": message_id,
                    "text": message_text(rng, f"f02u{r}q"),
                    "label": rng.choice(["spam", "ham"]),
                }
                answers = list(pool.map(lambda c, b=body: send(c, b), clients))  # type: ignore[misc]
                statuses.update(answer.status_code for answer in answers)
                changed = sorted(a.json()["changed"] for a in answers if a.status_code == 200)
                if changed != [False] * (CLIENTS - 1) + [True]:
                    wrong.append(f"round {r}: changed {changed}")
                ledger[message_id] = (body["text"], body["label"])
    finally:
        for client in clients:
            client.close()

    comparison = compare_with_ledger(any_url, ledger)
    print(f"F02: {rounds} rounds x {CLIENTS} clients, statuses {dict(statuses)}")  # noqa: T201
    assert statuses == Counter({200: rounds * CLIENTS})
    assert wrong == []
    assert comparison.problems == []


def test_f03_train_and_mark_at_once_end_in_one_serial_order(
    any_url: str, start_server: StartServer
) -> None:
    server = start_server(any_url, workers=2)
    rounds = F03_ROUNDS // PAIRS
    ledger: dict[str, tuple[str, str]] = {}
    orders: Counter[str] = Counter()
    wrong: list[str] = []
    lock = threading.Lock()

    def race(pair: int) -> None:
        rng = random.Random(pair)
        barrier = threading.Barrier(2)
        with (
            httpx.Client(base_url=server.url, timeout=30) as trainer,
            httpx.Client(base_url=server.url, timeout=30) as marker,
            ThreadPoolExecutor(2) as pool,
        ):
            for r in range(rounds):
                message_id = f"<f03-{pair}-{r}@faults.test>"
                text = message_text(rng, f"f03u{pair}x{r}q")

                def train(m: str = message_id, t: str = text) -> httpx.Response:
                    barrier.wait(timeout=30)
                    return trainer.post(
                        "/v1/models/default/train",
                        json={"message_id": m, "text": t, "label": "spam"},
                    )

                def mark(m: str = message_id, t: str = text) -> httpx.Response:
                    barrier.wait(timeout=30)
                    return marker.post(
                        "/v1/models/default/feedback",
                        json={"message_id": m, "text": t, "label": "ham"},
                    )

                trained, marked = (f.result() for f in [pool.submit(train), pool.submit(mark)])
                final, problem = serial_order(trained, marked)
                with lock:
                    orders[final] += 1
                    if problem:
                        wrong.append(f"{message_id}: {problem}")
                    ledger[message_id] = (text, final)

    with ThreadPoolExecutor(PAIRS) as pairs:
        list(pairs.map(race, range(PAIRS)))

    comparison = compare_with_ledger(any_url, ledger)
    print(f"F03: {rounds * PAIRS} rounds, final labels {dict(orders)}")  # noqa: T201
    assert wrong == []
    assert comparison.problems == []


def serial_order(trained: httpx.Response, marked: httpx.Response) -> tuple[str, str | None]:
    """The final label that the two answers imply, and what is wrong with them if anything."""
    if trained.status_code != 200 or marked.status_code != 200:
        return "spam", f"statuses {trained.status_code} {marked.status_code}: {marked.text}"
    t: dict[str, Any] = trained.json()
    m: dict[str, Any] = marked.json()
    if t["previous_label"] is None and m["previous_label"] == "spam" and t["changed"]:
        return "ham", None if m["changed"] else "mark after train did not move it"
    if m["previous_label"] is None and t["previous_label"] == "ham" and m["changed"]:
        return "spam", None if t["changed"] else "train after mark did not move it"
    return "spam", f"answers fit no serial order: train {t}, mark {m}"
