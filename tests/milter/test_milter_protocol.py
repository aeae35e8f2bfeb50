"""The milter of `spamsift serve`, spoken to as Postfix does (tests/milter/client.py): headers
added, policies, the model chosen per recipient, fail open, and reports that find its verdict."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.builders import ham_message, spam_message, train_examples
from tests.database_link import DatabaseLink
from tests.milter.client import MilterClient, added_headers
from tests.servers import free_port

Serve = Callable[..., tuple[TestClient, MilterClient]]


@pytest.fixture
def serve(settings: Settings) -> Iterator[Serve]:
    """Start the app with a milter on a free port (settings overridden); train `default`."""
    opened: list[Any] = []

    def start(**overrides: Any) -> tuple[TestClient, MilterClient]:
        port = free_port()
        changed = settings.model_copy(
            update={"milter_address": f"127.0.0.1:{port}", "min_learns": 1, **overrides}
        )
        client = TestClient(create_app(changed))
        client.__enter__()
        opened.append(client)
        train_examples(client, 6, 6)
        milter = MilterClient("127.0.0.1", port)
        opened.append(milter)
        return client, milter

    yield start
    for thing in reversed(opened):
        if isinstance(thing, TestClient):
            thing.__exit__(None, None, None)
        else:
            thing.sock.close()


def test_spam_is_tagged_with_the_headers_mail_software_reads(serve: Serve) -> None:
    _, milter = serve()
    replies = milter.message(spam_message(80, message_id="<s80@x>").encode(), ["bob@example.net"])

    headers = added_headers(replies)
    assert replies[-1][0] == b"c"
    assert headers["X-Spamsift-Verdict"] == "spam"
    assert headers["X-Spam-Flag"] == "YES"
    assert headers["X-Spam-Status"].startswith("Yes, score=")
    assert "required=9.0 tests=SPAMSIFT_SPAM" in headers["X-Spam-Status"]
    score = headers["X-Spam-Status"].split("score=")[1].split()[0]
    assert headers["X-Spam-Level"] == "*" * int(float(score))


def test_ham_has_no_spam_flag_and_status_no(serve: Serve) -> None:
    _, milter = serve()
    headers = added_headers(milter.message(ham_message(81).encode(), ["bob@example.net"]))

    assert headers["X-Spamsift-Verdict"] == "ham"
    assert "X-Spam-Flag" not in headers
    assert headers["X-Spam-Status"].startswith("No, score=")


def test_header_names_are_configurable_and_may_be_left_out(serve: Serve) -> None:
    _, milter = serve(spam_status_header="X-Bayes-Status", spam_level_header="")
    headers = added_headers(milter.message(spam_message(82).encode(), ["bob@example.net"]))

    assert headers["X-Bayes-Status"].startswith("Yes")
    assert "X-Spam-Status" not in headers
    assert "X-Spam-Level" not in headers


def test_reject_refuses_spam_over_the_threshold_with_550(serve: Serve) -> None:
    _, milter = serve(milter_spam_action="reject", milter_reject_threshold=0.5)
    spam = milter.message(spam_message(83).encode(), ["bob@example.net"])
    ham = milter.message(ham_message(84).encode(), ["bob@example.net"])

    assert spam[-1][0] == b"y"
    assert spam[-1][1].startswith(b"550 5.7.1")
    assert ham[-1][0] == b"c"


def test_quarantine_holds_spam(serve: Serve) -> None:
    _, milter = serve(milter_spam_action="quarantine")
    replies = milter.message(spam_message(85).encode(), ["bob@example.net"])

    assert [command for command, _ in replies][-2:] == [b"q", b"c"]


def test_a_senders_spam_headers_are_removed(serve: Serve) -> None:
    _, milter = serve()
    forged = "X-Spam-Flag: NO\r\nX-Spamsift-Verdict: ham\r\n" + ham_message(86)
    replies = milter.message(forged.encode(), ["bob@example.net"])

    removed = {data[4:].split(b"\0")[0] for command, data in replies if command == b"m"}
    assert removed == {b"X-Spam-Flag", b"X-Spamsift-Verdict"}


def test_the_model_is_chosen_per_recipient(serve: Serve) -> None:
    client, milter = serve(
        milter_recipient_models="carol@example.net=carol", milter_model_per_recipient=True
    )
    assert client.post("/v1/models", json={"name": "carol"}).status_code == 201
    assert client.post("/v1/models", json={"name": "dave.example.net"}).status_code == 201

    to_carol = added_headers(milter.message(spam_message(87).encode(), ["carol@example.net"]))
    to_dave = added_headers(milter.message(spam_message(88).encode(), ["Dave@Example.NET"]))
    to_erin = added_headers(milter.message(spam_message(89).encode(), ["erin@example.net"]))
    to_both = added_headers(
        milter.message(spam_message(90).encode(), ["carol@example.net", "erin@example.net"])
    )

    # carol and dave.example.net have no trained message: their mail passes unscanned.
    assert to_carol == {"X-Spamsift-Scanned": "no (model not trained)"}
    assert to_dave == {"X-Spamsift-Scanned": "no (model not trained)"}
    assert to_erin["X-Spamsift-Verdict"] == "spam"  # no model of hers: the default
    assert to_both["X-Spamsift-Verdict"] == "spam"  # recipients of two models: the default


def test_a_message_not_classified_in_time_passes_marked(serve: Serve) -> None:
    _, milter = serve(milter_timeout_seconds=1e-9)
    replies = milter.message(spam_message(91).encode(), ["bob@example.net"])

    assert replies[-1][0] == b"c"
    assert added_headers(replies) == {"X-Spamsift-Scanned": "no (timeout)"}


def test_several_messages_on_one_connection(serve: Serve) -> None:
    _, milter = serve()
    verdicts = [
        added_headers(milter.message(raw.encode(), ["bob@example.net"]))["X-Spamsift-Verdict"]
        for raw in (spam_message(92), ham_message(93), spam_message(94))
    ]
    assert verdicts == ["spam", "ham", "spam"]


def test_a_report_of_the_delivered_copy_finds_the_milters_verdict(serve: Serve) -> None:
    client, milter = serve()
    raw = spam_message(95, message_id="<milter95@example.org>")
    assert added_headers(milter.message(raw.encode(), ["bob@example.net"]))["X-Spam-Flag"]
    delivered = (
        "Return-Path: <promo@lottery.biz>\nDelivered-To: bob@example.net\n"
        "Received: from localhost by mx (Postfix) with ESMTP id ABC123\n"
        "X-Spamsift-Verdict: spam\nX-Spam-Flag: YES\n" + raw.replace("\r\n", "\n")
    )

    first = client.post("/v1/models/default/feedback", json={"label": "ham", "raw": delivered})
    again = client.post("/v1/models/default/feedback", json={"label": "ham", "raw": delivered})
    by_id = client.post(
        "/v1/models/default/feedback",
        json={"label": "ham", "message_id": "<milter95@example.org>"},
    )

    assert first.json()["changed"] is True
    assert again.json()["changed"] is False
    assert by_id.json()["changed"] is False
    activity = client.get("/v1/models/default/stats").json()["activity"]["all"]
    assert activity["corrections"] == 1  # the milter said spam; one report, counted once


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_mail_passes_marked_when_the_database_stops_answering(
    serve: Serve, database_url: str
) -> None:
    link, relayed = DatabaseLink.to_database(database_url)
    try:
        # carol's model is not in memory (made, never used): her mail needs the database. (A
        # model held in memory classifies without it, until it looks for others' training.)
        client, milter = serve(
            database_url=relayed, milter_recipient_models="carol@example.net=carol"
        )
        assert client.post("/v1/models", json={"name": "carol"}).status_code == 201
        assert added_headers(milter.message(spam_message(96).encode(), ["bob@example.net"]))

        link.silence()
        replies = milter.message(spam_message(97).encode(), ["carol@example.net"])

        assert replies[-1][0] == b"c"
        assert added_headers(replies) == {"X-Spamsift-Scanned": "no (timeout)"}
    finally:
        link.close()
