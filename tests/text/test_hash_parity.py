"""The compiled core's hash path gives exactly the answers of the pure-Python reference.

`hash_raw` / `hash_text` of the compiled core (tokens counted by hash in C) against the
Python core's (the string tokenizer, each text hashed, `token_digest`): the same hashes and
counts in the same first-emission order, the same digest, defects and token texts, on every
message of every shared corpus, under Hypothesis, on the bad-input catalogue within the time
bound of tests/text/test_robustness.py, with the time budget running out at each of its
checks, and with the cap on distinct tokens. Skipped where the extension is not built.
The pipeline (families, order, budget checks, caps) is one for both cores; what differs,
and what these guard, is the sink: the compiled HashCounter against the string tokens hashed.
"""

import dataclasses
import sys
import time
import types
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.text import HashedTokens, TokenizerLimits, core, hash_raw, hash_text, text_only
from app.text.families import FAMILIES, Family, prefixes_left_out
from tests.bad_inputs import BadInput, catalogue
from tests.cores import TOKEN_CORE
from tests.text.conftest import raw_bytes, read_corpus
from tests.text.test_core_parity import texts
from tests.text.test_properties import mail_like
from tests.text.test_robustness import MAX_SECONDS

if core.COMPILED is None:
    pytest.skip("the compiled token core (app.text._core) is not built", allow_module_level=True)
COMPILED = core.COMPILED
PYTHON = core.PYTHON
LIMITS = TokenizerLimits()


def raw_by(token_core: core.TokenCore, raw: bytes, limits: TokenizerLimits) -> HashedTokens:
    return hash_raw(raw, limits=limits, core=token_core)


def text_by(token_core: core.TokenCore, text: str, limits: TokenizerLimits) -> HashedTokens:
    return hash_text(text, limits=limits, core=token_core)


def answers(hashed: HashedTokens) -> tuple[object, ...]:
    """Everything a HashedTokens says, in order."""
    return (
        hashed.hashes.tolist(),
        hashed.counts.tolist(),
        hashed.digest,
        hashed.defects,
        list(hashed.token_counts.items()),  # the texts, in the order of the hashes
        utf8(hashed),  # … and their UTF-8, as the compiled core hands it to a writer
        len(hashed),
    )


def utf8(hashed: HashedTokens) -> list[bytes]:
    encoded = hashed.encoded()
    texts = [
        encoded.blob[start : start + length]
        for start, length in zip(encoded.starts.tolist(), encoded.lengths.tolist(), strict=True)
    ]
    assert texts == [text.encode("utf-8", "surrogatepass") for text in hashed.token_counts]
    return texts


def assert_same_raw(raw: bytes, limits: TokenizerLimits = LIMITS, what: str = "") -> None:
    compiled = raw_by(COMPILED, raw, limits)
    assert answers(compiled) == answers(raw_by(PYTHON, raw, limits)), what or repr(raw)
    assert compiled.hashes.dtype == compiled.counts.dtype == "int64"


def assert_same_text(text: str, limits: TokenizerLimits = LIMITS, what: str = "") -> None:
    compiled = text_by(COMPILED, text, limits)
    assert answers(compiled) == answers(text_by(PYTHON, text, limits)), what or repr(text)


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["spamassassin", "trec06c-subset", "csdmc2010"])
def test_every_mail_of_the_corpus_hashes_the_same_both_ways(name: str) -> None:
    messages = 0
    for record in read_corpus(name):
        assert_same_raw(raw_bytes(record), what=record["id"])
        messages += 1
    assert messages > 1900


@pytest.mark.corpus
def test_every_sms_and_text_only_mail_hashes_the_same_both_ways() -> None:
    for record in read_corpus("sms-spam-collection"):
        assert_same_text(record["text"], what=record["id"])
    for index, record in enumerate(read_corpus("trec06c-subset")):
        if index % 10:
            continue  # as test_core_parity: the raw test reads every message
        assert_same_text(text_only(raw_bytes(record), core=TOKEN_CORE), what=record["id"])


# Small caps and token lengths: pairs cut inside a multi-byte character, over-long words,
# and the cap on distinct tokens falling anywhere in a message.
limits_drawn = st.builds(
    TokenizerLimits,
    max_token_chars=st.integers(min_value=1, max_value=46),
    max_distinct_tokens=st.one_of(st.just(20_000), st.integers(min_value=0, max_value=40)),
)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), limits_drawn)
def test_arbitrary_bytes_hash_the_same_both_ways(raw: bytes, limits: TokenizerLimits) -> None:
    assert_same_raw(raw, limits)


@settings(max_examples=300, deadline=None)
@given(mail_like, limits_drawn)
def test_mail_like_bytes_hash_the_same_both_ways(raw: bytes, limits: TokenizerLimits) -> None:
    assert_same_raw(raw, limits)


