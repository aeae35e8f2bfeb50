"""contrib/'s mail-server files installed as docs/mail-servers.md installs them, under a test
folder instead of /: every file is read from contrib/ and only its paths are moved (the
`PATHS` below); settings a mail administrator edits (the server's URL) are set in mail.env.

The programs are then run with the environment Postfix, procmail, maildrop and Pigeonhole
give them (`PIPE_ENVIRONMENT`): no PATH with the virtualenv, no SPAMSIFT_* variable.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

CONTRIB = Path(__file__).resolve().parents[2] / "contrib"

# What Postfix's pipe(8) and Pigeonhole's pipe hand a program (beside USER, HOME, LOGNAME):
# no PATH at all.
PIPE_ENVIRONMENT = {"LANG": "C"}


def pipe_environment(user: str) -> dict[str, str]:
    home = pwd.getpwnam(user).pw_dir if _user_exists(user) else "/nonexistent"
    return {**PIPE_ENVIRONMENT, "USER": user, "LOGNAME": user, "HOME": home}


@dataclass(frozen=True)
class Installed:
    root: Path
    env_file: Path
    filter_key: Path
    report_key: Path
    spool: Path
    mark: Path
    filter: Path
    feedback: Path
    sieve_dir: Path

    def contrib_text(self, relative: str) -> str:
        """A contrib/ file's text with its installed paths moved under `root`."""
        return moved((CONTRIB / relative).read_text(), self.root)

    def set_setting(self, name: str, value: str) -> None:
        """Change one NAME=value line of mail.env, as an administrator edits it."""
        text = self.env_file.read_text()
        text, count = re.subn(rf"(?m)^{name}=.*$", f"{name}={value}", text)
        assert count == 1, f"{name} is not in contrib/mail.env"
        self.env_file.write_text(text)


def moved(text: str, root: Path) -> str:
    for real, test in paths(root).items():
        text = text.replace(real, test)
    return text


def paths(root: Path) -> dict[str, str]:
    return {
        "/etc/spamsift/": f"{root}/etc/spamsift/",
        "/usr/local/lib/spamsift/": f"{root}/lib/spamsift/",
        "/var/spool/spamsift": f"{root}/spool/spamsift",
        "/etc/dovecot/sieve/": f"{root}/etc/dovecot/sieve/",
    }


def install(
    root: Path,
    *,
    url: str,
    filter_key: str | None = None,
    report_key: str | None = None,
    filter_user: str | None = None,
    report_user: str | None = None,
) -> Installed:
    """Install as the guide does: scripts 0755, mail.env 0644, each key file 0400 owned by the
    user that reads it (when running as root), the spool owned by the mail user."""
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    etc, lib = root / "etc" / "spamsift", root / "lib" / "spamsift"
    pipe_dir, sieve_dir, spool = (
        lib / "sieve-pipe",
        root / "etc" / "dovecot" / "sieve",
        root / "spool" / "spamsift",
    )
    for folder in (etc, lib, pipe_dir, sieve_dir, spool):
        folder.mkdir(parents=True, exist_ok=True)
        for part in (folder, *folder.relative_to(root).parents):
            (root / part).chmod(0o755)
    installed = Installed(
        root=root,
        env_file=etc / "mail.env",
        filter_key=etc / "filter.key",
        report_key=etc / "report.key",
        spool=spool,
        mark=lib / "spamsift-mark",
        filter=lib / "spamsift-filter",
        feedback=pipe_dir / "spamsift-feedback",
        sieve_dir=sieve_dir,
    )
    for source, target in (
        ("spamsift-mark.sh", installed.mark),
        ("postfix/spamsift-filter.sh", installed.filter),
        ("dovecot/spamsift-feedback.sh", installed.feedback),
    ):
        target.write_text(installed.contrib_text(source))
        target.chmod(0o755)
    for name in ("report-spam.sieve", "report-ham.sieve", "spamsift-junk.sieve"):
        (sieve_dir / name).write_text(installed.contrib_text(f"dovecot/{name}"))
    installed.env_file.write_text(installed.contrib_text("mail.env"))
    installed.env_file.chmod(0o644)
    installed.set_setting("SPAMSIFT_URL", url)
    for key, path, user in (
        (filter_key, installed.filter_key, filter_user),
        (report_key, installed.report_key, report_user),
    ):
        if key is not None:
            path.write_text(key + "\n")
            path.chmod(0o400)
            if user is not None and os.geteuid() == 0:
                shutil.chown(path, user, user_group(user))
    if report_user is not None and os.geteuid() == 0:
        shutil.chown(spool, report_user, user_group(report_user))
    return installed


def user_group(user: str) -> int:
    return pwd.getpwnam(user).pw_gid


def _user_exists(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    return True
