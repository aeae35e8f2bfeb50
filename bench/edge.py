"""What hostile clients without a key cost a real `spamsift serve --workers 1` (SQLite).

1. Idle connections: N sockets from 127.0.0.1 that send nothing (the server started with the
   soft descriptor limit of a systemd service, 1,024), then a new client from 127.0.0.2 asks
   for /healthz: served or not, and in how long.
2. Large JSON bodies: three 62 MB training batches of 1,000 items at once (the last item
   invalid, so each is parsed whole and then refused with 422) while one client polls
   /healthz and a classify: the longest wait of each.

`--repo` serves another checkout's code (to compare before and after):

    python -m bench.edge [--repo PATH] [--connections 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import resource
import socket
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

from bench.server import REPO, Server, serve

SYSTEMD_DEFAULT_SOFT_LIMIT = 1024


def get(server: Server, path: str, *, source: str = "127.0.0.1", timeout: float = 10) -> int:
    connection = http.client.HTTPConnection(
        server.host, server.port, timeout=timeout, source_address=(source, 0)
    )
    try:
        connection.request("GET", path, headers={"Host": "localhost"})
        return connection.getresponse().status
    finally:
        connection.close()


def idle_connections(repo: Path, folder: Path, count: int) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, count + 200)), hard))
    with ExitStack() as stack:
        resource.setrlimit(resource.RLIMIT_NOFILE, (SYSTEMD_DEFAULT_SOFT_LIMIT, hard))
        try:
            server = stack.enter_context(
                serve(f"sqlite:///{folder / 'idle.db'}", workers=1, folder=folder, repo=repo)
            )
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, count + 200)), hard))
        idle = []
        for _ in range(count):
            sock = socket.create_connection((server.host, server.port), timeout=10)
            stack.callback(sock.close)
            idle.append(sock)
        time.sleep(1)  # let the server accept what it will
        start = time.perf_counter()
        try:
            status: int | str = get(server, "/healthz", source="127.0.0.2")
        except OSError as error:
            status = type(error).__name__
        seconds = time.perf_counter() - start
        refused = 0
        for sock in idle:
            sock.setblocking(False)
            with suppress(OSError):
                refused += sock.recv(16).startswith(b"HTTP/1.1 503")
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return {
        "idle connections": count,
        "new client (other address)": status,
        "its wait, s": round(seconds, 3),
        "idle ones answered 503": refused,
    }


def large_bodies(repo: Path, folder: Path) -> dict[str, Any]:
    text = ('Dear friend,\n\tcheap watches \u00e9t\u00e9 "now" ' * 1_200)[:50_000]
    items: list[dict[str, str]] = [{"raw": text, "label": "spam"}] * 999 + [{"raw": text}]
    body = json.dumps({"items": items}).encode()
    waits: dict[str, list[float]] = {"healthz": [], "classify": []}
    done = threading.Event()
    with serve(f"sqlite:///{folder / 'bodies.db'}", workers=1, folder=folder, repo=repo) as server:

        def batch() -> None:
            connection = http.client.HTTPConnection(server.host, server.port, timeout=600)
            connection.request(
                "POST",
                "/v1/models/default/train/batch",
                body=body,
                headers={"Content-Type": "application/json", "Host": "localhost"},
            )
            connection.getresponse().read()
            connection.close()

        def poll() -> None:
            connection = http.client.HTTPConnection(server.host, server.port, timeout=600)
            message = json.dumps({"text": "cheap watches"}).encode()
            headers = {"Content-Type": "application/json", "Host": "localhost"}
            while not done.is_set():
                start = time.perf_counter()
                connection.request("GET", "/healthz", headers=headers)
                connection.getresponse().read()
                waits["healthz"].append(time.perf_counter() - start)
                start = time.perf_counter()
                connection.request("POST", "/classify", body=message, headers=headers)
                connection.getresponse().read()
                waits["classify"].append(time.perf_counter() - start)
                time.sleep(0.02)
            connection.close()

        poller = threading.Thread(target=poll)
        poller.start()
        time.sleep(0.5)
        senders = [threading.Thread(target=batch) for _ in range(3)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()
        done.set()
        poller.join()
    return {
        "batches": f"3 x {len(body) / 1e6:.0f} MB",
        "healthz longest wait, ms": round(max(waits["healthz"]) * 1000),
        "classify longest wait, ms": round(max(waits["classify"]) * 1000),
        "polls": len(waits["healthz"]),
    }


def main(argv: list[str] | None = None) -> int:
    from bench.run import print_table

    parser = argparse.ArgumentParser(prog="python -m bench.edge", description=__doc__)
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose code is served")
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=None, help="where to write the results")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-edge-") as folder:
        idle = idle_connections(repo, Path(folder), args.connections)
        bodies = large_bodies(repo, Path(folder))
    print_table(f"idle connections from one address, code of {repo}", [idle])
    print_table(f"three large JSON batches at once, code of {repo}", [bodies])
    if args.json is not None:
        args.json.write_text(json.dumps({"repo": str(repo), "idle": idle, "bodies": bodies}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
