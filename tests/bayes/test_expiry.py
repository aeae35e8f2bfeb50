"""The expiry rule alone: dead tokens, then the least recently seen, the least informative
first among equals, then the one made first."""

from __future__ import annotations

import numpy as np

from app.bayes.expiry import choose_expired


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


# Six tokens, ids 10..15; (ham, spam) message counts of each, over 10 ham and 10 spam.
IDS = ints(10, 11, 12, 13, 14, 15)
DOCS = np.array([[0, 5, 1, 4, 2, 2], [0, 0, 1, 4, 2, 2]], dtype=np.int64)
TERMS = DOCS * 2
LAST_SEEN = ints(9, 1, 1, 1, 3, 3)
CLASS_DOCS = ints(10, 10)


def test_dead_tokens_go_whatever_the_maximum() -> None:
    choice = choose_expired(IDS, DOCS, TERMS, LAST_SEEN, CLASS_DOCS, max_tokens=100)
    assert choice.expired.tolist() == [10]  # no count left, though seen last
    assert choice.kept == 5


def test_past_the_maximum_the_oldest_go_the_least_informative_first() -> None:
    # Seen at 1: 11 (5 ham, 0 spam: spread 0.5), 12 and 13 (as often in each: spread 0).
    # 12 and 13 tie on both: 12 was made first (the lower id).
    two = choose_expired(IDS, DOCS, TERMS, LAST_SEEN, CLASS_DOCS, max_tokens=3)
    one = choose_expired(IDS, DOCS, TERMS, LAST_SEEN, CLASS_DOCS, max_tokens=4)
    assert two.expired.tolist() == [10, 12, 13]
    assert one.expired.tolist() == [10, 12]
    assert (two.kept, one.kept) == (3, 4)


def test_the_order_tokens_were_made_in_breaks_the_last_tie() -> None:
    made = ints(0, 1, 5, 2, 3, 4)  # 12 was deleted once and made again after 13
    choice = choose_expired(IDS, DOCS, TERMS, LAST_SEEN, CLASS_DOCS, max_tokens=4, made=made)
    assert choice.expired.tolist() == [10, 13]


def test_expiring_to_zero_takes_every_token() -> None:
    choice = choose_expired(IDS, DOCS, TERMS, LAST_SEEN, CLASS_DOCS, max_tokens=0)
    assert choice.expired.tolist() == IDS.tolist()
    assert choice.kept == 0
