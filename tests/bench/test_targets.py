"""The targets table's verdicts: ratios to bogofilter, limits, and agreement of the cores."""

from __future__ import annotations

from bench.targets import Target, markdown, target_rows
from bench.timing import summary


def test_a_ratio_target_is_met_at_bogofilters_rate_and_not_below_it() -> None:
    target = Target(
        "classify",
        "ratio",
        {"compiled": summary([100.0, 110.0, 90.0]), "python": summary([60.0])},
        summary([100.0]),
    )
    assert target.ratio("compiled") == 1.0
    assert target.met("compiled") is True
    assert target.ratio("python") == 0.6
    assert target.met("python") is False


def test_without_bogofilter_a_ratio_target_has_no_verdict() -> None:
    target = Target("classify", "ratio", {"compiled": summary([100.0])}, None)
    assert target.ratio("compiled") is None
    assert target.met("compiled") is None


def test_an_upper_limit_is_met_at_the_limit_and_not_above_it() -> None:
    target = Target(
        "p99", "at_most", {"compiled": summary([20.0]), "python": summary([20.5])}, limit=20
    )
    assert target.met("compiled") is True
    assert target.met("python") is False


def test_accuracy_is_met_only_when_both_cores_agree() -> None:
    same = Target("roca", "same", {"compiled": summary([0.2]), "python": summary([0.2])})
    differ = Target("roca", "same", {"compiled": summary([0.2]), "python": summary([0.3])})
    assert same.met("compiled") is True
    assert same.met("python") is True
    assert differ.met("compiled") is False


def test_the_markdown_table_has_one_line_per_target_and_the_same_columns() -> None:
    targets = [
        Target(
            "classify",
            "ratio",
            {"compiled": summary([90.0]), "python": summary([50.0])},
            summary([100.0]),
        ),
        Target(
            "first classification", "at_most", {"compiled": None, "python": summary([1.0])}, limit=2
        ),
    ]
    lines = markdown(targets, ("compiled", "python"))
    assert len(lines) == 2 + len(targets)
    assert {line.count("|") for line in lines} == {9}
    assert "| 0.90 | 0.50 | no / no |" in lines[2]
    assert lines[3].endswith("| — / yes |")


def test_a_limit_row_shows_bogofilters_figure_without_a_ratio() -> None:
    target = Target(
        "first classification", "at_most", {"compiled": summary([1.5])}, summary([0.02]), limit=2
    )
    assert target.ratio("compiled") is None
    assert target.met("compiled") is True


def test_a_failed_section_leaves_its_rows_empty_and_the_others_standing() -> None:
    results = {"in_process": None, "http": None, "model_1m": None, "accuracy": None}
    rows = target_rows(results, ("compiled", "python"), ["sqlite"])
    assert rows
    assert all(row.measured == {"compiled": None, "python": None} for row in rows)
    assert all(row.met("compiled") is None for row in rows if row.goal != "same")
