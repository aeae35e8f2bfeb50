"""The engine config these tests were written against: SpamBayes' Robinson-Fisher values
(s 0.45, x 0.5, min_dev 0.1), no stop words, naive Bayes by default. The engine has no
defaults of its own; the service's ModelConfig declares the served ones."""

from __future__ import annotations

from typing import Any

from app.bayes.naive_bayes import NaiveBayesConfig

TEST_VALUES: dict[str, Any] = {
    "event_model": "multinomial",
    "alpha": 1.0,
    "prior": "mle",
    "min_df": 1,
    "max_vocab": None,
    "stop_words": frozenset(),
    "rf_strength": 0.45,
    "rf_assumed": 0.5,
    "rf_min_dev": 0.1,
    "spam_threshold": 0.9,
    "ham_threshold": 0.1,
}


def engine_config(**options: Any) -> NaiveBayesConfig:
    return NaiveBayesConfig(**{**TEST_VALUES, **options})
