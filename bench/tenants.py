"""One tenant abusing its key, another tenant classifying: how much the abuse costs the other.

    python -m bench.tenants                       # 40 abusing clients, SQLite, one worker
    python -m bench.tenants --clients 40 --global-messages 6046 --seconds 30 --json t.json
    python -m bench.tenants --kinds multinomial,bernoulli    # per-request event models only

A real `spamsift serve` (one worker) on a fresh SQLite file (or `--postgres URL`). A global
model is trained on spamassassin (`--global-messages`, in corpus order); alice's personal
model is backed by it; bob has a model of his own. alice's key (classify and train, limited to
alice) is used by `--clients` clients at once, each sending in turn, as fast as answered:

- classify with `event_model` multinomial, then bernoulli (the blend's whole-vocabulary sums);
- classify/batch of SPAMSIFT_MAX_BATCH_ITEMS messages;
- train/batch of SPAMSIFT_MAX_BATCH_ITEMS messages of random words (a vocabulary flood).

bob's key classifies one message at a time from one client, first with nobody else on the
server (unloaded), then during the abuse (loaded); the table gives his p50 and p99 and the
ratio loaded/unloaded, and what alice's clients got (status counts). The bench process runs
the clients on the same 2-core machine as the server.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from app.config import Settings
from app.service.corpus import LabelledMessage
from app.service.keys import create_key
from app.service.messages import Message
from app.service.models import create_model
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.store.migrate import upgrade_schema
from bench import data
from bench.server import percentiles_ms, serve


def post(
    connection: http.client.HTTPConnection, path: str, key: str, payload: Any
) -> tuple[int, float]:
    body = json.dumps(payload).encode()
    started = time.perf_counter()
    connection.request(
        "POST",
        path,
        body=body,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    response = connection.getresponse()
    response.read()
    return response.status, time.perf_counter() - started


def as_message(message: LabelledMessage) -> Message:
    return Message(raw=message.raw, text=message.text)


def prepare(url: str, global_messages: int) -> dict[str, str]:
    """Models and keys in the database at `url`; return the keys (and sample texts)."""
    rt = Runtime(Settings(database_url=url, train_time_budget_seconds=600))
    try:
        upgrade_schema(rt.db)
        create_model(rt, name="global", classes=None, config={})
        create_model(rt, name="alice", classes=None, config={}, relation={"backed_by": "global"})
        create_model(rt, name="bob", classes=None, config={})
        messages = data.load("spamassassin")[:global_messages]
        for start in range(0, len(messages), 500):
            chunk = messages[start : start + 500]
            train_batch(rt, model_name="global", items=[(as_message(m), m.label) for m in chunk])
        mixed = random.Random(1).sample(messages, 440)  # the corpus is sorted by folder
        for model, own in (("bob", mixed[:400]), ("alice", mixed[400:])):
            train_batch(rt, model_name=model, items=[(as_message(m), m.label) for m in own])
        keys = {
            "alice": create_key(rt.db, scopes=["classify", "train"], models=["alice"])[0],
            "bob": create_key(rt.db, scopes=["classify"], models=["bob"])[0],
        }
        keys["sample"] = json.dumps([data.raw_text(m) for m in mixed[:200]])
        return keys
    finally:
        rt.close()


def bob_latencies(port: int, key: str, texts: list[str], seconds: float) -> list[float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    latencies = []
    deadline = time.monotonic() + seconds
    index = 0
    while time.monotonic() < deadline:
        status, took = post(
            connection, "/v1/models/bob/classify", key, {"text": texts[index % len(texts)]}
        )
        if status != 200:
            raise RuntimeError(f"bob's classify answered {status}")
        latencies.append(took)
        index += 1
    connection.close()
    return latencies


KINDS = ("multinomial", "bernoulli", "classify_batch", "train_batch")


def abuse(
    port: int,
    key: str,
    texts: list[str],
    stop: threading.Event,
    seen: Counter[str],
    kinds: tuple[str, ...] = KINDS,
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    batch_items = Settings().max_batch_items
    turn = random.randrange(len(kinds))
    while not stop.is_set():
        kind = kinds[turn % len(kinds)]
        turn += 1
        if kind in ("multinomial", "bernoulli"):
            path = "/v1/models/alice/classify"
            payload: Any = {"text": random.choice(texts), "event_model": kind}
        elif kind == "classify_batch":
            path = "/v1/models/alice/classify/batch"
            payload = {"items": [{"text": random.choice(texts)} for _ in range(batch_items)]}
        else:
            path = "/v1/models/alice/train/batch"
            payload = {
                "items": [
                    {
                        "label": "spam",
                        "text": " ".join(f"r{random.getrandbits(48):x}" for _ in range(300)),
                    }
                    for _ in range(batch_items)
                ]
            }
        try:
            status, _ = post(connection, path, key, payload)
        except (OSError, http.client.HTTPException):
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            status = 0
        seen[f"{kind} {status}"] += 1
        if status == 429:
            # A pause, so that this process's refused clients do not spin on the cores the
            # server shares with them (an attacker would run elsewhere).
            time.sleep(0.1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=40)
    parser.add_argument("--global-messages", type=int, default=6046)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--postgres", help="a PostgreSQL URL instead of a SQLite file")
    parser.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help=f"what alice's clients send, in turn (comma-separated of {', '.join(KINDS)})",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        url = args.postgres or f"sqlite:///{folder}/bench.db"
        started = time.monotonic()
        keys = prepare(url, args.global_messages)
        prepared_s = time.monotonic() - started
        texts: list[str] = json.loads(keys["sample"])
        kinds = tuple(args.kinds.split(","))
        with serve(url, workers=1, folder=Path(folder)) as server:
            bob_latencies(server.port, keys["bob"], texts, 3.0)  # warm: bob's model held
            unloaded = bob_latencies(server.port, keys["bob"], texts, args.seconds)
            stop, seen = threading.Event(), Counter[str]()
            threads = [
                threading.Thread(
                    target=abuse,
                    args=(server.port, keys["alice"], texts, stop, seen, kinds),
                )
                for _ in range(args.clients)
            ]
            for thread in threads:
                thread.start()
            time.sleep(5.0)  # the abuse under way
            loaded = bob_latencies(server.port, keys["bob"], texts, args.seconds)
            stop.set()
            for thread in threads:
                thread.join(timeout=600)
    before, during = percentiles_ms(unloaded), percentiles_ms(loaded)
    result = {
        "clients": args.clients,
        "kinds": list(kinds),
        "max_requests_per_key": Settings().max_requests_per_key,
        "global_messages": args.global_messages,
        "prepare_s": round(prepared_s, 1),
        "bob_unloaded_ms": {**before, "n": len(unloaded)},
        "bob_loaded_ms": {**during, "n": len(loaded)},
        "p99_ratio": round(during["p99"] / before["p99"], 2),
        "alice_statuses": dict(sorted(seen.items())),
    }
    json.dump(result, sys.stdout, indent=2)
    print()
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
