"""bench/lab/label_noise.py: copies labelled both ways found, misordered pairs counted as
1-ROCA counts them."""

from __future__ import annotations

import numpy as np

from app.service.corpus import LabelledMessage
from app.service.evaluation import roc_auc
from bench.lab.label_noise import labelled_both_ways, misordered


def raw(sender: str, subject: str, to: str) -> bytes:
    return f"From: {sender}\r\nTo: {to}\r\nSubject: {subject}\r\n\r\nbody\r\n".encode()


def test_copies_of_one_mailing_with_both_labels_are_found() -> None:
    messages = [
        LabelledMessage(id="1", label="ham", raw=raw("News <n@x.example>", "Issue 1", "a@y")),
        LabelledMessage(id="2", label="spam", raw=raw("news <n@x.example>", "issue  1", "b@y")),
        LabelledMessage(id="3", label="spam", raw=raw("News <n@x.example>", "Issue 2", "a@y")),
        LabelledMessage(id="4", label="spam", raw=raw("News <n@x.example>", "Issue 2", "b@y")),
        LabelledMessage(id="5", label="ham", raw=raw("Bob <b@z.example>", "", "a@y")),
        LabelledMessage(id="6", label="spam", raw=raw("Bob <b@z.example>", "", "b@y")),
    ]
    assert labelled_both_ways(messages).tolist() == [True, True, False, False, False, False]


def test_misordered_pairs_are_the_numerator_of_one_minus_roca() -> None:
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 6, 40).astype(np.float64)  # many ties
    spam = rng.random(40) < 0.5
    wrong = misordered(scores, spam)
    brute = sum(
        1.0 if h > s else 0.5 if h == s else 0.0 for s in scores[spam] for h in scores[~spam]
    )
    pairs = spam.sum() * (~spam).sum()
    assert wrong[spam].sum() == wrong[~spam].sum() == brute
    assert np.isclose(brute / pairs, 1 - roc_auc(scores, spam))
