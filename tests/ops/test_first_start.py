"""What `spamsift serve` says and refuses at start: an open server stays on this machine
unless the operator says otherwise; one line tells version, database, workers and mode;
libraries stay quiet at info."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest

from app import __version__
from app.serving import ServeError, check_open_server, is_loopback
from tests.ops.server import SPAMSIFT, running_server, serve_env


def start_lines(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_an_open_server_on_a_public_address_refuses_to_start(tmp_path: Path) -> None:
    completed = subprocess.run(
        [str(SPAMSIFT), "serve", "--host", "0.0.0.0", "--port", "1"],
        cwd=tmp_path,
        env=serve_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert completed.returncode == 2
    assert "refusing to serve on 0.0.0.0 without authentication" in completed.stderr
    assert "--allow-no-authentication" in completed.stderr
    assert "spamsift keys create --scope admin" in completed.stderr


@pytest.mark.parametrize(
    ("host", "mode", "allowed", "starts"),
    [
        ("127.0.0.1", "development", False, True),
        ("::1", "development", False, True),
        ("localhost", "development", False, True),
        ("0.0.0.0", "development", False, False),
        ("::", "development", False, False),
        ("192.0.2.7", "development", False, False),
        ("mail.example.org", "development", False, False),
        ("0.0.0.0", "development", True, True),
        ("0.0.0.0", "api keys", False, True),
    ],
)
def test_only_loopback_serves_without_authentication_by_default(
    host: str, mode: str, allowed: bool, starts: bool
) -> None:
    if starts:
        check_open_server(host=host, mode=mode, allow_no_authentication=allowed)
    else:
        with pytest.raises(ServeError, match="without authentication"):
            check_open_server(host=host, mode=mode, allow_no_authentication=allowed)
    assert is_loopback(host) is (host in ("127.0.0.1", "::1", "localhost"))


@pytest.mark.slow
def test_the_start_line_names_version_database_workers_and_mode_and_alembic_is_quiet(
    tmp_path: Path,
) -> None:
    env = serve_env(tmp_path, SPAMSIFT_LOG_LEVEL="info", SPAMSIFT_ALLOW_NO_AUTHENTICATION="true")
    with running_server(tmp_path, env, "--host", "0.0.0.0") as server:
        assert httpx.get(f"{server.url}/readyz", timeout=10).status_code == 200
        output = server.output()

    lines = start_lines(output)
    starting = [line for line in lines if str(line["event"]).startswith("spamsift ")]
    assert len(starting) == 1, output
    line = starting[0]
    assert line["version"] == __version__
    assert line["database"] == f"sqlite:///{tmp_path / 'spamsift.db'}"
    assert (line["workers"], line["mode"]) == (1, "development")
    assert not [line for line in lines if line["logger"] == "alembic.runtime.migration"], output
    assert any("DEVELOPMENT MODE" in str(line["event"]) for line in lines), output


def test_the_start_line_masks_the_database_password(tmp_path: Path) -> None:
    from app.serving import describe_database

    url = "postgresql+psycopg://spamsift:s3cret@db.example.org/spamsift"
    assert describe_database(url) == "postgresql+psycopg://spamsift:***@db.example.org/spamsift"
    assert describe_database("sqlite:///./x.db") == f"sqlite:///{Path('x.db').absolute()}"
