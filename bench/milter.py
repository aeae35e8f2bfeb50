"""The milter through a real Postfix: messages/s classified, and the SMTP latency it adds.

    python -m bench.milter [--messages 1000] [--runs 3] [--rate 50] [--seconds 10] [--json out]

Needs Debian's postfix and root (a throw-away Postfix instance in a temporary folder, SMTP on
127.0.0.1 at a free port, every message delivered into one Maildir; tests/milter/postfix.py).
`spamsift serve` runs with its milter on SQLite, `default` trained on 200 + 200 messages.

- throughput: `--messages` messages sent over 8 SMTP connections at once, timed from the first
  MAIL FROM until the last one is in the Maildir; with the milter and without (Postfix alone);
- latency: messages sent at `--rate` per second for `--seconds`, each its own SMTP session
  (connect to 250 after the data), p50 and p99 with the milter and without; the milter's added
  latency is the difference of the p99s.

Each figure is the median of `--runs` runs; the table names the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import smtplib
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.run import machine
from bench.timing import summary
from tests.builders import ham_message, spam_message
from tests.milter.postfix import Postfix
from tests.servers import free_port, wait_until_ready

CONNECTIONS = 8


def start_spamsift(root: Path, milter_port: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (root / "spamsift.log").open("wb")
    env = {
        **os.environ,
        "SPAMSIFT_DATABASE_URL": f"sqlite:///{root}/spamsift.db",
        "SPAMSIFT_MILTER_ADDRESS": f"127.0.0.1:{milter_port}",
        "SPAMSIFT_LOG_LEVEL": os.environ.get("SPAMSIFT_LOG_LEVEL", "warning"),
    }
    spamsift = str(Path(sys.executable).with_name("spamsift"))
    process = subprocess.Popen(
        [spamsift, "serve", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    wait_until_ready(url, process, lambda: (root / "spamsift.log").read_text()[-2000:])
    with httpx.Client(base_url=url, timeout=120) as client:
        items = [{"label": "spam", "raw": spam_message(i)} for i in range(200)]
        items += [{"label": "ham", "raw": ham_message(i)} for i in range(200)]
        client.post("/v1/models/default/train/batch", json={"items": items}).raise_for_status()
    return process, url


def corpus(count: int, offset: int) -> list[bytes]:
    return [
        (spam_message(offset + i) if i % 2 else ham_message(offset + i)).encode()
        for i in range(count)
    ]


def throughput(postfix: Postfix, messages: list[bytes]) -> float:
    """Messages per second from the first send until the last one is delivered."""
    before = postfix.delivered_count()
    chunks = [messages[i::CONNECTIONS] for i in range(CONNECTIONS)]

    def send(chunk: list[bytes]) -> None:
        with smtplib.SMTP("127.0.0.1", postfix.smtp_port, timeout=120) as smtp:
            for raw in chunk:
                smtp.sendmail("sender@example.org", ["bob@example.net"], raw)

    started = time.monotonic()
    with ThreadPoolExecutor(CONNECTIONS) as pool:
        list(pool.map(send, chunks))
    while postfix.delivered_count() < before + len(messages):
        if time.monotonic() - started > 600:
            raise RuntimeError("messages not delivered within 10 minutes")
        time.sleep(0.02)
    return len(messages) / (time.monotonic() - started)


def latencies(postfix: Postfix, messages: list[bytes], rate: float) -> list[float]:
    """Seconds of each SMTP session (connect to the 250 after the data), sent at `rate`/s."""
    times: list[float] = []
    lock = threading.Lock()

    def send(raw: bytes) -> None:
        started = time.monotonic()
        with smtplib.SMTP("127.0.0.1", postfix.smtp_port, timeout=120) as smtp:
            smtp.sendmail("sender@example.org", ["bob@example.net"], raw)
        with lock:
            times.append(time.monotonic() - started)

    start = time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        for index, raw in enumerate(messages):
            delay = start + index / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pool.submit(send, raw)
    return times


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="spamsift-bench-milter-"))
    root.chmod(0o755)
    milter_port = free_port()
    process, _ = start_spamsift(root, milter_port)
    result: dict[str, Any] = {"machine": machine(), "settings": vars(args)}
    try:
        for name, port in (("postfix alone", None), ("with the milter", milter_port)):
            postfix = Postfix(
                root / name.replace(" ", "-"), smtp_port=free_port(), milter_port=port
            )
            postfix.start()
            try:
                latency_count = int(args.rate * args.seconds)
                rates, p50, p99 = [], [], []
                for run in range(args.runs):
                    rates.append(throughput(postfix, corpus(args.messages, 1000 + run * 10_000)))
                    times = latencies(
                        postfix, corpus(latency_count, 500_000 + run * 10_000), args.rate
                    )
                    p50.append(percentile(times, 0.50) * 1000)
                    p99.append(percentile(times, 0.99) * 1000)
                result[name] = {
                    "messages_per_second": summary(rates, digits=1),
                    "latency_p50_ms": summary(p50, digits=1),
                    "latency_p99_ms": summary(p99, digits=1),
                }
            finally:
                postfix.stop()
        result["load_average_1min_at_end"] = os.getloadavg()[0]
    finally:
        process.terminate()
        process.wait(30)
        shutil.rmtree(root, ignore_errors=True)
    alone, milter = result["postfix alone"], result["with the milter"]
    result["added_p99_ms"] = round(
        milter["latency_p99_ms"]["median"] - alone["latency_p99_ms"]["median"], 1
    )
    return result


def print_table(result: dict[str, Any]) -> None:
    info = result["machine"]
    print(
        f"machine: {info['cpu']} ({info['cpus']} cpus), "
        f"load {info['load_average_1min_at_start']:.1f} at start, "
        f"{result['load_average_1min_at_end']:.1f} at end; medians of "
        f"{result['settings']['runs']} runs (spread in % of the median)"
    )
    print(f"{'':18} {'msg/s':>14} {'p50 ms':>14} {'p99 ms':>14}")
    for name in ("postfix alone", "with the milter"):
        row = result[name]
        cells = [
            f"{row[key]['median']} ±{row[key]['spread_pct']}%"
            for key in ("messages_per_second", "latency_p50_ms", "latency_p99_ms")
        ]
        print(f"{name:18} " + " ".join(f"{cell:>14}" for cell in cells))
    print(
        f"p99 SMTP latency the milter adds at {result['settings']['rate']} msg/s: "
        f"{result['added_p99_ms']} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=float, default=50)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = measure(args)
    print_table(result)
    text = json.dumps(result, indent=2, default=str)
    if args.json:
        args.json.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
