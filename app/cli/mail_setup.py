"""`spamsift check-mail-setup`: check the mail-server integration as Postfix and Dovecot see it.

The scripts of contrib/ (the Postfix filter, procmail, maildrop, the Dovecot reports) read
their settings from one file (default /etc/spamsift/mail.env) and their key files as the user
each runs as. This command reads the same file, checks that each named user can read what it
needs (by the files' owners and modes, whoever runs the check), that the server answers, and
that each key is accepted for its job (classify for the filter, train for the reports) on the
configured model, through the HTTP API, changing nothing. One line per finding; exit status 1
when any is a problem, 0 when all is well.
"""

from __future__ import annotations

import argparse
import grp
import pwd
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

DEFAULT_ENV_FILE = "/etc/spamsift/mail.env"
# Sent as feedback by message id: no such message exists, so the answer says whether the key
# may train the model and whether the model exists, and nothing is trained.
PROBE_MESSAGE_ID = "<check-mail-setup@spamsift.invalid>"
# What the scripts read from the file (the rest of contrib/mail.env is optional).
REQUIRED = (
    "SPAMSIFT_URL",
    "SPAMSIFT_MODEL",
    "SPAMSIFT_FILTER_KEY_FILE",
    "SPAMSIFT_REPORT_KEY_FILE",
    "SPAMSIFT_TIMEOUT",
    "SPAMSIFT_SPOOL",
)
OK, PROBLEM = "ok", "PROBLEM"

if TYPE_CHECKING:  # httpx loads when the check runs, not for every command's parser
    import httpx


def add_check_mail_setup_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    check = commands.add_parser(
        "check-mail-setup",
        help="check the mail-server scripts' settings, key files and server as they see them",
        description="Read the mail scripts' settings file, check that the filter user and the "
        "report user can read what they need, that the server answers and that each key "
        "works for its job. One line per finding; exit 1 on any problem.",
    )
    check.add_argument("--env-file", default=DEFAULT_ENV_FILE, help=f"default: {DEFAULT_ENV_FILE}")
    check.add_argument(
        "--filter-user",
        default="spamsift-filter",
        help="the user the filter runs as (Postfix's pipe user, or the user procmail or "
        "maildrop delivers for); '' to skip the filter (default: spamsift-filter)",
    )
    check.add_argument(
        "--report-user",
        default="vmail",
        help="the mail user Dovecot runs the reports as; '' to skip the reports (default: vmail)",
    )
    check.set_defaults(run=run_check_mail_setup)


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gids: frozenset[int]


class Findings:
    def __init__(self) -> None:
        self.problems = 0

    def ok(self, text: str) -> None:
        print(f"{OK:<8}{text}")

    def problem(self, text: str) -> None:
        self.problems += 1
        print(f"{PROBLEM:<8}{text}")


def run_check_mail_setup(args: argparse.Namespace) -> int:
    found = Findings()
    env_file = Path(args.env_file)
    users = {
        job: name
        for job, name in (("filter", args.filter_user), ("report", args.report_user))
        if name
    }
    accounts: dict[str, Account] = {}
    for job, name in users.items():
        account = account_of(name)
        if account is None:
            found.problem(f"the {job} user {name} does not exist")
        else:
            accounts[job] = account
    settings = read_env_file(env_file, found)
    if settings is None:
        return 1
    for account in accounts.values():
        if not readable_by(env_file, account):
            found.problem(f"{env_file} is not readable by {account.name} ({describe(env_file)})")
    missing = [name for name in REQUIRED if not settings.get(name)]
    if missing:
        found.problem(f"{env_file} does not set {', '.join(missing)} (see contrib/mail.env)")
        return 1
    url, model = settings["SPAMSIFT_URL"].rstrip("/"), settings["SPAMSIFT_MODEL"]
    try:
        timeout = float(settings["SPAMSIFT_TIMEOUT"])
    except ValueError:
        found.problem(f"SPAMSIFT_TIMEOUT={settings['SPAMSIFT_TIMEOUT']} is not a number of seconds")
        timeout = 10.0
    import httpx

    with httpx.Client(base_url=url, timeout=timeout) as client:
        if not server_answers(client, url, found):
            return 1
        if "filter" in accounts:
            usable, key = key_for(
                Path(settings["SPAMSIFT_FILTER_KEY_FILE"]), accounts["filter"], found
            )
            if usable:
                check_filter_key(client, key, model, found)
        if "report" in accounts:
            report = accounts["report"]
            usable, key = key_for(Path(settings["SPAMSIFT_REPORT_KEY_FILE"]), report, found)
            if usable:
                check_report_key(client, key, model, settings, found)
            check_spool(Path(settings["SPAMSIFT_SPOOL"]), report, found)
    if found.problems:
        return 1
    found.ok("the mail scripts will work as configured")
    return 0


