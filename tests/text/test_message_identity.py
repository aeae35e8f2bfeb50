"""A message's identity is made faster but never differently: the Message-ID read from the raw
header and the bytes `token_digest` hashes (stored in message keys) are those of the
definitions below, the code of session 5, kept here as the oracle.
"""

import hashlib
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from app.service.messages import MAX_MESSAGE_ID_CHARS, header_message_id
from tests.text.conftest import raw_bytes, read_corpus
from tests.text.test_properties import mail_like

_FIELD_NAME = re.compile(rb"[!-9;-~]+:")


def oracle_header_message_id(raw: bytes) -> str | None:
    header: list[bytes] = []
    current = b""
    for line in raw.split(b"\n"):
        if line.startswith(b"From ") and not header and not current:
            continue
        if line[:1] in (b" ", b"\t") and current:
            current += line
            continue
        if current:
            header.append(current)
        if not _FIELD_NAME.match(line):
            current = b""
            break
        current = line
    if current:
        header.append(current)
    for field in header:
        name, _, value = field.partition(b":")
        if name.strip().lower() == b"message-id":
            text = " ".join(value.decode("utf-8", "replace").split())
            if text and len(text) <= MAX_MESSAGE_ID_CHARS and text.isprintable():
                return text
            return None
    return None


def oracle_token_digest(token_counts: dict[str, int]) -> str:
    lines = [f"{token}\t{token_counts[token]}\n" for token in sorted(token_counts)]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


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
