"""Exit statuses a cron job can trust: a bad argument is status 2 (classify: 3, its error
status), said on stderr before anything is read or written; the database is left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import StoredCounts, stored_counts
from tests.cli.conftest import Cli
from tests.cli.mailfiles import spam_bytes, write_eml_folder


def database_counts(cli: Cli) -> StoredCounts:
    from app.store.engine import Database

    db = Database(cli.database_url)
    try:
        return stored_counts(db)
    finally:
        db.dispose()


@pytest.mark.slow
def test_every_command_refuses_its_bad_arguments_with_status_2(cli: Cli, tmp_path: Path) -> None:
    mail = write_eml_folder(tmp_path / "mail", [spam_bytes(1)])
    nowhere = str(tmp_path / "nowhere")
    cases = [
        (("train", "--label", "spam", str(mail), nowhere), 2, "no such file or folder"),
        (("train", "--label", "spma", str(mail)), 2, "is not a class of model default"),
        (("train", str(mail)), 2, "--label"),
        (("train", "--label", "spam", "--batch-size", "0", str(mail)), 2, "--batch-size"),
        (("feedback", "--label", "spma", str(mail / "000.eml")), 2, "spma"),
        (("feedback", "--label", "spam", nowhere), 2, "cannot read"),
        (("import", nowhere), 2, "no such file"),
        (("import-bogofilter", nowhere), 2, "cannot read"),
        (("keys", "create", "--scope", "everything"), 2, "invalid choice"),
        (("models", "set", "default", "alpah=2"), 2, "alpah"),
        (("models", "create", "Bad Name"), 2, "model name"),
        (("serve", "--port", "eighty"), 2, "invalid int"),
        (("classify", nowhere), 3, "cannot read"),
        (("classify", "--no-such-option"), 3, "unrecognized arguments"),
    ]
    before = database_counts(cli)

    for args, status, said in cases:
        completed = cli(*args)
        assert completed.returncode == status, (args, completed.stderr)
        assert said.encode() in completed.stderr, (args, completed.stderr)

    assert database_counts(cli) == before


def test_version_names_the_installed_version(cli: Cli) -> None:
    from app import __version__
    from tests.cores import TOKEN_CORE

    core = TOKEN_CORE.name
    assert cli.ok("--version").strip() == f"spamsift {__version__} (token core: {core})"
