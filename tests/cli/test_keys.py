"""`spamsift keys create|list|revoke`, run as the installed console script against a SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.service.keys import KEY_PATTERN
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from tests.conftest import TEST_ENVIRONMENT

# The console script installed beside this interpreter, as an operator runs it.
SPAMSIFT = str(Path(sys.executable).with_name("spamsift"))
MESSAGE = {"text": "cheap watches and a casino prize for the winner"}


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/keys.db"
    db = Database(url)  # made as `spamsift db upgrade` makes it: keys never create a database
    upgrade_schema(db)
    db.dispose()
    return url


def spamsift(database_url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("SPAMSIFT_")}
    env.update(TEST_ENVIRONMENT)  # no min_learns floor: see tests/conftest.py
    env["SPAMSIFT_DATABASE_URL"] = database_url
    return subprocess.run(
        [SPAMSIFT, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def create(database_url: str, cwd: Path, *args: str) -> str:
    completed = spamsift(database_url, cwd, "keys", "create", *args)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.splitlines()[-1]


def classify_status(database_url: str, key: str) -> int:
    settings = Settings(database_url=database_url, _env_file=None)  # type: ignore[call-arg]
    with TestClient(create_app(settings)) as client:
        headers = {"Authorization": f"Bearer {key}"}
        return client.post("/classify", json=MESSAGE, headers=headers).status_code


def test_keys_create_prints_the_key_alone_on_its_last_line(
    database_url: str, tmp_path: Path
) -> None:
    completed = spamsift(database_url, tmp_path, "keys", "create", "--scope", "classify")

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.endswith("\n")
    (key,) = completed.stdout.splitlines()  # stdout is the key alone: KEY=$(spamsift keys …)
    assert KEY_PATTERN.fullmatch(key)
    assert "shown only this once" in completed.stderr
    assert key not in completed.stderr


@pytest.mark.slow
def test_keys_list_shows_each_key_without_its_secret(database_url: str, tmp_path: Path) -> None:
    relay = create(database_url, tmp_path, "--scope", "classify", "--scope", "train")
    limited = create(
        database_url, tmp_path, "--scope", "admin", "--model", "default", "--name", "ops team"
    )

    completed = spamsift(database_url, tmp_path, "keys", "list")

    assert completed.returncode == 0, completed.stderr
    header, *rows = completed.stdout.splitlines()
    assert header.split() == ["KEY", "ID", "NAME", "SCOPES", "MODELS", "CREATED", "REVOKED"]
    assert len(rows) == 2
    for key, scopes, models in ((relay, "classify,train", "*"), (limited, "admin", "default")):
        key_id = KEY_PATTERN.fullmatch(key)["key_id"]  # type: ignore[index]
        (row,) = [row for row in rows if row.startswith(key_id)]
        assert scopes in row.split()
        assert models in row.split()
        assert row.rstrip().endswith("-")  # not revoked
        assert key.split("_", 2)[2] not in completed.stdout
    assert "ops team" in completed.stdout


def test_keys_list_on_a_fresh_database_says_it_is_in_development_mode(
    database_url: str, tmp_path: Path
) -> None:
    completed = spamsift(database_url, tmp_path, "keys", "list")

    assert completed.returncode == 0, completed.stderr
    assert "development mode" in completed.stdout


@pytest.mark.slow
def test_a_created_key_works_until_revoked_then_gets_401(database_url: str, tmp_path: Path) -> None:
    key = create(database_url, tmp_path, "--scope", "classify")
    key_id = KEY_PATTERN.fullmatch(key)["key_id"]  # type: ignore[index]
    assert classify_status(database_url, key) == 409  # authorized; nothing trained yet

    revoked = spamsift(database_url, tmp_path, "keys", "revoke", key_id)

    assert revoked.returncode == 0, revoked.stderr
    assert key_id in revoked.stdout
    assert "no unrevoked key is left" in revoked.stdout
    assert classify_status(database_url, key) == 401
    listing = spamsift(database_url, tmp_path, "keys", "list").stdout
    (row,) = [line for line in listing.splitlines() if line.startswith(key_id)]
    assert not row.rstrip().endswith("-")  # the revocation time is listed


def test_the_database_files_never_hold_the_key(database_url: str, tmp_path: Path) -> None:
    key = create(database_url, tmp_path, "--scope", "admin")

    stored = b"".join(path.read_bytes() for path in tmp_path.glob("keys.db*"))

    assert stored
    assert key.encode() not in stored
    assert key.split("_", 2)[2].encode() not in stored


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["create", "--scope", "root"], 2, "invalid choice"),
        (["create"], 2, "--scope"),
        (["create", "--scope", "train", "--model", "missing"], 1, "no model named 'missing'"),
        (["create", "--scope", "train", "--model", "Not A Name"], 1, "model name"),
        (["revoke", "ffffffffffff"], 1, "no API key"),
    ],
)
def test_keys_commands_refuse_bad_arguments_with_a_message(
    database_url: str, tmp_path: Path, args: list[str], status: int, message: str
) -> None:
    completed = spamsift(database_url, tmp_path, "keys", *args)

    assert completed.returncode == status
    assert message in completed.stderr
    assert completed.stdout == ""


@pytest.mark.slow
def test_the_last_admin_key_is_not_revoked_while_other_keys_remain(
    database_url: str, tmp_path: Path
) -> None:
    admin = create(database_url, tmp_path, "--scope", "admin")
    create(database_url, tmp_path, "--scope", "classify")
    admin_id = KEY_PATTERN.fullmatch(admin)["key_id"]  # type: ignore[index]

    refused = spamsift(database_url, tmp_path, "keys", "revoke", admin_id)

    assert refused.returncode == 1
    error = refused.stderr.splitlines()[-1]
    assert error.startswith("spamsift keys revoke: key ")
    assert "last admin key" in error
    assert "spamsift keys create --scope admin" in error
    listing = spamsift(database_url, tmp_path, "keys", "list").stdout
    (row,) = [line for line in listing.splitlines() if line.startswith(admin_id)]
    assert row.rstrip().endswith("-")  # still in force
