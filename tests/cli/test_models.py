"""`spamsift models …` and `spamsift stats`: model administration without curl, on the local
database and through a server (`--url`), as tables or the API's JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.cli.mailfiles import ham_bytes, spam_bytes, write_eml_folder


@pytest.mark.slow
def test_models_are_made_listed_changed_and_shown(cli: Cli) -> None:
    created = cli("models", "create", "example.org", "event_model=multinomial", "alpha=0.5")
    listed = cli.ok("models", "list")
    changed = json.loads(
        cli.ok("models", "set", "example.org", "spam_threshold=0.95", "alpha=", "--json")
    )
    shown = cli.ok("models", "show", "example.org")

    assert created.returncode == 0, created.stderr
    assert b"created model example.org (ham, spam)" in created.stdout
    assert b"spamsift models create: database " in created.stderr
    assert [line.split()[0] for line in listed.splitlines()] == ["NAME", "default", "example.org"]
    assert changed["config"]["spam_threshold"] == 0.95
    assert changed["config"]["alpha"] == 1.0  # `alpha=` reset it to its default
    assert changed["config"]["event_model"] == "multinomial"
    assert re.search(r"^spam_threshold +0\.95$", shown, re.MULTILINE)


@pytest.mark.slow
def test_bad_options_and_names_exit_2_and_unknown_models_exit_1(cli: Cli) -> None:
    unknown_option = cli("models", "set", "default", "alpah=2")
    bad_value = cli("models", "set", "default", "alpha=-1")
    not_a_pair = cli("models", "set", "default", "alpha")
    bad_name = cli("models", "create", "Not A Name")
    missing = cli("models", "show", "nosuch")

    for completed in (unknown_option, bad_value, not_a_pair, bad_name):
        assert completed.returncode == 2, completed.stderr
    assert b"alpah" in unknown_option.stderr
    assert b"alpha" in bad_value.stderr
    assert missing.returncode == 1
    assert b"nosuch" in missing.stderr


@pytest.mark.slow
def test_deleting_a_model_asks_for_its_name_or_takes_yes(cli: Cli) -> None:
    cli.ok("models", "create", "short-lived")

    unasked = cli("models", "delete", "short-lived", input=b"short-lived\n")  # not a terminal
    still_there = cli.ok("models", "show", "short-lived")
    deleted = cli("models", "delete", "short-lived", "--yes")

    assert unasked.returncode == 2
    assert b"--yes" in unasked.stderr
    assert "short-lived" in still_there
    assert deleted.returncode == 0, deleted.stderr
    assert cli("models", "show", "short-lived").returncode == 1


@pytest.mark.slow
def test_stats_prints_counts_activity_and_the_min_learns_warning(
    cli: Cli, server: str, tmp_path: Path
) -> None:
    cli.ok("train", "--label", "spam", str(write_eml_folder(tmp_path / "s", [spam_bytes(1)])))
    cli.ok("train", "--label", "ham", str(write_eml_folder(tmp_path / "h", [ham_bytes(2)])))
    cli.ok("models", "set", "default", "min_learns=2")

    table = cli.ok("stats")
    remote = json.loads(cli.ok("stats", "default", "--json", "--url", server))
    listed = json.loads(cli.ok("models", "list", "--json", "--url", server))
    remote_delete = cli("models", "delete", "default", "--yes", "--url", server)

    assert "ham    1" in table
    assert "spam   1" in table
    assert "warning: model has 1 ham, 1 spam; verdicts need 2 of each" in table
    assert "ACTIVITY" in table
    assert remote["classes"]["spam"]["messages"] == 1
    assert remote["min_learns"] == 2
    assert [model["name"] for model in listed["models"]] == ["default"]
    assert remote_delete.returncode == 0, remote_delete.stderr


@pytest.mark.slow
def test_a_personal_model_is_made_backed_shown_and_its_backing_model_kept(
    cli: Cli, server: str
) -> None:
    created = cli("models", "create", "alice", "--backed-by", "default")
    shown = cli.ok("models", "show", "alice")
    backing = cli.ok("models", "show", "default")
    refused = cli("models", "delete", "default", "--yes")
    remote = json.loads(
        cli.ok("models", "set", "alice", "feedback_trains_backing=true", "--json", "--url", server)
    )
    chained = cli("models", "create", "bob", "backed_by=alice", "--url", server)
    cleared = json.loads(cli.ok("models", "set", "alice", "backed_by=", "--json"))

    assert created.returncode == 0, created.stderr
    assert b"created model alice (ham, spam), backed by default" in created.stdout
    assert "backed by default: classified on both models' counts" in shown
    assert "backs alice" in backing
    assert refused.returncode == 1
    assert b"model_backs_others" not in refused.stderr  # the local command says it in words
    assert b"backs the models alice" in refused.stderr
    assert remote["backed_by"] == "default"
    assert remote["feedback_trains_backing"] is True
    assert chained.returncode == 2
    assert b"invalid_backing" in chained.stderr
    assert cleared["backed_by"] is None
