"""Configuration: SPAMSIFT_* variables and .env, checked at start with one clear line;
.env.example lists every setting with its default."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import get_args
from urllib.parse import unquote

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from app.config import DATABASE_SCHEMES, DATABASE_URL, Settings, check_database_url
from app.text.core import CoreChoice
from tests.ops.server import SPAMSIFT, serve_env

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_LINE = re.compile(r"^#?(SPAMSIFT_[A-Z0-9_]+)=(.*)$")


def example_settings() -> dict[str, str]:
    found: dict[str, str] = {}
    lines = (REPO / ".env.example").read_text().splitlines()
    for number, line in enumerate(lines):
        match = EXAMPLE_LINE.match(line)
        if match:
            variable, value = match.groups()
            assert variable not in found, f"{variable} twice in .env.example"
            assert lines[number - 1].startswith("#"), f"{variable} has no comment above it"
            found[variable] = value
    return found


def test_env_example_lists_every_setting_with_its_default() -> None:
    listed = example_settings()

    variables = {f"SPAMSIFT_{name.upper()}": name for name in Settings.model_fields}
    assert set(listed) == set(variables)
    for variable, name in variables.items():
        default = Settings.model_fields[name].default
        shown = listed[variable]
        if default is None:
            assert shown == ""
            continue
        parsed = Settings(_env_file=None, **{name: shown})  # type: ignore[call-arg]
        assert getattr(parsed, name) == default, variable


def test_copying_env_example_to_env_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in example_settings():
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text((REPO / ".env.example").read_text())

    assert Settings() == Settings(_env_file=None)  # type: ignore[call-arg]


def test_a_dot_env_file_is_read_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPAMSIFT_MAX_BATCH_ITEMS", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(
        "SPAMSIFT_MAX_BATCH_ITEMS=7\nSPAMSIFT_RETENTION_DAYS=2\nSPAMSIFT_LOG_FORMAT=TEXT\n"
    )
    monkeypatch.setenv("SPAMSIFT_RETENTION_DAYS", "3")

    settings = Settings()

    assert (settings.max_batch_items, settings.retention_days) == (7, 3)
    assert settings.log_format == "text"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///./spamsift.db", "sqlite:///./spamsift.db"),
        ("postgresql+psycopg://u:p@db/spamsift", "postgresql+psycopg://u:p@db/spamsift"),
        ("postgresql://u:p@db:5433/spamsift", "postgresql+psycopg://u:p@db:5433/spamsift"),
        ("postgres://u@db/spamsift", "postgresql+psycopg://u@db/spamsift"),
    ],
)
def test_database_urls_name_a_driver_spamsift_has(url: str, expected: str) -> None:
    settings = Settings(database_url=url, _env_file=None)  # type: ignore[call-arg]

    assert settings.database_url == expected


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///./spamsift.db",
        "sqlite://",
        "sqlite:////abs/path.db?mode=ro",
        "postgresql://u:p%40ss@db:5433/spamsift",
        "postgresql+psycopg://u@[::1]:5432/spamsift?sslmode=require",
        "postgresql+psycopg://u@db/",
        "postgres://u@db",
        "mysql://spamsift@db/spamsift",
        "postgresql://u@db:port/spamsift",
        "not a url",
        "",
    ],
)
def test_settings_read_a_url_as_the_store_connects_to_it(url: str) -> None:
    """Settings check URLs without SQLAlchemy (they import no other room): the scheme and the
    database they read are SQLAlchemy's, and a URL they take SQLAlchemy parses alike."""
    try:
        expected = make_url(url)
    except (ArgumentError, ValueError):
        with pytest.raises(ValueError, match="not a database URL"):
            check_database_url(url)
        return
    parsed = DATABASE_URL.match(url)
    assert parsed is not None
    assert (parsed["scheme"], unquote(parsed["database"] or "")) == (
        expected.drivername,
        expected.database or "",
    )
    try:
        checked = check_database_url(url)
    except ValueError:
        return
    scheme = DATABASE_SCHEMES[expected.drivername]
    assert make_url(checked) == expected.set(drivername=scheme)


def test_the_tokenizer_setting_offers_the_text_rooms_choices() -> None:
    assert get_args(Settings.model_fields["tokenizer"].annotation) == get_args(CoreChoice)


