"""Builders for bayes tests: random count matrices and the messages they hold."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

REPO = Path(__file__).resolve().parents[2]
WORD = re.compile(r"[a-z0-9']+")


def random_counts(
    *,
    seed: int,
    n_messages: int = 120,
    n_tokens: int = 60,
    n_classes: int = 2,
    density: float = 0.15,
    max_count: int = 6,
) -> tuple[scipy.sparse.csr_array, np.ndarray]:
    """Return a term matrix (n_messages, n_tokens) and labels with every class present.

    Classes draw tokens with different rates, so the classes are learnable and scores vary.
    """
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n_messages) % n_classes)
    rates = rng.gamma(0.6, 1.0, size=(n_classes, n_tokens))
    rates *= density * n_tokens / rates.sum(axis=1, keepdims=True)
    present = rng.random((n_messages, n_tokens)) < np.minimum(rates[labels], 0.95)
    counts = present * rng.integers(1, max_count + 1, size=(n_messages, n_tokens))
    return scipy.sparse.csr_array(counts.astype(np.int64)), labels


def non_empty_columns(X: scipy.sparse.csr_array) -> np.ndarray:
    """Return the columns with at least one non-zero entry (scikit-learn's vocabulary)."""
    return np.flatnonzero(np.asarray((X > 0).sum(axis=0)).ravel() > 0)


def rows_of(X: scipy.sparse.csr_array) -> list[tuple[np.ndarray, np.ndarray]]:
    """Return each message as (token ids, term counts)."""
    return [
        (X.indices[X.indptr[i] : X.indptr[i + 1]], X.data[X.indptr[i] : X.indptr[i + 1]])
        for i in range(X.shape[0])
    ]


def corpus_messages(name: str) -> list[tuple[str, str]]:
    """Return (label, text) of a shared corpus, or skip the test saying where it looked."""
    root = Path(os.environ.get("SPAMSIFT_CORPORA", REPO.parent / "shared" / "corpora"))
    path = root / name / "messages.jsonl.gz"
    if not path.exists():
        pytest.skip(f"corpus {name} not found at {path} (set SPAMSIFT_CORPORA)")
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [(item["label"], item["text"]) for item in map(json.loads, lines)]


def word_counts(text: str) -> dict[str, int]:
    """Split text into lower-case words, as a stand-in for the real tokenizer."""
    counts: dict[str, int] = {}
    for word in WORD.findall(text.lower()):
        counts[word] = counts.get(word, 0) + 1
    return counts
