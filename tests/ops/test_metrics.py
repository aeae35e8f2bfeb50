"""/metrics: every metric family, against what the API answered and what /stats says; and
several worker processes of a real `spamsift serve --workers 2` adding up in one scrape."""

from __future__ import annotations

import concurrent.futures
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.config import Settings
from app.main import create_app
from tests.builders import ham_text, spam_text, train_examples
from tests.ops.server import running_server, serve_env

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(target: TestClient | httpx.Client) -> Samples:
    response = target.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


def test_requests_are_counted_by_method_route_template_and_status(client: TestClient) -> None:
    for _ in range(3):
        client.get("/healthz")
    client.get("/v1/no/such/path")
    client.delete("/v1/models/default/messages/<private-id@example.org>")
    client.request("BREW", "/healthz")

    samples = scrape(client)

    requests = "spamsift_http_requests_total"
    assert value(samples, requests, method="GET", route="/healthz", status="200") == 3
    assert value(samples, requests, method="GET", route="unmatched", status="404") == 1
    forget = "/v1/models/{name}/messages/{message_id}"
    assert value(samples, requests, method="DELETE", route=forget, status="404") == 1
    assert value(samples, requests, method="other", route="/healthz", status="405") == 1
    duration = "spamsift_http_request_duration_seconds"
    assert value(samples, f"{duration}_count", method="GET", route="/healthz") == 3
    assert value(samples, f"{duration}_bucket", method="GET", route="/healthz", le="+Inf") == 3
    assert value(samples, f"{duration}_sum", method="GET", route="/healthz") > 0
    assert not any("private-id" in str(labels) for _, labels in samples)


