"""A throw-away local-only Postfix and Dovecot: own configuration, queue and state folders
under a test folder, listening on 127.0.0.1 only, on ports picked free.

Both run as root, as on a mail server (their own daemons then drop to `postfix`, `dovecot`,
`dovenull`). Users that exist on any Debian system stand for the guide's ones: `nobody` for the
filter user `spamsift-filter`, `mail` for the mail user that owns the mailboxes (Dovecot's
`vmail` in the guide). Nothing is added to the system's own /etc/postfix or /etc/dovecot.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.mail.contrib import Installed
from tests.servers import free_port

FILTER_USER = "nobody"  # stands for the guide's spamsift-filter
MAIL_USER = "mail"  # stands for the guide's vmail
START_SECONDS = 60.0


def missing_programs() -> str | None:
    """Why this machine cannot run the mail servers, or None."""
    for program in ("postfix", "dovecot", "procmail", "maildrop", "curl", "logger"):
        if shutil.which(program) is None and not Path("/usr/sbin", program).exists():
            return f"{program} is not installed (Debian: see .ci/run)"
    if os.geteuid() != 0:
        return "Postfix and Dovecot run as root, as on a mail server: run the test as root"
    return None


def wait_for_port(port: int, what: str, log: Path) -> None:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{what} not listening on {port}: {_tail(log)}")


def start(command: list[str], folder: Path, log: Path) -> None:
    """Run a daemon's start command: its output to a file (the daemon keeps the descriptors
    it was given, so a pipe would never close)."""
    output = folder / "start.out"
    with output.open("wb") as sink:
        completed = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, timeout=120)
    assert completed.returncode == 0, output.read_text(errors="replace") + _tail(log)


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"


@dataclass(frozen=True)
class Dovecot:
    imap_port: int
    lmtp_port: int
    log: Path
    config: Path
    home: Path  # the test user's home; Maildir in home/Maildir

    def maildir(self, folder: str = "") -> Path:
        base = self.home / "Maildir"
        return base / f".{folder}" if folder else base


@contextmanager
def dovecot(folder: Path, installed: Installed) -> Iterator[Dovecot]:
    """Dovecot with IMAP and LMTP, one test user (any name, password `secret`) whose Maildir
    belongs to the mail user, a Junk folder and a trash folder named "Deleted Messages" with
    the SPECIAL-USE flag \\Trash, and the guide's 90-spamsift-imapsieve.conf and
    91-spamsift-junk.conf included as they are (paths moved)."""
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    conf_d = folder / "conf.d"
    conf_d.mkdir()
    home = folder / "home"
    (home / "Maildir").mkdir(parents=True)
    shutil.chown(home, MAIL_USER, MAIL_USER)
    shutil.chown(home / "Maildir", MAIL_USER, MAIL_USER)
    for name in ("90-spamsift-imapsieve.conf", "91-spamsift-junk.conf"):
        (conf_d / name).write_text(installed.contrib_text(f"dovecot/{name}"))
    imap_port, lmtp_port = free_port(), free_port()
    log = folder / "dovecot.log"
    (folder / "dovecot.conf").write_text(
        f"""
instance_name = spamsift-test-{imap_port}
base_dir = {folder}/run
state_dir = {folder}/state
log_path = {log}
protocols = imap lmtp
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain
first_valid_uid = 1
mail_location = maildir:{home}/Maildir
passdb {{
  driver = static
  args = password=secret
}}
userdb {{
  driver = static
  args = uid={MAIL_USER} gid={MAIL_USER} home={home} allow_all_users=yes
}}
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Junk {{
    special_use = \\Junk
    auto = subscribe
  }}
  mailbox "Deleted Messages" {{
    special_use = \\Trash
    auto = subscribe
  }}
  mailbox Archive {{
    auto = subscribe
  }}
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp_port}
  }}
}}
service auth {{
  unix_listener auth-userdb {{
    mode = 0666
  }}
}}
!include conf.d/*.conf
"""
    )
    conf = folder / "dovecot.conf"
    start(["dovecot", "-c", str(conf)], folder, log)
    try:
        wait_for_port(imap_port, "dovecot imap", log)
        wait_for_port(lmtp_port, "dovecot lmtp", log)
        yield Dovecot(imap_port, lmtp_port, log, conf, home)
    finally:
        subprocess.run(["doveadm", "-c", str(conf), "stop"], capture_output=True, timeout=60)


@dataclass(frozen=True)
class Postfix:
    smtp_port: int
    log: Path


@contextmanager
def postfix(
    folder: Path, installed: Installed, *, lmtp_port: int, procmailrc: Path, mailfilter: Path
) -> Iterator[Postfix]:
    """Postfix with Debian's master.cf and the guide's contrib/postfix/master.cf lines (the
    smtp service on a free port instead of 25, the re-injection listener on another free
    port, the filter user `nobody`). Domains: dovecot.test (LMTP to Dovecot), procmail.test
    and maildrop.test (pipe to those, as the mail user, with the given rc files)."""
    folder.mkdir(parents=True)
    folder.chmod(0o755)
    etc, spool, data = folder / "etc", folder / "spool", folder / "data"
    for path in (etc, spool, data):
        path.mkdir()
        path.chmod(0o755)
    shutil.chown(data, "postfix")
    smtp_port, reinject_port = free_port(), free_port()
    log = folder / "postfix.log"
    installed.set_setting("SPAMSIFT_REINJECT_URL", f"smtp://127.0.0.1:{reinject_port}")
    guide = installed.contrib_text("postfix/master.cf")
    guide = guide.replace("smtp      inet", f"127.0.0.1:{smtp_port} inet")
    guide = guide.replace("127.0.0.1:10026", f"127.0.0.1:{reinject_port}")
    guide = guide.replace("user=spamsift-filter", f"user={FILTER_USER}")
    debian = Path("/usr/share/postfix/master.cf.dist").read_text().splitlines()
    debian = [line for line in debian if not line.startswith("smtp      inet")]
    local = (
        f"test-procmail unix -     n       n       -       -       pipe\n"
        f"  flags=DRhu user={MAIL_USER} argv=/usr/bin/procmail -t -m {procmailrc}\n"
        f"test-maildrop unix -     n       n       -       -       pipe\n"
        f"  flags=DRhu user={MAIL_USER} argv=/usr/bin/maildrop {mailfilter}\n"
    )
    (etc / "master.cf").write_text("\n".join(debian) + "\n" + guide + local)
    (etc / "main.cf").write_text(
        f"""
compatibility_level = 3.6
queue_directory = {spool}
data_directory = {data}
mail_owner = postfix
setgid_group = postdrop
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = mail.test
mydomain = test
myorigin = mail.test
mydestination =
mynetworks = 127.0.0.0/8
relayhost =
alias_maps =
alias_database =
local_recipient_maps =
smtpd_relay_restrictions = permit_mynetworks, reject
virtual_mailbox_domains = dovecot.test
virtual_transport = lmtp:inet:127.0.0.1:{lmtp_port}
transport_maps = inline:{{ procmail.test=test-procmail:, maildrop.test=test-maildrop: }}
relay_domains = procmail.test, maildrop.test
maillog_file = {log}
maillog_file_prefixes = {folder}
smtputf8_enable = no
biff = no
"""
    )
    command = ["postfix", "-c", str(etc)]
    start([*command, "start"], folder, log)
    try:
        wait_for_port(smtp_port, "postfix smtpd", log)
        yield Postfix(smtp_port, log)
    finally:
        subprocess.run([*command, "stop"], capture_output=True, timeout=120)
