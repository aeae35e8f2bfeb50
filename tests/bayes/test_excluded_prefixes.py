"""Tokens starting with an excluded prefix (a derived token family turned off) are not in V:
scored as if they had never been trained, incrementally as after a full rebuild."""

from __future__ import annotations

import numpy as np
import pytest

from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier
from app.bayes.tokens import TokenIndex
from tests.bayes.engine_config import engine_config

CLASSES = ("ham", "spam")
PREFIXES = ("pair:", "size:")
MESSAGES = [
    ("spam", {"cheap": 2, "pills": 1, "pair:cheap pills": 1, "size:7": 1}),
    ("ham", {"meeting": 1, "monday": 1, "pair:meeting monday": 1, "size:9": 1}),
    ("spam", {"cheap": 1, "offer": 1, "pair:cheap offer": 1, "size:7": 1}),
    ("ham", {"monday": 2, "notes": 1, "pair:monday notes": 1, "size:10": 1, "sizeable": 1}),
]
QUERIES = [
    {"cheap": 1, "pair:cheap pills": 1, "size:7": 1},
    {"monday": 1, "sizeable": 1, "pair:meeting monday": 2},
]


def trained(messages: list[tuple[str, dict[str, int]]]) -> CountTable:
    table = CountTable(CLASSES)
    for label, counts in messages:
        table.add(CLASSES.index(label), table.intern(list(counts)), list(counts.values()))
    return table


def matrix(table: CountTable, queries: list[dict[str, int]]) -> np.ndarray:
    X = np.zeros((len(queries), table.n_tokens))
    for row, counts in enumerate(queries):
        for token, count in counts.items():
            token_id = int(table.lookup([token])[0])
            if token_id >= 0:
                X[row, token_id] = count
    return X


def test_a_token_index_finds_the_texts_starting_with_prefixes() -> None:
    index = TokenIndex.from_texts(["pair:a b", "size:3", "sizeable", "pa", "pair:", "ünï"])

    assert index.starting_with(PREFIXES).tolist() == [True, True, False, False, True, False]
    assert index.starting_with(("ü",)).tolist() == [False] * 5 + [True]
    assert not index.starting_with(()).any()


def test_a_token_index_checks_only_the_ids_asked_for() -> None:
    index = TokenIndex.from_texts(["pair:a b", "size:3", "sizeable", "pa", "pair:", "ünï"])
    index.grow(8)  # ids 6 and 7 not placed yet: no text starts with anything
    token_ids = np.array([4, 2, 4, 7, 0, 5, 6], dtype=np.int64)

    found = index.starting_with(PREFIXES, token_ids)

    assert found.tolist() == [True, False, True, False, True, False, False]
    assert index.starting_with(("ü",), token_ids).tolist() == [False] * 5 + [True, False]
    assert index.starting_with(PREFIXES, np.zeros(0, dtype=np.int64)).tolist() == []


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli", "robinson-fisher"])
def test_excluded_tokens_score_as_if_never_trained_incrementally_too(event_model: str) -> None:
    without = [
        (label, {t: c for t, c in counts.items() if not t.startswith(PREFIXES)})
        for label, counts in MESSAGES
    ]
    reference = trained(without)
    expected = Classifier(reference, engine_config(event_model=event_model)).predict_proba(
        matrix(reference, QUERIES)
    )
    table = trained(MESSAGES[:2])
    classifier = Classifier(
        table, engine_config(event_model=event_model, excluded_prefixes=PREFIXES)
    )
    classifier.predict_proba(matrix(table, QUERIES))  # caches built; the rest is incremental
    for label, counts in MESSAGES[2:]:
        table.add(CLASSES.index(label), table.intern(list(counts)), list(counts.values()))

    incremental = classifier.predict_proba(matrix(table, QUERIES))
    rebuilt = Classifier(
        table, engine_config(event_model=event_model, excluded_prefixes=PREFIXES)
    ).predict_proba(matrix(table, QUERIES))

    np.testing.assert_allclose(incremental, expected, rtol=1e-12)
    np.testing.assert_allclose(rebuilt, expected, rtol=1e-12)
    assert classifier.vocabulary_size == reference.n_tokens


def test_an_empty_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="excluded_prefixes"):
        engine_config(excluded_prefixes=("",))