@settings(max_examples=500, deadline=None)
@given(st.one_of(texts, st.text(max_size=2000)), limits_drawn)
def test_arbitrary_text_hashes_the_same_both_ways(text: str, limits: TokenizerLimits) -> None:
    assert_same_text(text, limits)


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, max_size=200, unique=True), st.sampled_from([-1, 0, 1, 2]))
def test_the_digest_sorts_tokens_by_code_point_whatever_its_depth_limit(
    tokens: list[str], depth: int
) -> None:
    """The digest's introsort, and the heapsort it falls back to (depth 0) when a sender's
    token order defeats its pivots, give Python's order of the texts."""
    from app.text import _core  # type: ignore[attr-defined]

    tokens = [token.encode("utf-8", "replace").decode() for token in tokens]  # no surrogates
    expected = [token.encode() for token in sorted(set(tokens))]
    assert _core.sorted_utf8(sorted(set(tokens), reverse=True), depth) == expected
    assert _core.sorted_utf8(list(dict.fromkeys(tokens)), depth) == expected


def test_a_message_given_as_str_hashes_the_same_both_ways() -> None:
    raw = "Subject: caf\u00e9 \u4e2d\u6587\n\nBuy the cheap pills now at http://a.example/x"
    compiled = raw_by(COMPILED, raw, LIMITS)
    assert answers(compiled) == answers(raw_by(PYTHON, raw, LIMITS))


def test_the_text_is_capped_as_tokenize_text_caps_it() -> None:
    limits = TokenizerLimits(max_scan_bytes=50)
    text = "caf\u00e9 \u4e2d\u6587 word " * 20
    assert_same_text(text, limits)
    assert "truncated" in text_by(COMPILED, text, limits).defects


def test_the_distinct_token_cap_keeps_the_first_tokens_and_says_so() -> None:
    raw = b"Subject: many\n\n" + b" ".join(b"w%d" % n for n in range(500))
    for cap in (0, 1, 5, 100, 2000):
        limits = TokenizerLimits(max_distinct_tokens=cap)
        assert_same_raw(raw, limits)
        hashed = raw_by(COMPILED, raw, limits)
        assert len(hashed) == min(cap, len(raw_by(COMPILED, raw, LIMITS)))
        assert ("truncated" in hashed.defects) == (cap < 2000)


BUDGET_MESSAGE = (
    b"From: Ann <a@example.org>\nSubject: hello there\nContent-Type: multipart/mixed; "
    b"boundary=b\n\n--b\n\nfirst part http://a.example/x\n--b\nContent-Type: text/html\n\n"
    b"<p>second <a href='http://b.example/'>part</a><!-- hidden words --></p>\n"
    b"--b\n\nthird part\n--b--\n"
)


def ticking() -> Callable[[], float]:
    """A clock that advances by 1 each time it is read: the budget runs out at a check."""
    ticks = iter(range(1_000_000))
    return lambda: float(next(ticks))


def test_the_time_budget_runs_out_at_the_same_checks_both_ways() -> None:
    cut = 0
    for deadline in range(30):
        compiled_limits = TokenizerLimits(deadline=float(deadline), clock=ticking())
        python_limits = TokenizerLimits(deadline=float(deadline), clock=ticking())
        compiled = raw_by(COMPILED, BUDGET_MESSAGE, compiled_limits)
        assert answers(compiled) == answers(raw_by(PYTHON, BUDGET_MESSAGE, python_limits))
        # Both read the clock as often: the checks are the same ones.
        assert compiled_limits.clock() == python_limits.clock()  # type: ignore[misc]
        cut += "time_budget" in compiled.defects
        text_limits = [TokenizerLimits(deadline=float(deadline), clock=ticking()) for _ in range(2)]
        assert answers(text_by(COMPILED, "some words here", text_limits[0])) == answers(
            text_by(PYTHON, "some words here", text_limits[1])
        )
    assert 0 < cut < 30, "some deadlines must fall inside the message, some after it"


CATALOGUE = catalogue()


@pytest.mark.parametrize("bad", CATALOGUE, ids=[bad.id for bad in CATALOGUE])
def test_every_bad_input_hashes_the_same_both_ways_in_bounded_time(bad: BadInput) -> None:
    raw = bad.build()
    start = time.thread_time()
    compiled = raw_by(COMPILED, raw, LIMITS)
    seconds = time.thread_time() - start
    assert answers(compiled) == answers(raw_by(PYTHON, raw, LIMITS)), bad.id
    assert seconds < MAX_SECONDS


@pytest.mark.corpus
def test_threads_hashing_at_once_get_the_answers_of_one_thread() -> None:
    """Each thread counts in a table of its own: a thread waiting for the GIL in a Python
    call mid-message must not find another's tokens in it."""
    raws = [raw_bytes(record) for record in islice(read_corpus("spamassassin"), 300)]
    raws += [b"Subject: x\n\n" + b"word " * 50 + b"y" * 60 + b" http://a.example/p word" * 9] * 50
    expected = [answers(raw_by(COMPILED, raw, LIMITS)) for raw in raws]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(4) as pool:
            for _ in range(2):
                got = pool.map(lambda raw: answers(raw_by(COMPILED, raw, LIMITS)), raws)
                assert list(got) == expected
    finally:
        sys.setswitchinterval(interval)


