"""`spamsift evaluate --online`: the immediate-feedback protocol, its train modes and measures."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.bayes.blend import merge_counts
from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier
from app.service.corpus import LabelledMessage
from app.service.evaluation import (
    CLASSES,
    Example,
    StreamExpiry,
    evaluate_online,
    fnr_at_false_positives,
    ranking_measures,
    score_stream,
    stream_order,
    tokenize_corpus,
)
from app.service.model_config import ModelConfig
from tests.builders import ham_text, spam_text
from tests.cli.test_evaluate import SPAMSIFT
from tests.cores import TOKEN_CORE

# Every token learned (`pairs_until_log_odds` 0): these tests rebuild each prefix's model from
# whole messages; what the writer leaves out when sure has its own tests
# (tests/api/test_pairs_when_unsure.py, tests/api/test_matches_engine.py).
CONFIG = ModelConfig(
    event_model="robinson-fisher", stop_words="none", pairs_until_log_odds=0
).to_engine()


def small_corpus(n: int = 40) -> list[LabelledMessage]:
    messages = [LabelledMessage(id=f"s/{i}", label="spam", text=spam_text(i)) for i in range(n)]
    messages += [LabelledMessage(id=f"h/{i}", label="ham", text=ham_text(i)) for i in range(n)]
    return messages


@pytest.fixture(scope="module")
def examples() -> list[Example]:
    return tokenize_corpus(small_corpus(), core=TOKEN_CORE)


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "small.jsonl"
    lines = [{"id": m.id, "label": m.label, "text": m.text} for m in small_corpus()]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_the_shuffle_sorts_by_the_sha256_of_seed_and_id(examples: list[Example]) -> None:
    shuffled = stream_order(examples, 7)
    expected = sorted(e.id for e in examples)
    expected.sort(key=lambda i: hashlib.sha256(f"7:{i}".encode()).digest())
    assert [e.id for e in shuffled] == expected
    assert [e.id for e in stream_order(examples, None)] == [e.id for e in examples]


@pytest.mark.parametrize("event_model", ["robinson-fisher", "multinomial", "bernoulli"])
def test_each_message_is_scored_by_the_model_of_the_messages_before_it(
    examples: list[Example], event_model: str
) -> None:
    config = replace(CONFIG, event_model=event_model)  # type: ignore[arg-type]
    stream = stream_order(examples, 3)
    scored = score_stream(stream, config)
    assert scored.trained == len(stream)
    # Rebuild the model of each prefix the ordinary way and score the next message with it.
    assert scored.scores[0] == 0.0
    for position in (0, 1, 2, 7, 40, len(stream) - 1):
        table = CountTable(CLASSES)
        for example in stream[:position]:
            ids = table.intern(list(example.tokens))
            order = np.argsort(ids)
            terms = np.fromiter(example.tokens.values(), np.int64)
            table.add(CLASSES.index(example.label), ids[order], terms[order])
        if table.class_docs.min() == 0:  # one class only: even odds, whatever the model
            assert scored.scores[position] == 0.0
            continue
        X = table.vectorize([stream[position].tokens])
        expected = Classifier(table, config).spam_log_odds(X)[0]
        assert scored.scores[position] == pytest.approx(expected, rel=1e-9, abs=1e-9), position


@pytest.mark.parametrize("event_model", ["robinson-fisher", "multinomial", "bernoulli"])
@pytest.mark.parametrize("weight", [1, 3])
def test_a_stream_into_a_backed_model_is_scored_as_classify_blends_the_two(
    examples: list[Example], event_model: str, weight: int
) -> None:
    """score_stream from a backing model: each message scored on the backing model's counts
    plus `weight` times those of the messages before it, as merge_counts blends them."""
    config = replace(CONFIG, event_model=event_model)  # type: ignore[arg-type]
    stream = stream_order(examples, 5)
    backing, personal = _table_of(stream[40:]), stream[:40]
    backing_before = (backing.token_docs.copy(), backing.class_docs.copy())
    scored = score_stream(personal, config, start=backing, weight=weight)
    assert np.array_equal(backing.token_docs, backing_before[0])  # the start is not changed
    assert np.array_equal(backing.class_docs, backing_before[1])
    for position in (0, 1, 9, len(personal) - 1):
        blend = merge_counts(_table_of(personal[:position]), backing, base_weight=weight)
        X = blend.vectorize([personal[position].tokens])
        expected = Classifier(blend, config).spam_log_odds(X)[0]
        assert scored.scores[position] == pytest.approx(expected, rel=1e-9, abs=1e-9), position
    tokens = {token for example in stream for token in example.tokens}
    assert scored.stored_tokens == len(tokens)


def _table_of(examples: list[Example]) -> CountTable:
    table = CountTable(CLASSES)
    for example in examples:
        ids = table.intern(list(example.tokens))
        order = np.argsort(ids)
        terms = np.fromiter(example.tokens.values(), np.int64)
        table.add(CLASSES.index(example.label), ids[order], terms[order])
    return table


def test_the_first_message_meets_an_empty_model_at_even_odds(examples: list[Example]) -> None:
    report = evaluate_online(examples[:1], corpus="x", config=CONFIG, shuffle_seed=None)
    (error,) = report.ranking.top_errors
    assert error.spam_log_odds == 0.0
    assert report.unsure == 1


def test_train_modes_train_all_then_fewer(examples: list[Example]) -> None:
    reports = {
        mode: evaluate_online(examples, corpus="x", config=CONFIG, train_mode=mode)
        for mode in ("all", "error", "unsure")
    }
    assert reports["all"].trained == len(examples)
    # an empty model scores even odds, an error: train on error starts at once
    assert 1 <= reports["error"].trained <= reports["unsure"].trained < len(examples)
    for report in reports.values():
        assert report.messages == len(examples)
        assert sum(point.messages for point in report.learning_curve) == len(examples)
        assert report.ranking.one_minus_roca_percent < 10


def test_fnr_at_false_positives_lets_the_worst_ham_through() -> None:
    scores = np.array([0.1, 0.2, 0.9, 0.8, 0.95, 0.85, 0.5])
    positive = np.array([False, False, False, False, True, True, True])
    assert fnr_at_false_positives(scores, positive, 0) == pytest.approx(2 / 3)  # above 0.9
    assert fnr_at_false_positives(scores, positive, 1) == pytest.approx(1 / 3)  # above 0.8
    assert fnr_at_false_positives(scores, positive, 4) == 0.0


def test_ranking_measures_give_intervals_around_the_estimate_and_the_worst_errors() -> None:
    rng = np.random.default_rng(1)
    positive = rng.random(400) < 0.4
    scores = rng.normal(3 * positive.astype(float), 1.0)
    ids = [f"m{i}" for i in range(400)]
    measures = ranking_measures(scores, positive, ids)
    low, high = measures.one_minus_roca_percent_ci95
    assert low <= measures.one_minus_roca_percent <= high
    assert measures.fnr_at_0fp >= measures.fnr_at_1fp >= measures.fnr_at_2fp
    worst_ham = max(np.flatnonzero(~positive), key=lambda i: scores[i])
    worst_spam = min(np.flatnonzero(positive), key=lambda i: scores[i])
    assert measures.top_errors[0].id == ids[worst_ham]
    assert measures.top_errors[5].id == ids[worst_spam]
    assert ranking_measures(scores, positive, ids) == measures  # fixed seed: reproducible


def test_the_online_command_prints_json_with_the_learning_curve(corpus_file: Path) -> None:
    completed = subprocess.run(
        [SPAMSIFT, "evaluate", str(corpus_file), "--online", "--json", "--train-mode", "unsure"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    report = json.loads(completed.stdout)
    assert report["train_mode"] == "unsure"
    assert report["order"] == "shuffled, seed 0"
    assert report["messages"] == 80
    assert len(report["learning_curve"]) == 10
    ranking = report["ranking"]
    for key in ("fnr_at_0fp", "fnr_at_1fp", "fnr_at_2fp", "fnr_at_1pct_fpr", "fnr_at_max_fpr"):
        assert 0 <= ranking[key] <= 1
    assert len(ranking["one_minus_roca_percent_ci95"]) == 2
    assert {e["label"] for e in ranking["top_errors"]} == {"spam", "ham"}


def test_the_online_command_in_file_order_prints_a_table(corpus_file: Path) -> None:
    completed = subprocess.run(
        [SPAMSIFT, "evaluate", str(corpus_file), "--online", "--in-order"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "online (corpus order)" in completed.stdout
    assert "learning curve" in completed.stdout
    assert "top-ranked errors" in completed.stdout


def evaluate_online_command(corpus_file: Path, *flags: str) -> str:
    """`spamsift evaluate CORPUS --online FLAGS...`'s standard output."""
    return subprocess.run(
        [SPAMSIFT, "evaluate", str(corpus_file), "--online", *flags],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def test_the_online_command_measures_token_expiry(
    corpus_file: Path, examples: list[Example]
) -> None:
    """--max-tokens runs the server's expiry between the messages: the model ends within the
    maximum (expiry ran after the last message), having deleted tokens on the way, where the
    same stream without expiry ends with more."""
    every = 8  # 80 messages: expiry runs last after the 80th
    expiry = ["--max-tokens", "15", "--expire-every", str(every)]
    report = json.loads(evaluate_online_command(corpus_file, "--json", *expiry))
    unbounded = evaluate_online(examples, corpus="x", config=ModelConfig().to_engine())

    assert report["expiry"] == {"max_tokens": 15, "every": every, "pair_probation": None}
    assert report["vocabulary"] <= 15 < unbounded.vocabulary
    assert report["expired_tokens"] > 0
    assert unbounded.expiry is None
    assert unbounded.expired_tokens == 0


def test_the_online_command_measures_pair_probation(
    corpus_file: Path, examples: list[Example]
) -> None:
    """--pair-probation runs the server's expiry of a model with that option between the
    messages: the stream ends with the tokens the same stream keeps in process under the
    same expiry, fewer than without it."""
    flags = ["--pair-probation", "10", "--expire-every", "5", "--pairs-until-log-odds", "0"]
    config = ModelConfig(pairs_until_log_odds=0).to_engine()
    expiry = StreamExpiry(max_tokens=None, every=5, pair_probation=10)

    report = json.loads(evaluate_online_command(corpus_file, "--json", *flags))
    in_process = evaluate_online(examples, corpus="x", config=config, expiry=expiry)
    unbounded = evaluate_online(examples, corpus="x", config=config)

    assert report["expiry"] == {"max_tokens": None, "every": 5, "pair_probation": 10}
    assert report["expired_tokens"] == in_process.expired_tokens > 0
    assert report["vocabulary"] == in_process.vocabulary < unbounded.vocabulary
    printed = evaluate_online_command(corpus_file, *flags)
    assert "token expiry: pairs on probation for 10 messages after every 5 messages" in printed


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--online", "--max-tokens", "0"], "argument --max-tokens: must be at least 1, got 0"),
        (["--online", "--max-tokens", "many"], "argument --max-tokens: expected a whole number"),
        (
            ["--online", "--max-tokens", "9", "--expire-every", "0"],
            "argument --expire-every: must be at least 1, got 0",
        ),
        (["--max-tokens", "9"], "--max-tokens needs --online"),
        (["--pair-probation", "9"], "--pair-probation needs --online"),
        (["--online", "--pair-probation", "0"], "argument --pair-probation: must be at least 1"),
        (
            ["--online", "--expire-every", "5"],
            "--expire-every needs --max-tokens or --pair-probation",
        ),
    ],
)
def test_token_expiry_flags_are_refused_clearly(
    corpus_file: Path, flags: list[str], said: str
) -> None:
    completed = subprocess.run(
        [SPAMSIFT, "evaluate", str(corpus_file), *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2
    assert said in completed.stderr
    assert completed.stdout == ""
