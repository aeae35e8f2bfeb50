"""The targets table's verdicts: ratios to bogofilter, limits, and agreement of the cores, as
`python -m bench.targets --verdicts` gives them for figures given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bench import run_bench

CORES = ["compiled", "python"]


def table(folder: Path, **figures: Any) -> dict[str, Any]:
    """The rows and markdown lines bench.targets makes of `figures` (see its `verdicts`)."""
    given = folder / "figures.json"
    given.write_text(json.dumps({"cores": CORES, **figures}))
    return run_bench("bench.targets", "--verdicts", str(given), folder=folder).report


def rows(folder: Path, *targets: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = table(folder, targets=list(targets))["targets"]
    return found


def test_a_ratio_target_is_met_at_bogofilters_rate_and_not_below_it(tmp_path: Path) -> None:
    (row,) = rows(
        tmp_path,
        {
            "name": "classify",
            "goal": "ratio",
            "measured": {"compiled": [100.0, 110.0, 90.0], "python": [60.0]},
            "bogofilter": [100.0],
        },
    )
    assert row["ratio_compiled"] == 1.0
    assert row["met_compiled"] is True
    assert row["ratio_python"] == 0.6
    assert row["met_python"] is False


def test_without_bogofilter_a_ratio_target_has_no_verdict(tmp_path: Path) -> None:
    (row,) = rows(
        tmp_path, {"name": "classify", "goal": "ratio", "measured": {"compiled": [100.0]}}
    )
    assert row["ratio_compiled"] is None
    assert row["met_compiled"] is None


def test_an_upper_limit_is_met_at_the_limit_and_not_above_it(tmp_path: Path) -> None:
    (row,) = rows(
        tmp_path,
        {
            "name": "p99",
            "goal": "at_most",
            "measured": {"compiled": [20.0], "python": [20.5]},
            "limit": 20,
        },
    )
    assert row["met_compiled"] is True
    assert row["met_python"] is False


def test_accuracy_is_met_only_when_both_cores_agree(tmp_path: Path) -> None:
    same, differ = rows(
        tmp_path,
        {"name": "roca", "goal": "same", "measured": {"compiled": [0.2], "python": [0.2]}},
        {"name": "roca", "goal": "same", "measured": {"compiled": [0.2], "python": [0.3]}},
    )
    assert same["met_compiled"] is True
    assert same["met_python"] is True
    assert differ["met_compiled"] is False


def test_the_markdown_table_has_one_line_per_target_and_the_same_columns(
    tmp_path: Path,
) -> None:
    targets = [
        {
            "name": "classify",
            "goal": "ratio",
            "measured": {"compiled": [90.0], "python": [50.0]},
            "bogofilter": [100.0],
        },
        {
            "name": "first classification",
            "goal": "at_most",
            "measured": {"compiled": None, "python": [1.0]},
            "limit": 2,
        },
    ]
    lines = table(tmp_path, targets=targets)["markdown"]
    assert len(lines) == 2 + len(targets)
    assert {line.count("|") for line in lines} == {9}
    assert "| 0.90 | 0.50 | no / no |" in lines[2]
    assert lines[3].endswith("| — / yes |")


def test_a_limit_row_shows_bogofilters_figure_without_a_ratio(tmp_path: Path) -> None:
    (row,) = rows(
        tmp_path,
        {
            "name": "first classification",
            "goal": "at_most",
            "measured": {"compiled": [1.5]},
            "bogofilter": [0.02],
            "limit": 2,
        },
    )
    assert row["ratio_compiled"] is None
    assert row["met_compiled"] is True


def test_a_failed_section_leaves_its_rows_empty_and_the_others_standing(tmp_path: Path) -> None:
    results = {"in_process": None, "http": None, "model_1m": None, "accuracy": None}
    found = table(tmp_path, results=results, kinds=["sqlite"])["targets"]
    assert found
    assert all(row["compiled"] is None and row["python"] is None for row in found)
    same = "same with both cores"  # the goal of the accuracy rows, met only when both agree
    assert all(row["met_compiled"] is None for row in found if row["goal"] != same)