def test_texts_are_made_on_demand_and_survive_the_next_message() -> None:
    first = raw_by(COMPILED, b"Subject: caf\xc3\xa9\n\nfirst message words", LIMITS)
    raw_by(COMPILED, b"Subject: other\n\nsecond message, other words entirely", LIMITS)
    assert list(first.token_counts)[:4] == [
        "header:subject",
        "subject:caf\u00e9",
        "content-type:text/plain",
        "first",
    ]


def test_a_thread_keeps_its_counter_for_mail_but_not_after_a_huge_message() -> None:
    from app.text import _core  # type: ignore[attr-defined]

    raw_by(COMPILED, b"Subject: hi\n\nan ordinary message", LIMITS)
    kept = _core._threads.counter
    assert kept is not None
    raw_by(COMPILED, b"Subject: hi\n\nanother ordinary message", LIMITS)
    assert _core._threads.counter is kept  # reused: its buffers grow once
    huge = b"Subject: big\n\n" + b" ".join(b"w%d" % n for n in range(100_000))
    assert_same_raw(huge)
    assert _core._threads.counter is None  # dropped: the next message starts small
    assert_same_raw(b"Subject: hi\n\nan ordinary message")


def test_an_extension_without_the_hash_path_falls_back_to_python_with_a_warning() -> None:
    # An extension built before the HashCounter existed must not leave hash_raw without a core.
    stale = types.SimpleNamespace(
        **{
            field.name: getattr(COMPILED, field.name)
            for field in dataclasses.fields(core.TokenCore)
            if field.name not in ("name", "hash_counter")
        }
    )
    with pytest.warns(RuntimeWarning, match="out of date.*hash_counter"):
        assert core.compiled_from(stale) is None


families_drawn = st.frozensets(st.sampled_from(FAMILIES))


@settings(max_examples=300, deadline=None)
@given(mail_like, limits_drawn, families_drawn)
def test_mail_hashes_the_same_both_ways_with_any_families_off(
    raw: bytes, limits: TokenizerLimits, families: frozenset[Family]
) -> None:
    compiled = hash_raw(raw, limits=limits, core=COMPILED, families=families)
    reference = hash_raw(raw, limits=limits, core=PYTHON, families=families)
    assert answers(compiled) == answers(reference), repr(raw)


@settings(max_examples=300, deadline=None)
@given(st.one_of(texts, st.text(max_size=2000)), limits_drawn, families_drawn)
def test_text_hashes_the_same_both_ways_with_any_families_off(
    text: str, limits: TokenizerLimits, families: frozenset[Family]
) -> None:
    compiled = hash_text(text, limits=limits, core=COMPILED, families=families)
    reference = hash_text(text, limits=limits, core=PYTHON, families=families)
    assert answers(compiled) == answers(reference), repr(text)


@settings(max_examples=200, deadline=None)
@given(mail_like, families_drawn)
def test_a_family_off_gives_the_tokens_of_every_family_but_its_own(
    raw: bytes, families: frozenset[Family]
) -> None:
    # A family is made independently of the others: off, exactly its tokens are missing
    # (while the distinct-token cap does not cut).
    every = hash_raw(raw, core=COMPILED).token_counts
    some = hash_raw(raw, core=COMPILED, families=families).token_counts
    left_out = prefixes_left_out(families)
    assert some == {
        token: count
        for token, count in every.items()
        if not (left_out and token.startswith(left_out))
    }


def core_with_counter(counter: type) -> types.SimpleNamespace:
    """The compiled core's functions with another HashCounter: an extension built from an
    older _core.pyx."""
    return types.SimpleNamespace(
        **{
            field.name: getattr(COMPILED, field.name)
            for field in dataclasses.fields(core.TokenCore)
            if field.name not in ("name", "hash_counter")
        },
        hash_counter=counter,
    )


def test_an_extension_whose_counter_cannot_skip_pairs_falls_back_to_python() -> None:
    # Built before the families were options: its HashCounter.body_text takes no switch.
    class OldCounter:
        def body_text(self, text: str, max_chars: int) -> None:
            pass

        def release(self) -> None:
            pass

    stale = core_with_counter(OldCounter)
    with pytest.warns(RuntimeWarning, match="out of date.*body_text"):
        assert core.compiled_from(stale) is None


def test_an_extension_whose_counter_gives_no_utf8_falls_back_to_python() -> None:
    # Built before writers took the tokens' bytes: its result is five values, no UTF-8.
    class OldCounter:
        def body_text(self, text: str, max_chars: int, pairs: bool) -> None:
            pass

        def result(self, max_distinct: int) -> tuple[object, ...]:
            empty = np.zeros(0, dtype=np.int64)
            return (empty, empty, "", list, False)

        def release(self) -> None:
            pass

    stale = core_with_counter(OldCounter)
    with pytest.warns(RuntimeWarning, match="out of date.*UTF-8"):
        assert core.compiled_from(stale) is None
