"""`spamsift check-mail-setup` on contrib/'s files installed as the guide installs them: what is
right says ok, each thing wrong one PROBLEM line, and the exit status says whether any is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from tests.mail.contrib import Installed, install

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="key files owned by other users: run as root, as an admin does"
)
FILTER_USER, REPORT_USER = "nobody", "mail"  # users every Debian system has


def set_up(cli: Cli, server: str, root: Path, *, filter_scope: str = "classify") -> Installed:
    filter_key = cli.ok("keys", "create", "--scope", filter_scope).split()[-1]
    report_key = cli.ok("keys", "create", "--scope", "train").split()[-1]
    return install(
        root,
        url=server,
        filter_key=filter_key,
        filter_user=FILTER_USER,
        report_key=report_key,
        report_user=REPORT_USER,
    )


def check(cli: Cli, installed: Installed) -> tuple[int, list[str]]:
    completed = cli(
        "check-mail-setup",
        "--env-file",
        str(installed.env_file),
        "--filter-user",
        FILTER_USER,
        "--report-user",
        REPORT_USER,
    )
    return completed.returncode, completed.stdout.decode().splitlines()


def problems(lines: list[str]) -> list[str]:
    return [line.removeprefix("PROBLEM").strip() for line in lines if line.startswith("PROBLEM")]


def test_a_setup_made_as_the_guide_says_passes(cli: Cli, server: str, open_folder: Path) -> None:
    installed = set_up(cli, server, open_folder / "root")

    status, lines = check(cli, installed)

    assert (status, problems(lines)) == (0, [])
    assert "ok      the filter key may classify with model default" in lines
    assert "ok      the report key may train model default, which exists" in lines
    assert lines[-1] == "ok      the mail scripts will work as configured"


def test_each_mistake_is_one_problem_line(cli: Cli, server: str, open_folder: Path) -> None:
    # The report key given to the filter too (as the old guide's steps did), and the filter
    # user unable to read its key file.
    installed = set_up(cli, server, open_folder / "root", filter_scope="train")
    status, lines = check(cli, installed)
    assert status == 1
    (refused,) = problems(lines)
    assert refused.startswith("the filter key is refused for classify on default: HTTP 403")

    os.chown(installed.filter_key, 0, 0)
    status, lines = check(cli, installed)
    assert status == 1
    assert problems(lines) == [
        f"{installed.filter_key} is not readable by {FILTER_USER} (root:root 0400)"
    ]


@pytest.mark.parametrize("fault", ["server down", "no model", "no settings", "spool"])
def test_what_stops_the_scripts_is_named(
    cli: Cli, server: str, open_folder: Path, fault: str
) -> None:
    installed = set_up(cli, server, open_folder / "root")
    if fault == "server down":
        installed.set_setting("SPAMSIFT_URL", "http://127.0.0.1:9")
    elif fault == "no model":
        installed.set_setting("SPAMSIFT_MODEL", "nosuchmodel")
    elif fault == "no settings":
        installed.env_file.unlink()
    else:
        os.chown(installed.spool, 0, 0)

    status, lines = check(cli, installed)

    assert status == 1
    expected = {
        "server down": "the server at http://127.0.0.1:9 does not answer",
        "no model": "model nosuchmodel does not exist",
        "no settings": f"cannot read {installed.env_file}",
        "spool": f"{REPORT_USER} cannot write to {installed.spool}",
    }[fault]
    assert any(problem.startswith(expected) for problem in problems(lines)), lines
