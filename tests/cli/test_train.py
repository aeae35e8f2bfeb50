"""`spamsift train`: every kind of source, the summary, refusals, and --url against a server."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.store.engine import Database
from tests.builders import StoredCounts, ham_text, spam_text, stored_counts
from tests.cli.conftest import Cli, run_on_terminal
from tests.cli.mailfiles import (
    ham_bytes,
    latin1_ham,
    spam_bytes,
    write_corpus,
    write_eml_folder,
    write_maildir,
    write_mbox,
)


def summary(output: str) -> dict[str, int]:
    """{"trained": n, "already known": n, "relabelled": n, "refused": n} from the summary."""
    found = dict(re.findall(r"^  (trained|already known|relabelled|refused) +(\d+)$", output, re.M))
    return {key: int(value) for key, value in found.items()}


def counts(database_url: str) -> StoredCounts:
    db = Database(database_url)
    try:
        return stored_counts(db)
    finally:
        db.dispose()


def test_train_reads_folders_mbox_and_maildir_and_sums_up(cli: Cli, tmp_path: Path) -> None:
    folder = write_eml_folder(tmp_path / "eml", [spam_bytes(i) for i in range(4)])
    mbox = write_mbox(tmp_path / "spam.mbox", [spam_bytes(i) for i in range(4, 7)])
    maildir = write_maildir(tmp_path / "Maildir", [ham_bytes(i) for i in range(5)])

    spam = cli.ok("train", "--label", "spam", str(folder), str(mbox))
    ham = cli.ok("train", "--label", "ham", str(maildir))

    assert summary(spam) == {"trained": 7, "already known": 0, "relabelled": 0, "refused": 0}
    assert summary(ham) == {"trained": 5, "already known": 0, "relabelled": 0, "refused": 0}
    stored = counts(cli.database_url)
    assert stored.class_totals[1][0] == 7  # spam: the .DS_Store file is not mail
    assert stored.class_totals[0][0] == 5  # ham: tmp/ and the .Junk sub-folder are not read
    message_ids = {message_id for message_id, _ in stored.trained.values()}
    assert "<spam5@lottery.example>" in message_ids  # the Message-ID header names the message
    assert "<ham3@example.org>" in message_ids


@pytest.mark.slow
def test_training_again_reports_known_and_relabelled_messages(cli: Cli, tmp_path: Path) -> None:
    folder = write_eml_folder(tmp_path / "eml", [spam_bytes(i) for i in range(4)])
    cli.ok("train", "--label", "spam", str(folder))
    before = counts(cli.database_url)

    again = cli.ok("train", "--label", "spam", str(folder))
    assert summary(again) == {"trained": 0, "already known": 4, "relabelled": 0, "refused": 0}
    assert counts(cli.database_url) == before

    moved = cli.ok("train", "--label", "ham", str(folder))
    assert summary(moved) == {"trained": 0, "already known": 0, "relabelled": 4, "refused": 0}
    assert counts(cli.database_url).class_totals[0][0] == 4


def test_a_corpus_carries_its_labels(cli: Cli, tmp_path: Path) -> None:
    corpus = write_corpus(
        tmp_path / "mixed.jsonl.gz",
        [{"id": f"s{i}", "label": "spam", "text": spam_text(i)} for i in range(3)]
        + [
            {"id": f"h{i}", "label": "ham", "text": ham_bytes(i).decode(), "encoding": "utf-8"}
            for i in range(2)
        ],
    )

    output = cli.ok("train", str(corpus))  # no --label: the lines have theirs

    assert summary(output)["trained"] == 5
    stored = counts(cli.database_url)
    assert stored.class_totals[1][0] == 3
    assert stored.class_totals[0][0] == 2
    assert {"s0", "<ham1@example.org>"} <= {mid for mid, _ in stored.trained.values()}


def test_refused_messages_are_listed_with_their_reason_and_the_rest_is_trained(
    cli: Cli, tmp_path: Path
) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    for i in range(6):
        (folder / f"spam{i}.eml").write_bytes(spam_bytes(i))
    (folder / "empty.eml").write_bytes(b"")
    (folder / "short.eml").write_bytes(b"Subject: hi\r\n\r\nok\r\n")
    corpus = write_corpus(
        tmp_path / "broken.jsonl",
        [{"id": "fine", "label": "spam", "text": spam_text(50)}, {"id": "x"}],
    )

    completed = cli("train", "--label", "spam", str(folder), str(corpus))

    assert completed.returncode == 0, completed.stderr
    output = completed.stdout.decode()
    assert summary(output) == {"trained": 7, "already known": 0, "relabelled": 0, "refused": 3}
    assert re.search(r"empty file: \S*empty\.eml", output)
    assert re.search(r"short\.eml", output)
    assert "broken.jsonl:2" in output
    assert counts(cli.database_url).class_totals[1][0] == 7


def test_a_path_that_does_not_exist_exits_2_before_anything_is_read(
    cli: Cli, tmp_path: Path
) -> None:
    folder = write_eml_folder(tmp_path / "eml", [spam_bytes(i) for i in range(3)])

    completed = cli("train", "--label", "spam", str(folder), str(tmp_path / "nope"))

    assert completed.returncode == 2
    assert b"nope: no such file or folder" in completed.stderr
    assert completed.stdout == b""
    assert counts(cli.database_url).class_totals[1][0] == 0


@pytest.mark.slow
def test_standard_input_is_an_mbox_or_one_message(cli: Cli, tmp_path: Path) -> None:
    mbox = write_mbox(tmp_path / "spam.mbox", [spam_bytes(i) for i in range(3)]).read_bytes()

    from_mbox = cli.ok("train", "--label", "spam", "-", input=mbox)
    one = cli.ok("train", "--label", "ham", "-", input=ham_bytes(7))

    assert summary(from_mbox) == {"trained": 3, "already known": 0, "relabelled": 0, "refused": 0}
    assert summary(one) == {"trained": 1, "already known": 0, "relabelled": 0, "refused": 0}
    stored = counts(cli.database_url)
    assert (stored.class_totals[0][0], stored.class_totals[1][0]) == (1, 3)
    message_ids = {message_id for message_id, _ in stored.trained.values()}
    assert {"<spam0@lottery.example>", "<spam2@lottery.example>", "<ham7@example.org>"} <= (
        message_ids
    )


@pytest.mark.slow
def test_standard_input_that_is_empty_too_large_or_named_twice_is_refused(
    cli: Cli, tmp_path: Path
) -> None:
    empty = cli.ok("train", "--label", "spam", "-", input=b"\n\n")
    too_large = cli(
        "train",
        "--label",
        "spam",
        "-",
        input=spam_bytes(1) + b"x" * 5000,
        env={"SPAMSIFT_MAX_MESSAGE_BYTES": "4096"},
    )
    twice = cli("train", "--label", "spam", "-", "-", input=spam_bytes(2))
    unlabelled = cli("train", "-", input=spam_bytes(3))

    assert summary(empty)["refused"] == 1
    assert "empty input: -" in empty
    assert too_large.returncode == 0, too_large.stderr
    assert "over the message size limit (4096 B): -" in too_large.stdout.decode()
    assert twice.returncode == 2  # a bad argument: said before anything is read
    assert b"standard input given twice" in twice.stderr
    assert unlabelled.returncode == 2
    assert counts(cli.database_url).class_totals[1][0] == 0


def test_train_needs_a_label_for_mail_files(cli: Cli, tmp_path: Path) -> None:
    folder = write_eml_folder(tmp_path / "eml", [spam_bytes(1)])

    completed = cli("train", str(folder))

    assert completed.returncode == 2
    assert b"--label" in completed.stderr


@pytest.mark.slow
def test_an_unknown_label_exits_2_before_anything_is_read(
    cli: Cli, server: str, tmp_path: Path
) -> None:
    folder = write_eml_folder(tmp_path / "eml", [spam_bytes(i) for i in range(3)])

    local = cli("train", "--label", "spma", str(folder))
    remote = cli("train", "--label", "spma", "--url", server, str(folder))

    for completed in (local, remote):
        assert completed.returncode == 2
        assert b"--label 'spma' is not a class of model default (ham, spam)" in completed.stderr
        assert completed.stdout == b""
    assert counts(cli.database_url).class_totals[1][0] == 0


def test_an_unknown_model_stops_with_status_1(cli: Cli, tmp_path: Path) -> None:
    folder = write_eml_folder(tmp_path / "eml", [spam_bytes(1)])

    completed = cli("train", "--label", "spam", "--model", "nosuch", str(folder))

    assert completed.returncode == 1
    assert b"nosuch" in completed.stderr


def test_no_progress_bar_when_stderr_is_not_a_terminal(cli: Cli, tmp_path: Path) -> None:
    folder = write_eml_folder(tmp_path / "eml", [spam_bytes(i) for i in range(3)])

    completed = cli("train", "--label", "spam", str(folder))

    assert completed.returncode == 0
    assert b"messages/s" not in completed.stderr
    assert b"\r" not in completed.stderr  # a bar redraws its line with carriage returns


def test_a_terminal_gets_a_progress_bar_with_messages_per_second(cli: Cli, tmp_path: Path) -> None:
    folder = write_eml_folder(tmp_path / "eml", [spam_bytes(i) for i in range(6)])
    completed, seen = run_on_terminal(
        cli, "train", "--label", "spam", "--batch-size", "2", str(folder)
    )
    assert completed.returncode == 0
    assert b"messages/s" in seen
    assert b"training" in seen
    assert summary(completed.stdout.decode())["trained"] == 6


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", ["500", "2"])
def test_train_through_a_server_stores_what_local_training_stores(
    cli: Cli, server: str, tmp_path: Path, batch_size: str
) -> None:
    messages = [spam_bytes(i) for i in range(5)] + [latin1_ham(i) for i in range(3)]
    spam_folder = write_eml_folder(tmp_path / "spam", messages[:5])
    ham_folder = write_eml_folder(tmp_path / "ham", [*messages[5:], ham_bytes(9)])
    (ham_folder / "short.eml").write_bytes(b"Subject: hi\r\n\r\nok\r\n")
    local = Cli(f"sqlite:///{tmp_path}/local.db", cli.cwd)
    local.ok("db", "upgrade")  # only serve and db upgrade create a database
    for runner, extra in ((local, []), (cli, ["--url", server])):
        for label, folder in (("spam", spam_folder), ("ham", ham_folder)):
            output = runner.ok(
                "train", "--label", label, "--batch-size", batch_size, *extra, str(folder)
            )
            assert summary(output)["refused"] == (1 if label == "ham" else 0), output

    remote_counts, local_counts = counts(cli.database_url), counts(local.database_url)
    assert remote_counts == local_counts
    assert remote_counts.class_totals[0][0] == 4  # three Latin-1 messages went alone, as bytes


@pytest.mark.slow
def test_train_through_a_server_relabels_and_refuses_like_the_local_database(
    cli: Cli, server: str, tmp_path: Path
) -> None:
    corpus = write_corpus(
        tmp_path / "c.jsonl",
        [{"id": f"m{i}", "label": "spam", "text": spam_text(i)} for i in range(4)]
        + [{"id": "short", "label": "ham", "text": "?!"}],  # no token at all
    )
    first = cli.ok("train", "--url", server, str(corpus))
    relabelled = write_corpus(
        tmp_path / "r.jsonl",
        [{"id": f"m{i}", "label": "ham", "text": spam_text(i)} for i in range(2)]
        + [{"id": "n0", "label": "ham", "text": ham_text(0)}],
    )
    second = cli.ok("train", "--url", server, str(relabelled))

    assert summary(first) == {"trained": 4, "already known": 0, "relabelled": 0, "refused": 1}
    assert summary(second) == {"trained": 1, "already known": 0, "relabelled": 2, "refused": 0}


def test_train_through_a_server_that_is_down_stops_with_status_1(cli: Cli, tmp_path: Path) -> None:
    folder = write_eml_folder(tmp_path / "eml", [spam_bytes(1)])

    completed = cli("train", "--label", "spam", "--url", "http://127.0.0.1:9", str(folder))

    assert completed.returncode == 1
    assert b"cannot reach" in completed.stderr
