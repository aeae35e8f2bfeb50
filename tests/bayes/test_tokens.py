"""TokenIndex: the id <-> text mapping of a model, against a plain dict and list."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.bayes import tokens as tokens_module
from app.bayes.tokens import TokenIndex, token_hashes
from app.token_texts import EncodedTexts, HashedTexts

TEXTS = ["free", "viagra", "subject:hello", "url:example.com", "naïve", "日本語", "💊"]


def weak_hash(text: str) -> int:
    """Few distinct values, so most tokens share a hash with another."""
    return len(text) % 3


def weak_hashes(texts: list[str]) -> np.ndarray:
    return np.array([weak_hash(text) for text in texts], dtype=np.int64)


class TextsAsked:
    """The `texts_at` of a lookup by hash: the texts of `tokens`, noting the positions asked."""

    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.asked: list[int] = []

    def __call__(self, positions: np.ndarray) -> list[str]:
        self.asked.extend(positions.tolist())
        return [self.tokens[i] for i in positions.tolist()]


def no_texts(positions: np.ndarray) -> list[str]:
    raise AssertionError(f"texts asked for positions {positions.tolist()}")


def test_texts_come_back_by_id_and_ids_by_text() -> None:
    index = TokenIndex.from_texts(TEXTS)

    assert len(index) == len(TEXTS)
    assert list(index) == TEXTS
    assert [index[i] for i in range(len(TEXTS))] == TEXTS
    assert index[-1] == "💊"
    assert index[1:3] == ["viagra", "subject:hello"]
    assert index.lookup([*TEXTS, "unknown"]).tolist() == [*range(len(TEXTS)), -1]
    assert "naïve" in index
    assert "naive" not in index
    assert index.index("日本語") == 5
    with pytest.raises(ValueError, match="not a known token"):
        index.index("naive")
    with pytest.raises(IndexError):
        index[len(TEXTS)]


def test_from_texts_refuses_repeated_or_empty_texts_and_changes_nothing() -> None:
    with pytest.raises(ValueError, match="has id 0, cannot place it at 2"):
        TokenIndex.from_texts(["a", "b", "a"])
    with pytest.raises(ValueError, match="non-empty"):
        TokenIndex.from_texts(["a", ""])


def test_interning_gives_unknown_tokens_the_next_ids_in_order_of_first_sight() -> None:
    index = TokenIndex.from_texts(["a"])

    ids = index.intern(["b", "a", "c", "b"])

    assert ids.tolist() == [1, 0, 2, 1]
    assert list(index) == ["a", "b", "c"]


def test_placing_leaves_gaps_unnamed_and_refuses_conflicts_without_changing_anything() -> None:
    index = TokenIndex()

    placed = index.place(np.array([7, 2]), ["seven", "two"])

    assert sorted(placed.tolist()) == [2, 7]
    assert len(index) == 8
    assert [index[0], index[2], index[7]] == ["", "two", "seven"]
    assert index.place(np.array([2, 2]), ["two", "two"]).tolist() == []  # same pair: no-op
    for ids, texts, message in [
        ([2], ["deux"], "token id 2 is 'two', cannot place 'deux'"),
        ([3], ["two"], "token 'two' has id 2, cannot place it at 3"),
        ([4, 5], ["four", "four"], "token 'four' has id 4, cannot place it at 5"),
        ([4, 4], ["four", "vier"], "token id 4 is 'four', cannot place 'vier'"),
        ([-1], ["minus"], "token ids must be >= 0"),
    ]:
        with pytest.raises(ValueError, match=message):
            index.place(np.array(ids), texts)
        assert len(index) == 8
        assert index.lookup(["four", "vier", "deux", "minus"]).tolist() == [-1] * 4


def test_tokens_added_one_by_one_stay_found_across_merges() -> None:
    index = TokenIndex()
    texts = [f"token{i}" for i in range(20_000)]

    for start in range(0, len(texts), 7):
        index.intern(texts[start : start + 7])

    assert index.lookup(texts).tolist() == list(range(len(texts)))
    index.merge()
    assert index.lookup([*texts, "token20000"]).tolist() == [*range(len(texts)), -1]


def test_tokens_sharing_a_hash_are_told_apart_exactly() -> None:
    texts = [f"t{i}" * (i % 5 + 1) for i in range(5000)]
    index = TokenIndex.from_texts(texts, hash_function=weak_hash)
    index.intern(["late", "later", "latest"])

    assert index.lookup(texts).tolist() == list(range(len(texts)))
    assert index.lookup(["late", "later", "latest"]).tolist() == [5000, 5001, 5002]
    assert "never seen" not in index  # its weak hash is a known token's: compared exactly
    assert index.lookup(["never seen"], exact=True).tolist() == [-1]
    assert list(index)[:3] == texts[:3]


def test_tokens_added_a_few_at_a_time_and_in_bulk_are_told_apart_across_merges() -> None:
    # A weak hash: tokens added a few at a time (held apart until a merge) share hashes with
    # those placed in bulk, before and after them.
    first = [f"a{i}" * (i % 4 + 1) for i in range(5000)]
    index = TokenIndex.from_texts(first, hash_function=weak_hash)
    reference = dict(zip(first, range(len(first)), strict=True))
    few = [f"b{i}" for i in range(12)]
    for start in range(0, len(few), 3):
        index.intern(few[start : start + 3])
    reference.update((text, len(first) + i) for i, text in enumerate(few))
    bulk = [f"c{i}" * (i % 3 + 1) for i in range(4500)]
    bulk_ids = np.arange(len(reference), len(reference) + len(bulk), dtype=np.int64)
    index.place(bulk_ids, bulk)
    reference.update(zip(bulk, bulk_ids.tolist(), strict=True))
    known = list(reference)

    assert index.lookup(known, exact=True).tolist() == [reference[text] for text in known]
    index.merge()
    assert index.lookup(known, exact=True).tolist() == [reference[text] for text in known]
    assert index.lookup(["b99", "c"], exact=True).tolist() == [-1, -1]


@pytest.mark.parametrize("hash_function", [None, weak_hash])
def test_a_set_of_words_finds_exactly_the_ids_each_index_gives_them(hash_function) -> None:
    """Stop words are looked up as a set whose hashes are kept between calls: each index,
    whatever its hash function, still finds its own ids, -1 for a word it lacks."""
    words = frozenset(["free", "naïve", "absent", "💊"])
    first = TokenIndex(hash_function=hash_function)
    second = TokenIndex(hash_function=hash_function)
    first.place(np.arange(7), TEXTS)
    second.place(np.arange(20, 27), TEXTS[::-1])
    for index in (first, second, first):  # what one call kept must not leak into the next
        expected = index.lookup(sorted(words), exact=True)
        assert sorted(index.lookup_words(words).tolist()) == sorted(expected.tolist())
    assert sorted(first.lookup_words(words).tolist()) == [-1, 0, 4, 6]
    assert sorted(second.lookup_words(words).tolist()) == [-1, 20, 22, 26]


def test_a_lookup_by_hash_finds_what_a_lookup_by_text_finds_without_asking_for_texts() -> None:
    index = TokenIndex.from_texts(TEXTS[:4])
    index.intern(TEXTS[4:])  # waiting in the small sorted array
    probe = [*reversed(TEXTS), "unknown", "naive", "f0"]

    found = index.lookup_hashes(token_hashes(probe), no_texts)

    assert found.tolist() == index.lookup(probe).tolist() == [6, 5, 4, 3, 2, 1, 0, -1, -1, -1]
    assert index.lookup_hashes(np.zeros(0, dtype=np.int64), no_texts).tolist() == []
    assert TokenIndex().lookup_hashes(token_hashes(TEXTS), no_texts).tolist() == [-1] * 7


@pytest.mark.parametrize("probes", [3, 40, 700, 5000])
def test_a_lookup_by_hash_in_a_large_index_finds_the_same_ids_sorted_first_or_not(
    probes: int,
) -> None:
    # Below and above the number of hashes a lookup sorts before searching, in an index large
    # enough to be searched that way: the ids are the plain dict's either way.
    texts = [f"token{i}" for i in range(20_000)]
    index = TokenIndex.from_texts(texts)
    index.intern([f"late{i}" for i in range(300)])  # waiting in the small sorted array
    reference = {text: i for i, text in enumerate([*texts, *(f"late{i}" for i in range(300))])}
    rng = np.random.default_rng(probes)
    candidates = [*reference, *(f"unknown{i}" for i in range(5000))]
    probe = [candidates[i] for i in rng.integers(0, len(candidates), probes).tolist()]

    found = index.lookup_hashes(token_hashes(probe), no_texts)

    assert found.tolist() == [reference.get(text, -1) for text in probe]


@pytest.mark.parametrize("compiled", [True, False], ids=["buckets", "binary search"])
def test_a_large_index_finds_the_same_ids_through_buckets_or_a_binary_search(
    monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    """The compiled lookup through buckets and numpy's binary search (what runs without a C
    compiler) give a large index the same ids, after merges too (new buckets each time)."""
    if compiled and tokens_module._bucket_ids is None:
        pytest.skip("the compiled lookup (app/bayes/_index.pyx) is not built here")
    if not compiled:
        monkeypatch.setattr(tokens_module, "_bucket_ids", None)
    texts = [f"token{i}" for i in range(30_000)]
    index = TokenIndex.from_texts(texts)
    reference = {text: i for i, text in enumerate(texts)}
    rng = np.random.default_rng(7)
    for round_ in range(3):
        late = [f"late{round_}-{i}" for i in range(5_000)]  # past 1/64: merged into the large
        index.intern(late)
        reference.update((text, len(reference)) for text in late)
        candidates = [*reference, *(f"unknown{i}" for i in range(5000))]
        probe = [candidates[i] for i in rng.integers(0, len(candidates), 3000).tolist()]
        found = index.lookup_hashes(token_hashes(probe), no_texts)
        assert found.tolist() == [reference.get(text, -1) for text in probe]
    assert (index._buckets is not None) is compiled


@pytest.mark.skipif(
    tokens_module._bucket_ids is None,
    reason="the compiled lookup (app/bayes/_index.pyx) is not built here",
)
@settings(max_examples=300, deadline=None)
@given(
    hashes=st.sets(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=3000),
    needles=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=200),
    extremes=st.booleans(),
    wide_ids=st.booleans(),
)
def test_the_compiled_bucket_lookup_finds_what_a_binary_search_finds(
    hashes: set[int], needles: list[int], extremes: bool, wide_ids: bool
) -> None:
    """Any sorted hashes (the extremes of int64 too, which the sign bit's flip must keep in
    order), any needles: hashes present, absent, before the first and after the last; ids
    of either width an index keeps."""
    if extremes:
        hashes |= {-(2**63), 2**63 - 1}
    sorted_hashes = np.array(sorted(hashes), dtype=np.int64)
    ids = np.random.default_rng(len(hashes)).permutation(sorted_hashes.size)
    ids = ids.astype(np.int64 if wide_ids else np.int32)
    probe = np.array([*needles, *sorted_hashes[:: max(1, len(hashes) // 50)]], dtype=np.int64)
    buckets = tokens_module._Buckets.of_hashes(sorted_hashes)
    found = tokens_module._bucket_ids(sorted_hashes, ids, buckets.starts, buckets.shift, probe)
    positions = np.minimum(np.searchsorted(sorted_hashes, probe), sorted_hashes.size - 1)
    expected = np.where(sorted_hashes[positions] == probe, ids[positions], -1)
    assert found.tolist() == expected.tolist()


def test_a_lookup_by_hash_asks_for_the_texts_of_collided_hashes_only() -> None:
    # weak_hash gives 0, 1 or 2: "ab" (2) and "cd" (2) collide, "x" (1) is alone; a text of
    # length 0 mod 3 has a hash no indexed text has.
    index = TokenIndex.from_texts(["ab", "x"], hash_function=weak_hash)
    index.intern(["cd"])
    probe = ["x", "cd", "abc", "ab", "zz", "cd"]
    asked = TextsAsked(probe)

    found = index.lookup_hashes(weak_hashes(probe), asked)

    assert found.tolist() == index.lookup(probe).tolist() == [1, 2, -1, 0, 0, 2]
    assert asked.asked == [1, 3, 4, 5]  # once, for the tokens of hash 2
    # "zz" is taken for "ab" as a lookup by text takes it: equal hashes, and not a collided
    # text. Scoring accepts that (a 64-bit keyed hash); writers look up by text, exactly.
    assert index.lookup(["zz"], exact=True).tolist() == [-1]


def test_a_lookup_by_hash_refuses_texts_that_do_not_match_the_positions_asked() -> None:
    index = TokenIndex.from_texts(["ab", "cd"], hash_function=weak_hash)

    with pytest.raises(ValueError, match="asked for 1 texts, got 0"):
        index.lookup_hashes(weak_hashes(["cd"]), lambda positions: [])


def test_a_copy_and_a_pickled_index_keep_their_collided_texts_apart_by_hash() -> None:
    texts = [f"t{i}" * (i % 5 + 1) for i in range(300)]
    index = TokenIndex.from_texts(texts, hash_function=weak_hash)
    probe = [*texts, "never seen"]
    expected = index.lookup(probe).tolist()

    for twin in (index.copy(), pickle.loads(pickle.dumps(index))):
        assert twin.lookup_hashes(weak_hashes(probe), TextsAsked(probe)).tolist() == expected


def test_texts_whose_str_hashes_are_equal_under_any_key_are_not_taken_for_each_other() -> None:
    # CPython hashes a str's internal buffer: "て" (U+3066, stored as the bytes 66 30) and
    # "f0" (stored as 66 30) have equal hash() whatever the process's key.
    assert hash("て") == hash("f0")
    index = TokenIndex.from_texts(["て", "户", "💊"])

    assert index.lookup(["f0", "7b", "て"]).tolist() == [-1, -1, 0]
    assert index.intern(["f0"]).tolist() == [3]
    assert index.lookup(["f0", "て"]).tolist() == [3, 0]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=12),
        ),
        max_size=25,
    )
)
def test_any_mix_of_interning_and_placing_matches_a_dict(
    steps: list[tuple[bool, list[str]]],
) -> None:
    index = TokenIndex(hash_function=weak_hash)
    reference: dict[str, int] = {}
    size = 0
    for by_place, texts in steps:
        if by_place:  # the database hands out ids past the end, leaving a gap
            new = [text for text in dict.fromkeys(texts) if text not in reference]
            ids = np.arange(size + 1, size + 1 + len(new), dtype=np.int64)
            index.place(ids, new)
            reference.update(zip(new, ids.tolist(), strict=True))
            size += len(new) + 1 if new else 0
        else:
            index.intern(texts)
            for text in texts:
                if text not in reference:
                    reference[text] = size
                    size += 1
        assert len(index) == size
        known = list(reference)
        assert index.lookup(known).tolist() == [reference[text] for text in known]
        assert all(index[token_id] == text for text, token_id in reference.items())
        probe = [*known, *texts, "never seen"]
        asked = TextsAsked(probe)
        by_hash = index.lookup_hashes(weak_hashes(probe), asked)
        assert by_hash.tolist() == index.lookup(probe).tolist()
        assert len(set(asked.asked)) == len(asked.asked)  # each position at most once
        exact = [reference.get(text, -1) for text in probe]
        assert index.lookup(probe, exact=True).tolist() == exact
        from_bytes = HashedTexts(weak_hashes(probe), EncodedTexts.from_strings(probe))
        assert index.lookup_exact(from_bytes).tolist() == exact


def test_a_large_index_costs_a_few_dozen_bytes_a_token() -> None:
    n = 200_000
    index = TokenIndex.from_texts([f"w{i:07x}" for i in range(n)])
    index.intern([f"x{i}" for i in range(1000)])

    # About 33 bytes a token just after the id arrays doubled (25 before); a dict and list
    # of str cost ~135 bytes a token.
    assert index.nbytes() / n < 36


def test_a_copy_and_a_pickled_index_in_another_process_find_every_token() -> None:
    texts = [f"token{i}" for i in range(6000)]
    index = TokenIndex()
    index.place(np.arange(2, 6002), texts)  # ids 0 and 1 left unnamed
    index.intern(["late"])
    twin = index.copy()
    twin.intern(["only in the copy"])

    assert index.lookup(["only in the copy"]).tolist() == [-1]
    assert twin.lookup([*texts, "late"]).tolist() == [*range(2, 6002), 6002]
    script = (
        "import pickle, sys; index = pickle.load(sys.stdin.buffer); "
        "print(index.lookup(sys.argv[1:]).tolist(), len(index), repr(index[0]))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script, "token0", "late", "token5999", "nothing"],
        input=pickle.dumps(index),
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "random"},
    )
    assert completed.stdout.decode().split() == ["[2,", "6002,", "6001,", "-1]", "6003", "''"]


def test_texts_placed_as_one_buffer_index_as_the_same_strings_do() -> None:
    texts = [*TEXTS, "x" * 300, "\udcff", *(f"t{i}" for i in range(5000))]
    joined = "".join(text + "\x1f" for text in texts)
    encoded = EncodedTexts.from_terminated(joined, "\x1f", len(texts))
    assert encoded is not None
    ids = np.arange(3, 3 + len(texts))
    from_buffer, from_strings = TokenIndex(), TokenIndex()
    from_buffer.place(ids, encoded)
    from_strings.place(ids, texts)

    assert list(from_buffer) == list(from_strings) == ["", "", "", *texts]
    assert from_buffer.lookup([*texts, "unknown"], exact=True).tolist() == [*ids.tolist(), -1]
    assert [encoded[i] for i in range(len(texts))] == texts  # one text decoded at a time
    assert from_buffer.nbytes() == from_strings.nbytes()  # the terminators are not kept


def test_a_buffer_whose_texts_hold_the_terminator_is_refused_for_another_read() -> None:
    assert EncodedTexts.from_terminated("a\x1fb\x1f", "\x1f", 1) is None
    empty = EncodedTexts.from_terminated("", "\x1f", 0)
    assert empty is not None
    assert list(empty) == []
    with pytest.raises(ValueError, match="within"):
        EncodedTexts(b"abc", np.array([0, 2]), np.array([2, 2]))


def test_long_texts_widen_the_narrow_length_type_and_stay_exact() -> None:
    index = TokenIndex.from_texts(["short"])
    index.intern(["y" * 70_000, "after"])

    assert index[1] == "y" * 70_000
    assert index[2] == "after"
    assert index.lookup(["y" * 70_000, "short"], exact=True).tolist() == [1, 0]


@settings(max_examples=200, deadline=None)
@given(
    texts=st.sets(
        st.text(alphabet=st.sampled_from("ab\x00é€😀"), min_size=1, max_size=20).map(
            lambda tail: "received:" + tail  # a long shared prefix: ties past the first 8 bytes
        )
        | st.text(min_size=1, max_size=12),
        min_size=1,
        max_size=60,
    ),
    k=st.integers(0, 70),
    data=st.data(),
)
def test_first_by_text_is_the_head_of_a_sort_by_text(texts, k, data):
    index = TokenIndex.from_texts(sorted(texts, key=hash))
    ids = data.draw(st.lists(st.sampled_from(range(len(index))), unique=True))
    chosen = index.first_by_text(np.asarray(ids, dtype=np.int64), k)
    assert sorted(index[i] for i in chosen) == sorted(index[i] for i in ids)[:k]
