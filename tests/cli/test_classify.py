"""`spamsift classify` and `spamsift feedback` as console scripts: output, exit status as
bogofilter's, the byte-exact `--add-header` filter, locally and with `--url` against a server."""

from __future__ import annotations

import json
import re
from email import message_from_bytes
from pathlib import Path

import pytest

from app.cli.mail import add_verdict_headers, split_header_block, strip_own_headers
from app.cli.sources import to_message
from app.config import Settings
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.store.engine import Database
from tests.builders import stored_counts
from tests.cli.conftest import Cli
from tests.cli.mailfiles import ham_bytes, latin1_ham, spam_bytes

# No known word; its shape is one link (as every trained spam) in plain text (as every trained
# ham), a size no trained message has: evidence either way in equal measure.
UNKNOWN = b"Subject: zyxxy\r\n\r\nqwertzu http://zz.invalid/\r\n"


def train_some(database_url: str, model: str = "default") -> None:
    """Ten spam and ten ham through the service, named as the CLI names them (by Message-ID):
    the setup, not what is under test."""
    rt = Runtime(Settings(database_url=database_url, _env_file=None))  # type: ignore[call-arg]
    try:
        items = [(to_message(spam_bytes(i)), "spam") for i in range(10)]
        items += [(to_message(ham_bytes(i)), "ham") for i in range(10)]
        train_batch(rt, model_name=model, items=items)
    finally:
        rt.close()


@pytest.fixture
def trained(cli: Cli) -> Cli:
    train_some(cli.database_url)
    return cli


@pytest.mark.slow
def test_classify_prints_the_verdict_and_exits_as_bogofilter_does(trained: Cli) -> None:
    for raw, verdict, status in (
        (spam_bytes(20), "spam", 0),
        (ham_bytes(20), "ham", 1),
        (UNKNOWN, "unsure", 2),  # no known word, shape evidence balanced
    ):
        completed = trained("classify", input=raw)
        assert completed.returncode == status, completed.stderr.decode()
        word, probability = completed.stdout.decode().split()
        assert word == verdict
        assert 0.0 <= float(probability) <= 1.0


def test_classify_reads_a_file_and_gives_the_whole_result_as_json(
    trained: Cli, tmp_path: Path
) -> None:
    path = tmp_path / "mail.eml"
    path.write_bytes(spam_bytes(21))

    result = json.loads(trained.ok("classify", "--json", str(path)))

    assert result["verdict"] == "spam"
    assert result["message_id"] == "<spam21@lottery.example>"
    assert set(result) >= {
        "message_id", "label", "verdict", "probabilities", "spam_probability", "scores",
        "event_model", "tokens", "defects",
    }  # fmt: skip


@pytest.mark.slow
def test_classify_errors_exit_3(cli: Cli, tmp_path: Path) -> None:
    untrained = cli("classify", input=spam_bytes(1))
    missing = cli("classify", str(tmp_path / "nope.eml"))
    empty = cli("classify", input=b"")
    down = cli("classify", "--url", "http://127.0.0.1:9", input=spam_bytes(1))
    bad_option = cli("classify", "--no-such-option", input=spam_bytes(1))  # 2 would be unsure

    for completed in (untrained, missing, empty, down, bad_option):
        assert completed.returncode == 3
        assert completed.stdout == b""
        assert completed.stderr
    assert b"no trained message" in untrained.stderr


@pytest.mark.slow
def test_add_header_prints_the_message_byte_for_byte_with_the_verdict_headers_first(
    trained: Cli,
) -> None:
    for raw in (spam_bytes(22), latin1_ham(3), ham_bytes(22).replace(b"\r\n", b"\n")):
        completed = trained("classify", "--add-header", input=raw)

        assert completed.returncode in (0, 1), completed.stderr.decode()
        spam = completed.returncode == 0
        newline = b"\r\n" if raw.split(b"\n", 1)[0].endswith(b"\r") else b"\n"
        added = 5 if spam else 4  # X-Spam-Flag on spam only
        *fields, rest = completed.stdout.split(newline, added)
        assert fields[0] in (b"X-Spamsift-Verdict: spam", b"X-Spamsift-Verdict: ham")
        assert re.fullmatch(rb"X-Spamsift-Probability: [01]\.\d{6}", fields[1])
        assert [field.split(b":")[0] for field in fields[2:]] == [
            *([b"X-Spam-Flag"] if spam else []),
            b"X-Spam-Status",
            b"X-Spam-Level",
        ]
        assert rest == raw


