"""The benchmark suite's quick mode runs every part and writes every section (no timings
are asserted: speed goals live in bench/, not in tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench import run_bench

PARTS = ("scoring", "tokenize", "http", "bogofilter", "memory", "models", "targets")


@pytest.mark.corpus
@pytest.mark.timeout(900)
def test_quick_bench_writes_every_section(tmp_path: Path) -> None:
    run = run_bench("bench", "--quick", needs="spamassassin", folder=tmp_path, timeout_seconds=880)
    report = run.report
    assert report["quick"] is True
    assert set(report["parts"]) == set(PARTS)
    for name in PARTS:
        part = report["parts"][name]
        assert "error" not in part, part.get("traceback")
        assert part["table"], f"{name} printed no table"
    assert {"multinomial", "bernoulli", "robinson-fisher"} <= set(report["parts"]["scoring"])
    assert set(report["parts"]["tokenize"]["linearity"]) == {"long words", "deep html", "base64"}
    servers = report["parts"]["http"]["servers"]
    assert "sqlite/workers=1" in servers
    for measured in servers.values():
        if "skipped" not in measured:
            assert measured["classify_single"]["50"]["errors"] == 0
    peer = report["parts"]["bogofilter"]
    assert "spamsift_in_process_sqlite_1_process" in peer
    assert "spamsift_http_2_workers_sqlite" in peer
    assert "status" in peer["bogofilter"]  # found, installed, or why it is absent
    assert report["parts"]["memory"]["sqlite"]["rss_loaded_bytes"] > 0
    targets = report["parts"]["targets"]
    for core in targets["cores"]:
        assert targets["http"][core]["token_core"] == core  # the server said which core ran
        open_loop = targets["http"][core]["classify_single_open_loop"]
        assert open_loop["share_of_saturated_rate"] == 0.8
    assert all(set(targets["cores"]) <= set(row) for row in targets["targets"])
    assert any(line.startswith("| target | goal |") for line in targets["markdown"])
    assert not targets.get("errors"), targets.get("errors")
    assert "bench" in run.stdout
