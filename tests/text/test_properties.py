"""Properties over arbitrary input: never raise, storable tokens, line endings irrelevant."""

from hypothesis import given, settings
from hypothesis import strategies as st

from app.text import text_only, tokenize_raw, tokenize_text
from app.text.defects import ALL_DEFECTS
from tests.cores import TOKEN_CORE

# Bytes that look like mail often enough to reach the MIME and header code paths.
mail_pieces = st.sampled_from(
    [
        b"From: a@example.org\n",
        b"Subject: =?utf-8?B?w6k=?= x\n",
        b"Content-Type: ",
        b"multipart/mixed; boundary=b\n",
        b"text/html; charset=gb2312\n",
        b"message/rfc822\n",
        b"Content-Transfer-Encoding: base64\n",
        b"Content-Transfer-Encoding: quoted-printable\n",
        b"\n",
        b"\r\n",
        b"\r",
        b"--b\n",
        b"--b--\n",
        b"<a href='http://x.example/'>",
        b"<!--",
        b"=?",
        b"=C3=A9",
        b"\xc3\xa9",
        b"\xe4\xb8\xad",
        b"\x00",
        b"\xed\xa0\x80",
        b" ",
        b"\t",
        b"word",
        b"http://",
        b"@",
        b"\xff",
    ]
)
mail_like = st.lists(st.one_of(mail_pieces, st.binary(max_size=20)), max_size=40).map(b"".join)


def assert_well_formed(result) -> None:
    for token, count in result.token_counts.items():
        token.encode("utf-8")
        assert "\x00" not in token
        assert token
        assert count > 0
    assert set(result.defects) <= ALL_DEFECTS
    assert list(result.defects) == sorted(set(result.defects))


@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise_and_give_storable_tokens(raw):
    assert_well_formed(tokenize_raw(raw, core=TOKEN_CORE))
    assert_well_formed(tokenize_text(text_only(raw, core=TOKEN_CORE), core=TOKEN_CORE))


@given(mail_like)
@settings(max_examples=300)
def test_mail_like_bytes_never_raise_and_give_storable_tokens(raw):
    assert_well_formed(tokenize_raw(raw, core=TOKEN_CORE))
    assert_well_formed(tokenize_raw(raw.decode("latin-1"), core=TOKEN_CORE))
    assert_well_formed(tokenize_text(text_only(raw, core=TOKEN_CORE), core=TOKEN_CORE))


@given(st.text(max_size=500))
def test_arbitrary_text_never_raises_and_gives_storable_tokens(text):
    assert_well_formed(tokenize_text(text, core=TOKEN_CORE))
    assert_well_formed(tokenize_raw(text, core=TOKEN_CORE))


@given(mail_like, st.sampled_from([b"\r\n", b"\r"]))
def test_line_endings_give_identical_tokens(raw, ending):
    lf = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    assert tokenize_raw(lf.replace(b"\n", ending), core=TOKEN_CORE) == tokenize_raw(
        lf, core=TOKEN_CORE
    )
