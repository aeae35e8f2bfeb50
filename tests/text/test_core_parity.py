"""The compiled token core gives exactly the tokens of the pure-Python reference.

Every message of every shared corpus, and Hypothesis over arbitrary bytes and text, both
through the public entry points (token multiset and defects) and function by function.
Skipped where the extension is not built (the Python path then is the only one). The
pipeline over them is one for both cores (app.text.tokenize); what differs is the loops.
"""

import dataclasses
import time
import types
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.text import TokenizedMessage, TokenizerLimits, core, text_only, tokenize_raw, tokenize_text
from app.text import headers as python_headers
from app.text import words as python_words
from app.text.tokenize import DERIVED_PREFIXES
from tests.bad_inputs import BadInput, catalogue
from tests.cores import TOKEN_CORE
from tests.text.conftest import raw_bytes, read_corpus
from tests.text.test_properties import mail_like
from tests.text.test_robustness import MAX_SECONDS

if core.COMPILED is None:
    pytest.skip("the compiled token core (app.text._core) is not built", allow_module_level=True)
COMPILED = core.COMPILED
LIMITS = TokenizerLimits()


def both_ways(function: Callable[[core.TokenCore], Any]) -> tuple[Any, Any]:
    """Return function(core) with the Python core, then with the compiled one."""
    return function(core.PYTHON), function(COMPILED)


def assert_same(reference: TokenizedMessage, compiled: TokenizedMessage, what: str) -> None:
    assert compiled.token_counts == reference.token_counts, what
    # Same emission order too: the first max_distinct_tokens kept depend on it.
    assert list(compiled.token_counts) == list(reference.token_counts), what
    assert compiled.defects == reference.defects, what
    # What is read off the tokens: the lines a message key hashes, the prefixed tokens counted.
    assert COMPILED.token_lines(compiled.token_counts) == core.PYTHON.token_lines(
        reference.token_counts
    ), what
    for prefixes in ("url:", DERIVED_PREFIXES):
        assert COMPILED.count_prefixed(compiled.token_counts, prefixes) == (
            core.PYTHON.count_prefixed(reference.token_counts, prefixes)
        ), what


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["spamassassin", "trec06c-subset", "csdmc2010"])
def test_every_mail_of_the_corpus_gives_the_same_tokens_both_ways(name):
    messages = 0
    for record in read_corpus(name):
        raw = raw_bytes(record)
        reference, compiled = both_ways(
            lambda token_core, raw=raw: tokenize_raw(raw, core=token_core)
        )
        assert_same(reference, compiled, record["id"])
        messages += 1
    assert messages > 1900


@pytest.mark.corpus
def test_every_sms_and_text_only_mail_gives_the_same_tokens_both_ways():
    for record in read_corpus("sms-spam-collection"):
        text = record["text"]
        reference, compiled = both_ways(
            lambda token_core, text=text: tokenize_text(text, core=token_core)
        )
        assert_same(reference, compiled, record["id"])
    # The text-only view of mail (`evaluate --text-only`): every line a body text.
    for index, record in enumerate(read_corpus("trec06c-subset")):
        if index % 10:
            continue  # the raw test above already reads every message; a tenth here
        text = text_only(raw_bytes(record), core=TOKEN_CORE)
        reference, compiled = both_ways(
            lambda token_core, text=text: tokenize_text(text, core=token_core)
        )
        assert_same(reference, compiled, record["id"])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_give_the_same_tokens_both_ways(raw):
    reference, compiled = both_ways(lambda token_core: tokenize_raw(raw, core=token_core))
    assert_same(reference, compiled, repr(raw))


@settings(max_examples=300, deadline=None)
@given(mail_like)
def test_mail_like_bytes_give_the_same_tokens_both_ways(raw):
    reference, compiled = both_ways(lambda token_core: tokenize_raw(raw, core=token_core))
    assert_same(reference, compiled, repr(raw))


# Text from the alphabets the word cutter treats differently: ASCII letters and digits,
# currency signs, Latin letters, other Unicode digits, CJK, Hangul, kana, line breaks,
# colons and blanks of header lines, URL and address characters, anything else.
interesting_characters = st.sampled_from(
    [
        *"aZ09 \t\n:.-_$\u00a3\u20ac\u00a5@/=?<>",
        *["http://", "www.", "\u0663", "\u00e9", "\u00b2", "\u2160", "\x00", "\x1b", "A"],
        *["@a.b", "@x", ".c", "a" * 70, "-", "+", "\u00c9"],
        *["\u4e2d", "\u6587", "\uac00", "\u3042", "\u1100", "\U00020000"],
    ]
)
texts = st.one_of(
    st.text(max_size=300),
    st.lists(st.one_of(interesting_characters, st.text(max_size=3)), max_size=80).map("".join),
)


