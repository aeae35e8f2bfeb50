"""`python -m bench.personal` on a tiny slice of every user's mailbox: the harness runs end to
end and reports every condition (sanity only: a slice this small measures nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench import run_bench


@pytest.mark.corpus
@pytest.mark.timeout(600)
def test_the_personal_bench_measures_every_user_alone_global_and_blended(tmp_path: Path) -> None:
    run = run_bench(
        "bench.personal", "--limit", "120", "--trainings", "10,40", "--seeds", "2",
        needs="csdmc2010", folder=tmp_path,
    )  # fmt: skip
    report = run.report
    assert [user["user"] for user in report["users"]] == [
        "spamassassin-hard",
        "csdmc2010",
        "trec06c",
        "sms",
    ]
    for user in report["users"]:
        assert user["test_messages"] > 0
        assert 0 <= user["global"]["one_minus_roca_percent"] <= 100
        assert [row["n"] for row in user["trainings"]] == [10, 40]
        for row in user["trainings"]:
            blend = row["blend"]  # the blend always scores: the global model has both classes
            assert blend["one_minus_roca_percent"]["min"] <= blend["one_minus_roca_percent"]["max"]
            assert 0 <= blend["fnr_at_1pct_fpr"]["median"] <= 1
    assert "| user | personal trainings |" in run.stdout


@pytest.mark.corpus
@pytest.mark.timeout(600)
def test_the_personal_bench_streams_enron_users_personal_global_and_blended(
    tmp_path: Path,
) -> None:
    run = run_bench(
        "bench.personal", "--enron", "--limit", "150", "--users", "enron2", "--weights", "1,4",
        needs="enron-spam", folder=tmp_path,
    )  # fmt: skip
    (user,) = run.report["users"]
    assert user["user"] == "enron2"
    assert user["messages"] == 150
    assert user["global_messages"] == 5 * 150  # the other five users' streams
    assert list(user["conditions"]) == ["personal", "global", "blend", "blend_x4"]
    for name, measured in user["conditions"].items():
        assert 0 <= measured["one_minus_roca_percent"] <= 100, name
        assert 0 <= measured["fnr_at_1pct_fpr"] <= 1, name
        assert 0 <= measured["unsure_share"] <= 1, name
        assert measured["early"]["messages"] == 150
    # the blend holds the global model's tokens and the user's
    conditions = user["conditions"]
    assert conditions["blend"]["tokens"] >= conditions["global"]["tokens"]
    assert conditions["blend"]["tokens"] >= conditions["personal"]["tokens"]
    assert "| user | condition |" in run.stdout
