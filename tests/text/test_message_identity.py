"""A message's identity is made faster but never differently: the Message-ID read from the raw
header and the bytes `token_digest` hashes (stored in message keys) are those of the
definitions below, the code before it was made faster (commit 980aa9f), kept as the oracle.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.service.messages import header_message_id, token_digest
from app.text import tokenize_raw, tokenize_text
from tests.text.conftest import raw_bytes, read_corpus
from tests.text.message_identity_oracle import digest_before, message_id_before
from tests.text.test_properties import mail_like

# The code before it was made faster.
oracle_header_message_id = message_id_before
oracle_token_digest = digest_before


@pytest.mark.corpus
def test_every_corpus_mail_gives_the_message_id_of_the_oracle():
    for name in ("spamassassin", "trec06c-subset", "csdmc2010"):
        for record in read_corpus(name):
            raw = raw_bytes(record)
            assert header_message_id(raw) == oracle_header_message_id(raw), record["id"]


header_pieces = st.sampled_from(
    [
        b"Message-ID: <a@b>",
        b"message-id :  <x@y> ",
        b"MESSAGE-ID:",
        b" <folded@z>",
        b"\t<tab@z>",
        b"From someone Mon",
        b"from lower Mon",
        b"FROM UPPER",
        b"Subject: hi",
        b"X-A: \xff\xfe",
        b"",
        b"\r",
        b"no header line",
        b"Message-ID: <" + b"l" * 300 + b">",
        b"Message-ID: <ctl\x01>",
    ]
)
raw_messages = st.one_of(
    st.binary(max_size=500),
    mail_like,
    st.lists(st.one_of(header_pieces, st.binary(max_size=20)), max_size=12).map(b"\n".join),
)


@settings(max_examples=1000, deadline=None)
@given(raw_messages)
def test_any_bytes_give_the_message_id_of_the_oracle(raw):
    assert header_message_id(raw) == oracle_header_message_id(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"From a@b Mon\nMessage-ID: <x@y>\n\nbody",
        b"from a@b Mon\nMessage-ID: <x@y>\n\nbody",  # an envelope line is "From " exactly
        b"FROM a@b Mon\nMessage-ID: <x@y>\n\nbody",
        b"Subject: a\nMESSAGE-ID:\t<x@y>\n (folded)\nTo: b\n\nbody",
        b"Subject: a\n\nMessage-ID: <in@body>\n",
    ],
)
def test_hand_written_headers_give_the_message_id_of_the_oracle(raw):
    assert header_message_id(raw) == oracle_header_message_id(raw)


@pytest.mark.corpus
def test_corpus_mail_hashes_the_lines_of_the_oracle(token_core):
    """A tenth of each corpus, with each core (test_core_parity compares the lines of every
    message both ways, and the Python core's lines are the oracle's code)."""
    for name in ("spamassassin", "trec06c-subset", "csdmc2010", "sms-spam-collection"):
        for index, record in enumerate(read_corpus(name)):
            if index % 10:
                continue
            if name == "sms-spam-collection":
                counts = tokenize_text(record["text"], core=token_core).token_counts
            else:
                counts = tokenize_raw(raw_bytes(record), core=token_core).token_counts
            assert token_digest(counts, core=token_core) == oracle_token_digest(counts), record[
                "id"
            ]


token_texts = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["url:a.example", "pair:a b", "caf\u00e9", "\u4e2d\u6587", "\U0001f600", ""]),
)
counts_values = st.one_of(
    st.integers(min_value=1, max_value=1000),
    st.integers(),  # beyond 64 bits and negative too: the lines hold whatever is counted
)


@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.dictionaries(token_texts, counts_values, max_size=40))
def test_any_counts_hash_the_lines_of_the_oracle_or_raise_as_it_does(token_core, token_counts):
    try:
        expected = oracle_token_digest(token_counts)
    except UnicodeEncodeError:  # a lone surrogate: the tokenizer never emits one
        with pytest.raises(UnicodeEncodeError):
            token_digest(token_counts, core=token_core)
        return
    assert token_digest(token_counts, core=token_core) == expected
