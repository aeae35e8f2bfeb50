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
from collections.abc import Iterator, Sequence

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
    from app.serving import ServeError, load_settings

    parser = build_parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    # Status 2 says "bad argument or setting", which `classify` means as "unsure": there, as in
    # bogofilter, every error is 3.
    usage_status = EXIT_ERROR if arguments[:1] == ["classify"] else 2
    try:
        args = parse_arguments(parser, arguments)
    except SystemExit as stop:
        if stop.code == 2:
            return usage_status
        raise
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:  # a bad SPAMSIFT_* setting: one line naming it, before any command reads one
        load_settings()
    except ServeError as error:
        print(f"{args.command_name}: {error}", file=sys.stderr)
        return usage_status
    try:
        status: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    return status


def parse_arguments(parser: argparse.ArgumentParser, arguments: list[str]) -> argparse.Namespace:
    """The arguments, options allowed between positionals (`train --label spam a/ --model x
    b/`): argparse's intermixed parsing, which it offers for a parser without sub-commands
    only, run by the command's own parser once the sub-command is known."""
    args, extras = parser.parse_known_args(arguments)
    command = dict(subcommands(parser)).get(getattr(args, "command_name", None) or "")
    if not extras or command is None:
        return parser.parse_args(arguments)  # as argparse says it, errors too
    words = len(command.prog.split()) - 1  # "spamsift keys create": keys, create
    return command.parse_intermixed_args(arguments[words:])


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
    for name, command in subcommands(parser):
        command.set_defaults(command_name=name)  # "spamsift keys create": in its messages
    return parser


def subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command that runs (`spamsift train`, `spamsift keys create`, …) with its parser,
    walking the sub-command tree."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for command in dict.fromkeys(action.choices.values()):  # an alias repeats its parser
            if command.get_default("run") is not None:
                yield command.prog, command
            yield from subcommands(command)


if __name__ == "__main__":
    sys.exit(main())
