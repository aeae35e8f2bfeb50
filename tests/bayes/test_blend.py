"""Merged counts: a personal table plus its backing table scores exactly as one table trained
on both tables' messages, for every event model; restricting to a message's tokens keeps
Robinson-Fisher's scores."""

from __future__ import annotations

import numpy as np
import pytest

from app.bayes.blend import merge_counts, restrict
from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier
from tests.bayes.engine_config import engine_config

CLASSES = ("ham", "spam")
HAM = [["meeting", "lunch", "report"], ["lunch", "family", "photos"], ["report", "budget"]]
SPAM = [["viagra", "cheap", "pills"], ["cheap", "loan", "now"], ["winner", "prize", "now"]]
PERSONAL_HAM = [["climbing", "rope", "lunch"], ["rope", "crag", "weekend"]]
PERSONAL_SPAM = [["crypto", "cheap", "wallet"], ["crypto", "airdrop"]]


def trained(
    messages: list[tuple[list[str], int]], *, tokens: list[str] | None = None
) -> CountTable:
    table = CountTable(CLASSES)
    if tokens:
        table.intern(tokens)
    for words, label in messages:
        ids = table.intern(sorted(set(words)))
        table.add(label, ids, np.ones(ids.size, dtype=np.int64))
    return table


def labelled(ham: list[list[str]], spam: list[list[str]]) -> list[tuple[list[str], int]]:
    return [(words, 0) for words in ham] + [(words, 1) for words in spam]


def counts_by_text(table: CountTable) -> dict[str, tuple[list[int], list[int]]]:
    return {
        text: (table.token_docs[:, i].tolist(), table.token_terms[:, i].tolist())
        for i, text in enumerate(table.tokens)
        if text
    }


def test_merged_counts_are_the_counts_of_both_models_messages() -> None:
    backing = trained(labelled(HAM, SPAM))
    personal = trained(labelled(PERSONAL_HAM, PERSONAL_SPAM))
    both = trained(labelled(HAM, SPAM) + labelled(PERSONAL_HAM, PERSONAL_SPAM))

    merged = merge_counts(backing, personal)

    assert counts_by_text(merged) == counts_by_text(both)
    np.testing.assert_array_equal(merged.class_docs, both.class_docs)
    np.testing.assert_array_equal(merged.class_terms, both.class_terms)
    assert counts_by_text(backing) == counts_by_text(trained(labelled(HAM, SPAM)))  # unchanged


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli", "robinson-fisher"])
def test_the_merged_table_scores_as_one_model_trained_on_both(event_model: str) -> None:
    backing = trained(labelled(HAM, SPAM))
    personal = trained(labelled(PERSONAL_HAM, PERSONAL_SPAM))
    both = trained(labelled(HAM, SPAM) + labelled(PERSONAL_HAM, PERSONAL_SPAM))
    merged = merge_counts(personal, backing)
    config = engine_config(event_model=event_model)
    message = [{"cheap": 1, "crypto": 2, "lunch": 1, "unknown": 1}, {"rope": 1, "report": 1}]

    expected = Classifier(both, config).predict_log_proba(both.vectorize(message))
    got = Classifier(merged, config).predict_log_proba(merged.vectorize(message))

    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_an_empty_personal_table_scores_as_its_backing_table() -> None:
    backing = trained(labelled(HAM, SPAM))
    merged = merge_counts(CountTable(CLASSES), backing)
    config = engine_config(event_model="multinomial")
    message = [{"cheap": 1, "lunch": 1}]

    np.testing.assert_allclose(
        Classifier(merged, config).predict_log_proba(merged.vectorize(message)),
        Classifier(backing, config).predict_log_proba(backing.vectorize(message)),
    )


def test_restricting_to_a_messages_tokens_keeps_robinson_fisher_scores() -> None:
    table = trained(labelled(HAM + PERSONAL_HAM, SPAM + PERSONAL_SPAM))
    message = {"cheap": 1, "crypto": 1, "rope": 3, "never-seen": 1}
    part = restrict(table, list(message))
    config = engine_config(event_model="robinson-fisher")

    assert sorted(part.tokens) == ["cheap", "crypto", "rope"]
    np.testing.assert_allclose(
        Classifier(part, config).predict_log_proba(part.vectorize([message])),
        Classifier(table, config).predict_log_proba(table.vectorize([message])),
    )


def test_merging_tables_of_other_classes_is_refused() -> None:
    with pytest.raises(ValueError, match="same classes"):
        merge_counts(CountTable(CLASSES), CountTable(("a", "b", "c")))


def test_a_weight_counts_each_personal_message_that_many_times() -> None:
    backing = trained(labelled(HAM, SPAM))
    personal = trained(labelled(PERSONAL_HAM, PERSONAL_SPAM))
    three_times = trained(labelled(HAM, SPAM) + 3 * labelled(PERSONAL_HAM, PERSONAL_SPAM))

    merged = merge_counts(personal, backing, base_weight=3)

    assert counts_by_text(merged) == counts_by_text(three_times)
    np.testing.assert_array_equal(merged.class_docs, three_times.class_docs)
    np.testing.assert_array_equal(merged.class_terms, three_times.class_terms)
    with pytest.raises(ValueError, match="base_weight"):
        merge_counts(personal, backing, base_weight=0)


def test_merging_a_messages_rows_gives_the_rows_of_the_merged_tables() -> None:
    from app.bayes.blend import merge_rows, rows_of

    backing = trained(labelled(HAM, SPAM))
    personal = trained(labelled(PERSONAL_HAM, PERSONAL_SPAM))
    texts = ["cheap", "crypto", "lunch", "never-seen", "rope", "now"]
    whole = merge_counts(personal, backing, base_weight=2)

    table, ids = merge_rows(
        CLASSES, texts, [rows_of(personal, texts), rows_of(backing, texts)], [2, 1]
    )

    assert sorted(table.tokens) == ["cheap", "crypto", "lunch", "now", "rope"]
    by_text = counts_by_text(whole)
    assert counts_by_text(table) == {text: by_text[text] for text in table.tokens}
    np.testing.assert_array_equal(table.class_docs, whole.class_docs)
    np.testing.assert_array_equal(table.class_terms, whole.class_terms)
    assert ids[0].tolist() == personal.lookup(list(table.tokens)).tolist()
    assert ids[1].tolist() == backing.lookup(list(table.tokens)).tolist()
