"""`spamsift import-bogofilter`: a hand-made `bogoutil -d` dump, and a real one from Debian's
bogofilter where it is installed (`apt-get install bogofilter`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from app.store.engine import Database
from tests.builders import StoredCounts, stored_counts
from tests.cli.conftest import Cli
from tests.cli.mailfiles import ham_bytes, spam_bytes

DUMP = Path(__file__).parent / "data" / "bogofilter-wordlist.txt"
HAM, SPAM = 0, 1


def counts(database_url: str, model: str) -> StoredCounts:
    db = Database(database_url)
    try:
        return stored_counts(db, model)
    finally:
        db.dispose()


def test_a_dump_becomes_document_counts_in_spamsift_spelling(cli: Cli) -> None:
    output = cli.ok("import-bogofilter", str(DUMP), "--model", "bogo")

    assert "model bogo (created): added 4 spam and 3 ham messages" in output
    assert "skipped 1 tokens: header words (head:)" in output
    stored = counts(cli.database_url, "bogo")
    assert stored.class_totals == {HAM: (3, 16), SPAM: (4, 16)}
    expected = {
        # Free, free and FREE are one token; 3 + 2 + 1 spam messages are at most the 4 there are
        ("free", SPAM): 4,
        ("free", HAM): 1,
        ("casino", SPAM): 3,
        ("jackpot", SPAM): 2,
        ("meeting", HAM): 3,
        ("agenda", HAM): 2,
        ("quarterly", HAM): 2,
        ("subject:winner", SPAM): 4,
        ("subject:project", HAM): 3,
        ("received:lottery-1.biz", SPAM): 2,
        ("return-path:example.org", HAM): 3,
        ("from:example.org", HAM): 2,
        ("winner", SPAM): 1,  # the full-width spelling, after NFKC
    }
    # bogofilter counts presence only: the multinomial term counts equal the document counts
    assert stored.nonzero_counts() == {key: (docs, docs) for key, docs in expected.items()}
    assert stored.trained == {}  # no ledger: these messages cannot be forgotten one by one


def test_import_bogofilter_adds_to_a_model_and_import_dash_dash_bogofilter_is_the_same(
    cli: Cli,
) -> None:
    cli.ok("import-bogofilter", str(DUMP))
    cli.ok("import", "--bogofilter", "--model", "default", str(DUMP))

    stored = counts(cli.database_url, "default")
    assert stored.class_totals == {HAM: (6, 32), SPAM: (8, 32)}
    assert stored.token_counts[("casino", SPAM)] == (6, 6)


@pytest.mark.slow
def test_a_file_that_is_no_dump_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    broken = tmp_path / "broken.txt"
    broken.write_bytes(DUMP.read_bytes().replace(b"casino 3 0", b"casino three 0"))
    no_counts = tmp_path / "no-counts.txt"
    no_counts.write_bytes(b"casino 3 0 20261121\n")

    for path, message in ((broken, b"line 7"), (no_counts, b".MSG_COUNT")):
        completed = cli("import-bogofilter", str(path), "--model", "bogo")
        assert completed.returncode == 1
        assert message in completed.stderr
    assert b"no model named 'bogo'" in cli("classify", "--model", "bogo", "-", input=b"x").stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bogofilter") is None, reason="bogofilter is not installed")
def test_a_real_bogofilter_wordlist_moves_over(cli: Cli, tmp_path: Path) -> None:
    home = tmp_path / "bogofilter"
    home.mkdir()
    spam = [spam_bytes(i) for i in range(8)]
    ham = [ham_bytes(i) for i in range(8)]
    for flag, messages in (("-s", spam), ("-n", ham)):
        for raw in messages:
            subprocess.run(["bogofilter", "-d", str(home), flag], input=raw, check=True, timeout=60)
    dump = subprocess.run(
        ["bogoutil", "-d", str(home / "wordlist.db")],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    (tmp_path / "dump.txt").write_bytes(dump)
    bogofilter_counts = {
        line.split()[0]: (int(line.split()[1]), int(line.split()[2])) for line in dump.splitlines()
    }

    cli.ok("import-bogofilter", str(tmp_path / "dump.txt"), "--model", "moved")

    stored = counts(cli.database_url, "moved")
    assert bogofilter_counts[b".MSG_COUNT"] == (8, 8)
    assert stored.class_totals[SPAM][0] == 8
    assert stored.class_totals[HAM][0] == 8
    for word in (b"casino", b"meeting", b"agenda"):
        spam_docs, ham_docs = bogofilter_counts[word]
        text = word.decode()
        assert stored.token_counts.get((text, SPAM), (0, 0))[0] == spam_docs
        assert stored.token_counts.get((text, HAM), (0, 0))[0] == ham_docs
    # the moved-over model filters at once: its own training mail lands on the right side
    for raw, status in ((spam[0], 0), (spam[5], 0), (ham[0], 1), (ham[5], 1)):
        completed = cli("classify", "--model", "moved", "-", input=raw)
        assert completed.returncode == status, completed.stdout + completed.stderr
