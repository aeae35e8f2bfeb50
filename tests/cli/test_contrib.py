"""The mail-server recipes of contrib/, each run as written against a real `spamsift serve`.

procmail: the filter command of contrib/procmail/procmailrc (and procmail itself where Debian's
procmail is installed). Postfix: contrib/postfix/spamsift-filter.sh, re-injecting through a
stand-in for sendmail that keeps what Postfix would receive. Dovecot: the script the sieve
`pipe` of contrib/dovecot/*.sieve calls, with the message on stdin (and the sieve scripts
compiled with sievec where Debian's dovecot-sieve is installed).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from app.cli.sources import to_message
from app.config import Settings
from app.service.runtime import Runtime
from app.service.training import train_batch
from app.store.engine import Database
from tests.builders import stored_counts
from tests.cli.conftest import BIN, Cli, clean_environment
from tests.cli.mailfiles import ham_bytes, spam_bytes

CONTRIB = Path(__file__).resolve().parents[2] / "contrib"
DEAD_URL = "http://127.0.0.1:9"


def train_some(database_url: str) -> None:
    rt = Runtime(Settings(database_url=database_url, _env_file=None))  # type: ignore[call-arg]
    try:
        items = [(to_message(spam_bytes(i)), "spam") for i in range(10)]
        items += [(to_message(ham_bytes(i)), "ham") for i in range(10)]
        train_batch(rt, model_name="default", items=items)
    finally:
        rt.close()


def run(
    command: list[str], database_url: str, cwd: Path, message: bytes, **env: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        command,
        input=message,
        env={**clean_environment(database_url), **env},
        cwd=cwd,
        capture_output=True,
        timeout=120,
    )


def procmail_filter_command() -> str:
    """The command of the recipe's `:0fw` filter, exactly as the file writes it."""
    lines = (CONTRIB / "procmail" / "procmailrc").read_text().splitlines()
    start = lines.index(":0fw")
    command = lines[start + 1]
    assert command.startswith("| ")
    return command[2:]


def test_the_procmail_filter_marks_mail_and_its_rule_files_spam(cli: Cli, server: str) -> None:
    train_some(cli.database_url)
    command = procmail_filter_command()
    rule = (CONTRIB / "procmail" / "procmailrc").read_text().split("* ^", 1)[1].splitlines()[0]

    for raw, verdict in ((spam_bytes(30), b"spam"), (ham_bytes(30), b"ham")):
        completed = run(["sh", "-c", command], cli.database_url, cli.cwd, raw, SPAMSIFT_URL=server)
        assert completed.returncode == 0, completed.stderr.decode()
        assert completed.stdout.startswith(b"X-Spamsift-Verdict: " + verdict)
        assert completed.stdout.endswith(raw)
        filed = re.search(rule.encode(), completed.stdout, re.M) is not None
        assert filed == (verdict == b"spam")

    down = run(
        ["sh", "-c", command], cli.database_url, cli.cwd, spam_bytes(31), SPAMSIFT_URL=DEAD_URL
    )
    assert down.returncode == 3  # procmail's `w` then keeps the original message
    assert down.stdout == spam_bytes(31)


@pytest.mark.skipif(shutil.which("procmail") is None, reason="procmail is not installed")
def test_procmail_itself_runs_the_recipe(cli: Cli, server: str, tmp_path: Path) -> None:
    train_some(cli.database_url)
    maildir = tmp_path / "Mail"
    for box in ("Inbox", "Junk"):
        for part in ("cur", "new", "tmp"):
            (maildir / box / part).mkdir(parents=True)
    rcfile = tmp_path / "procmailrc"
    recipe = (CONTRIB / "procmail" / "procmailrc").read_text()
    recipe = recipe.replace("SPAMSIFT_URL=http://127.0.0.1:8000", f"SPAMSIFT_URL={server}")
    recipe = recipe.replace("PATH=/opt/spamsift/.venv/bin:", f"PATH={BIN}:")
    rcfile.write_text(
        f"MAILDIR={maildir}\nDEFAULT={maildir}/Inbox/\nLOGFILE={tmp_path}/log\n{recipe}"
    )
    rcfile.chmod(0o600)

    for raw in (spam_bytes(32), ham_bytes(32)):
        completed = run(["procmail", "-m", str(rcfile)], cli.database_url, cli.cwd, raw)
        assert completed.returncode == 0, completed.stderr.decode()

    (junk,) = (maildir / "Junk" / "new").iterdir()
    (inbox,) = (maildir / "Inbox" / "new").iterdir()
    assert junk.read_bytes().startswith(b"X-Spamsift-Verdict: spam")
    assert spam_bytes(32) in junk.read_bytes()  # procmail ends a delivery with a blank line
    assert inbox.read_bytes().startswith(b"X-Spamsift-Verdict: ham")


