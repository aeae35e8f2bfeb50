"""`spamsift evaluate`: the split rule, the metrics, and the command itself on a real corpus."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from app.service.evaluation import fnr_at_fpr, is_test_message, roc_auc
from tests.conftest import corpus_path

# The console script installed beside this interpreter, as a user runs it.
SPAMSIFT = str(Path(sys.executable).with_name("spamsift"))


def test_the_test_split_is_the_fifth_whose_sha256_is_divisible_by_five():
    ids = [f"easy_ham/{n:05d}" for n in range(2000)]
    expected = [int(hashlib.sha256(i.encode()).hexdigest(), 16) % 5 == 0 for i in ids]
    assert [is_test_message(i) for i in ids] == expected
    assert 0.17 < sum(expected) / len(ids) < 0.23


@pytest.mark.parametrize("seed", range(5))
def test_roc_auc_equals_scikit_learn_with_ties(seed):
    rng = np.random.default_rng(seed)
    positive = rng.random(500) < 0.3
    scores = np.round(rng.normal(positive.astype(float), 1.0), 1)  # rounding makes ties
    assert roc_auc(scores, positive) == pytest.approx(roc_auc_score(positive, scores), rel=1e-12)


def test_fnr_at_zero_false_positives_counts_spam_tied_with_the_worst_ham_as_missed():
    scores = np.array([0.1, 0.2, 0.9, 0.95, 0.9, 0.5])
    positive = np.array([False, False, False, True, True, True])
    # the worst ham scores 0.9: spam at 0.95 is caught, spam at 0.9 (tie) and 0.5 are missed
    assert fnr_at_fpr(scores, positive, max_fpr=0.001) == pytest.approx(2 / 3)


def test_fnr_at_fpr_lets_one_ham_through_per_thousand():
    ham = np.linspace(0, 1, 2000)
    spam = np.array([0.9993, 0.9999, 0.5])
    scores = np.concatenate([ham, spam])
    positive = np.concatenate([np.zeros(2000, bool), np.ones(3, bool)])
    # 2 of 2000 ham may be called spam: the threshold is the third-highest ham (~0.9990)
    assert fnr_at_fpr(scores, positive, max_fpr=0.001) == pytest.approx(1 / 3)


@pytest.mark.corpus
def test_the_evaluate_command_reports_every_scorer_on_the_sms_corpus():
    path = corpus_path("sms-spam-collection")
    completed = subprocess.run(
        [SPAMSIFT, "evaluate", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(completed.stdout)
    assert report["corpus"] == "sms-spam-collection"
    assert report["train_messages"] + report["test_messages"] == 5574
    assert [s["event_model"] for s in report["scorers"]] == [
        "multinomial",
        "bernoulli",
        "robinson-fisher",
    ]
    for scorer in report["scorers"]:
        assert scorer["roc_auc"] > 0.98
        assert 0 <= scorer["fnr_at_max_fpr"] <= 1


def test_evaluate_says_which_file_is_missing(tmp_path):
    completed = subprocess.run(
        [SPAMSIFT, "evaluate", str(tmp_path / "nope.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 3
    assert "no such corpus file" in completed.stderr