def read_env_file(path: Path, found: Findings) -> dict[str, str] | None:
    """The NAME=value lines of the file, as the shell reads them (quotes removed)."""
    try:
        text = path.read_text()
    except OSError as error:
        found.problem(f"cannot read {path}: {error.strerror}")
        return None
    settings: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, equals, value = line.partition("=")
        try:
            words = shlex.split(value, comments=True)
        except ValueError as error:
            found.problem(f"{path}:{number}: {error}")
            continue
        if not equals or not name.isidentifier() or len(words) > 1:
            found.problem(f"{path}:{number}: not a NAME=value line: {line.strip()}")
            continue
        settings[name] = words[0] if words else ""
    found.ok(f"{path} read")
    return settings


def server_answers(client: httpx.Client, url: str, found: Findings) -> bool:
    import httpx

    try:
        response = client.get("/readyz")
    except httpx.HTTPError as error:
        found.problem(f"the server at {url} does not answer: {error}")
        return False
    if response.status_code != 200:
        found.problem(f"the server at {url} is not ready: HTTP {response.status_code}")
        return False
    found.ok(f"the server at {url} answers")
    return True


def key_for(path: Path, account: Account, found: Findings) -> tuple[bool, str | None]:
    """Whether the key can be tested, and the key in `path` (None: no key file, so the
    scripts send no key); not when `account` cannot read it, or this command cannot."""
    if not path.exists():
        found.ok(f"{path} does not exist: {account.name}'s requests carry no key")
        return True, None
    if not readable_by(path, account):
        found.problem(f"{path} is not readable by {account.name} ({describe(path)})")
        return False, None
    if path.stat().st_mode & stat.S_IROTH:
        found.problem(f"{path} is readable by every user ({describe(path)}): chmod o-r")
    try:
        return True, path.read_text().strip()
    except OSError as error:
        found.problem(f"cannot read {path} to test the key: {error.strerror} (run as root)")
        return False, None


def _headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def check_filter_key(client: httpx.Client, key: str | None, model: str, found: Findings) -> None:
    """The filter's key must be accepted by POST /classify for the model. The request's body
    is empty JSON: a key is checked before the body is read, so 422 means the key is good and
    nothing is classified."""
    response = client.post("/classify", params={"model": model}, json={}, headers=_headers(key))
    if response.status_code == 422:
        found.ok(f"the filter key may classify with model {model}")
    else:
        found.problem(f"the filter key is refused for classify on {model}: {_reason(response)}")


def check_report_key(
    client: httpx.Client,
    key: str | None,
    model: str,
    settings: dict[str, str],
    found: Findings,
) -> None:
    """The reports' key must be accepted by POST /feedback for the model, and the model must
    exist: feedback on a message id that does not exist says both, training nothing."""
    if settings.get("SPAMSIFT_MODEL_PER_USER") == "1":
        found.ok("reports go to a model per user: each must exist (spamsift models create)")
        return
    response = client.post(
        "/feedback",
        params={"model": model},
        json={"label": "spam", "message_id": PROBE_MESSAGE_ID},
        headers=_headers(key),
    )
    code = _code(response)
    if response.status_code == 404 and code == "message_not_found":
        found.ok(f"the report key may train model {model}, which exists")
    elif code == "model_not_found":
        found.problem(f"model {model} does not exist: spamsift models create {model}")
    else:
        found.problem(f"the report key is refused for feedback on {model}: {_reason(response)}")


def check_spool(spool: Path, account: Account, found: Findings) -> None:
    folder = spool if spool.exists() else spool.parent
    if not folder.is_dir():
        found.problem(f"the spool {spool} does not exist, nor its parent folder")
    elif readable_by(folder, account) and allows(folder, account, "w"):
        found.ok(f"{account.name} can write reports to {spool}")
    else:
        found.problem(f"{account.name} cannot write to {folder} ({describe(folder)})")


def account_of(name: str) -> Account | None:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    groups = {group.gr_gid for group in grp.getgrall() if name in group.gr_mem}
    return Account(name, entry.pw_uid, frozenset({entry.pw_gid, *groups}))


def allows(path: Path, account: Account, what: str) -> bool:
    """Whether the owner/group/other mode bits of `path` give `account` access `what`."""
    if account.uid == 0:
        return True
    info = path.stat()
    if info.st_uid == account.uid:
        shift = 6
    elif info.st_gid in account.gids:
        shift = 3
    else:
        shift = 0
    return bool((info.st_mode >> shift) & {"r": 4, "w": 2, "x": 1}[what])


def readable_by(path: Path, account: Account) -> bool:
    """Whether `account` can reach `path` (every folder above it searchable) and read it."""
    try:
        folders = path.resolve().parents
        return all(allows(folder, account, "x") for folder in folders) and allows(
            path, account, "r"
        )
    except OSError:
        return False


def describe(path: Path) -> str:
    info = path.stat()
    try:
        owner = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        owner = str(info.st_uid)
    try:
        group = grp.getgrgid(info.st_gid).gr_name
    except KeyError:
        group = str(info.st_gid)
    return f"{owner}:{group} {stat.S_IMODE(info.st_mode):04o}"


def _code(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return ""


def _reason(response: httpx.Response) -> str:
    try:
        return f"HTTP {response.status_code}: {response.json()['error']['message']}"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}"
