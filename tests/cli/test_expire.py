"""`spamsift expire`: tokens beyond the maximum and old classification records."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.service.runtime import Runtime
from app.store.engine import Database
from tests.builders import train_examples
from tests.cli.conftest import Cli
from tests.service.test_expiry import table_figures


def test_spamsift_expire_runs_from_the_command_line(cli: Cli, database_url: str) -> None:
    settings = Settings(database_url=database_url, _env_file=None)  # type: ignore[call-arg]
    rt = Runtime(settings)
    try:
        train_examples(rt, 4, 4)
    finally:
        rt.close()
    output = cli.ok("expire", "--max-tokens", "25")
    assert "model default: removed" in output
    assert "25 kept" in output
    db = Database(database_url)
    try:
        assert table_figures(db)["tokens"] == 25
    finally:
        db.dispose()


@pytest.mark.slow
def test_spamsift_expire_prunes_ledgers_and_db_vacuum_rebuilds(cli: Cli, database_url: str) -> None:
    settings = Settings(database_url=database_url, _env_file=None)  # type: ignore[call-arg]
    rt = Runtime(settings)
    try:
        train_examples(rt, 4, 4)
    finally:
        rt.close()

    output = cli.ok("expire", "--max-ledger-messages", "5")

    assert "model default: dropped 3 ledger entries" in output
    output = cli.ok("db", "vacuum")
    assert "bytes before" in output