@settings(max_examples=500, deadline=None)
@given(texts, st.integers(min_value=1, max_value=46))
def test_word_and_text_tokens_are_the_same_both_ways(text, max_token_chars):
    assert COMPILED.word_tokens(text, max_token_chars) == python_words.word_tokens(
        text, max_token_chars
    )
    assert COMPILED.text_tokens(text, max_token_chars) == python_words.text_tokens(
        text, max_token_chars
    )


header_names = st.one_of(
    st.sampled_from(["subject", "from", "to", "received", "x-mailer", "list-id", "digits"]),
    st.text(alphabet="abcxyz-:", min_size=1, max_size=50),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(header_names, texts), max_size=8),
    st.integers(min_value=1, max_value=46),
)
def test_header_tokens_are_the_same_both_ways(fields, max_token_chars):
    limits = TokenizerLimits(max_token_chars=max_token_chars)
    assert COMPILED.header_tokens(fields, limits) == python_headers.header_tokens(fields, limits)


header_lines = st.lists(
    st.one_of(
        st.sampled_from(["Subject: x", " folded", "\tfolded", "X-A:", "a b: c", ": no name"]),
        st.sampled_from(["From :a", "n" * 200 + ": long", "n" * 201 + ": too long", ""]),
        texts,
    ),
    max_size=12,
).map("\n".join)


@settings(max_examples=500, deadline=None)
@given(
    header_lines,
    st.integers(min_value=1, max_value=40),
    st.integers(min_value=1, max_value=6),
)
def test_header_blocks_split_the_same_both_ways(text, max_value, max_fields):
    limits = TokenizerLimits(max_header_value_bytes=max_value, max_header_fields=max_fields)
    assert COMPILED.split_header_block(text, limits) == python_headers.split_header_block(
        text, limits
    )


CATALOGUE = catalogue()


@pytest.mark.parametrize("bad", CATALOGUE, ids=[bad.id for bad in CATALOGUE])
def test_every_bad_input_gives_the_same_tokens_both_ways_in_bounded_time(bad: BadInput):
    """The API's bad-input catalogue (tests/bad_inputs.py), at the tokenizer: same tokens, and
    the compiled core keeps the time bound of tests/text/test_robustness.py (CPU seconds)."""
    raw = bad.build()

    def tokenize_timed(token_core: core.TokenCore) -> tuple[TokenizedMessage, float]:
        start = time.thread_time()
        result = tokenize_raw(raw, core=token_core)
        return result, time.thread_time() - start

    (reference, _), (compiled, compiled_seconds) = both_ways(tokenize_timed)
    assert_same(reference, compiled, bad.id)
    assert compiled_seconds < MAX_SECONDS


@settings(max_examples=500, deadline=None)
@given(texts)
def test_email_domains_and_normalisation_are_the_same_both_ways(text):
    from app.text import _core  # type: ignore[attr-defined]

    normalized = python_words.normalize_text(text)
    assert _core.normalize_text(text) == normalized
    assert _core.email_domains(normalized) == python_words.email_domains(normalized)
    assert _core.email_domains(text) == python_words.email_domains(text)


