"""The candidate token families of `bench.accuracy --add` and `--keep-case` (sanity only)."""

from app.service.corpus import LabelledMessage
from app.text import tokenize_text
from bench.token_experiments import CHAR4_PREFIX_CHARS, case_kept, char4_tokens, hour_tokens
from tests.cores import TOKEN_CORE

MAIL = LabelledMessage(
    id="m1",
    label="spam",
    raw=b"Date: Tue, 01 Oct 2002 23:30:00 -0200\nSubject: Hi\n\n" + b"FREE offer " * 1000,
)


def test_char4_tokens_are_binary_hashed_and_read_only_the_first_characters():
    tokens = char4_tokens(MAIL, False, {})
    assert set(tokens.values()) == {1}
    assert all(token.startswith("c4:") and len(token) == 8 for token in tokens)
    assert len(tokens) <= CHAR4_PREFIX_CHARS
    assert char4_tokens(LabelledMessage(id="e", label="ham", text=""), False, {}) == {}


def test_hour_is_that_of_the_date_header_in_utc_and_only_in_the_full_view():
    assert hour_tokens(MAIL, False, {}) == {"hour:1": 1}
    assert hour_tokens(MAIL, True, {}) == {}
    undated = LabelledMessage(id="u", label="ham", raw=b"Subject: x\n\nhi")
    assert hour_tokens(undated, False, {}) == {"hour:none": 1}


def test_case_kept_only_inside_its_block():
    text = "FREE Money at http://Example.COM/Win"
    with case_kept():
        kept = tokenize_text(text, core=TOKEN_CORE).token_counts
    assert {"FREE", "Money", "url:example.com", "urlpath:Win"} <= set(kept)
    assert {"free", "money", "url:example.com"} <= set(
        tokenize_text(text, core=TOKEN_CORE).token_counts
    )
