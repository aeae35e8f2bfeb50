"""`python -m bench.dashboard_stats` on a tiny model: the harness runs end to end and reports
every figure (sanity only: a model this small measures nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.corpus
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_dashboard_stats_bench_reports_stats_and_classify_percentiles(tmp_path: Path) -> None:
    corpora = Path(os.environ.get("SPAMSIFT_CORPORA", REPO.parent / "shared" / "corpora"))
    if not (corpora / "spamassassin" / "messages.jsonl.gz").exists():
        pytest.skip(f"no shared corpora at {corpora}")
    out = tmp_path / "stats.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.dashboard_stats", "--tokens", "5000", "--json", str(out)],
        cwd=REPO,
        env={**os.environ, "SPAMSIFT_CORPORA": str(corpora)},
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["tokens"] == 5000
    assert len(report["stats_after_training_s"]) == 3
    assert report["stats_same_generation_s"] > 0
    for row in report["classify_ms"].values():
        assert row["errors"] == 0
        assert row["p99"] >= row["p50"] > 0