field_lists = st.lists(
    st.tuples(
        st.sampled_from(
            ["content-type", "content-disposition", "content-transfer-encoding", "subject", "x"]
        ),
        st.one_of(texts, st.sampled_from([" Base64 ", "=?utf-8?q?=C3=A9?=", "caf\u00e9", "=?"])),
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(field_lists, st.sampled_from([None, "utf-8", "gb2312", "x-bogus"]))
def test_header_values_and_content_fields_are_the_same_both_ways(fields, charset):
    found_python: set[str] = set()
    found_compiled: set[str] = set()
    assert COMPILED.decode_header_values(
        fields, charset, found_compiled
    ) == python_headers.decode_header_values(fields, charset, found_python)
    assert found_compiled == found_python
    assert COMPILED.content_fields(fields) == python_headers.content_fields(fields)


@pytest.mark.corpus
def test_threads_tokenizing_at_once_get_the_tokens_of_one_thread():
    """The compiled core shares one table of recent words between calls (each call its own
    generation); threads switching in its Python calls must never see another's words."""
    import sys
    from concurrent.futures import ThreadPoolExecutor
    from itertools import islice

    raws = [raw_bytes(record) for record in islice(read_corpus("spamassassin"), 400)]
    # Over-long words and URLs call back into Python in the middle of a text.
    raws += [b"Subject: x\n\n" + b"word " * 50 + b"y" * 60 + b" http://a.example/p word" * 9] * 50
    expected, _ = both_ways(lambda token_core: [tokenize_raw(raw, core=token_core) for raw in raws])
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as the interpreter lets them
    try:
        with ThreadPoolExecutor(4) as pool:
            for _ in range(3):
                assert list(pool.map(partial(tokenize_raw, core=COMPILED), raws)) == expected
    finally:
        sys.setswitchinterval(interval)


token_keys = st.one_of(
    texts,
    st.sampled_from(["url:a.example", "url:", "ur", "pair:a b", "size:3", "html:4", "\u4e2d"]),
    st.sampled_from(["url:", "pair:", "caf\u00e9:"]).flatmap(
        lambda prefix: texts.map(prefix.__add__)
    ),
)
prefix_sets = st.one_of(
    st.sampled_from(["url:", "", "caf\u00e9", "\u4e2d", "pair:"]),
    st.lists(st.sampled_from(["pair:", "size:", "links:", "html:", "\u4e2d", ""]), max_size=4).map(
        tuple
    ),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(token_keys, max_size=40), prefix_sets)
def test_prefixed_tokens_are_counted_the_same_both_ways(tokens, prefixes):
    expected = core.PYTHON.count_prefixed(tokens, prefixes)
    assert COMPILED.count_prefixed(tokens, prefixes) == expected
    assert COMPILED.count_prefixed(dict.fromkeys(tokens, 1), prefixes) == (
        core.PYTHON.count_prefixed(dict.fromkeys(tokens, 1), prefixes)
    )


@settings(max_examples=500, deadline=None)
@given(st.lists(token_keys, max_size=40), prefix_sets)
def test_prefixed_tokens_in_utf8_are_counted_as_their_texts_are(tokens, prefixes):
    encoded = [token.encode("utf-8", "surrogatepass") for token in tokens]
    offsets = np.cumsum([0, *map(len, encoded)])
    utf8 = b"".join(encoded)
    expected = core.PYTHON.count_prefixed(tokens, prefixes)
    assert core.PYTHON.count_prefixed_utf8(utf8, offsets, prefixes) == expected
    assert COMPILED.count_prefixed_utf8(utf8, offsets, prefixes) == expected


@pytest.mark.parametrize(
    "offsets", [[0, 3, 2], [-1, 2], [0, 9]], ids=["descending", "negative", "past the end"]
)
def test_offsets_outside_the_utf8_are_refused_both_ways(offsets):
    for token_core in (core.PYTHON, COMPILED):
        with pytest.raises(ValueError, match="offsets must ascend"):
            token_core.count_prefixed_utf8(b"abcd", np.array(offsets), "a")


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(st.dictionaries(token_keys, st.one_of(st.integers(1, 10**6), st.integers()), max_size=40))
def test_token_lines_are_the_same_both_ways(token_counts):
    try:
        expected = core.PYTHON.token_lines(token_counts)
    except UnicodeEncodeError:  # a lone surrogate (the tokenizer removes them)
        with pytest.raises(UnicodeEncodeError):
            COMPILED.token_lines(token_counts)
        return
    assert COMPILED.token_lines(token_counts) == expected


pair_inputs = st.lists(
    st.one_of(
        texts,
        st.sampled_from(["the", "a", "of", "cheap", "pills", "url:x.org", "digits:4", "skip:a 90"]),
        st.sampled_from(["caf\u00e9", "\u4e2d\u6587", "x" * 45, "\U0001f600"]),
    ),
    max_size=60,
)


@settings(max_examples=500, deadline=None)
@given(pair_inputs, st.integers(min_value=1, max_value=46))
def test_word_pairs_are_the_same_both_ways(tokens, max_token_chars):
    assert COMPILED.pair_tokens(tokens, max_token_chars) == core.PYTHON.pair_tokens(
        tokens, max_token_chars
    )


def test_an_out_of_date_compiled_core_falls_back_to_python_with_a_warning() -> None:
    # An extension built from an older _core.pyx lacks the newer functions: spamsift must
    # start on the Python core (same tokens), and say why.
    stale = types.SimpleNamespace(
        **{
            field.name: getattr(COMPILED, field.name)
            for field in dataclasses.fields(core.TokenCore)
            if field.name not in ("name", "token_lines")
        }
    )
    with pytest.warns(RuntimeWarning, match="out of date.*token_lines"):
        assert core.compiled_from(stale) is None
    complete = types.SimpleNamespace(token_lines=COMPILED.token_lines, **vars(stale))
    assert core.compiled_from(complete) == COMPILED
