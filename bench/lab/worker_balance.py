"""How the work of two batch clients spreads over two workers: `python -m bench.lab.worker_balance
[runs] [--repo PATH]`.

`spamsift serve --workers 2` on SQLite, trained from the SpamAssassin split's training messages
in batches of 500 from two clients, then its test messages classified in batches of 100 from
two clients, three passes to warm up and `runs` timed passes (default 10), each pass opening
two new connections as the targets' batch row does. For each pass it prints the busier
worker's share of the server's CPU (0.5: even; 1.0: one worker did everything), the pass's
messages per second, and how many answers closed their connection (the workers' balancing
moving one: 1 where both connections were accepted by one worker and one of them moved).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from bench import data
from bench.databases import fresh_database
from bench.server import REPO, run_load, serve
from bench.serving import classify_batch_requests, train_batch_requests
from bench.timing import process_cpu_seconds


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lab.worker_balance", description=__doc__)
    parser.add_argument("runs", nargs="?", type=int, default=10)
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout served")
    args = parser.parse_args()
    split = data.split("spamassassin")
    batches = classify_batch_requests(split.test, 100)
    with tempfile.TemporaryDirectory(prefix="spamsift-balance-") as tmp:
        folder = Path(tmp)
        with (
            fresh_database("sqlite", folder, None) as url,
            serve(url, workers=2, folder=folder, repo=args.repo.resolve()) as server,
        ):
            run_load(server, train_batch_requests(split.train, 500), clients=2)
            for _ in range(3):
                run_load(server, batches, clients=2)
            workers = server.pids()[1:]
            shares: list[float] = []
            rates: list[int] = []
            moved: list[int] = []
            for _ in range(args.runs):
                before = [process_cpu_seconds(pid) or 0.0 for pid in workers]
                done = run_load(server, batches, clients=2)
                if done.errors:
                    raise RuntimeError(f"classifying failed: {done.statuses}")
                used = [
                    (process_cpu_seconds(pid) or 0.0) - seconds
                    for pid, seconds in zip(workers, before, strict=True)
                ]
                shares.append(round(max(used) / sum(used), 2))
                rates.append(round(len(split.test) / done.seconds))
                moved.append(done.closed_by_server)
    print(
        json.dumps(
            {
                "busier_worker_cpu_share": shares,
                "messages_per_s": rates,
                "connections_closed_by_the_server": moved,
                "load_average_1min_at_end": round(os.getloadavg()[0], 2),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
