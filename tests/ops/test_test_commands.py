"""The README's two test commands: plain `pytest` leaves out the marked tests and says so,
`pytest --full` (what CI runs) and naming tests run everything."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import FOLDER_MARKERS, REPO

SAMPLE = "tests/api/test_human_messages.py"  # a file with SQLite and PostgreSQL variants


def collect(*options: str) -> str:
    """`pytest --collect-only` over SAMPLE as if it were the whole test tree."""
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", *options],
        cwd=REPO,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    return completed.stdout


def collected(output: str) -> tuple[int, int]:
    """(selected, deselected) from pytest's last line."""
    found = re.search(r"(\d+)(?:/(\d+))? tests? collected(?: \((\d+) deselected\))?", output)
    assert found, output[-1000:]
    total = int(found[2] or found[1])
    return int(found[1]), total - int(found[1])


@pytest.mark.slow  # three collections, each importing the app: ~10 s on an idle machine
def test_plain_pytest_leaves_out_the_marked_tests_and_says_how_to_run_them() -> None:
    quick = collect("-o", f"testpaths={SAMPLE}")
    full = collect("-o", f"testpaths={SAMPLE}", "--full")
    named = collect(SAMPLE)

    selected, left_out = collected(quick)
    assert left_out > 0
    assert selected > 0
    assert "Left out: the " in quick
    assert f"{left_out} PostgreSQL" in quick
    assert "pytest --full" in quick
    assert collected(full) == (selected + left_out, 0)
    assert collected(named) == (selected + left_out, 0)
    assert "Left out" not in full + named


@pytest.mark.slow  # a collection of the whole tree: ~7 s
def test_plain_pytest_does_not_even_collect_the_folders_it_leaves_out_whole() -> None:
    quick = collect()

    listed = {line.split("::")[0] for line in quick.splitlines() if "::" in line}
    assert any(path.startswith("tests/api/") for path in listed)
    for folder in FOLDER_MARKERS:
        assert not any(path.startswith(f"tests/{folder}/") for path in listed), folder
    assert "slow load, fault and property, browser, mail-server" in quick


def test_ci_runs_the_full_command_the_readme_gives() -> None:
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()

    assert 'pip install -e ".[test]" && pytest\n' in readme
    full = re.search(r"^ +(?:\S+=\S+ )*(pytest --full)$", readme, re.M)
    assert full, "the README gives the full test command"
    assert re.search(r"^pytest --full$", ci, re.M)
