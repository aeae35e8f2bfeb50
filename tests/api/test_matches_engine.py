"""The API's probabilities equal the engine's (app.bayes) on the same training, to 1e-9."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.bayes.counts import CountTable
from app.bayes.naive_bayes import Classifier
from app.service.model_config import ModelConfig
from app.text import TokenizerLimits, tokenize_raw, tokenize_text
from tests.builders import ham_message, ham_text, spam_message, spam_text
from tests.cores import TOKEN_CORE

CLASSES = ("ham", "spam")


def training_set() -> list[tuple[str, dict[str, str]]]:
    examples: list[tuple[str, dict[str, str]]] = []
    for i in range(8):
        examples.append(("spam", {"raw": spam_message(i)} if i % 2 else {"text": spam_text(i)}))
        examples.append(("ham", {"raw": ham_message(i)} if i % 3 else {"text": ham_text(i)}))
    examples.append(("ham", {"text": spam_text(3)}))  # a confusing one, in both vocabularies
    return examples


def token_counts(message: dict[str, str], limits: TokenizerLimits) -> dict[str, int]:
    if "raw" in message:
        return tokenize_raw(message["raw"], limits=limits, core=TOKEN_CORE).token_counts
    return tokenize_text(message["text"], limits=limits, core=TOKEN_CORE).token_counts


def reference_classifier(
    examples: list[tuple[str, dict[str, str]]], config: ModelConfig, limits: TokenizerLimits
) -> Classifier:
    """The engine trained as the service trains: each message learns all its tokens but the
    ones `not_learned` leaves out at the model's log odds for its label just before (the word
    pairs of a message the model is already sure of, `pairs_until_log_odds`)."""
    table = CountTable(CLASSES)
    engine = config.to_engine()
    classifier = Classifier(table, engine)
    for label, message in examples:
        counts = token_counts(message, limits)
        index = CLASSES.index(label)
        margin = None
        if table.class_docs.min() > 0:  # both classes trained: the model weighs them
            scores = classifier.joint_log_likelihood(table.vectorize([counts]))[0]
            margin = float(scores[index] - scores[1 - index])
        left_out = engine.not_learned(margin)
        learned = {t: n for t, n in counts.items() if not (left_out and t.startswith(left_out))}
        table.add(index, table.intern(list(learned)), list(learned.values()))
    return classifier


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli", "robinson-fisher"])
@pytest.mark.parametrize(
    "options", [{}, {"alpha": 0.3, "prior": "laplace"}, {"min_df": 2, "max_vocab": 40}]
)
def test_api_probabilities_equal_the_engine_on_the_same_counts(
    client: TestClient, event_model: str, options: dict[str, Any]
) -> None:
    examples = training_set()
    client.post("/v1/models", json={"name": "m", "event_model": event_model, **options})
    for label, message in examples:
        response = client.post("/v1/models/m/train", json={"label": label, **message})
        assert response.status_code == 200, response.text
    config = ModelConfig.model_validate({"event_model": event_model, **options})
    limits = TokenizerLimits(max_scan_bytes=client.app.state.runtime.settings.max_scan_bytes)  # type: ignore[attr-defined]
    reference = reference_classifier(examples, config, limits)
    queries = [
        {"raw": spam_message(20)},
        {"raw": ham_message(21)},
        {"text": spam_text(22)},
        {"text": ham_text(23) + " " + spam_text(24)},
        {"text": "an entirely unknown vocabulary zebra quokka"},
    ]

    for query in queries:
        answer = client.post("/v1/models/m/classify", json=query)
        assert answer.status_code == 200, answer.text
        X = reference.table.vectorize([token_counts(query, limits)])
        expected = reference.predict_proba(X, event_model=event_model)[0]
        got = np.array([answer.json()["probabilities"][label] for label in CLASSES])
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-300)
        scores = reference.joint_log_likelihood(X, event_model=event_model)[0]
        got_scores = np.array([answer.json()["scores"][label] for label in CLASSES])
        np.testing.assert_allclose(got_scores, scores, rtol=1e-9)


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli", "robinson-fisher"])
def test_after_relabel_and_forget_the_api_equals_an_engine_trained_on_what_remains(
    client: TestClient, event_model: str
) -> None:
    examples = training_set()
    ids = []
    for label, message in examples:
        response = client.post("/v1/models/default/train", json={"label": label, **message})
        ids.append(response.json()["message_id"])
    client.post("/v1/models/default/train", json={"label": "ham", **examples[0][1]})
    client.delete(f"/v1/models/default/messages/{ids[1]}")
    remaining = [("ham", examples[0][1]), *examples[2:]]
    config = ModelConfig()  # the model's own options: each request picks its event model
    limits = TokenizerLimits(max_scan_bytes=client.app.state.runtime.settings.max_scan_bytes)  # type: ignore[attr-defined]
    reference = reference_classifier(remaining, config, limits)

    for query in ({"raw": spam_message(30)}, {"text": ham_text(31)}):
        answer = client.post(
            "/v1/models/default/classify", json={**query, "event_model": event_model}
        )
        X = reference.table.vectorize([token_counts(query, limits)])
        expected = reference.predict_proba(X, event_model=event_model)[0]
        got = np.array([answer.json()["probabilities"][label] for label in CLASSES])
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-300)
