"""docs/mail-servers.md followed by a mail administrator, on a throw-away Postfix and Dovecot.

A `spamsift serve` (from the virtualenv, on a temporary SQLite file) with keys made as the
guide makes them; contrib/'s files installed as the guide installs them (tests/mail/contrib.py:
only paths and ports moved); mail sent by SMTP to 127.0.0.1; reports made by moving mail over
IMAP. The scripts run as Postfix and Pigeonhole run them: as other users, with no virtualenv
on PATH and no SPAMSIFT_* in their environment.
"""

from __future__ import annotations

import imaplib
import re
import shutil
import smtplib
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.conftest import SPAMSIFT, clean_environment, running_server
from tests.cli.mailfiles import ham_bytes, spam_bytes
from tests.mail.conftest import make_open_folder
from tests.mail.contrib import Installed, install, user_group
from tests.mail.servers import (
    FILTER_USER,
    MAIL_USER,
    Dovecot,
    Postfix,
    dovecot,
    missing_programs,
    postfix,
)

WAIT_SECONDS = 60.0
MOVED_AT_ONCE = 200


@dataclass
class MailSystem:
    url: str
    admin_key: str
    installed: Installed  # the Postfix filter and Dovecot reports
    delivery: Installed  # procmail and maildrop, as the mail user
    dovecot: Dovecot
    postfix: Postfix
    procmail_maildir: Path
    maildrop_maildir: Path

    def send(self, recipient: str, raw: bytes) -> None:
        with smtplib.SMTP("127.0.0.1", self.postfix.smtp_port, timeout=60) as smtp:
            smtp.sendmail("sender@example.net", [recipient], raw)

    def stats(self) -> dict[str, Any]:
        answer = httpx.get(
            f"{self.url}/v1/models/default/stats",
            headers={"Authorization": f"Bearer {self.admin_key}"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    @contextmanager
    def imap(self) -> Iterator[imaplib.IMAP4]:
        """An IMAP session as the test user alice@dovecot.test."""
        connection = imaplib.IMAP4("127.0.0.1", self.dovecot.imap_port, timeout=60)
        try:
            connection.login("alice@dovecot.test", "secret")
            yield connection
        finally:
            connection.logout()

    def holds(self, folder: str, message_id: str) -> bool:
        with self.imap() as connection:
            return message_id in message_ids(connection, folder)


def wait_for(what: str, condition: Callable[[], bool], log: Path | None = None) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
    raise AssertionError(f"{what}: not within {WAIT_SECONDS:g} s\n{tail}")


def delivered(maildir: Path) -> list[bytes]:
    """The messages of one Maildir folder, oldest first: by the time each file was written.
    Not by name: Dovecot names a file `<seconds>.M<microseconds>P<pid>...` without padding the
    microseconds, so within one second `M99999` sorts after `M100000`."""
    files = [path for box in ("new", "cur") for path in (maildir / box).glob("*")]
    return [
        path.read_bytes()
        for path in sorted(files, key=lambda path: (path.stat().st_mtime_ns, path.name))
    ]


def header(raw: bytes, name: str) -> list[str]:
    return BytesHeaderParser().parsebytes(raw).get_all(name) or []


def keys_create(database_url: str, folder: Path, scope: str, name: str) -> str:
    """`spamsift keys create` on the server's database, as the guide runs it."""
    completed = subprocess.run(
        [SPAMSIFT, "keys", "create", "--scope", scope, "--name", name],
        env=clean_environment(database_url),
        cwd=folder,
        capture_output=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr.decode()
    return completed.stdout.decode().split()[-1]


def write_delivery_rc_files(folder: Path, delivery: Installed) -> tuple[Path, Path, Path, Path]:
    """~/.procmailrc and ~/.mailfilter of a user whose mail procmail or maildrop delivers:
    where their Maildir is, then the contrib file appended, as the guide says."""
    rc_files = []
    maildirs = []
    for program, recipe in (
        ("procmail", "procmail/procmailrc"),
        ("maildrop", "maildrop/mailfilter"),
    ):
        home = folder / program
        maildir = home / "Maildir"
        for box in ("", ".Junk"):
            for part in ("cur", "new", "tmp"):
                (maildir / box / part).mkdir(parents=True, exist_ok=True)
        prelude = (
            f"MAILDIR={maildir}/\nDEFAULT={maildir}/\nLOGFILE={home}/procmail.log\nVERBOSE=yes\n"
            if program == "procmail"
            else f'DEFAULT="{maildir}"\nlogfile "{home}/maildrop.log"\n'
        )
        rc_file = home / ("procmailrc" if program == "procmail" else "mailfilter")
        rc_file.write_text(prelude + delivery.contrib_text(recipe))
        rc_file.chmod(0o600)
        for path in (home, *home.rglob("*")):
            shutil.chown(path, MAIL_USER, user_group(MAIL_USER))
        rc_files.append(rc_file)
        maildirs.append(maildir)
    return rc_files[0], rc_files[1], maildirs[0], maildirs[1]


@pytest.fixture(scope="module")
def mail_system(sqlite_template: Path) -> Iterator[MailSystem]:
    reason = missing_programs()
    if reason is not None:
        pytest.skip(reason)
    folder = make_open_folder()
    try:
        yield from _mail_system(folder, sqlite_template)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _mail_system(folder: Path, sqlite_template: Path) -> Iterator[MailSystem]:
    database = folder / "spamsift.db"
    shutil.copy(sqlite_template, database)
    database_url = f"sqlite:///{database}"
    server_folder = folder / "server"
    server_folder.mkdir()
    keys = {
        name: keys_create(database_url, server_folder, scope, name)
        for scope, name in (
            ("admin", "admin"),
            ("classify", "postfix"),
            ("train", "dovecot"),
            ("classify", "delivery"),
        )
    }
    with running_server(database_url, server_folder) as url:
        train = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {keys['admin']}"})
        try:
            for i in range(20):
                for label, raw in (("spam", spam_bytes(i)), ("ham", ham_bytes(i))):
                    answer = train.post(
                        f"/train?label={label}",
                        content=raw,
                        headers={"content-type": "message/rfc822"},
                    )
                    assert answer.status_code == 200, answer.text
        except httpx.TransportError as error:  # say what the server said, not only the client
            logs = "\n".join(log.read_text()[-4000:] for log in server_folder.glob("*.log"))
            message = f"training through spamsift serve failed: {error}\n{logs}"
            raise AssertionError(message) from error
        finally:
            train.close()
        installed = install(
            folder / "installed",
            url=url,
            filter_key=keys["postfix"],
            filter_user=FILTER_USER,
            report_key=keys["dovecot"],
            report_user=MAIL_USER,
        )
        delivery = install(
            folder / "delivery", url=url, filter_key=keys["delivery"], filter_user=MAIL_USER
        )
        procmailrc, mailfilter, procmail_maildir, maildrop_maildir = write_delivery_rc_files(
            folder / "users", delivery
        )
        with dovecot(folder / "dovecot", installed) as imap_server:
            for name in ("report-spam", "report-ham", "spamsift-junk"):
                sievec = subprocess.run(
                    ["sievec", "-c", str(folder / "dovecot" / "dovecot.conf"),
                     str(installed.sieve_dir / f"{name}.sieve")],
                    capture_output=True,
                    timeout=60,
                )  # fmt: skip
                assert sievec.returncode == 0, sievec.stderr.decode()
            with postfix(
                folder / "postfix",
                installed,
                lmtp_port=imap_server.lmtp_port,
                procmailrc=procmailrc,
                mailfilter=mailfilter,
            ) as smtp_server:
                yield MailSystem(
                    url=url,
                    admin_key=keys["admin"],
                    installed=installed,
                    delivery=delivery,
                    dovecot=imap_server,
                    postfix=smtp_server,
                    procmail_maildir=procmail_maildir,
                    maildrop_maildir=maildrop_maildir,
                )


def test_postfix_marks_mail_and_dovecot_files_spam_in_junk(mail_system: MailSystem) -> None:
    inbox, junk = mail_system.dovecot.maildir(), mail_system.dovecot.maildir("Junk")
    before = len(delivered(inbox)), len(delivered(junk))
    forged = spam_bytes(100).replace(b"Subject:", b"X-Spamsift-Verdict: ham\r\nSubject:", 1)
    mail_system.send("alice@dovecot.test", forged)
    mail_system.send("alice@dovecot.test", ham_bytes(100))

    wait_for(
        "both messages delivered",
        lambda: (len(delivered(inbox)), len(delivered(junk))) == (before[0] + 1, before[1] + 1),
        mail_system.postfix.log,
    )
    spam, ham = delivered(junk)[-1], delivered(inbox)[-1]
    assert header(spam, "X-Spamsift-Verdict") == ["spam"]  # the forged "ham" is gone
    assert float(header(spam, "X-Spamsift-Probability")[0]) >= 0.9
    assert header(spam, "Message-ID") == ["<spam100@lottery.example>"]
    assert header(ham, "X-Spamsift-Verdict") == ["ham"]
    assert float(header(ham, "X-Spamsift-Probability")[0]) <= 0.1


@pytest.mark.parametrize("program", ["procmail", "maildrop"])
def test_procmail_and_maildrop_mark_mail_and_file_spam(
    mail_system: MailSystem, program: str
) -> None:
    maildir = getattr(mail_system, f"{program}_maildir")
    recipient = f"user@{program}.test"
    mail_system.send(recipient, spam_bytes(110))
    mail_system.send(recipient, ham_bytes(110))

    wait_for(
        f"{program} delivered both",
        lambda: len(delivered(maildir)) == 1 and len(delivered(maildir / ".Junk")) == 1,
        mail_system.postfix.log,
    )
    (spam,), (ham,) = delivered(maildir / ".Junk"), delivered(maildir)
    assert header(spam, "X-Spamsift-Verdict") == ["spam"]
    assert header(ham, "X-Spamsift-Verdict") == ["ham"]
    assert spam_bytes(110).split(b"\r\n\r\n", 1)[1].replace(b"\r\n", b"\n") in spam


def test_mail_flows_unmarked_but_flagged_while_spamsift_is_down(mail_system: MailSystem) -> None:
    inbox = mail_system.dovecot.maildir()
    before = len(delivered(inbox))
    installed = mail_system.installed
    installed.set_setting("SPAMSIFT_URL", "http://127.0.0.1:9")
    try:
        mail_system.send("alice@dovecot.test", spam_bytes(120))
        wait_for(
            "delivered unscanned",
            lambda: len(delivered(inbox)) == before + 1,
            mail_system.postfix.log,
        )
    finally:
        installed.set_setting("SPAMSIFT_URL", mail_system.url)
    unscanned = delivered(inbox)[-1]
    assert header(unscanned, "Message-ID") == ["<spam120@lottery.example>"]
    assert header(unscanned, "X-Spamsift-Verdict") == ["unscanned"]
    assert "127.0.0.1" in header(unscanned, "X-Spamsift-Error")[0]


def uids(connection: imaplib.IMAP4, criteria: str = "ALL") -> list[bytes]:
    status, data = connection.uid("SEARCH", criteria)
    assert status == "OK"
    return data[0].split()


def message_ids(connection: imaplib.IMAP4, folder: str) -> list[str]:
    connection.select(f'"{folder}"')
    found = []
    for uid in uids(connection):
        status, data = connection.uid("FETCH", uid, "(BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])")
        assert status == "OK"
        found.extend(re.findall(rb"<[^>]+>", data[0][1]))  # type: ignore[index]
    return [value.decode() for value in found]


def move(connection: imaplib.IMAP4, source: str, message_id: str, target: str) -> None:
    connection.select(f'"{source}"')
    (uid,) = uids(connection, f'HEADER Message-ID "{message_id}"')
    status, data = connection.uid("MOVE", uid, f'"{target}"')
    assert status == "OK", data


def spool_empty(installed: Installed) -> bool:
    new = installed.spool / "new"
    return not new.exists() or not any(new.iterdir())


def test_moving_mail_over_imap_reports_it(mail_system: MailSystem) -> None:
    system = mail_system
    system.send("alice@dovecot.test", ham_bytes(130))  # classified ham, delivered to INBOX
    system.send("alice@dovecot.test", spam_bytes(130))  # classified spam, filed in Junk
    wait_for(
        "both delivered",
        lambda: (
            system.holds("INBOX", "<ham130@example.org>")
            and system.holds("Junk", "<spam130@lottery.example>")
        ),
        system.postfix.log,
    )
    start = system.stats()
    with system.imap() as imap:
        # "This is spam": INBOX -> Junk.
        move(imap, "INBOX", "<ham130@example.org>", "Junk")
        wait_for("the spam report sent", lambda: system.stats()["classes"]["spam"]["messages"]
                 == start["classes"]["spam"]["messages"] + 1, system.dovecot.log)  # fmt: skip
        after_spam = system.stats()
        assert after_spam["classes"]["ham"]["messages"] == start["classes"]["ham"]["messages"]
        assert after_spam["activity"]["all"]["feedback"] == start["activity"]["all"]["feedback"] + 1

        # "Not spam": Junk -> Archive relabels it (the counts move back, nothing counted twice).
        move(imap, "Junk", "<ham130@example.org>", "Archive")
        wait_for("the ham report sent", lambda: system.stats()["classes"]["ham"]["messages"]
                 == start["classes"]["ham"]["messages"] + 1, system.dovecot.log)  # fmt: skip
        after_ham = system.stats()
        assert after_ham["classes"]["spam"]["messages"] == start["classes"]["spam"]["messages"]

        # Spam thrown away: Junk -> the \Trash folder ("Deleted Messages") reports nothing.
        move(imap, "Junk", "<spam130@lottery.example>", "Deleted Messages")
        time.sleep(2)
        wait_for("the spool drained", lambda: spool_empty(system.installed))
        assert system.stats()["classes"] == after_ham["classes"]
        assert (
            system.stats()["activity"]["all"]["feedback"]
            == after_ham["activity"]["all"]["feedback"]
        )


def test_a_report_finds_the_classification_of_mail_through_the_filter(
    mail_system: MailSystem,
) -> None:
    """The dashboard's corrections count a report of mail the filter classified: the copy in
    the mailbox has the headers Postfix and Dovecot added after classifying it."""
    system = mail_system
    system.send("alice@dovecot.test", ham_bytes(140))
    wait_for(
        "delivered",
        lambda: system.holds("INBOX", "<ham140@example.org>"),
        system.postfix.log,
    )
    start = system.stats()["activity"]["all"]
    with system.imap() as imap:
        move(imap, "INBOX", "<ham140@example.org>", "Junk")
        wait_for("reported", lambda: system.stats()["activity"]["all"]["feedback"]
                 == start["feedback"] + 1, system.dovecot.log)  # fmt: skip
        now = system.stats()["activity"]["all"]
        assert now["corrections"] == start["corrections"] + 1
        assert now["false_negatives"] == start["false_negatives"] + 1


def test_moving_200_messages_to_junk_at_once(mail_system: MailSystem) -> None:
    """The move returns before the reports are sent (timed and printed, not asserted); every
    report is then sent."""
    system = mail_system
    with system.imap() as imap:
        imap.create('"Bulk"')
        for i in range(MOVED_AT_ONCE):
            status, data = imap.append('"Bulk"', "", None, ham_bytes(1000 + i))  # type: ignore[arg-type]
            assert status == "OK", data
        start = system.stats()["classes"]["spam"]["messages"]
        imap.select('"Bulk"')

        began = time.perf_counter()
        status, data = imap.uid("MOVE", "1:*", '"Junk"')
        seconds = time.perf_counter() - began
        assert status == "OK", data
        print(  # noqa: T201
            f"\nIMAP MOVE of {MOVED_AT_ONCE} messages to Junk returned in {seconds:.2f} s"
        )

        wait_for("every report sent", lambda: system.stats()["classes"]["spam"]["messages"]
                 == start + MOVED_AT_ONCE, system.dovecot.log)  # fmt: skip
        sent = time.perf_counter() - began
        print(f"all {MOVED_AT_ONCE} reports trained {sent:.2f} s after the move")  # noqa: T201
        # The drain removes a report's spool file once its answer is in: the last one goes
        # just after the count moved.
        wait_for("the spool drained", lambda: spool_empty(system.installed))


def test_the_guides_checks_pass(mail_system: MailSystem) -> None:
    """docs/mail-servers.md's "check it works" steps: `spamsift check-mail-setup`, then a
    message sent with curl and its header read with doveadm."""
    system = mail_system
    check = subprocess.run(
        [SPAMSIFT, "check-mail-setup", "--env-file", str(system.installed.env_file),
         "--filter-user", FILTER_USER, "--report-user", MAIL_USER],
        env={"PATH": "/usr/bin:/bin", "HOME": "/root"},
        capture_output=True,
        timeout=120,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()

    message = system.dovecot.home.parent / "check.eml"
    message.write_bytes(b"Subject: spamsift check\r\n\r\nHello, this is a test.\r\n")
    sent = subprocess.run(
        ["curl", "--silent", "--show-error", "--url",
         f"smtp://127.0.0.1:{system.postfix.smtp_port}", "--mail-from", "postmaster@example.org",
         "--mail-rcpt", "alice@dovecot.test", "--upload-file", str(message)],
        capture_output=True,
        timeout=120,
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr.decode()

    def fetched() -> str:
        completed = subprocess.run(
            ["doveadm", "-c", str(system.dovecot.config), "fetch", "-u", "alice@dovecot.test",
             "hdr", "mailbox", "INBOX", "subject", "spamsift check"],
            capture_output=True,
            timeout=60,
        )  # fmt: skip
        return completed.stdout.decode()

    wait_for("delivered", lambda: "X-Spamsift-Verdict" in fetched(), system.postfix.log)
    verdict = re.search(r"(?m)^X-Spamsift-Verdict: (\w+)", fetched())
    assert verdict is not None
    assert verdict[1] in ("ham", "unsure", "spam")
