"""What holds for every `spamsift` command alike, each taken from the argparse tree (a new
command is covered, or this file fails until it says how to run it): help text on every
option, a bad SPAMSIFT_* setting named in one line with status 2, and a database that cannot
be used named with the driver's own reason, worded as `spamsift db upgrade` words it.

The commands run in this process (`app.cli.main.main`), not as subprocesses: some thirty
interpreter starts per case would cost a minute of the quick test run."""

from __future__ import annotations

import argparse
import gzip
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.cli.classify import EXIT_ERROR
from app.cli.main import build_parser, main, subcommands
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from app.store.schema_version import current_revision
from tests.cli.mailfiles import spam_bytes
from tests.postgres import POSTGRES_URL
from tests.servers import free_port

COMMANDS = [name for name, _ in subcommands(build_parser())]
# Commands that never open the database (evaluate trains in memory, check-mail-setup asks the
# server over HTTP as the mail system does): the settings case only.
NO_DATABASE = {"spamsift evaluate", "spamsift check-mail-setup"}
# Status of a bad setting and of a database that cannot be used, where not 2 and 1: classify's
# statuses are verdicts, so its every error is 3 (as bogofilter's); serve and db upgrade stop
# with 2, so that systemd does not restart them in a loop (contrib/systemd).
SETTING_STATUS = {"spamsift classify": EXIT_ERROR}
DATABASE_STATUS = {"spamsift classify": EXIT_ERROR, "spamsift serve": 2, "spamsift db upgrade": 2}


def arguments_of(command: str, folder: Path) -> list[str]:
    """The words after `spamsift` that run `command` as far as opening its database."""
    message = folder / "message.eml"
    message.write_bytes(spam_bytes(1))
    export = folder / "export.jsonl.gz"
    with gzip.open(export, "wt") as file:
        file.write("")
    corpus = folder / "messages.jsonl"
    corpus.write_text("")
    dump = folder / "wordlist.txt"
    dump.write_text(".MSG_COUNT 1 1 20261126\n")
    after = {
        "spamsift serve": ["--port", str(free_port())],
        "spamsift train": ["--label", "spam", str(message)],
        "spamsift classify": [str(message)],
        "spamsift feedback": ["--label", "spam", str(message)],
        "spamsift import": [str(export)],
        "spamsift import-bogofilter": [str(dump)],
        "spamsift backup": [str(folder / "copy.db")],
        "spamsift keys create": ["--scope", "admin"],
        "spamsift keys revoke": ["0123456789abcdef"],
        "spamsift models create": ["alice"],
        "spamsift models show": ["default"],
        "spamsift models set": ["default", "alpha=0.5"],
        "spamsift models delete": ["default", "--yes"],
        "spamsift evaluate": [str(corpus)],
    }.get(command, [])
    return [*command.split()[1:], *after]


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
    """`serve` configures this process's logging as a server's: put it back after."""
    loggers = [logging.getLogger(), *map(logging.getLogger, logging.root.manager.loggerDict)]
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in loggers]
    yield
    for lg, handlers, level, propagate, disabled in saved:
        lg.handlers[:] = handlers
        lg.setLevel(level)
        lg.propagate, lg.disabled = propagate, disabled