@pytest.mark.slow
def test_add_header_writes_what_spamassassin_readers_expect(trained: Cli) -> None:
    spam = trained("classify", "--add-header", input=spam_bytes(27)).stdout
    ham = trained("classify", "--add-header", input=ham_bytes(27)).stdout
    renamed = trained(
        "classify",
        "--add-header",
        input=spam_bytes(27),
        env={"SPAMSIFT_SPAM_STATUS_HEADER": "X-Bayes-Status", "SPAMSIFT_SPAM_LEVEL_HEADER": ""},
    ).stdout

    spam_fields = message_from_bytes(spam)
    assert spam_fields["X-Spam-Flag"] == "YES"
    assert re.fullmatch(
        r"Yes, score=\d+\.\d required=9\.0 tests=SPAMSIFT_SPAM", spam_fields["X-Spam-Status"]
    )
    score = spam_fields["X-Spam-Status"].split("score=")[1].split()[0]
    assert spam_fields["X-Spam-Level"] == "*" * int(float(score))
    ham_fields = message_from_bytes(ham)
    assert ham_fields["X-Spam-Flag"] is None
    assert ham_fields["X-Spam-Status"].startswith("No, score=")
    renamed_fields = message_from_bytes(renamed)
    assert renamed_fields["X-Bayes-Status"].startswith("Yes, ")
    assert renamed_fields["X-Spam-Status"] is None
    assert renamed_fields["X-Spam-Level"] is None


def test_add_header_replaces_forged_verdict_headers_and_keeps_the_mbox_line(
    trained: Cli,
) -> None:
    raw = (
        b"From mallory@example.biz Sat Nov 21 09:30:00 2026\n"
        b"X-Spamsift-Verdict: ham\n"
        b"X-SPAMSIFT-Probability:\n 0.000000\n" + spam_bytes(23).replace(b"\r\n", b"\n")
    )

    completed = trained("classify", "--add-header", "--exit-zero", input=raw)

    assert completed.returncode == 0
    lines = completed.stdout.split(b"\n")
    assert lines[0].startswith(b"From mallory@example.biz")
    assert lines[1] == b"X-Spamsift-Verdict: spam"
    assert lines[2].startswith(b"X-Spamsift-Probability: ")
    assert completed.stdout.count(b"X-Spamsift") + completed.stdout.count(b"X-SPAMSIFT") == 2
    assert [line.split(b":")[0] for line in lines[3:6]] == [
        b"X-Spam-Flag",
        b"X-Spam-Status",
        b"X-Spam-Level",
    ]
    assert b"\n".join(lines[6:]) == spam_bytes(23).replace(b"\r\n", b"\n")


def test_add_header_fails_open_with_the_message_unchanged(cli: Cli) -> None:
    raw = spam_bytes(24)
    for args in (["--url", "http://127.0.0.1:9"], []):  # server down; nothing trained
        completed = cli("classify", "--add-header", "--exit-zero", *args, input=raw)
        assert completed.returncode == 3
        assert completed.stdout == raw


@pytest.mark.slow
def test_classify_through_a_server_answers_as_the_local_database(trained: Cli, server: str) -> None:
    for raw in (spam_bytes(25), ham_bytes(25), latin1_ham(5), UNKNOWN):
        local = trained("classify", "--json", input=raw)
        remote = trained("classify", "--json", "--url", server, input=raw)
        assert remote.returncode == local.returncode
        assert json.loads(remote.stdout) == json.loads(local.stdout)
        headed = trained("classify", "--add-header", "--url", server, input=raw)
        assert headed.stdout.endswith(raw)


def test_feedback_by_message_id_relabels_what_classify_saw(trained: Cli) -> None:
    raw = ham_bytes(26)
    assert trained("classify", input=raw).returncode == 1

    output = trained.ok("feedback", "--label", "spam", "--message-id", "<ham26@example.org>")

    assert output.strip() == "<ham26@example.org>: spam, trained"


@pytest.mark.slow
def test_feedback_with_the_message_relabels_it_even_with_our_headers_on(
    trained: Cli, server: str
) -> None:
    raw = spam_bytes(3)  # trained as spam by train_some
    marked = trained("classify", "--add-header", input=raw).stdout
    assert marked.startswith(b"X-Spamsift-Verdict: spam")

    local = trained.ok("feedback", "--label", "ham", "-", input=marked)
    remote = trained.ok("feedback", "--label", "spam", "--url", server, input=marked)
    again = trained.ok("feedback", "--label", "spam", "--url", server, input=marked)

    assert local.strip() == "<spam3@lottery.example>: ham, relabelled from spam"
    assert remote.strip() == "<spam3@lottery.example>: spam, relabelled from ham"
    assert again.strip() == "<spam3@lottery.example>: spam, already known"
    db = Database(trained.database_url)
    try:
        assert stored_counts(db).class_totals[1][0] == 10  # moved back, never counted twice
    finally:
        db.dispose()


def test_feedback_on_an_unknown_message_id_fails_with_status_1(trained: Cli) -> None:
    completed = trained("feedback", "--label", "spam", "--message-id", "<never@seen>")

    assert completed.returncode == 1
    assert b"retention" in completed.stderr


def test_header_helpers_give_back_every_byte() -> None:
    raw = b"A: 1\r\nB: two\r\n  folded\r\nX-Spamsift-Verdict: ham\r\n\r\nbody\r\nX-Spamsift: no\r\n"
    block = split_header_block(raw)

    assert block.join() == raw
    assert len(block.fields) == 3
    assert strip_own_headers(raw) == raw.replace(b"X-Spamsift-Verdict: ham\r\n", b"")
    assert add_verdict_headers(b"no headers at all", verdict="ham", probability=None) == (
        b"X-Spamsift-Verdict: ham\n\nno headers at all"
    )
