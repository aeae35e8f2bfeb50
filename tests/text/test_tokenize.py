"""The public interface of app.text on small hand-made inputs."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.text import (
    TokenizedMessage,
    TokenizerLimits,
    load_stop_words,
    text_only,
    tokenize_raw,
    tokenize_text,
)
from app.text.words import _URL, cut_urls
from tests.cores import TOKEN_CORE
from tests.text.families import words_only


def make_raw(
    *, headers: str = "From: Ann <ann@example.org>\nSubject: Hello", body: str = "hi"
) -> bytes:
    return f"{headers}\n\n{body}".encode()


def test_body_words_are_bare_and_header_words_are_prefixed():
    tokens = tokenize_raw(make_raw(body="Cheap pills"), core=TOKEN_CORE).token_counts
    assert tokens["cheap"] == 1
    assert tokens["pills"] == 1
    assert tokens["subject:hello"] == 1
    assert tokens["from:example.org"] == 1
    assert "hello" not in tokens


def test_token_counts_keep_first_emission_order_and_count_repeats():
    tokens = words_only(tokenize_text("b a b c b", core=TOKEN_CORE).token_counts)
    assert list(tokens) == ["b", "a", "c"]
    assert tokens["b"] == 3


def test_tokenizing_is_deterministic():
    raw = make_raw(body="<html>one two http://x.example.com/</html>")
    assert tokenize_raw(raw, core=TOKEN_CORE) == tokenize_raw(raw, core=TOKEN_CORE)


def test_a_str_message_gives_the_tokens_of_its_bytes():
    raw = make_raw(body="Caf\u00e9 na\u00efve")
    assert tokenize_raw(raw, core=TOKEN_CORE) == tokenize_raw(raw.decode("utf-8"), core=TOKEN_CORE)


def test_words_are_nfkc_casefolded_and_lose_format_characters():
    tokens = tokenize_text(
        "VIAGRA v\u200biagra \uff56\uff49\uff41\uff47\uff52\uff41 vi\u00adagra", core=TOKEN_CORE
    ).token_counts
    assert words_only(tokens) == {"viagra": 4}


def test_han_runs_become_overlapping_bigrams_and_a_lone_character_stays_whole():
    tokens = words_only(tokenize_text("\u4e2d\u6587\u5b57 x \u597d", core=TOKEN_CORE).token_counts)
    assert list(tokens) == ["\u4e2d\u6587", "\u6587\u5b57", "x", "\u597d"]


def test_urls_become_host_tokens_and_addresses_domain_tokens():
    tokens = tokenize_text(
        "see https://user@Shop.Example.COM:8080/buy?x=1 or mail bob@mail.example.net",
        core=TOKEN_CORE,
    ).token_counts
    assert tokens["url:shop.example.com"] == 1
    assert tokens["email:mail.example.net"] == 1
    assert "buy" not in tokens


def test_an_overlong_word_becomes_a_bounded_skip_token():
    tokens = tokenize_text("a" * 10_000 + " ok", core=TOKEN_CORE).token_counts
    assert words_only(tokens) == {"skip:a 1000": 1, "ok": 1}


def test_distinct_tokens_beyond_the_cap_are_dropped_and_flagged():
    limits = TokenizerLimits(max_distinct_tokens=3)
    result = tokenize_text("a b c d a e", limits=limits, core=TOKEN_CORE)
    assert result.token_counts == {"a": 2, "b": 1, "c": 1}
    assert result.defects == ("truncated",)


def test_text_beyond_max_scan_bytes_is_not_tokenized():
    result = tokenize_text(
        "one two three", limits=TokenizerLimits(max_scan_bytes=7), core=TOKEN_CORE
    )
    assert words_only(result.token_counts) == {"one": 1, "two": 1}
    assert "truncated" in result.defects


def test_text_only_gives_subject_and_visible_text_without_tags_or_other_headers():
    raw = make_raw(
        headers="From: a@b.example\nSubject: Big offer\nContent-Type: text/html",
        body="<html><head><style>p {color: red}</style></head><p>Click <b>now</b></p></html>",
    )
    text = text_only(raw, core=TOKEN_CORE)
    assert text.split() == ["Big", "offer", "Click", "now"]


def test_tokenized_message_is_a_frozen_value():
    result = tokenize_text("x", core=TOKEN_CORE)
    assert isinstance(result, TokenizedMessage)
    with pytest.raises(AttributeError):
        result.defects = ()  # type: ignore[misc]


def test_english_stop_words_are_normalised_like_body_words():
    words = load_stop_words("english")
    assert {"the", "and", "of"} <= words
    assert load_stop_words("none") == frozenset()
    assert load_stop_words(["The", "\uff21\uff2e\uff24"]) == {"the", "and"}


def test_chinese_stop_words_match_the_bigram_tokens():
    words = load_stop_words("chinese")
    assert "\u6211\u4eec" in words  # 我们
    assert "\u7684" in words  # 的


def test_an_unknown_stop_word_list_is_refused():
    with pytest.raises(ValueError, match="stop_words"):
        load_stop_words("klingon")


def test_spamsifts_own_marks_are_not_tokens() -> None:
    plain = b"From: a@example.org\nSubject: lunch plans\n\nsee you at noon"
    marked = (
        b"X-Spamsift-Verdict: ham\nX-Spamsift-Probability: 0.000120\n"
        b"x-spamsift-anything: else\n" + plain
    )
    assert (
        tokenize_raw(marked, core=TOKEN_CORE).token_counts
        == tokenize_raw(plain, core=TOKEN_CORE).token_counts
    )


def test_the_words_of_every_header_are_tokens_prefixed_by_its_name():
    headers = (
        "From: Ann <ann@example.org>\nSubject: Hello\nKeywords: Spring Blast\n"
        "Date: Tue, 3 Sep 2002 12:00:00 +0800\nReceived: from relay.example.net"
    )
    tokens = tokenize_raw(make_raw(headers=headers), core=TOKEN_CORE).token_counts
    assert tokens["keywords:spring"] == 1
    assert tokens["keywords:blast"] == 1
    assert tokens["date:tue"] == 1
    assert tokens["date:0800"] == 1
    assert tokens["received:relay"] == 1
    assert "spring" not in tokens  # never a body word


def test_html_styles_scripts_and_comments_give_hidden_words_not_body_words():
    body = (
        "Content-Type: text/html\n\n<html><style>.promo { color: red }</style>"
        "<!-- lorem ipsum --><p>Visible offer</p><script>track()</script></html>"
    )
    raw = f"From: a@example.org\nSubject: x\nMIME-Version: 1.0\n{body}".encode()
    tokens = tokenize_raw(raw, core=TOKEN_CORE).token_counts
    assert {"hidden:promo", "hidden:red", "hidden:lorem", "hidden:track"} <= set(tokens)
    assert "visible" in tokens
    assert not {"promo", "lorem", "track"} & set(tokens)
    assert "promo" not in text_only(
        raw, core=TOKEN_CORE
    )  # the text-only view stays the visible text


def test_list_machinery_and_x_headers_give_their_names_but_not_their_words():
    headers = (
        "From: a@example.org\nSubject: Hi\nList-Unsubscribe: <mailto:leave@lists.example.org>\n"
        "X-Mailman-Version: 2.0.11\nX-BeenThere: exmh-users@example.com"
    )
    tokens = tokenize_raw(make_raw(headers=headers), core=TOKEN_CORE).token_counts
    assert {"header:list-unsubscribe", "header:x-mailman-version", "header:x-beenthere"} <= set(
        tokens
    )
    assert not [t for t in tokens if t.startswith(("list-unsubscribe:", "x-"))]


def test_a_header_named_like_a_token_family_gives_no_colliding_tokens():
    headers = "From: a@example.org\nSubject: Hi\nHeader: subject\nDigits: 4"
    tokens = tokenize_raw(make_raw(headers=headers, body="hi"), core=TOKEN_CORE).token_counts
    assert "header:subject" in tokens  # the Subject field's name, once
    assert tokens["header:subject"] == 1
    assert "digits:4" not in tokens


def test_a_header_named_like_a_derived_token_gives_none_of_them():
    # Word pairs and the message's shape are evidence spamsift derives; a sender writing
    # "Size: 1" or "Pair: cheap pills" must not set them.
    headers = "From: a@example.org\nSubject: Hi\nSize: 1\nLinks: 9\nHTML: 4\nPair: cheap pills"
    tokens = tokenize_raw(make_raw(headers=headers, body="hi"), core=TOKEN_CORE).token_counts
    assert {"header:size", "header:links", "header:html", "header:pair"} <= set(tokens)
    assert [t for t in tokens if t.startswith(("size:", "links:", "html:"))] == [
        "size:2",
        "links:0",
        "html:0",
    ]
    assert not [t for t in tokens if t.startswith("pair:")]


url_pieces = st.one_of(
    st.sampled_from(
        [
            "http://",
            "https://a.example/x?y",
            "ftp://f",
            "www.",
            "www.b.example",
            "xhttp://no",
            "wwww.",
            " ",
            "\n",
            "<",
            ">",
            '"',
            "é",
            "/",
            "http://\u00e9.example",
        ]
    ),
    st.text(max_size=8),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(url_pieces, max_size=12).map("".join))
def test_cutting_urls_out_gives_what_findall_and_sub_give(text):
    # The two scans it replaced: each URL found, and each replaced by a blank.
    assert cut_urls(text) == (_URL.sub(" ", text), _URL.findall(text))
