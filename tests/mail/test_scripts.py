"""contrib/'s scripts against a real `spamsift serve`, installed as docs/mail-servers.md says
(tests/mail/contrib.py) and run with the environment Postfix and Pigeonhole give: no PATH, no
SPAMSIFT_* variable; settings come from mail.env alone. The whole mail system, with Postfix,
Dovecot, procmail and maildrop themselves, is tests/mail/test_end_to_end.py.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from app.cli.sources import to_message
from app.config import Settings
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.store.engine import Database
from tests.builders import stored_counts
from tests.cli.conftest import Cli
from tests.cli.mailfiles import ham_bytes, spam_bytes
from tests.mail.contrib import CONTRIB, Installed, install, pipe_environment

pytestmark = pytest.mark.skipif(
    shutil.which("curl") is None, reason="curl is not installed (Debian: apt-get install curl)"
)
DEAD_URL = "http://127.0.0.1:9"


def train_some(database_url: str) -> None:
    rt = Runtime(Settings(database_url=database_url, _env_file=None))  # type: ignore[call-arg]
    try:
        items = [(to_message(spam_bytes(i)), "spam") for i in range(10)]
        items += [(to_message(ham_bytes(i)), "ham") for i in range(10)]
        train_batch(rt, model_name="default", items=items)
    finally:
        rt.close()


def run(program: Path, *arguments: str, message: bytes) -> subprocess.CompletedProcess[bytes]:
    """Run as pipe(8) or Pigeonhole does: the message on stdin, their environment only."""
    return subprocess.run(
        [str(program), *arguments],
        input=message,
        env=pipe_environment("nobody"),
        cwd="/",
        capture_output=True,
        timeout=120,
    )


def headers_added(marked: bytes, original: bytes) -> list[str]:
    """The header lines `marked` has before `original` (which it must end with)."""
    assert marked.endswith(original)
    return marked[: len(marked) - len(original)].decode().splitlines()


@pytest.fixture
def installed(cli: Cli, server: str, tmp_path: Path) -> Installed:
    train_some(cli.database_url)
    filter_key = cli.ok("keys", "create", "--scope", "classify").split()[-1]
    report_key = cli.ok("keys", "create", "--scope", "train").split()[-1]
    return install(tmp_path / "root", url=server, filter_key=filter_key, report_key=report_key)


def test_the_mark_script_adds_the_servers_verdict(installed: Installed) -> None:
    for raw, verdict in ((spam_bytes(30), "spam"), (ham_bytes(30), "ham")):
        completed = run(installed.mark, message=raw)
        assert completed.returncode == 0, completed.stderr.decode()
        added = headers_added(completed.stdout, raw)
        assert added[0] == f"X-Spamsift-Verdict: {verdict}"
        probability = float(added[1].removeprefix("X-Spamsift-Probability: "))
        assert probability >= 0.9 if verdict == "spam" else probability <= 0.1
        assert len(added) == 2


def test_the_mark_script_drops_forged_marks_and_keeps_an_mbox_line_and_line_ends(
    installed: Installed,
) -> None:
    body = spam_bytes(31).replace(b"\r\n", b"\n")
    forged = body.replace(b"Subject:", b"X-Spamsift-Verdict: ham\n  (trust me)\nSubject:", 1)
    envelope = b"From promo@lottery.example Sat Nov 21 09:30:00 2026\n"

    completed = run(installed.mark, message=envelope + forged)

    assert completed.returncode == 0
    assert completed.stdout.startswith(envelope + b"X-Spamsift-Verdict: spam\n")
    assert completed.stdout.endswith(body)
    assert b"trust me" not in completed.stdout
    crlf = run(installed.mark, message=spam_bytes(32)).stdout
    assert crlf.startswith(b"X-Spamsift-Verdict: spam\r\nX-Spamsift-Probability: ")


@pytest.mark.parametrize("fault", ["server down", "key refused", "no settings"])
def test_the_mark_script_fails_open(installed: Installed, fault: str) -> None:
    if fault == "server down":
        installed.set_setting("SPAMSIFT_URL", DEAD_URL)
    elif fault == "key refused":
        installed.filter_key.write_text("ss_000000000000_wrong\n")
    else:
        installed.env_file.unlink()
    raw = spam_bytes(33)

    completed = run(installed.mark, message=raw)

    assert completed.returncode == 0  # procmail, maildrop and Postfix deliver the mail
    added = headers_added(completed.stdout, raw)
    assert added[0] == "X-Spamsift-Verdict: unscanned"
    assert added[1].startswith("X-Spamsift-Error: ")
    reason = {"server down": "127.0.0.1:9", "key refused": "HTTP 401", "no settings": "mail.env"}
    assert reason[fault] in added[1]


def test_the_postfix_filter_defers_only_when_it_cannot_hand_the_mail_back(
    installed: Installed,
) -> None:
    installed.set_setting("SPAMSIFT_REINJECT_URL", "smtp://127.0.0.1:9")
    completed = run(installed.filter, "alice@example.org", "bob@example.net", message=ham_bytes(1))
    assert completed.returncode == 75  # EX_TEMPFAIL: Postfix keeps the mail and retries
    assert run(installed.filter, message=ham_bytes(1)).returncode == 64


def class_messages(database_url: str) -> tuple[int, int]:
    db = Database(database_url)
    try:
        totals = stored_counts(db).class_totals
    finally:
        db.dispose()
    return totals[0][0], totals[1][0]


def wait_for_spool(installed: Installed, database_url: str, expected: tuple[int, int]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if class_messages(database_url) == expected and not any(
            (installed.spool / "new").iterdir()
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"counts {class_messages(database_url)}, expected {expected}")


def test_the_feedback_script_spools_and_reports_in_the_background(
    installed: Installed, cli: Cli
) -> None:
    raw = ham_bytes(4)  # trained as ham; the user moves it into Junk, then back out
    spam = run(installed.feedback, "spam", "alice@example.org", message=raw)
    assert spam.returncode == 0, spam.stderr.decode()
    wait_for_spool(installed, cli.database_url, (9, 11))
    ham = run(installed.feedback, "ham", "alice@example.org", message=raw)
    assert ham.returncode == 0, ham.stderr.decode()
    wait_for_spool(installed, cli.database_url, (10, 10))


def test_reports_wait_in_the_spool_while_the_server_is_down(
    installed: Installed, cli: Cli, server: str
) -> None:
    installed.set_setting("SPAMSIFT_URL", DEAD_URL)
    for i in range(3):
        assert run(installed.feedback, "spam", "alice", message=ham_bytes(i)).returncode == 0
    time.sleep(1)
    assert len(list((installed.spool / "new").iterdir())) == 3
    assert class_messages(cli.database_url) == (10, 10)

    installed.set_setting("SPAMSIFT_URL", server)
    drain = run(installed.feedback, "--drain", message=b"")
    assert drain.returncode == 0
    wait_for_spool(installed, cli.database_url, (7, 13))


def test_the_feedback_script_refuses_a_bad_label(installed: Installed) -> None:
    completed = run(installed.feedback, "maybe", "alice", message=ham_bytes(1))
    assert completed.returncode == 64
    assert not (installed.spool / "new").exists() or not any((installed.spool / "new").iterdir())


@pytest.mark.skipif(shutil.which("sievec") is None, reason="dovecot-sieve is not installed")
@pytest.mark.parametrize("name", ["report-spam.sieve", "report-ham.sieve", "spamsift-junk.sieve"])
def test_the_sieve_scripts_compile_with_the_guides_settings(tmp_path: Path, name: str) -> None:
    config = tmp_path / "dovecot.conf"
    config.write_text(f"!include {CONTRIB / 'dovecot' / '90-spamsift-imapsieve.conf'}\n")
    completed = subprocess.run(
        ["sievec", "-c", str(config), str(CONTRIB / "dovecot" / name), str(tmp_path / "out")],
        capture_output=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr.decode()
