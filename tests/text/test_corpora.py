"""Every message of the shared corpora tokenizes without an exception."""

import pytest

from app.text import text_only, tokenize_raw, tokenize_text
from tests.cores import TOKEN_CORE
from tests.text.conftest import raw_bytes, read_corpus

pytestmark = pytest.mark.corpus


def assert_storable(tokens: dict[str, int]) -> None:
    for token in tokens:
        token.encode("utf-8")
        assert "\x00" not in token


@pytest.mark.parametrize("name", ["spamassassin", "trec06c-subset"])
def test_every_mail_of_the_corpus_tokenizes_raw_and_text_only(name):
    messages = 0
    for record in read_corpus(name):
        raw = raw_bytes(record)
        result = tokenize_raw(raw, core=TOKEN_CORE)
        assert result.token_counts, record["id"]
        assert_storable(result.token_counts)
        assert_storable(
            tokenize_text(text_only(raw, core=TOKEN_CORE), core=TOKEN_CORE).token_counts
        )
        messages += 1
    assert messages > 6000


def test_every_sms_of_the_corpus_tokenizes():
    messages = 0
    for record in read_corpus("sms-spam-collection"):
        result = tokenize_text(record["text"], core=TOKEN_CORE)
        assert_storable(result.token_counts)
        messages += 1
    assert messages == 5574
