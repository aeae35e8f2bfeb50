"""The `spamsift` command: assembles one sub-command per module of app/cli.

serve.py       serve, db upgrade: run the HTTP API, migrate the schema
train.py       train: files, folders, mbox, Maildir and corpora, in batches
classify.py    classify: verdict as exit status, or the message with headers added
feedback.py    feedback: "report spam / not spam" from an IMAP hook
transfer.py    export, import, backup: JSON-lines copies of models, SQLite backups
bogofilter.py  import-bogofilter: a bogofilter wordlist dump into a model
expire.py      expire: tokens beyond a maximum per model, old classification records
evaluate.py    evaluate: train and test in memory on a labelled corpus
keys.py        keys create|list|revoke: API keys
mail_setup.py  check-mail-setup: the mail scripts' settings, key files and server, checked
models.py      models list|create|show|set|delete, stats: model administration
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from app import __version__
from app.cli.bogofilter import add_bogofilter_command
from app.cli.classify import EXIT_ERROR, add_classify_command
from app.cli.evaluate import add_evaluate_command
from app.cli.expire import add_expire_command
from app.cli.feedback import add_feedback_command
from app.cli.keys import add_keys_commands
from app.cli.mail_setup import add_check_mail_setup_command
from app.cli.models import add_models_commands
from app.cli.serve import add_serve_commands
from app.cli.train import add_train_command
from app.cli.transfer import add_transfer_commands


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(arguments)
    except SystemExit as stop:
        # argparse exits 2 on bad arguments, which `classify` means as "unsure": there, as in
        # bogofilter, every error is 3.
        if stop.code == 2 and arguments[:1] == ["classify"]:
            return EXIT_ERROR
        raise
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:
        status: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    return status


class VersionAction(argparse.Action):
    """`spamsift --version`: the version and which token core SPAMSIFT_TOKENIZER selects."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from app.serving import ServeError, load_settings
        from app.text.core import resolve

        core: str
        try:
            core = resolve(load_settings().tokenizer).name
        except ServeError as error:  # a bad setting: say so rather than guess
            core = f"unknown, {error}"
        print(f"spamsift {__version__} (token core: {core})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spamsift", description="Self-hosted naive Bayes spam filter."
    )
    parser.add_argument(
        "--version",
        action=VersionAction,
        nargs=0,
        help="show the version and the token core (compiled or python) this install runs",
    )
    commands = parser.add_subparsers(title="commands")
    add_serve_commands(commands)
    add_train_command(commands)
    add_classify_command(commands)
    add_feedback_command(commands)
    add_check_mail_setup_command(commands)
    add_transfer_commands(commands)
    add_bogofilter_command(commands)
    add_keys_commands(commands)
    add_models_commands(commands)
    add_evaluate_command(commands)
    add_expire_command(commands)
    return parser


if __name__ == "__main__":
    sys.exit(main())
