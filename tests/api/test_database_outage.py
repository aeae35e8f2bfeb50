"""While PostgreSQL does not answer, a model the process holds goes on classifying (200, from
the counts in memory: mail keeps being filtered), while training answers 503 and a model not
held answers 503. The outage is real for the app: its connections go through a TCP relay
that the test cuts."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import make_url

from app.config import Settings
from app.main import create_app
from tests.builders import ham_text, spam_text

POSTGRES_URL = os.environ.get("SPAMSIFT_TEST_POSTGRES_URL")


class Relay:
    """A TCP relay to PostgreSQL on 127.0.0.1 that can be cut (every connection closed and
    new ones refused) and restored."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = True
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open:
                client.close()
                continue
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.open = False
        with self.lock:
            for end in self.sockets:
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()
            self.sockets.clear()

    def restore(self) -> None:
        self.open = True

    def close(self) -> None:
        self.cut()
        self.listener.close()


@pytest.fixture
def relayed(database_url: str) -> Iterator[tuple[Relay, Settings]]:
    if not database_url.startswith("postgresql"):
        pytest.skip("a PostgreSQL outage: the SQLite file has no server to lose")
    url = make_url(database_url)
    relay = Relay(url.host or "127.0.0.1", url.port or 5432)
    settings = Settings(
        database_url=url.set(host="127.0.0.1", port=relay.port).render_as_string(
            hide_password=False
        ),
        lock_timeout_seconds=1.0,
        sync_interval_seconds=0.2,
    )
    try:
        yield relay, settings
    finally:
        relay.close()


def test_a_held_model_classifies_through_an_outage_and_training_is_refused(
    relayed: tuple[Relay, Settings],
) -> None:
    relay, settings = relayed
    with TestClient(create_app(settings)) as client:
        assert client.post("/v1/models", json={"name": "cold"}).status_code == 201
        for i in range(3):
            for label, text in (("spam", spam_text(i)), ("ham", ham_text(i))):
                for model in ("default", "cold"):
                    trained = client.post(
                        f"/v1/models/{model}/train", json={"label": label, "text": text}
                    )
                    assert trained.status_code == 200, trained.text
        before = client.post("/v1/models/default/classify", json={"text": spam_text(1)}).json()
        client.app.state.runtime.models.forget("cold")  # type: ignore[attr-defined]

        relay.cut()
        during = []
        deadline = time.monotonic() + 1.5  # several sync intervals
        while time.monotonic() < deadline:
            during.append(client.post("/v1/models/default/classify", json={"text": spam_text(1)}))
            time.sleep(0.05)
        train = client.post("/v1/models/default/train", json={"label": "spam", "text": "x y z"})
        cold = client.post("/v1/models/cold/classify", json={"text": spam_text(1)})
        relay.restore()
        time.sleep(0.3)
        after = client.post(
            "/v1/models/default/train", json={"label": "spam", "text": spam_text(9)}
        )

    assert {answer.status_code for answer in during} == {200}
    assert all(answer.json()["probabilities"] == before["probabilities"] for answer in during)
    assert train.status_code == 503
    assert train.headers["Retry-After"]
    assert cold.status_code == 503
    assert after.status_code == 200, after.text
