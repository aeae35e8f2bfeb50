"""Hand-written messages of tests/messages/: charsets, HTML, attachments, broken MIME."""

from pathlib import Path

import pytest

from app.text import TokenizedMessage, text_only, tokenize_raw
from tests.cores import TOKEN_CORE

MESSAGES = Path(__file__).parent.parent / "messages"


def tokenize_file(name: str) -> TokenizedMessage:
    return tokenize_raw((MESSAGES / name).read_bytes(), core=TOKEN_CORE)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("utf8_plain.eml", {"subject:grüsse", "subject:münchen", "from:word:jürgen", "münchen"}),
        ("latin1_qp.eml", {"subject:réunion", "subject:noël", "from:word:françois", "décidé"}),
        ("windows1252.eml", {"premium", "quality", "\u20ac99"}),
        ("gb2312_base64.eml", {"subject:发票", "subject:优惠", "from:word:先生", "发票", "来电"}),
        ("big5.eml", {"開會", "預算"}),
        ("iso2022jp.eml", {"subject:会議", "会議", "十時"}),
        ("koi8r.eml", {"subject:привет", "встреча", "офисе"}),
    ],
)
def test_each_charset_family_decodes_to_its_words(name, expected):
    result = tokenize_file(name)
    assert expected <= result.token_counts.keys()
    assert result.defects == ()


def test_a_soft_line_break_in_quoted_printable_joins_the_word():
    assert "décidé" in tokenize_file("latin1_qp.eml").token_counts


def test_html_gives_visible_words_and_link_hosts_but_not_hidden_text():
    tokens = tokenize_file("html_links.eml").token_counts
    assert {"click", "deal", "url:track.example.net", "url:img.example.net"} <= tokens.keys()
    assert "email:promo.example.com" in tokens
    assert not {"scriptword", "commentword", "color", "href", "img"} & tokens.keys()
    assert tokens["content-type:text/html"] == 1


def test_attachments_give_their_type_and_extension_only():
    tokens = tokenize_file("attachment.eml").token_counts
    assert {"attachment:application/pdf", "filename:.pdf", "filename:.exe"} <= tokens.keys()
    assert "attachment:application/octet-stream" in tokens
    assert "secretword" not in tokens
    assert "report" in tokens


def test_a_multipart_without_boundary_is_read_as_text():
    result = tokenize_file("missing_boundary.eml")
    assert {"flat", "body"} <= result.token_counts.keys()
    assert result.defects == ("bad_mime",)


def test_bad_base64_decodes_what_it_can_and_is_flagged():
    result = tokenize_file("bad_base64.eml")
    assert "hello" in result.token_counts
    assert "bad_base64" in result.defects


def test_broken_encoded_words_are_tolerated_and_flagged():
    result = tokenize_file("broken_rfc2047.eml")
    assert {"subject:working", "subject:café", "from:example.org"} <= result.token_counts.keys()
    assert "header_parse_error" in result.defects


def test_text_only_of_a_chinese_message_is_its_decoded_subject_and_body():
    assert text_only((MESSAGES / "gb2312_base64.eml").read_bytes(), core=TOKEN_CORE).split("\n")[
        :2
    ] == [
        "发票优惠",
        "本公司长期代开发票\uff0c欢迎来电。",
    ]
