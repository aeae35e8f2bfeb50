"""Token texts in one UTF-8 buffer: every byte comparison against Python's own on `str`s."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.token_hash import token_hashes
from app.token_texts import EncodedTexts, HashedTexts

# Few characters, several scripts: texts repeat, share prefixes and differ in one byte.
TEXT = st.text(alphabet="ab:é日💊\udcff", min_size=1, max_size=6)
TEXTS = st.lists(TEXT, max_size=40)


@given(TEXTS)
def test_texts_from_strings_and_from_offsets_decode_to_the_same_strings(texts):
    encoded = EncodedTexts.from_strings(texts)
    assert list(encoded) == texts
    offsets = np.concatenate([[0], np.cumsum(encoded.lengths)])
    again = EncodedTexts.from_offsets(encoded.blob, offsets)
    assert again.strings() == texts  # decoded from the bytes: no str was kept
    positions = np.arange(len(texts))[::-2]
    assert again.take(positions).strings() == [texts[i] for i in positions.tolist()]


@given(TEXTS, TEXTS)
def test_texts_compared_byte_by_byte_as_python_compares_them(first, second):
    n = min(len(first), len(second))
    # The other side's buffer is offset by a text before it, so equal texts lie apart.
    left = EncodedTexts.from_strings(first[:n])
    right = EncodedTexts.from_strings(["éé", *second[:n]]).take(np.arange(1, n + 1))
    expected = [a == b for a, b in zip(first, second, strict=False)]
    assert left.equal_to(right).tolist() == expected
    assert left.equal_to(left).all()


def test_texts_of_different_counts_are_not_compared():
    with pytest.raises(ValueError, match="comparing 1 texts with 2"):
        EncodedTexts.from_strings(["a"]).equal_to(EncodedTexts.from_strings(["a", "b"]))


@given(TEXTS, st.lists(st.text(alphabet="ab:é", max_size=3), max_size=3), st.data())
def test_prefixes_found_as_str_startswith_finds_them(texts, prefixes, data):
    # Some prefixes are the heads of texts, of 9 bytes and more too (read past the first 8).
    long_texts = [text * 3 for text in texts]
    for text in data.draw(st.lists(st.sampled_from(long_texts), max_size=2)) if texts else ():
        prefixes = [*prefixes, text[: data.draw(st.integers(0, len(text)))]]
    texts = texts + long_texts
    encoded = EncodedTexts.from_strings(texts)
    found = encoded.starting_with(prefixes)
    assert found.tolist() == [any(text.startswith(prefix) for prefix in prefixes) for text in texts]
    # The texts' first bytes, read once and kept, follow a subset taken afterwards.
    positions = np.arange(len(texts))[::-3]
    assert encoded.take(positions).starting_with(prefixes).tolist() == found[positions].tolist()


@given(TEXTS, st.booleans())
def test_distinct_texts_in_first_appearance_order_whatever_their_hashes(texts, weak):
    # A weak hash (a handful of values) makes most texts collide: told apart by their bytes.
    hashes = np.array([len(text) % 2 for text in texts]) if weak else token_hashes(texts)
    tokens = HashedTexts(np.asarray(hashes, dtype=np.int64), EncodedTexts.from_strings(texts))
    distinct, own = tokens.distinct()
    assert distinct.strings() == list(dict.fromkeys(texts))
    assert [distinct.strings()[i] for i in own.tolist()] == texts
    assert distinct.hashes.tolist() == [
        int(hashes[texts.index(text)]) for text in distinct.strings()
    ]


def test_hashes_must_match_the_texts_one_for_one():
    with pytest.raises(ValueError, match="2 hashes for 1 texts"):
        HashedTexts(np.zeros(2, dtype=np.int64), EncodedTexts.from_strings(["a"]))
    both = HashedTexts.concatenate(
        [HashedTexts.from_strings(["a", "b"]), HashedTexts.from_strings(["日"])]
    )
    assert both.strings() == ["a", "b", "日"]
    assert both.hashes.tolist() == token_hashes(["a", "b", "日"]).tolist()
