"""Monitoring during an incident: while PostgreSQL is stopped or the disk under SQLite is full,
`/v1/models/{name}/stats`, `/metrics` and `/healthz` keep answering 200 from what the server
holds in memory, and say what is wrong (not 503 or 507, which left monitoring blind)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.builders import ham_message, spam_message
from tests.faults.conftest import StartServer
from tests.faults.servers import PostgresCluster
from tests.faults.test_f10_disk_full import fill, small_disk

pytestmark = pytest.mark.slow

STATS = "/v1/models/default/stats"


def train_and_classify(client: httpx.Client, n: int) -> None:
    items = [{"label": "spam", "raw": spam_message(i)} for i in range(n)]
    items += [{"label": "ham", "raw": ham_message(i)} for i in range(n)]
    response = client.post("/v1/models/default/train/batch", json={"items": items})
    assert response.status_code == 200, response.text
    classify(client, n)


def classify(client: httpx.Client, n: int) -> None:
    for i in range(n):
        response = client.post("/v1/models/default/classify", json={"raw": spam_message(100 + i)})
        assert response.status_code == 200, response.text


def metric(client: httpx.Client, name: str, **labels: str) -> float | None:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


def assert_answers_from_memory(
    client: httpx.Client, before: dict[str, Any], condition: str
) -> None:
    stats = client.get(STATS)
    assert stats.status_code == 200, stats.text
    answer = stats.json()
    assert answer["database"]["status"] == condition
    assert answer["classes"] == before["classes"]
    assert answer["top_tokens"] == before["top_tokens"]
    assert answer["activity"]["all"]["trained"] == before["activity"]["all"]["trained"]
    assert metric(client, "spamsift_database_condition", condition=condition) == 1.0
    assert metric(client, "spamsift_database_condition", condition="ok") == 0.0
    assert metric(client, "spamsift_model_generation", model="default") == before["generation"]
    health = client.get("/healthz")
    assert health.status_code == 200
    assert health.json()["database"] == condition


def test_stats_metrics_and_health_answer_while_postgres_is_stopped(
    pg_cluster: PostgresCluster, cluster_url: str, start_server: StartServer
) -> None:
    server = start_server(cluster_url)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        train_and_classify(client, 6)
        before = client.get(STATS).json()
        assert before["database"]["status"] == "ok"
        assert metric(client, "spamsift_database_condition", condition="ok") == 1.0

        pg_cluster.stop("immediate")
        try:
            assert_answers_from_memory(client, before, "unavailable")
            assert client.get("/readyz").status_code == 503  # readiness still asks the database
        finally:
            pg_cluster.start()


def test_stats_metrics_and_health_answer_while_the_disk_is_full(
    tmp_path: Path, sqlite_template: Path, start_server: StartServer
) -> None:
    with small_disk(tmp_path / "disk", "4m") as disk:
        path = disk / "spamsift.db"
        shutil.copy(sqlite_template, path)
        server = start_server(f"sqlite:///{path}")
        with httpx.Client(base_url=server.url, timeout=30) as client:
            train_and_classify(client, 6)
            before = client.get(STATS).json()
            filler = fill(disk)
            classify(client, 30)  # records the database cannot take now: buffered
            refused = client.post(
                "/v1/models/default/train", json={"label": "spam", "raw": spam_message(999)}
            )

            assert refused.status_code == 507
            assert_answers_from_memory(client, before, "storage_full")

            filler.unlink()
            trained = client.post(
                "/v1/models/default/train", json={"label": "spam", "raw": spam_message(999)}
            )
            assert trained.status_code == 200
            assert client.get("/healthz").json()["database"] == "ok"
        server.stop()
