"""`python -m bench.dashboard_stats` on a tiny model: the harness runs end to end and reports
every figure (sanity only: a model this small measures nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench import run_bench


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_dashboard_stats_bench_reports_stats_and_classify_percentiles(tmp_path: Path) -> None:
    run = run_bench(
        "bench.dashboard_stats", "--tokens", "5000", needs="spamassassin", folder=tmp_path
    )
    report = run.report
    assert report["tokens"] == 5000
    assert len(report["stats_after_training_s"]) == 3
    assert report["stats_same_generation_s"] > 0
    for row in report["classify_ms"].values():
        assert row["errors"] == 0
        assert row["p99"] >= row["p50"] > 0
