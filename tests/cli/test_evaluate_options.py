"""`spamsift evaluate --rf-*`: the Robinson-Fisher options reach the scorer."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.builders import ham_text, spam_text
from tests.cli.test_evaluate import SPAMSIFT


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "small.jsonl"
    lines = [{"id": f"s/{i}", "label": "spam", "text": spam_text(i)} for i in range(60)]
    lines += [{"id": f"h/{i}", "label": "ham", "text": ham_text(i)} for i in range(60)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def robinson_fisher(corpus: Path, *options: str) -> dict[str, float]:
    completed = subprocess.run(
        [SPAMSIFT, "evaluate", str(corpus), "--json", "--event-model", "robinson-fisher", *options],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    (scorer,) = json.loads(completed.stdout)["scorers"]
    return scorer  # type: ignore[no-any-return]


def test_the_default_robinson_fisher_decides_every_test_message(corpus: Path) -> None:
    assert robinson_fisher(corpus)["unsure"] == 0


@pytest.mark.parametrize(
    "options",
    [
        # a strength of 1000 pulls every token to x = 0.5: every message is unsure
        ["--rf-strength", "1000"],
        # |f - 0.5| < 0.4999 for tokens of fewer than 150 messages: every token is ignored
        ["--rf-min-dev", "0.4999"],
    ],
)
def test_rf_options_reach_the_scorer(corpus: Path, options: list[str]) -> None:
    scorer = robinson_fisher(corpus, *options)

    test_messages = sum(1 for i in range(60) for prefix in ("s", "h") if _in_test(f"{prefix}/{i}"))
    assert scorer["unsure"] == test_messages


def test_rf_assumed_moves_unknown_evidence_toward_spam(corpus: Path) -> None:
    # with s = 1000 every token's probability is about x: x = 0.95 calls all mail spam
    scorer = robinson_fisher(corpus, "--rf-strength", "1000", "--rf-assumed", "0.95")

    assert scorer["false_positive_rate"] == 1.0
    assert scorer["recall"] == 1.0


def test_an_out_of_range_rf_option_is_refused_naming_it(corpus: Path) -> None:
    completed = subprocess.run(
        [SPAMSIFT, "evaluate", str(corpus), "--rf-min-dev", "0.7"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert "--rf-min-dev" in completed.stderr


def _in_test(message_id: str) -> bool:
    from app.service.evaluation import is_test_message

    return is_test_message(message_id)


def online_vocabulary(corpus: Path, *options: str) -> int:
    completed = subprocess.run(
        [SPAMSIFT, "evaluate", str(corpus), "--json", "--online", "--in-order", *options],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return int(json.loads(completed.stdout)["vocabulary"])


@pytest.mark.slow  # four spamsift processes
def test_the_token_families_are_flags_that_leave_their_tokens_out(corpus: Path) -> None:
    every = online_vocabulary(corpus)
    no_pairs = online_vocabulary(corpus, "--word-pairs", "false")
    words = online_vocabulary(corpus, "--word-pairs", "false", "--shape-tokens", "false")
    refused = subprocess.run(
        [SPAMSIFT, "evaluate", str(corpus), "--word-pairs", "sometimes"],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert every > no_pairs > words
    assert refused.returncode == 2
    assert "--word-pairs" in refused.stderr


@pytest.mark.slow  # two spamsift processes
def test_pairs_until_log_odds_is_a_flag_that_stores_fewer_pairs(corpus: Path) -> None:
    every = online_vocabulary(corpus, "--pairs-until-log-odds", "0")
    until_sure = online_vocabulary(corpus, "--pairs-until-log-odds", "1.5")
    words = online_vocabulary(corpus, "--word-pairs", "false")

    assert every > until_sure > words
