"""The dashboard's stats on a 1 M-token model, and what reading them does to classification.

    python -m bench.dashboard_stats --model /tmp/m1.sqlite      # built there if absent
    python -m bench.dashboard_stats --tokens 20000 --json out.json

A `spamsift serve --workers 1` on a model of `--tokens` distinct tokens (built through the
store as `bench.memory` builds it) is loaded by one training request, then:

- `GET /v1/models/default/stats` is timed after a training (a new generation: the token
  figures are ranked anew), and again at the same generation (kept figures), as the dashboard's
  pages and its range switch ask it;
- classification p99 (SpamAssassin test messages, one client) is measured alone, while another
  client reads stats in a loop, while it trains one message after another, and while it trains
  and reads stats in turn (each stats request then ranks a new generation).

`--repo` runs the server from another checkout (the same measurement before a change).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench import data
from bench.memory import build_model, probe_requests
from bench.server import REPO, Server, percentiles_ms, run_load, serve

STATS_PATH = "/v1/models/default/stats"
CLASSIFICATIONS = 300


def timed_get(client: httpx.Client, path: str) -> float:
    started = time.perf_counter()
    response = client.get(path)
    response.raise_for_status()
    return time.perf_counter() - started


@functools.cache
def a_message() -> tuple[str, str]:
    message = data.split("spamassassin", train_limit=1, test_limit=0).train[0]
    return data.raw_text(message), message.label


def train_one(client: httpx.Client, number: int) -> None:
    """Train one SpamAssassin message under a message id of its own: a new generation."""
    raw, label = a_message()
    response = client.post(
        "/v1/models/default/train",
        json={"raw": raw, "label": label, "message_id": f"s{number}"},
    )
    response.raise_for_status()


def while_running(server: Server, side: Callable[[httpx.Client, int], None]) -> dict[str, Any]:
    """Classification p50/p95/p99 (ms) while another client runs `side` in a loop."""
    requests, _ = probe_requests()
    done = threading.Event()
    rounds = [0]

    def loop() -> None:
        with httpx.Client(base_url=server.base_url, timeout=600) as client:
            while not done.is_set():
                side(client, rounds[0])
                rounds[0] += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        load = run_load(server, requests, clients=1, total=CLASSIFICATIONS)
    finally:
        done.set()
        thread.join()
    return {**percentiles_ms(load.latencies), "errors": load.errors, "side_rounds": rounds[0]}


def measure(url: str, folder: Path, repo: Path) -> dict[str, Any]:
    requests, train_request = probe_requests("m-load")
    with (
        serve(url, workers=1, folder=folder, repo=repo) as server,
        httpx.Client(base_url=server.base_url, timeout=600) as client,
    ):
        loaded = run_load(server, [train_request], clients=1)  # the model is held from now
        after_training = []
        same_generation = []
        for number in range(3):
            train_one(client, 10_000 + number)
            after_training.append(timed_get(client, STATS_PATH))
            same_generation.extend(timed_get(client, STATS_PATH) for _ in range(3))
        counter = [20_000]

        def train_then_stats(client: httpx.Client, _: int) -> None:
            counter[0] += 1
            train_one(client, counter[0])
            client.get(STATS_PATH).raise_for_status()

        def stats_only(client: httpx.Client, _: int) -> None:
            client.get(STATS_PATH).raise_for_status()

        def train_only(client: httpx.Client, _: int) -> None:
            counter[0] += 1
            train_one(client, counter[0])

        alone = run_load(server, requests, clients=1, total=CLASSIFICATIONS)
        classify = {
            "alone": {**percentiles_ms(alone.latencies), "errors": alone.errors},
            "stats_loop": while_running(server, stats_only),
            "train_loop": while_running(server, train_only),
            "train_and_stats_loop": while_running(server, train_then_stats),
        }
    return {
        "load_errors": loaded.errors,
        "stats_after_training_s": [round(s, 3) for s in after_training],
        "stats_same_generation_s": round(statistics.median(same_generation), 4),
        "classify_ms": classify,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--model", type=Path, help="SQLite file of the model, built if absent")
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout the server runs")
    parser.add_argument("--json", type=Path, help="also write the results here")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="spamsift-bench-") as tmp:
        model = arguments.model or Path(tmp) / "model.sqlite"
        if not model.exists():
            build_model(f"sqlite:///{model}", arguments.tokens)
        # Each run on a copy: its trainings must not grow the kept model.
        copy = Path(tmp) / "served.sqlite"
        copy.write_bytes(model.read_bytes())
        results = {
            "tokens": arguments.tokens,
            **measure(f"sqlite:///{copy}", Path(tmp), arguments.repo),
        }
    print(f"stats after a training (s): {results['stats_after_training_s']}")
    print(f"stats at the same generation (s, median): {results['stats_same_generation_s']}")
    print(f"{'classify while':<22} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'side rounds':>12}")
    for name, row in results["classify_ms"].items():
        print(
            f"{name:<22} {row['p50']:>8} {row['p95']:>8} {row['p99']:>8} "
            f"{row.get('side_rounds', '-'):>12}"
        )
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
