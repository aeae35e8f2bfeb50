"""A throw-away Postfix instance: its own configuration and queue directories in a temporary
folder, SMTP on 127.0.0.1 at a free port, every message delivered into one Maildir."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

POSTFIX = shutil.which("postfix") or "/usr/sbin/postfix"

MASTER_CF = """\
{smtp_port} inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000   0       flush
proxymap  unix  -       -       n       -       -       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
virtual   unix  -       n       n       -       -       virtual
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
"""

MAIN_CF = """\
compatibility_level = 3.6
queue_directory = {root}/queue
data_directory = {root}/data
maillog_file_prefixes = {root}
maillog_file = {root}/maillog
mail_owner = postfix
myhostname = mx.spamsift.test
mydomain = spamsift.test
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination
virtual_mailbox_domains = example.net
virtual_mailbox_base = {root}/mail
virtual_mailbox_maps = static:inbox/
virtual_uid_maps = static:{uid}
virtual_gid_maps = static:{gid}
alias_maps =
alias_database =
smtputf8_enable = no
biff = no
{milters}
milter_protocol = 6
milter_default_action = accept
milter_connect_timeout = 10s
milter_content_timeout = 30s
"""


class Postfix:
    def __init__(self, root: Path, *, smtp_port: int, milter_port: int | None) -> None:
        """`milter_port` None: no milter (Postfix alone, what a milter's cost is measured on)."""
        import pwd

        owner = pwd.getpwnam("postfix")
        self.root = root
        self.config = root / "etc"
        self.maildir = root / "mail" / "inbox"
        for folder in (self.config, root / "data", root / "mail", root / "queue"):
            folder.mkdir(parents=True)
        shutil.chown(root / "data", "postfix")
        shutil.chown(root / "mail", owner.pw_uid, owner.pw_gid)
        values = {
            "root": root,
            "smtp_port": smtp_port,
            "milters": ""
            if milter_port is None
            else f"smtpd_milters = inet:127.0.0.1:{milter_port}",
            "uid": owner.pw_uid,
            "gid": owner.pw_gid,
        }
        (self.config / "main.cf").write_text(MAIN_CF.format(**values))
        (self.config / "master.cf").write_text(MASTER_CF.format(**values))
        self.smtp_port = smtp_port

    def postfix(self, *args: str) -> None:
        subprocess.run([POSTFIX, "-c", str(self.config), *args], check=True, timeout=60)

    def start(self) -> None:
        self.postfix("start")

    def stop(self) -> None:
        subprocess.run([POSTFIX, "-c", str(self.config), "abort"], timeout=60, check=False)

    def delivered_count(self) -> int:
        new = self.maildir / "new"
        return sum(1 for _ in new.iterdir()) if new.is_dir() else 0

    def delivered(self, count: int, timeout: float = 60) -> list[bytes]:
        """Wait for `count` messages in the Maildir; return them (oldest first)."""
        new = self.maildir / "new"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            files = (
                sorted(new.glob("*"), key=lambda path: path.stat().st_mtime_ns)
                if new.is_dir()
                else []
            )
            if len(files) >= count:
                return [path.read_bytes() for path in files]
            time.sleep(0.1)
        log = (self.root / "maillog").read_text() if (self.root / "maillog").exists() else ""
        raise AssertionError(f"{count} messages not delivered in {timeout} s; log:\n{log[-3000:]}")
