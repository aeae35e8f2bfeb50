"""End to end through a real Postfix (Debian's postfix package): `spamsift serve` with its
milter as Postfix's smtpd_milters, mail sent by SMTP to 127.0.0.1 and read from the Maildir."""

from __future__ import annotations

import os
import shutil
import smtplib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from email import message_from_bytes
from pathlib import Path

import httpx
import pytest

from tests.builders import ham_message, spam_message
from tests.database_link import DatabaseLink
from tests.milter.postfix import POSTFIX, Postfix
from tests.servers import free_port, wait_until_ready

pytestmark = [
    pytest.mark.mailserver,
    pytest.mark.skipif(not Path(POSTFIX).exists(), reason="postfix is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="a Postfix instance is started as root"),
]


class Spamsift:
    def __init__(self, root: Path, milter_port: int, **settings: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (root / f"spamsift-{self.port}.log").open("wb")
        env = {
            **os.environ,
            "SPAMSIFT_DATABASE_URL": f"sqlite:///{root}/spamsift.db",
            "SPAMSIFT_LOG_LEVEL": "info",
            "SPAMSIFT_MILTER_ADDRESS": f"127.0.0.1:{milter_port}",
            "SPAMSIFT_MIN_LEARNS": "1",
            **settings,
        }
        spamsift = str(Path(sys.executable).with_name("spamsift"))
        self.process = subprocess.Popen(
            [spamsift, "serve", "--port", str(self.port)],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until_ready(self.url, self.process, self.output, name="spamsift serve")
        except AssertionError:
            self.stop()
            raise

    def output(self) -> str:
        return Path(self.log.name).read_text()[-3000:]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()  # its last flush may wait on a database that is gone
            self.process.wait(30)
        self.log.close()


@pytest.fixture
def mail_root() -> Iterator[Path]:
    # Not under pytest's temporary folder: it is private to root, and Postfix's daemons run
    # as the postfix user, which must reach the queue and the Maildir.
    root = Path(tempfile.mkdtemp(prefix="spamsift-postfix-"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def train(url: str) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        for i in range(6):
            for label, raw in (("spam", spam_message(i)), ("ham", ham_message(i))):
                answer = client.post("/train", json={"label": label, "raw": raw})
                assert answer.status_code == 200, answer.text


def send(port: int, raw: str, recipient: str = "bob@example.net") -> None:
    with smtplib.SMTP("127.0.0.1", port, timeout=60) as smtp:
        smtp.sendmail("sender@example.org", [recipient], raw.encode())


def test_postfix_marks_spam_and_ham_and_refuses_spam_by_policy(mail_root: Path) -> None:
    milter_port, smtp_port = free_port(), free_port()
    postfix = Postfix(mail_root, smtp_port=smtp_port, milter_port=milter_port)
    postfix.start()
    spamsift = None
    try:
        spamsift = Spamsift(mail_root, milter_port)
        train(spamsift.url)
        send(smtp_port, spam_message(100, message_id="<e2e-spam@example.org>"))
        send(smtp_port, ham_message(101, message_id="<e2e-ham@example.org>"))
        delivered = [message_from_bytes(raw) for raw in postfix.delivered(2)]
        by_id = {message["Message-ID"]: message for message in delivered}
        spam, ham = by_id["<e2e-spam@example.org>"], by_id["<e2e-ham@example.org>"]
        assert spam["X-Spam-Flag"] == "YES"
        assert spam["X-Spam-Status"].startswith("Yes, score=")
        assert spam["X-Spamsift-Verdict"] == "spam"
        assert ham["X-Spam-Flag"] is None
        assert ham["X-Spam-Status"].startswith("No, score=")

        # The delivered copy, reported: it finds the milter's verdict (a correction).
        with httpx.Client(base_url=spamsift.url, timeout=60) as client:
            raw = postfix.maildir.joinpath("new").iterdir()
            reported = [path.read_bytes() for path in raw if b"e2e-spam" in path.read_bytes()]
            answer = client.post(
                "/v1/models/default/feedback",
                content=reported[0],
                params={"label": "ham"},
                headers={"Content-Type": "message/rfc822"},
            )
            assert answer.status_code == 200, answer.text
            stats = client.get("/v1/models/default/stats").json()
            assert stats["activity"]["all"]["corrections"] == 1

        spamsift.stop()
        spamsift = Spamsift(
            mail_root,
            milter_port,
            SPAMSIFT_MILTER_SPAM_ACTION="reject",
            SPAMSIFT_MILTER_REJECT_THRESHOLD="0.5",
        )
        with pytest.raises(smtplib.SMTPDataError) as refused:
            send(smtp_port, spam_message(102))
        assert refused.value.smtp_code == 550
        send(smtp_port, ham_message(103, message_id="<e2e-ham2@example.org>"))
        assert len(postfix.delivered(3)) == 3
    finally:
        postfix.stop()
        if spamsift is not None:
            spamsift.stop()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_postfix_delivers_mail_marked_unscanned_when_the_database_stops_answering(
    mail_root: Path, database_url: str
) -> None:
    link, relayed = DatabaseLink.to_database(database_url)
    milter_port, smtp_port = free_port(), free_port()
    postfix = Postfix(mail_root, smtp_port=smtp_port, milter_port=milter_port)
    postfix.start()
    spamsift = None
    try:
        # carol's model is not in memory (made, never used): her mail needs the database. (A
        # model held in memory classifies without it, until it looks for others' training.)
        spamsift = Spamsift(
            mail_root,
            milter_port,
            SPAMSIFT_DATABASE_URL=relayed,
            SPAMSIFT_MILTER_RECIPIENT_MODELS="carol@example.net=carol",
        )
        train(spamsift.url)
        httpx.post(f"{spamsift.url}/v1/models", json={"name": "carol"}, timeout=60)
        send(smtp_port, spam_message(110, message_id="<before@example.org>"))
        assert message_from_bytes(postfix.delivered(1)[0])["X-Spam-Flag"] == "YES"

        link.silence()
        send(smtp_port, spam_message(111, message_id="<after@example.org>"), "carol@example.net")

        by_id = {m["Message-ID"]: m for m in map(message_from_bytes, postfix.delivered(2))}
        after = by_id["<after@example.org>"]
        assert after["X-Spamsift-Scanned"] == "no (timeout)"
        assert after["X-Spam-Flag"] is None
    finally:
        link.close()
        postfix.stop()
        if spamsift is not None:
            spamsift.stop()
