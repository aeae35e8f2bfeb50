"""The command line as people type it: options between paths, `stats --model`, every command
naming its database, a port already in use, progress on a terminal for import and export."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import SPAMSIFT, Cli, clean_environment, run_on_terminal
from tests.cli.mailfiles import ham_bytes, spam_bytes, write_eml_folder


@pytest.mark.slow
def test_options_may_come_between_the_paths(cli: Cli, tmp_path: Path) -> None:
    first = write_eml_folder(tmp_path / "a", [spam_bytes(1), spam_bytes(2)])
    second = write_eml_folder(tmp_path / "b", [spam_bytes(3)])
    cli.ok("models", "create", "alice")

    cli.ok("train", "--label", "spam", str(first), "--model", "alice", str(second))

    assert '"spam": 3' in cli.ok("models", "show", "alice", "--json")


@pytest.mark.slow
def test_stats_takes_the_model_as_an_option_too(cli: Cli, tmp_path: Path) -> None:
    cli.ok("models", "create", "alice")
    cli.ok(
        "train",
        "--label",
        "ham",
        "--model",
        "alice",
        str(write_eml_folder(tmp_path / "h", [ham_bytes(1)])),
    )

    by_option = cli.ok("stats", "--model", "alice")
    by_position = cli.ok("stats", "alice")
    both = cli("stats", "alice", "--model", "default")

    assert by_option.startswith("model alice ")
    assert by_position.startswith("model alice ")
    assert both.returncode == 2
    assert b"give the model once" in both.stderr


def test_expire_names_its_database_and_refuses_a_missing_file(cli: Cli, tmp_path: Path) -> None:
    expired = cli("expire")
    nowhere = tmp_path / "nowhere.db"
    missing = cli("expire", env={"SPAMSIFT_DATABASE_URL": f"sqlite:///{nowhere}"})

    assert expired.returncode == 0, expired.stderr
    assert expired.stderr.decode().startswith("spamsift expire: database ")
    assert missing.returncode == 1
    assert f"no database at {nowhere}".encode() in missing.stderr
    assert not nowhere.exists()


def test_a_port_in_use_stops_serve_with_status_3(cli: Cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        completed = subprocess.run(
            [SPAMSIFT, "serve", "--port", str(port)],
            env=clean_environment(cli.database_url),
            cwd=cli.cwd,
            capture_output=True,
            timeout=120,
        )

    assert completed.returncode == 3, completed.stderr
    last = completed.stderr.decode().strip().splitlines()[-1]
    assert last == f"spamsift serve: cannot listen on 127.0.0.1:{port}: address already in use"


@pytest.mark.slow
def test_export_and_import_show_progress_on_a_terminal(cli: Cli, tmp_path: Path) -> None:
    folder = write_eml_folder(tmp_path / "mail", [spam_bytes(i) for i in range(3)])
    cli.ok("train", "--label", "spam", str(folder))
    export = tmp_path / "export.jsonl"

    exported, export_screen = run_on_terminal(cli, "export", "-o", str(export))
    quiet = cli("export", "-o", str(tmp_path / "quiet.jsonl"))
    imported, import_screen = run_on_terminal(cli, "import", "--replace", str(export))

    assert exported.returncode == 0
    assert imported.returncode == 0
    assert b"exporting" in export_screen
    assert b"rows" in export_screen
    assert b"importing" in import_screen
    assert b"\r" not in quiet.stderr  # not a terminal: the summary line alone
