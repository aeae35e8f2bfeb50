"""F13: overload. `spamsift serve --limit-concurrency N` (uvicorn's limit) answers 503 at once
beyond N requests and connections in flight instead of queueing them: many more clients than
that send /classify as fast as they can; the excess gets a fast 503, everything else a normal
answer, memory stays bounded, and the service is back to normal right after the load stops.

uvicorn counts open connections too: idle keep-alive connections of the overloading clients
keep refusing newcomers until they close (uvicorn's keep-alive timeout, 5 s), hence "back to
normal within 10 s" while those clients stay connected, and at once when they go.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections import Counter

import httpx

from tests.faults.conftest import LOAD_SECONDS, StartServer
from tests.faults.load import message_text

LIMIT = 4
CLIENTS = 24
RECOVERY_SECONDS = 10.0  # ROBUSTNESS F13: back to normal within 10 s after the load stops


def test_f13_overload_gets_fast_503_and_recovers(
    sqlite_url: str, start_server: StartServer
) -> None:
    server = start_server(sqlite_url, cli=True, uvicorn_args=["--limit-concurrency", str(LIMIT)])
    rng = random.Random(13)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for i in range(10):
            body = {"text": message_text(rng, f"f13u{i}q"), "label": ("ham", "spam")[i % 2]}
            assert client.post("/v1/models/default/train", json=body).status_code == 200
    rss_before = server.rss_bytes()

    timings: list[tuple[int | str, float]] = []
    lock = threading.Lock()
    stop = threading.Event()
    clients = [httpx.Client(base_url=server.url, timeout=30) for _ in range(CLIENTS)]

    def overload(client: httpx.Client, seed: int) -> None:
        local = random.Random(seed)
        while not stop.is_set():
            started = time.monotonic()
            try:
                response = client.post(
                    "/v1/models/default/classify", json={"text": message_text(local, "o")}
                )
                status: int | str = response.status_code
            except httpx.TransportError as error:
                status = type(error).__name__
            with lock:
                timings.append((status, time.monotonic() - started))

    threads = [
        threading.Thread(target=overload, args=(client, n)) for n, client in enumerate(clients)
    ]
    for thread in threads:
        thread.start()
    time.sleep(LOAD_SECONDS)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    rss_after = server.rss_bytes()

    stopped, recovered = time.monotonic(), None
    with httpx.Client(base_url=server.url, timeout=30) as probe:
        while time.monotonic() - stopped < 30:  # the overloading clients are still connected
            if probe.post("/classify", json={"text": message_text(rng, "p")}).status_code == 200:
                recovered = time.monotonic() - stopped
                break
            time.sleep(0.1)
        for client in clients:
            client.close()
        after_close = [
            probe.post("/classify", json={"text": message_text(rng, "p")}).status_code
            for _ in range(5)
        ]

    statuses = Counter(status for status, _ in timings)
    refused = sorted(seconds for status, seconds in timings if status == 503)
    admitted = sorted(seconds for status, seconds in timings if status == 200)
    print(  # noqa: T201
        f"F13: {CLIENTS} clients for {LOAD_SECONDS:.0f} s on --limit-concurrency {LIMIT}: "
        f"{dict(statuses)}; 503 median {statistics.median(refused or [0]):.4f} s max "
        f"{max(refused or [0]):.3f} s; 200 median {statistics.median(admitted or [0]):.4f} s "
        f"p99 {admitted[int(0.99 * (len(admitted) - 1))] if admitted else 0:.3f} s; RSS "
        f"{rss_before / 2**20:.0f} -> {rss_after / 2**20:.0f} MiB; normal again "
        f"{recovered} s after the load stopped, {after_close} once its clients left"
    )
    assert set(statuses) <= {200, 503}
    assert statuses[503] > 0  # the limit was reached
    assert statuses[200] > 0
    # Refused at once, not queued: a queued request would wait for the CLIENTS / LIMIT (6)
    # requests ahead of it, so its latency would be several admitted ones. (A plain "faster
    # than admitted" failed on a loaded CI machine with both medians at 31 ms: the client
    # threads share one interpreter, and their own time dominates both.)
    assert statistics.median(refused) < CLIENTS / LIMIT / 2 * statistics.median(admitted)
    assert recovered is not None
    assert recovered < RECOVERY_SECONDS
    assert after_close == [200] * 5
    assert rss_after < rss_before + 100 * 2**20
