"""Every command names the database it works on; only `serve` and `db upgrade` create one.

The trap: `cd /etc/spamsift && spamsift keys create …` once wrote the key into a new, empty
./spamsift.db there, while the server (on another file) stayed open and checked no key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import SPAMSIFT, Cli, clean_environment
from tests.cli.mailfiles import spam_bytes, write_eml_folder
from tests.postgres import POSTGRES_URL

DUMP = Path(__file__).parent / "data" / "bogofilter-wordlist.txt"


def run_in(folder: Path, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    """`spamsift …` in `folder` with SPAMSIFT_DATABASE_URL unset (the default) or `url`."""
    env = clean_environment("unused")
    del env["SPAMSIFT_DATABASE_URL"]
    if url is not None:
        env["SPAMSIFT_DATABASE_URL"] = url
    return subprocess.run(
        [SPAMSIFT, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "command",
    [
        ("keys", "create", "--scope", "admin"),
        ("keys", "list"),
        ("train", "--label", "spam", "MAIL"),
        ("classify", "MAIL"),
        ("feedback", "--label", "spam", "--message-id", "<a@b>"),
        ("export",),
        ("import", "EXPORT"),
        ("backup", "copy.db"),
        ("import-bogofilter", "DUMP"),
    ],
)
def test_a_command_from_the_wrong_folder_creates_no_database_and_says_where_it_looked(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    elsewhere = tmp_path / "etc-spamsift"
    elsewhere.mkdir()
    mail = write_eml_folder(tmp_path / "mail", [spam_bytes(1)]) / "000.eml"
    export = tmp_path / "export.jsonl"
    export.write_text("")
    args = [
        {"MAIL": str(mail), "EXPORT": str(export), "DUMP": str(DUMP)}.get(argument, argument)
        for argument in command
    ]

    completed = run_in(elsewhere, *args)

    expected = elsewhere / "spamsift.db"
    assert completed.returncode in (1, 3), completed.stderr  # classify's error status is 3
    assert f"database sqlite:///{expected}" in completed.stderr
    assert f"no database at {expected}" in completed.stderr
    assert "SPAMSIFT_DATABASE_URL" in completed.stderr
    assert not expected.exists()
    assert completed.stdout.strip() == ""  # no key printed: none was made


@pytest.mark.slow
def test_db_upgrade_creates_the_database_and_names_it(tmp_path: Path) -> None:
    completed = run_in(tmp_path, "db", "upgrade")

    assert completed.returncode == 0, completed.stderr
    assert f"database sqlite:///{tmp_path / 'spamsift.db'}" in completed.stderr
    assert (tmp_path / "spamsift.db").exists()
    listed = run_in(tmp_path, "keys", "list")
    assert listed.returncode == 0, listed.stderr
    assert f"spamsift keys list: database sqlite:///{tmp_path / 'spamsift.db'}" in listed.stderr


def test_every_command_names_its_database_with_the_password_masked(
    cli: Cli, tmp_path: Path
) -> None:
    if not POSTGRES_URL:
        pytest.skip("needs SPAMSIFT_TEST_POSTGRES_URL (trust auth ignores the password)")
    from sqlalchemy.engine import make_url

    from tests.postgres import throwaway_database

    mail = write_eml_folder(tmp_path / "mail", [spam_bytes(1)]) / "000.eml"
    with throwaway_database(POSTGRES_URL, "spamsift_names") as url:
        with_password = make_url(url).set(password="s3cret").render_as_string(hide_password=False)
        masked = make_url(with_password).render_as_string(hide_password=True)
        commands = [
            ("db", "upgrade"),
            ("train", "--label", "spam", str(mail)),
            ("classify", str(mail)),
            ("feedback", "--label", "spam", str(mail)),
            ("keys", "list"),
            ("export", "-o", str(tmp_path / "x.jsonl")),
            ("import", str(tmp_path / "x.jsonl")),
        ]
        for command in commands:
            completed = run_in(tmp_path, *command, url=with_password)
            assert f"database {masked}" in completed.stderr, (command, completed.stderr)
            assert "s3cret" not in completed.stderr + completed.stdout, command
