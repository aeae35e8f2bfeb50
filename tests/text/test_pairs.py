"""Word pairs (orthogonal sparse bigrams of adjacent words): what they are and their bounds."""

import time

import pytest

from app.text.pairs import pair_tokens

MAX_CHARS = 40


def test_each_two_adjacent_words_give_one_pair_in_order():
    assert pair_tokens(["cheap", "pills", "today"], MAX_CHARS) == [
        "pair:cheap pills",
        "pair:pills today",
    ]


def test_english_stop_words_are_skipped_and_their_neighbours_pair():
    assert pair_tokens(["buy", "the", "pills", "of", "a", "kind"], MAX_CHARS) == [
        "pair:buy pills",
        "pair:pills kind",
    ]


def test_prefixed_tokens_are_not_words_and_their_neighbours_pair():
    tokens = ["url:example.org", "click", "digits:11", "skip:a 1000", "offers", "email:x.org"]
    assert pair_tokens(tokens, MAX_CHARS) == ["pair:click offers"]


def test_fewer_than_two_words_give_no_pair():
    assert pair_tokens([], MAX_CHARS) == []
    assert pair_tokens(["alone"], MAX_CHARS) == []
    assert pair_tokens(["url:example.org", "alone"], MAX_CHARS) == []


def test_a_pair_of_long_words_is_cut_to_the_token_length():
    first, second = "a" * MAX_CHARS, "b" * MAX_CHARS
    (pair,) = pair_tokens([first, second], MAX_CHARS)
    assert pair == "pair:" + (first + " " + second)[:MAX_CHARS]
    assert len(pair) <= MAX_CHARS + len("pair:")


def test_output_is_bounded_by_the_input():
    words = [f"w{i}" for i in range(10_000)]
    assert len(pair_tokens(words, MAX_CHARS)) == len(words) - 1


def test_time_grows_linearly_with_the_number_of_words():
    def cpu_seconds(count: int) -> float:
        words = ["word"] * count
        start = time.thread_time()
        for _ in range(5):
            pair_tokens(words, MAX_CHARS)
        return time.thread_time() - start

    small, large = cpu_seconds(20_000), cpu_seconds(200_000)
    # 10x the words: well under 100x the time (quadratic), with room for a noisy machine
    assert large < 40 * max(small, 1e-3)


def test_compiled_pairs_take_time_linear_in_the_words_too():
    from app.text import core

    if core.COMPILED is None:
        pytest.skip("the compiled token core (app.text._core) is not built")
    compiled_pairs = core.COMPILED.pair_tokens

    def cpu_seconds(count: int) -> float:
        words = ["word"] * count
        start = time.thread_time()
        for _ in range(5):
            compiled_pairs(words, MAX_CHARS)
        return time.thread_time() - start

    small, large = cpu_seconds(20_000), cpu_seconds(200_000)
    assert large < 40 * max(small, 1e-3)
