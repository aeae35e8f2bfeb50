"""The time budget of TokenizerLimits: a deadline on a clock the caller hands in.

A counting clock (one tick per look) makes these tests exact, with no timing involved.
"""

from collections.abc import Callable
from dataclasses import replace

from app.text import TokenizerLimits, tokenize_raw, tokenize_text

# The tests take `token_core`: each core keeps the budget.


MESSAGE = (
    b"From: a@example.org\nSubject: hello\nContent-Type: multipart/mixed; boundary=b\n\n"
    b"--b\n\nfirst part\n--b\n\nsecond part\n--b\n\nthird part\n--b--\n"
)


def ticking() -> Callable[[], float]:
    """A clock that advances by 1 each time it is read."""
    ticks = iter(range(1_000_000))
    return lambda: float(next(ticks))


def test_without_a_clock_there_is_no_budget(token_core):
    limits = TokenizerLimits(deadline=-1.0)
    assert "time_budget" not in tokenize_raw(MESSAGE, limits=limits, core=token_core).defects


def test_a_passed_deadline_stops_before_anything_is_tokenized(token_core):
    limits = TokenizerLimits(deadline=0.0, clock=lambda: 0.0)
    result = tokenize_raw(MESSAGE, limits=limits, core=token_core)
    assert result.token_counts == {}
    assert result.defects == ("time_budget",)
    text = tokenize_text("some words here", limits=limits, core=token_core)
    assert (text.token_counts, text.defects) == ({}, ("time_budget",))


def test_the_deadline_is_looked_at_between_parts_and_what_was_read_is_kept(token_core):
    full = tokenize_raw(MESSAGE, core=token_core)
    cut_short = []
    for deadline in range(1, 12):
        limits = TokenizerLimits(deadline=float(deadline), clock=ticking())
        result = tokenize_raw(MESSAGE, limits=limits, core=token_core)
        if "time_budget" in result.defects:
            # What was tokenized is a prefix of the whole message's tokens.
            assert list(result.token_counts) == list(full.token_counts)[: len(result.token_counts)]
            cut_short.append(result)
        else:
            assert result == full
    assert cut_short, "some deadline must fall inside the message"
    assert any("first" in r.token_counts and "third" not in r.token_counts for r in cut_short)


def test_a_far_deadline_changes_nothing(token_core):
    limits = replace(TokenizerLimits(), deadline=1e18, clock=ticking())
    assert tokenize_raw(MESSAGE, limits=limits, core=token_core) == tokenize_raw(
        MESSAGE, core=token_core
    )