def test_an_empty_admin_key_seeds_nothing() -> None:
    assert Settings(admin_key="", _env_file=None).admin_key is None  # type: ignore[call-arg]


def run_serve(tmp_path: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SPAMSIFT), "serve", "--port", "1"],  # never reached: it stops before listening
        cwd=tmp_path,
        env=serve_env(tmp_path, **settings),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            {"SPAMSIFT_MAX_MESSAGE_BYTES": "-1"},
            "SPAMSIFT_MAX_MESSAGE_BYTES='-1': Input should be greater than 0",
        ),
        (
            {"SPAMSIFT_DATABASE_URL": "mysql://spamsift@db/spamsift"},
            "SPAMSIFT_DATABASE_URL='mysql://spamsift@db/spamsift': unknown database scheme 'mysql'",
        ),
        ({"SPAMSIFT_DATABASE_URL": "not a url"}, "SPAMSIFT_DATABASE_URL: not a database URL"),
        (
            {"SPAMSIFT_DATABASE_URL": "postgresql+psycopg://spamsift:hunter2@127.0.0.1:1/db"},
            "SPAMSIFT_DATABASE_URL: cannot use the database "
            "postgresql+psycopg://spamsift:***@127.0.0.1:1/db: connection failed",
        ),
        (
            {"SPAMSIFT_DATABASE_URL": "sqlite:////nonexistent-dir/x/spamsift.db"},
            "SPAMSIFT_DATABASE_URL: cannot use the database "
            "sqlite:////nonexistent-dir/x/spamsift.db: unable to open database file",
        ),
        ({"SPAMSIFT_LOG_LEVEL": "loud"}, "SPAMSIFT_LOG_LEVEL='loud': Input should be 'debug'"),
        (
            {"SPAMSIFT_RETENTION_DAYS": "a week", "SPAMSIFT_LOG_FORMAT": "xml"},
            "SPAMSIFT_LOG_FORMAT='xml': Input should be 'json' or 'text'; "
            "SPAMSIFT_RETENTION_DAYS='a week': Input should be a valid number",
        ),
    ],
)
def test_serve_with_a_bad_setting_prints_one_line_naming_it_and_exits_2(
    tmp_path: Path, settings: dict[str, str], expected: str
) -> None:
    result = run_serve(tmp_path, **settings)

    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    # One line for the operator; anything else is a JSON log line said before it (a warning).
    lines = [line for line in result.stderr.splitlines() if not line.startswith('{"ts": ')]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"spamsift serve: {expected}"), lines[0]
    assert "Traceback" not in result.stderr
    assert "hunter2" not in result.stderr


def test_a_bad_setting_in_dot_env_is_named_too(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("SPAMSIFT_MAX_BATCH_ITEMS=0\n")

    result = run_serve(tmp_path)

    assert result.returncode == 2
    assert result.stderr.strip() == (
        "spamsift serve: SPAMSIFT_MAX_BATCH_ITEMS='0': Input should be greater than 0"
    )


def test_the_admin_key_is_never_echoed(tmp_path: Path) -> None:
    result = run_serve(tmp_path, SPAMSIFT_ADMIN_KEY="s3cret-admin-key", SPAMSIFT_MAX_MIME_DEPTH="0")

    assert result.returncode == 2
    assert "SPAMSIFT_MAX_MIME_DEPTH='0'" in result.stderr
    assert "s3cret" not in result.stderr


def test_db_upgrade_names_a_bad_setting_too_and_migrates_a_good_database(tmp_path: Path) -> None:
    env = serve_env(tmp_path)
    bad = subprocess.run(
        [str(SPAMSIFT), "db", "upgrade"],
        cwd=tmp_path,
        env={**env, "SPAMSIFT_DATABASE_URL": "postgresql+psycopg://spamsift:pw@127.0.0.1:1/db"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    good = subprocess.run(
        [str(SPAMSIFT), "db", "upgrade"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert bad.returncode == 2
    assert (
        bad.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "spamsift db upgrade: SPAMSIFT_DATABASE_URL: cannot use the database "
            "postgresql+psycopg://spamsift:***@127.0.0.1:1/db"
        )
    )
    assert "Traceback" not in bad.stderr
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("database at revision ")