def postfix_filter(
    cli: Cli, tmp_path: Path, message: bytes, *, url: str, sendmail_status: int = 0, **env: str
) -> tuple[subprocess.CompletedProcess[bytes], bytes, list[str]]:
    """Run the Postfix pipe script as master.cf does; return it, and what was re-injected."""
    injected, argv = tmp_path / "injected.eml", tmp_path / "argv"
    sendmail = tmp_path / "sendmail"
    sendmail.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" > "{argv}"\ncat > "{injected}"\nexit {sendmail_status}\n'
    )
    sendmail.chmod(0o755)
    completed = run(
        [str(CONTRIB / "postfix" / "spamsift-filter.sh"), "-f", "alice@example.org", "--",
         "bob@example.net"],
        cli.database_url,
        cli.cwd,
        message,
        **{"SPAMSIFT_URL": url, "SENDMAIL": str(sendmail),
           "SPAMSIFT_KEY_FILE": str(tmp_path / "no-key"), **env},
    )  # fmt: skip
    return (
        completed,
        injected.read_bytes() if injected.exists() else b"",
        argv.read_text().splitlines() if argv.exists() else [],
    )


def test_the_postfix_filter_marks_and_reinjects_mail(cli: Cli, server: str, tmp_path: Path) -> None:
    train_some(cli.database_url)
    raw = spam_bytes(33)

    completed, injected, argv = postfix_filter(cli, tmp_path, raw, url=server)

    assert completed.returncode == 0, completed.stderr.decode()
    assert argv == ["-f", "alice@example.org", "--", "bob@example.net"]
    *headers, rest = injected.split(b"\r\n", 5)  # spamsift's two fields, then X-Spam-*
    assert headers[0] == b"X-Spamsift-Verdict: spam"
    assert headers[1].startswith(b"X-Spamsift-Probability: ")
    assert rest == raw


def test_the_postfix_filter_uses_the_key_file_and_fails_open(
    cli: Cli, server: str, tmp_path: Path
) -> None:
    train_some(cli.database_url)
    key = cli.ok("keys", "create", "--scope", "classify").splitlines()[-1]
    key_file = tmp_path / "api-key"
    key_file.write_text(key + "\n")
    raw = ham_bytes(34)

    with_key, injected, _ = postfix_filter(
        cli, tmp_path, raw, url=server, SPAMSIFT_KEY_FILE=str(key_file)
    )
    assert with_key.returncode == 0
    assert injected.startswith(b"X-Spamsift-Verdict: ham")

    without_key, unmarked, _ = postfix_filter(cli, tmp_path, raw, url=server)
    assert without_key.returncode == 0  # 401: mail goes on unmarked
    assert unmarked == raw
    assert b"401" in without_key.stderr

    server_down, unmarked, _ = postfix_filter(cli, tmp_path, raw, url=DEAD_URL)
    assert server_down.returncode == 0
    assert unmarked == raw

    not_reinjected, _, _ = postfix_filter(cli, tmp_path, raw, url=server, sendmail_status=1)
    assert not_reinjected.returncode == 75  # Postfix defers and retries the message


def sieve_pipe_arguments(name: str) -> tuple[str, list[str]]:
    """The program and arguments the sieve script's `pipe` passes, ${username} as 'alice'."""
    text = (CONTRIB / "dovecot" / name).read_text()
    match = re.search(r'pipe :copy "([^"]+)" \[([^\]]*)\];', text)
    assert match is not None
    arguments = [a.replace("${username}", "alice") for a in re.findall(r'"([^"]*)"', match[2])]
    return match[1], arguments


def test_the_dovecot_report_scripts_train_through_the_server(
    cli: Cli, server: str, tmp_path: Path
) -> None:
    train_some(cli.database_url)
    key = cli.ok("keys", "create", "--scope", "train").splitlines()[-1]
    key_file = tmp_path / "api-key"
    key_file.write_text(key)
    raw = ham_bytes(4)  # trained as ham; the user moves it into Junk, then back out
    outputs = []
    for sieve, label in (("report-spam.sieve", "spam"), ("report-ham.sieve", "ham")):
        program, arguments = sieve_pipe_arguments(sieve)
        assert arguments == [label, "alice"]
        completed = run(
            [str(CONTRIB / "dovecot" / program), *arguments],
            cli.database_url,
            cli.cwd,
            raw,
            SPAMSIFT_URL=server,
            SPAMSIFT_KEY_FILE=str(key_file),
        )
        assert completed.returncode == 0, completed.stderr.decode()
        outputs.append(completed.stdout.decode().strip())
        db = Database(cli.database_url)
        try:
            totals = stored_counts(db).class_totals
        finally:
            db.dispose()
        assert (totals[0][0], totals[1][0]) == ((9, 11) if label == "spam" else (10, 10))

    assert outputs == [
        "<ham4@example.org>: spam, relabelled from ham",
        "<ham4@example.org>: ham, relabelled from spam",
    ]


@pytest.mark.skipif(shutil.which("sievec") is None, reason="dovecot-sieve is not installed")
@pytest.mark.parametrize("name", ["report-spam.sieve", "report-ham.sieve"])
def test_the_sieve_scripts_compile(tmp_path: Path, name: str) -> None:
    config = tmp_path / "dovecot.conf"
    config.write_text(
        "plugin {\n  sieve_plugins = sieve_imapsieve sieve_extprograms\n"
        "  sieve_global_extensions = +vnd.dovecot.pipe +vnd.dovecot.environment\n}\n"
    )
    completed = subprocess.run(
        ["sievec", "-c", str(config), str(CONTRIB / "dovecot" / name), str(tmp_path / "out")],
        capture_output=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr.decode()
