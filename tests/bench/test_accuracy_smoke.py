"""`python -m bench.accuracy` on a tiny slice of every corpus view: the harness runs end to
end and writes every section (sanity only: a slice this small measures nothing)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.bench import run_bench

VIEWS = ("spamassassin", "spamassassin-text", "trec06c-text", "sms", "csdmc2010-text")


@pytest.mark.corpus
@pytest.mark.timeout(600)
def test_the_accuracy_harness_runs_every_view_in_both_protocols(tmp_path: Path) -> None:
    run = run_bench("bench.accuracy", "--limit", "40", needs="csdmc2010", folder=tmp_path)
    report = run.report
    assert [view["view"] for view in report["views"]] == list(VIEWS)
    with_peer = report["bogofilter"] is not None
    for view in report["views"]:
        assert view["messages"] == 40
        for protocol in ("batch", "online"):
            part = view[protocol]
            systems = ("spamsift", "bogofilter") if with_peer else ("spamsift",)
            for system in systems:
                measures = part[system]
                # a batch test split of 8 messages may hold one class only: no ROC then
                assert _nan_or_within(measures["one_minus_roca_percent"], 100)
                assert _nan_or_within(measures["fnr_at_max_fpr"], 1)
                assert measures["top_errors"]
            if with_peer:
                assert "one_minus_roca_percent" in part["ratio_to_best_peer"]
        assert len(view["online"]["learning_curve"]) == 10
        online = view["online"]["spamsift"]  # 40 messages hold both classes
        assert 0 <= online["one_minus_roca_percent"] <= 100
    assert len(report["table"]) == 2 + 2 * len(VIEWS)


def _nan_or_within(value: float, high: float) -> bool:
    return math.isnan(value) or 0 <= value <= high