def run(command: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """Run `command` in this process; its status and its stderr's lines."""
    try:
        status = main(arguments_of(command, folder))
    except SystemExit as stop:  # as the console script's sys.exit(main()) ends
        status = int(stop.code or 0)
    return status, capsys.readouterr().err.strip().splitlines()


def test_every_option_of_every_command_says_what_it_does() -> None:
    parser = build_parser()
    missing = [
        f"{name} {action.option_strings or action.dest}"
        for name, command in [("spamsift", parser), *subcommands(parser)]
        for action in command._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not action.help
    ]

    assert missing == []
    assert len(COMMANDS) >= 20  # the walk reaches the nested commands (keys create, db …)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_setting_is_one_line_naming_it(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    monkeypatch.setenv("SPAMSIFT_DATABASE_URL", f"sqlite:///{tmp_path / 'spamsift.db'}")
    monkeypatch.setenv("SPAMSIFT_MAX_MESSAGE_BYTES", "-1")

    status, lines = run(command, tmp_path, capsys)

    assert status == SETTING_STATUS.get(command, 2)
    assert lines == [f"{command}: SPAMSIFT_MAX_MESSAGE_BYTES='-1': Input should be greater than 0"]
    assert not (tmp_path / "spamsift.db").exists()


def database_failures(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> dict[str, tuple[int, str]]:
    """Each command's status and last line of stderr on the database of `url`."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPAMSIFT_DATABASE_URL", url)
    monkeypatch.setenv("SPAMSIFT_LOCK_TIMEOUT_SECONDS", "2")  # PostgreSQL's connect_timeout
    failures = {}
    for command in COMMANDS:
        if command not in NO_DATABASE:
            status, lines = run(command, tmp_path, capsys)
            failures[command] = (status, lines[-1] if lines else "")
    return failures


def assert_named_as_db_upgrade_names_it(failures: dict[str, tuple[int, str]], reason: str) -> None:
    status, said = failures["spamsift db upgrade"]
    cause = said.removeprefix("spamsift db upgrade: ")
    assert cause.startswith("SPAMSIFT_DATABASE_URL: cannot use the database postgresql"), said
    assert reason in cause, said
    assert "retry later" not in cause
    for command, (status, line) in failures.items():
        assert (status, line) == (DATABASE_STATUS.get(command, 1), f"{command}: {cause}")


def test_every_command_names_a_refused_connection_as_db_upgrade_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"postgresql+psycopg://spamsift:hunter2@127.0.0.1:{free_port()}/spamsift"

    failures = database_failures(url, tmp_path, monkeypatch, capsys)

    assert_named_as_db_upgrade_names_it(failures, "Connection refused")
    assert all("hunter2" not in line for _, line in failures.values())


@pytest.mark.postgresql
def test_every_command_names_a_mistyped_database_as_db_upgrade_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if not POSTGRES_URL:
        pytest.skip("needs SPAMSIFT_TEST_POSTGRES_URL (a PostgreSQL server to ask)")
    url = make_url(POSTGRES_URL).set(database="spamsift_no_such_database")

    failures = database_failures(
        url.render_as_string(hide_password=False), tmp_path, monkeypatch, capsys
    )

    assert_named_as_db_upgrade_names_it(
        failures, 'database "spamsift_no_such_database" does not exist'
    )


# Commands that bring the schema up to date (serve, db upgrade) or only rebuild the file
# (db vacuum): every other one finds the schema current or stops.
MIGRATING = {"spamsift serve", "spamsift db upgrade", "spamsift db vacuum"}


def assert_every_command_stops_saying(
    cause: str,
    url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each command but those that migrate or need no database, run on `url`, stops with its
    status for an unusable database and `cause` as its last line."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPAMSIFT_DATABASE_URL", url)
    failures = {}
    for command in COMMANDS:
        if command not in NO_DATABASE | MIGRATING:
            status, lines = run(command, tmp_path, capsys)
            failures[command] = (status, lines[-1] if lines else "")
    assert failures == {
        command: (DATABASE_STATUS.get(command, 1), f"{command}: {cause}") for command in failures
    }


def test_only_serve_and_db_upgrade_migrate_every_other_command_says_to_run_db_upgrade(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'spamsift.db'}"
    db = Database(url)
    upgrade_schema(db, "0001")  # a database a server of an earlier version left

    cause = (
        "the database's schema is older than this spamsift: run `spamsift db upgrade` "
        "(or start `spamsift serve`, which upgrades it)"
    )
    assert_every_command_stops_saying(cause, url, tmp_path, monkeypatch, capsys)
    assert current_revision(db) == "0001"
    db.dispose()
    assert main(["db", "upgrade"]) == 0
    assert run("spamsift keys list", tmp_path, capsys)[0] == 0


def test_a_database_a_later_version_upgraded_is_refused_by_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'spamsift.db'}"
    db = Database(url)
    upgrade_schema(db)
    with db.transaction(write=True) as conn:  # as a later spamsift's migration leaves it
        conn.execute(text("UPDATE alembic_version SET version_num = 'a-later-one'"))
    db.dispose()

    cause = (
        "the database's schema is newer than this spamsift: it was upgraded by a later "
        "version; run that version"
    )
    assert_every_command_stops_saying(cause, url, tmp_path, monkeypatch, capsys)
