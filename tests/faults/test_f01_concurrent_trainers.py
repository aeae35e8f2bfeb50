"""F01 (with F04, F05 and F14 under load): 16 concurrent trainers with overlapping vocabularies
train, batch, relabel, mark by message_id, forget and re-send through real servers; afterwards
every stored count equals the clients' ledger of acknowledged operations, exactly, and no
request got a 5xx (no deadlock, serialization failure or "database is locked" reached a client).

Backends: PostgreSQL through one server and through two; SQLite (WAL) through one server with
`--workers 2`, i.e. two processes each creating its engine after the fork of uvicorn.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter

import pytest

from tests.faults.conftest import LOAD_SECONDS, StartServer
from tests.faults.load import Load, compare_with_ledger

TRAINERS = 16

SETUPS = {
    "postgresql-1-server": ("postgres_url", 1, 1),  # (database, servers, workers per server)
    "postgresql-2-servers": ("postgres_url", 2, 1),
    "sqlite-2-workers": ("sqlite_url", 1, 2),
}


@pytest.mark.parametrize("setup", list(SETUPS))
def test_f01_sixteen_trainers_lose_no_increment(
    setup: str, request: pytest.FixtureRequest, start_server: StartServer
) -> None:
    fixture, n_servers, workers = SETUPS[setup]
    url = str(request.getfixturevalue(fixture))
    servers = [start_server(url, workers=workers) for _ in range(n_servers)]

    load = Load([server.url for server in servers], trainers=TRAINERS, tag="f01").start()
    time.sleep(LOAD_SECONDS)
    result = load.finish()
    comparison = compare_with_ledger(url, result.ledger)

    print(  # noqa: T201 - the figure the README reports
        f"F01 {setup}: {result.summary()}; {comparison.cells} (token, class) counts and "
        f"{comparison.doc_increments} doc increments compared, {len(comparison.problems)} wrong"
    )
    assert result.server_errors() == Counter(), result.failures[:10]
    assert result.failures == []
    assert result.anomalies == []
    assert comparison.problems == []
    assert sum(result.acknowledged.values()) >= TRAINERS  # every trainer got work done
    assert set(result.acknowledged) >= {"train", "batch", "relabel", "feedback", "forget"}
    if url.startswith("sqlite"):
        for server in servers:
            server.stop()
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
