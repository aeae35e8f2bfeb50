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


SYSTEMS = ("spamsift", "multinomial_nb", "bernoulli_nb")


@pytest.mark.corpus
@pytest.mark.timeout(600)
def test_the_accuracy_harness_streams_mail_in_order_beside_its_peers(tmp_path: Path) -> None:
    """trec07p-early in delivery order and one enron-spam user in arrival order, each message
    scored then trained by spamsift, scikit-learn's two naive Bayes and bogofilter."""
    run = run_bench(
        "bench.accuracy", "--views", "", "--streams", "trec07p-inorder,enron1",
        "--limit", "250", needs="trec07p-early", folder=tmp_path,
    )  # fmt: skip
    report = run.report
    assert report["views"] == []
    streams = report["streams"]
    assert [stream["stream"] for stream in streams] == ["trec07p-inorder", "enron1"]
    with_peer = report["bogofilter"] is not None
    systems = (*SYSTEMS, "bogofilter") if with_peer else SYSTEMS
    for stream in streams:
        assert stream["messages"] == 250
        assert stream["spam"] + stream["ham"] == 250
        assert stream["spam"] > 0
        assert stream["ham"] > 0
        assert tuple(stream["systems"]) == systems
        for name, measured in stream["systems"].items():
            assert 0 <= measured["one_minus_roca_percent"] <= 100, name
            for rate in ("fnr_at_max_fpr", "fnr_at_1pct_fpr", "spam_recall", "ham_recall"):
                assert 0 <= measured[rate] <= 1, (name, rate)
            assert 0 <= measured["unsure_share"] <= 1
            assert measured["tokens"] > 0, name  # a model holds what it was trained with
            assert measured["cpu_ms_per_message"] > 0, name
            assert [s["messages"] for s in measured["stretches"]] == [50] * 5
            new = measured["new_spam"]
            assert new["new"]["spam"] > 0
            assert (
                new["new"]["spam"] + new["after_new"]["spam"] + new["other"]["spam"]
                <= (stream["spam"])
            )
            assert measured["top_errors"]
        # scikit-learn learns every token of every message; spamsift all but the word pairs of
        # messages it was already sure of (pairs_until_log_odds), so no more and most of them
        spamsift_tokens = stream["systems"]["spamsift"]["tokens"]
        every_token = stream["systems"]["multinomial_nb"]["tokens"]
        assert every_token / 2 < spamsift_tokens <= every_token
        assert set(stream["ratio_to_best_peer"]) == {"one_minus_roca_percent", "fnr_at_max_fpr"}
    enron = streams[1]["systems"]["spamsift"]["top_errors"]
    assert all(error["id"].startswith("enron1/") for error in enron)  # one user's mailbox
    # two tables (accuracy and cost; drift), a blank line between: a row per stream and system
    assert len(report["stream_table"]) == 2 + 2 * len(systems) + 1 + 2 + 2 * len(systems)
