"""Message-level limits (ROBUSTNESS "suggested starting limits", issue 4) over HTTP, each at its
limit and one past it, with a small value and with the default, on SQLite and PostgreSQL.

Each message is trained through `/v1/models/default/train`; the answer's `defects` and the token
texts stored in the database show what the limit did. A message at the limit and the one past
it end in different words ("yz" and "qr"), so both can be stored and still be told apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.config import Settings
from app.main import create_app
from app.text import TokenizerLimits, tokenize_raw, tokenize_text
from tests.builders import spam_text, stored_counts, train_examples
from tests.cores import TOKEN_CORE

RFC822 = {"content-type": "message/rfc822"}
TRAIN = "/v1/models/default/train"
# Eleven words: every message below has at least min_train_tokens (11) without the part tested.
WORDS = " ".join(f"w{i}" for i in range(11))


@contextmanager
def client_with(settings: Settings, **limits: Any) -> Iterator[TestClient]:
    checked = Settings.model_validate({**settings.model_dump(), **limits})
    with TestClient(create_app(checked)) as client:
        yield client


def train_raw(client: TestClient, raw: bytes) -> dict[str, Any]:
    response = client.post(f"{TRAIN}?label=spam", content=raw, headers=RFC822)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def train_text(client: TestClient, text: str) -> dict[str, Any]:
    response = client.post(TRAIN, json={"label": "spam", "text": text})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def stored_tokens(client: TestClient) -> set[str]:
    return {text for text, _ in stored_counts(client).nonzero_counts()}


def error_code(response: Any) -> str:
    return str(response.json()["error"]["code"])


def test_the_defaults_are_the_catalogue_values() -> None:
    defaults = {name: field.default for name, field in Settings.model_fields.items()}
    assert defaults["max_header_value_bytes"] == 8 * 1024
    assert defaults["max_header_fields"] == 1000
    assert defaults["max_mime_depth"] == 20
    assert defaults["max_mime_parts"] == 1000
    assert defaults["max_scan_bytes"] == 512 * 1024
    assert defaults["max_distinct_tokens"] == 20_000
    assert defaults["max_token_chars"] == 40
    assert defaults["min_train_tokens"] == 11
    assert defaults["classify_time_budget_seconds"] == 2
    assert defaults["train_time_budget_seconds"] == 5


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_header_value_bytes", 0),
        ("max_header_fields", 0),
        ("max_mime_depth", 0),
        ("max_mime_parts", 0),
        ("max_scan_bytes", 0),
        ("max_distinct_tokens", 0),
        ("max_token_chars", 0),
        ("max_token_chars", 47),  # tokens must fit the 200-byte column
        ("min_train_tokens", 0),
        ("classify_time_budget_seconds", -1),
        ("train_time_budget_seconds", -0.5),
    ],
)
def test_settings_out_of_bounds_are_refused(name: str, value: float) -> None:
    with pytest.raises(ValidationError, match=name):
        Settings.model_validate({name: value})


def test_the_limits_are_read_from_spamsift_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPAMSIFT_MAX_HEADER_FIELDS", "7")
    monkeypatch.setenv("SPAMSIFT_MIN_TRAIN_TOKENS", "3")
    monkeypatch.setenv("SPAMSIFT_TRAIN_TIME_BUDGET_SECONDS", "0.25")
    settings = Settings(_env_file=None)  # type: ignore[call-arg,unused-ignore]
    assert (settings.max_header_fields, settings.min_train_tokens) == (7, 3)
    assert settings.train_time_budget_seconds == 0.25


# -- header value length --------------------------------------------------------------------


def subject_of_length(length: int, last_word: str) -> bytes:
    """A Subject value of exactly `length` characters ending in " <last_word>"."""
    value = "x" * (length - len(last_word) - 1) + " " + last_word
    assert len(value) == length
    return f"Subject: {value}\n\n{WORDS}".encode()


@pytest.mark.parametrize("limit", [64, 8 * 1024])
def test_a_header_value_at_the_limit_is_whole_and_one_byte_more_is_truncated(
    settings: Settings, limit: int
) -> None:
    with client_with(settings, max_header_value_bytes=limit) as client:
        at_limit = train_raw(client, subject_of_length(limit, "yz"))
        beyond = train_raw(client, subject_of_length(limit + 1, "qr"))
        tokens = stored_tokens(client)

    assert "truncated" not in at_limit["defects"]
    assert "truncated" in beyond["defects"]
    assert "subject:yz" in tokens
    assert {"subject:q"} <= tokens
    assert "subject:qr" not in tokens


# -- header field count ---------------------------------------------------------------------


def header_fields(count: int, prefix: str) -> bytes:
    fields = "".join(f"X-{prefix}{i}: v\n" for i in range(count))
    return f"{fields}\n{WORDS}".encode()


@pytest.mark.parametrize("limit", [5, 1000])
def test_header_fields_up_to_the_limit_are_read_and_one_more_is_truncated(
    settings: Settings, limit: int
) -> None:
    with client_with(settings, max_header_fields=limit) as client:
        at_limit = train_raw(client, header_fields(limit, "a"))
        beyond = train_raw(client, header_fields(limit + 1, "b"))
        tokens = stored_tokens(client)

    assert "truncated" not in at_limit["defects"]
    assert "truncated" in beyond["defects"]
    assert f"header:x-a{limit - 1}" in tokens
    assert f"header:x-b{limit - 1}" in tokens
    assert f"header:x-b{limit}" not in tokens
    assert "w10" in tokens  # the body is still read


# -- MIME depth -----------------------------------------------------------------------------

TOP = "From: a@example.org\nSubject: one two three four five six seven eight nine ten\n"


def nested_messages(depth: int, word: str) -> bytes:
    """`depth` message/rfc822 parts, each inside the one before; `word` in the innermost."""
    return (TOP + "Content-Type: message/rfc822\n\n" * depth + f"Subject: x\n\n{word}").encode()


def nested_multiparts(depth: int, word: str) -> bytes:
    """`depth` levels of multipart below the top one... the text part at depth `depth`."""
    raw = TOP
    for level in range(depth):
        raw += f"Content-Type: multipart/mixed; boundary=b{level}\n\n--b{level}\n"
    return (raw + f"\n{word}\n").encode()


@pytest.mark.parametrize("limit", [3, 20])
@pytest.mark.parametrize("nesting", [nested_messages, nested_multiparts])
def test_parts_nested_to_the_limit_are_read_and_one_level_more_is_not(
    settings: Settings, limit: int, nesting: Any
) -> None:
    with client_with(settings, max_mime_depth=limit) as client:
        at_limit = train_raw(client, nesting(limit, "deepyz"))
        beyond = train_raw(client, nesting(limit + 1, "deepqr"))
        tokens = stored_tokens(client)

    assert "mime_depth" not in at_limit["defects"]
    assert "mime_depth" in beyond["defects"]
    assert "deepyz" in tokens
    assert "deepqr" not in tokens


# -- MIME part count ------------------------------------------------------------------------


def parts(count: int, prefix: str) -> bytes:
    """A multipart of `count` parts in all: the multipart itself and count - 1 text parts."""
    children = "".join(f"--z\n\n{prefix}{i}\n" for i in range(count - 1))
    return (TOP + f"Content-Type: multipart/mixed; boundary=z\n\n{children}--z--\n").encode()


@pytest.mark.parametrize("limit", [4, 1000])
def test_parts_up_to_the_limit_are_read_and_one_more_is_truncated(
    settings: Settings, limit: int
) -> None:
    with client_with(settings, max_mime_parts=limit) as client:
        at_limit = train_raw(client, parts(limit, "a"))
        beyond = train_raw(client, parts(limit + 1, "b"))
        tokens = stored_tokens(client)

    assert "truncated" not in at_limit["defects"]
    assert "truncated" in beyond["defects"]
    assert f"a{limit - 2}" in tokens  # the last of limit - 1 text parts
    assert f"b{limit - 2}" in tokens
    assert f"b{limit - 1}" not in tokens


# -- decoded text scanned -------------------------------------------------------------------


def text_of_length(length: int, last_word: str) -> str:
    """Plain ASCII text of exactly `length` bytes: WORDS, filler, then " <last_word>"."""
    head = WORDS + " "
    text = head + "x" * (length - len(head) - len(last_word) - 1) + " " + last_word
    assert len(text.encode()) == length
    return text


@pytest.mark.parametrize("limit", [100, 512 * 1024])
@pytest.mark.parametrize("form", ["text", "raw"])
def test_text_up_to_the_scan_limit_is_read_and_one_byte_more_is_truncated(
    settings: Settings, limit: int, form: str
) -> None:
    def send(text: str) -> dict[str, Any]:
        if form == "text":
            return train_text(client, text)
        return train_raw(client, f"Subject: s\n\n{text}".encode())

    with client_with(settings, max_scan_bytes=limit) as client:
        at_limit = send(text_of_length(limit, "yz"))
        beyond = send(text_of_length(limit + 1, "qr"))
        tokens = stored_tokens(client)

    assert "truncated" not in at_limit["defects"]
    assert "truncated" in beyond["defects"]
    assert {"yz", "q"} <= tokens
    assert "qr" not in tokens


# -- distinct tokens per message ------------------------------------------------------------


@pytest.mark.parametrize("limit", [30, 20_000])
def test_distinct_tokens_up_to_the_limit_are_kept_and_one_more_is_truncated(
    settings: Settings, limit: int
) -> None:
    # n words give 2n + 1 distinct tokens (n words, n - 1 pairs, size, links); a URL adds one
    at_limit_text = " ".join(f"a{i}" for i in range((limit - 2) // 2)) + " http://x.example"
    beyond_text = " ".join(f"b{i}" for i in range(limit // 2))
    unlimited = TokenizerLimits(max_distinct_tokens=10 * limit)
    assert (
        len(tokenize_text(at_limit_text, limits=unlimited, core=TOKEN_CORE).token_counts) == limit
    )
    beyond_tokens = list(tokenize_text(beyond_text, limits=unlimited, core=TOKEN_CORE).token_counts)
    assert len(beyond_tokens) == limit + 1
    with client_with(settings, max_distinct_tokens=limit) as client:
        at_limit = train_text(client, at_limit_text)
        beyond = train_text(client, beyond_text)
        tokens = stored_tokens(client)

    assert "truncated" not in at_limit["defects"]
    assert "truncated" in beyond["defects"]
    assert at_limit["tokens"] == beyond["tokens"] == limit
    assert set(beyond_tokens[:limit]) <= tokens  # the first `limit` distinct tokens are kept
    at_limit_tokens = set(
        tokenize_text(at_limit_text, limits=unlimited, core=TOKEN_CORE).token_counts
    )
    assert tokens == at_limit_tokens | set(beyond_tokens[:limit])


# -- token length ---------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [10, 40])
def test_a_word_of_the_limit_is_a_token_and_one_char_more_is_a_skip_token(
    settings: Settings, limit: int
) -> None:
    at_limit, beyond = "a" * limit, "b" * (limit + 1)
    skip = f"skip:b {(limit + 1) // 10 * 10}"
    with client_with(settings, max_token_chars=limit) as client:
        as_text = train_text(client, f"{WORDS} {at_limit} {beyond}")
        as_raw = train_raw(client, f"Subject: {at_limit} {beyond}\n\n{WORDS}".encode())
        tokens = stored_tokens(client)

    assert as_text["defects"] == as_raw["defects"] == []  # a skip token is no defect
    assert {at_limit, skip, f"subject:{at_limit}", f"subject:{skip}"} <= tokens
    assert not any(beyond in token for token in tokens)


# -- fewest tokens to train -----------------------------------------------------------------


def words(count: int, prefix: str) -> str:
    return " ".join(f"{prefix}{i}" for i in range(count))


def body_only(text: str) -> str:
    """A raw message of no header field: its tokens are the words of `text`."""
    return "\n" + text


@pytest.mark.parametrize("limit", [11, 3])
def test_training_raw_mail_needs_min_train_tokens(settings: Settings, limit: int) -> None:
    with client_with(settings, min_train_tokens=limit) as client:
        too_few = client.post(
            TRAIN, json={"label": "spam", "raw": body_only(words(limit - 1, "f"))}
        )
        nothing_stored = stored_counts(client)
        enough = client.post(TRAIN, json={"label": "spam", "raw": body_only(words(limit, "e"))})

        assert too_few.status_code == 422
        assert error_code(too_few) == "too_few_tokens"
        assert f"has {limit - 1} distinct tokens" in too_few.json()["error"]["message"]
        assert nothing_stored.trained == {}
        assert nothing_stored.nonzero_counts() == {}
        assert enough.status_code == 200, enough.text
        # every token stored, word pairs and shape tokens included
        expected = len(tokenize_raw(body_only(words(limit, "e")), core=TOKEN_CORE).token_counts)
        assert enough.json()["tokens"] == expected > limit


def test_a_batch_with_one_message_of_too_few_tokens_applies_nothing_and_names_it(
    settings: Settings,
) -> None:
    with client_with(settings) as client:
        items = [
            {"label": "spam", "text": spam_text(1)},
            {"label": "ham", "raw": body_only(words(11, "h"))},
            {"label": "ham", "raw": body_only(words(10, "s"))},
        ]
        refused = client.post(f"{TRAIN}/batch", json={"items": items})
        after_refusal = stored_counts(client)
        items[2]["raw"] = body_only(words(11, "s"))
        accepted = client.post(f"{TRAIN}/batch", json={"items": items})

        assert refused.status_code == 422
        assert error_code(refused) == "too_few_tokens"
        assert refused.json()["error"]["message"].startswith("items[2]: ")
        assert after_refusal.trained == {}
        assert after_refusal.nonzero_counts() == {}
        assert accepted.status_code == 200, accepted.text


def test_feedback_with_a_message_of_too_few_tokens_is_422(settings: Settings) -> None:
    with client_with(settings) as client:
        response = client.post(
            "/v1/models/default/feedback", json={"label": "spam", "raw": body_only(words(10, "f"))}
        )
        rfc822 = client.post(
            "/feedback?label=spam", content=b"Subject: hi\n\nshort", headers=RFC822
        )
        assert stored_counts(client).trained == {}

    assert response.status_code == rfc822.status_code == 422
    assert error_code(response) == error_code(rfc822) == "too_few_tokens"


def test_plain_text_trains_with_any_token_while_raw_mail_keeps_the_floor(
    settings: Settings,
) -> None:
    with client_with(settings) as client:
        short_text = client.post(TRAIN, json={"label": "spam", "text": "free prize now"})
        short_mail = client.post(TRAIN, json={"label": "spam", "raw": body_only("free prize now")})
        no_token = client.post(TRAIN, json={"label": "spam", "text": "!!! ..."})
        feedback = client.post(
            "/v1/models/default/feedback", json={"label": "ham", "text": "lunch at noon?"}
        )

    assert short_text.status_code == 200, short_text.text
    assert short_text.json()["tokens"] == len(
        tokenize_text("free prize now", core=TOKEN_CORE).token_counts
    )
    assert feedback.status_code == 200, feedback.text
    assert short_mail.status_code == 422
    assert error_code(short_mail) == "too_few_tokens"
    assert no_token.status_code == 422
    assert error_code(no_token) in ("too_few_tokens", "invalid_message")


# -- time budget ----------------------------------------------------------------------------

LONG_MESSAGE = (
    "From: a@example.org\nSubject: cheap watches\nContent-Type: multipart/mixed; boundary=z\n\n"
    f"--z\n\n{WORDS}\n--z\nContent-Type: text/html\n\n<p>{spam_text(3)}</p>\n--z--\n"
)


def test_classify_past_its_time_budget_scores_what_it_read_and_says_time_budget(
    settings: Settings,
) -> None:
    # A budget of 0 has run out at the first look: deterministic, no timing involved.
    with client_with(settings, classify_time_budget_seconds=0) as client:
        train_examples(client, 2, 2)  # training has its own budget
        single = client.post("/v1/models/default/classify", json={"raw": LONG_MESSAGE})
        rfc822 = client.post("/classify", content=LONG_MESSAGE.encode(), headers=RFC822)
        batch = client.post(
            "/v1/models/default/classify/batch",
            json={"items": [{"raw": LONG_MESSAGE}, {"text": spam_text(4)}]},
        )
    with client_with(settings) as client:
        train_examples(client, 2, 2)
        in_time = client.post("/v1/models/default/classify", json={"raw": LONG_MESSAGE})

    assert single.status_code == rfc822.status_code == batch.status_code == 200, single.text
    assert "time_budget" in single.json()["defects"]
    assert "time_budget" in rfc822.json()["defects"]
    assert all("time_budget" in r["defects"] for r in batch.json()["results"])
    assert single.json()["tokens"] == 0  # nothing was read in time: the priors decide
    assert in_time.status_code == 200
    assert "time_budget" not in in_time.json()["defects"]
    assert in_time.json()["tokens"] > 0


def test_train_past_its_time_budget_is_503_and_applies_nothing(settings: Settings) -> None:
    with client_with(settings, train_time_budget_seconds=0) as client:
        single = client.post(TRAIN, json={"label": "spam", "raw": LONG_MESSAGE})
        rfc822 = client.post("/train?label=spam", content=LONG_MESSAGE.encode(), headers=RFC822)
        batch = client.post(
            f"{TRAIN}/batch",
            json={"items": [{"label": "spam", "raw": LONG_MESSAGE}] * 2},
        )
        feedback = client.post(
            "/v1/models/default/feedback", json={"label": "ham", "raw": LONG_MESSAGE}
        )
        stored = stored_counts(client)

    for response in (single, rfc822, batch, feedback):
        assert response.status_code == 503, response.text
        assert error_code(response) == "time_budget_exceeded"
        assert response.headers["retry-after"] == "1"
    assert batch.json()["error"]["message"].startswith("items[0]: ")
    assert stored.trained == {}
    assert stored.nonzero_counts() == {}
