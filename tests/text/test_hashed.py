"""Hashed tokens: the same tokens, counts, digest and defects as the string tokenizer."""

import hashlib
import pickle
import subprocess
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from app.bayes.tokens import token_hashes
from app.text import (
    hash_raw,
    hash_text,
    token_digest,
    token_hash,
    token_lines,
    tokenize_raw,
    tokenize_text,
)
from app.text.core import TokenCore

# The tests taking `token_core` run with each core: each one gives these answers.


RAW = (
    b"From: Ann <ann@example.org>\nSubject: cheap \xe7\x81\xaf pills\n\n"
    b"Buy cheap pills at http://pills.example.com now, now, now.\n"
)


def test_a_raw_message_hashes_to_the_string_tokenizers_counts(token_core: TokenCore) -> None:
    tokenized = tokenize_raw(RAW, core=token_core)
    hashed = hash_raw(RAW, core=token_core)
    assert hashed.token_counts == tokenized.token_counts
    assert list(hashed.token_counts) == list(tokenized.token_counts)  # first-emission order
    assert hashed.hashes.tolist() == [token_hash(t) for t in tokenized.token_counts]
    assert hashed.counts.tolist() == list(tokenized.token_counts.values())
    assert hashed.defects == tokenized.defects
    assert len(hashed) == len(tokenized.token_counts)


def test_the_digest_is_the_sha256_of_the_token_lines(token_core: TokenCore) -> None:
    hashed = hash_text("now now then", core=token_core)
    expected = hashlib.sha256(
        token_lines(tokenize_text("now now then", core=token_core).token_counts, core=token_core)
    )
    assert (
        hashed.digest == expected.hexdigest() == token_digest(hashed.token_counts, core=token_core)
    )


def test_an_ascii_token_hashes_as_its_str_and_any_other_as_its_utf8_bytes() -> None:
    assert token_hash("viagra") == hash("viagra")
    assert token_hash("灯") == hash("灯".encode())
    # "灯" is held as the bytes 6f 70, as "op" is: the str hashes are equal under any key,
    # the UTF-8 hashes are not.
    assert hash("灯") == hash("op")
    assert token_hash("灯") != token_hash("op")


@given(st.lists(st.text(min_size=1, max_size=12), max_size=30))
def test_the_model_index_hashes_every_text_as_the_tokenizer_does(texts: list[str]) -> None:
    assert token_hashes(texts).tolist() == [token_hash(t) for t in texts]
    assert token_hashes(texts).dtype == np.int64


def test_hashed_tokens_cross_processes_as_texts_and_are_hashed_there(token_core: TokenCore) -> None:
    hashed = hash_raw(RAW, core=token_core)
    script = (
        "import pickle, sys; from app.text import token_hash; "
        "h = pickle.loads(sys.stdin.buffer.read()); "
        "assert h.hashes.tolist() == [token_hash(t) for t in h.token_counts], 'hashes'; "
        "sys.stdout.buffer.write(pickle.dumps((h.token_counts, h.counts.tolist(), h.digest, "
        "h.defects)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=pickle.dumps(hashed), capture_output=True, check=True
    )
    assert pickle.loads(done.stdout) == (
        hashed.token_counts,
        hashed.counts.tolist(),
        hashed.digest,
        hashed.defects,
    )