def test_model_figures_agree_with_the_api_and_stats(client: TestClient) -> None:
    trained = train_examples(client, 6, 5)
    verdicts = [
        client.post("/v1/models/default/classify", json={"text": text}).json()["verdict"]
        for text in (spam_text(30), spam_text(31), ham_text(30))
    ]
    batch = client.post(
        "/v1/models/default/classify/batch", json={"items": [{"text": spam_text(32)}]}
    ).json()
    verdicts.append(batch["results"][0]["verdict"])
    m1 = client.post("/v1/models/default/classify", json={"text": ham_text(31), "message_id": "m1"})
    verdicts.append(m1.json()["verdict"])
    assert verdicts[-1] != "spam"  # so that marking it spam is a correction
    corrected = client.post("/feedback", json={"message_id": "m1", "label": "spam"})
    assert corrected.status_code == 200, corrected.text
    confirmed = client.post(
        "/feedback", json={"message_id": trained[0].message_id, "label": trained[0].label}
    )
    assert confirmed.status_code == 200, confirmed.text
    assert client.delete(f"/v1/models/default/messages/{trained[1].message_id}").status_code == 200
    client.post("/v1/models", json={"name": "empty.example"})

    samples = scrape(client)
    stats = client.get("/v1/models/default/stats").json()

    everything = stats["activity"]["all"]
    for verdict in ("spam", "ham", "unsure"):
        counted = value(samples, "spamsift_classifications_total", model="default", verdict=verdict)
        assert counted == everything["verdicts"][verdict]
        assert counted == verdicts.count(verdict)
    assert sum(everything["verdicts"].values()) == len(verdicts)
    assert value(samples, "spamsift_trainings_total", model="default") == everything["trained"]
    assert everything["trained"] == 11 + 1  # 11 learned, the feedback on m1 learned one more
    # The confirming feedback gave a message the label it had: like a repeated report, it
    # changes nothing and counts nothing.
    assert value(samples, "spamsift_feedback_total", model="default") == 1
    assert value(samples, "spamsift_feedback_corrections_total", model="default") == 1
    assert value(samples, "spamsift_forgotten_messages_total", model="default") == 1
    assert value(samples, "spamsift_model_generation", model="default") == stats["generation"]
    assert (
        value(samples, "spamsift_model_vocabulary_tokens", model="default")
        == stats["vocabulary"]["tokens"]
    )
    for label in ("spam", "ham"):
        assert (
            value(samples, "spamsift_model_trained_messages", model="default", **{"class": label})
            == stats["classes"][label]["messages"]
        )
    # A model nobody used yet is there too, empty.
    assert value(samples, "spamsift_model_vocabulary_tokens", model="empty.example") == 0
    assert ("spamsift_model_generation", frozenset({("model", "empty.example")})) in samples
    assert value(samples, "spamsift_database_errors_total", route="/train") == 0


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def test_database_errors_are_counted_and_model_figures_left_out(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/missing-dir/none.db"
    settings = Settings(database_url=url, _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(settings)) as client:
        for _ in range(2):
            assert client.post("/train", json={"label": "spam", "text": "x y"}).status_code == 503
        assert client.get("/v1/models/default/stats").status_code == 503
        # /metrics itself needs the database to check the API key (503 now), so read the
        # exposition the route would answer.
        metrics = client.app.state.metrics  # type: ignore[attr-defined]
        samples = parse(metrics.exposition().decode())
        again = parse(metrics.exposition().decode())

    assert value(samples, "spamsift_database_errors_total", route="/train") == 2
    assert value(samples, "spamsift_database_errors_total", route="/v1/models/{name}/stats") == 1
    assert value(samples, "spamsift_database_errors_total", route="/metrics") == 1
    assert value(again, "spamsift_database_errors_total", route="/metrics") == 2
    assert "spamsift_model_generation" not in names(samples)  # left out, not made up
    assert value(samples, "spamsift_http_requests_total", method="POST", route="/train",
                 status="503") == 2  # fmt: skip


EVERY_FAMILY = {
    "spamsift_http_requests_total",
    "spamsift_http_request_duration_seconds_bucket",
    "spamsift_model_generation",
    "spamsift_model_vocabulary_tokens",
    "spamsift_model_trained_messages",
    "spamsift_classifications_total",
    "spamsift_trainings_total",
    "spamsift_feedback_total",
    "spamsift_feedback_corrections_total",
    "spamsift_forgotten_messages_total",
}


@pytest.mark.slow
def test_two_workers_add_up_in_every_scrape(tmp_path: Path) -> None:
    """Prometheus multiprocess mode: whichever worker answers, the counts are the server's."""
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    (metrics_dir / "counter_1.db").write_bytes(b"stale garbage of an earlier run")
    env = serve_env(tmp_path, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    requests = 40

    with running_server(tmp_path, env, "--workers", "2") as server:
        started = '"event": "Application startup complete."'
        deadline = time.monotonic() + 120
        while server.output().count(started) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)  # /readyz answered by one worker; wait for the other too
        assert server.output().count(started) == 2, server.output()

        def healthz(_: Any) -> str:
            with httpx.Client(base_url=server.url, timeout=30) as fresh:  # a new connection each
                response = fresh.get("/healthz")
            assert response.status_code == 200
            return response.headers["x-request-id"]

        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(healthz, range(requests)))
        with httpx.Client(base_url=server.url, timeout=30) as client:
            for i in range(4):
                client.post("/train", json={"label": "spam", "text": spam_text(i)})
                client.post("/train", json={"label": "ham", "text": ham_text(i)})
            client.post("/classify", json={"text": spam_text(9)})
            scrapes = []
            for _ in range(6):
                with httpx.Client(base_url=server.url, timeout=30) as fresh:
                    scrapes.append(scrape(fresh))
        workers_seen = {path.name for path in metrics_dir.glob("*.db")}
    output = server.output()

    # The supervisor and both workers log through spamsift's formatter: JSON lines only.
    assert all(line.startswith('{"ts": ') for line in output.splitlines()), output
    assert output.count('"event": "Application startup complete."') == 2

    for samples in scrapes:
        counted = value(
            samples, "spamsift_http_requests_total", method="GET", route="/healthz", status="200"
        )
        assert counted == requests
        assert value(samples, "spamsift_http_requests_total", method="POST", route="/train",
                     status="200") == 8  # fmt: skip
        assert names(samples) >= EVERY_FAMILY
    assert "counter_1.db" not in workers_seen
    assert len(workers_seen) >= 2, workers_seen  # both workers answered and wrote their counts
