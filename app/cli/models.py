"""`spamsift models list|create|show|set|delete` and `spamsift stats [MODEL]`.

What an admin does daily without curl, on the local database or a server (`--url`, with an
admin key). Human-readable tables by default; `--json` prints what the HTTP API answers.
Deleting a model drops everything it learned: it asks for the name (or takes `--yes`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from app.cli.answers import answer_json
from app.cli.outcomes import BadArgument, CommandError
from app.cli.targets import API_KEY_VARIABLE, local_runtime
from app.config import Settings
from app.errors import InvalidInput, SpamsiftError

if TYPE_CHECKING:
    from app.service.models import ModelInfo
    from app.service.runtime import Runtime

Row = tuple[str, ...]
NAME_HELP = "the model's name: letters, digits, '.', '_', '-' (at most 64)"
OPTIONS_HELP = (
    "model options, e.g. alpha=0.5 min_learns=50 (a value is read as JSON when it can be; "
    "empty resets to the default); docs/configuration.md lists them"
)


class Admin(Protocol):
    """Model administration on the local database or a server, answering the API's JSON."""

    def all(self) -> list[dict[str, Any]]: ...
    def create(self, name: str, classes: list[str] | None, options: dict[str, Any]) -> Any: ...
    def show(self, name: str) -> dict[str, Any]: ...
    def change(self, name: str, options: dict[str, Any]) -> dict[str, Any]: ...
    def delete(self, name: str) -> None: ...
    def stats(self, name: str) -> dict[str, Any]: ...


def add_models_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    models = commands.add_parser("models", help="models: list, create, show, set, delete")
    model_commands = models.add_subparsers(title="models commands")

    listing = model_commands.add_parser("list", help="every model with its message counts")
    _add_common(listing, "spamsift models list")
    listing.set_defaults(run=run_list)

    create = model_commands.add_parser(
        "create",
        help="make a model",
        description="Make a model, e.g. `spamsift models create example.org "
        "event_model=multinomial spam_threshold=0.95`. Options are listed in "
        "docs/configuration.md and `spamsift models show default`.",
    )
    create.add_argument("name", metavar="NAME", help=NAME_HELP)
    create.add_argument(
        "--classes", help="comma-separated labels (default: ham,spam)", default=None
    )
    create.add_argument(
        "--backed-by",
        metavar="MODEL",
        default=None,
        help="classify on this model's counts summed with MODEL's (a personal model backed by "
        "a global one); same as backed_by=MODEL",
    )
    create.add_argument("options", nargs="*", metavar="OPTION=VALUE", help=OPTIONS_HELP)
    _add_common(create, "spamsift models create")
    create.set_defaults(run=run_create)

    show = model_commands.add_parser("show", help="a model's options and message counts")
    show.add_argument("name", metavar="NAME", help="the model")
    _add_common(show, "spamsift models show")
    show.set_defaults(run=run_show)

    change = model_commands.add_parser(
        "set",
        help="change options (no retraining needed); OPTION= resets one to its default",
    )
    change.add_argument("name", metavar="NAME", help="the model")
    change.add_argument("options", nargs="+", metavar="OPTION=VALUE", help=OPTIONS_HELP)
    _add_common(change, "spamsift models set")
    change.set_defaults(run=run_set)

    delete = model_commands.add_parser(
        "delete", help="delete a model and everything it learned (asks first)"
    )
    delete.add_argument("name", metavar="NAME", help="the model")
    delete.add_argument("--yes", action="store_true", help="do not ask (for scripts)")
    _add_common(delete, "spamsift models delete")
    delete.set_defaults(run=run_delete)

    stats = commands.add_parser(
        "stats", help="a model's dashboard: counts, vocabulary, activity, strongest tokens"
    )
    stats.add_argument(
        "name", nargs="?", default=None, metavar="MODEL", help="the model (default: default)"
    )
    stats.add_argument(
        "--model",
        dest="model_option",
        metavar="MODEL",
        help="the model, named as train and classify name it (the same as MODEL)",
    )
    _add_common(stats, "spamsift stats")
    stats.set_defaults(run=run_stats)


def _add_common(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--json", action="store_true", help="print the API's JSON answer")
    parser.add_argument(
        "--url", help="a running spamsift server instead of the local database (admin key)"
    )
    parser.add_argument(
        "--api-key", default=None, help=f"API key for --url (default: ${API_KEY_VARIABLE})"
    )
    parser.set_defaults(command_name=command)


# -- the commands ----------------------------------------------------------------------------


def run_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        models = admin.all()
    if args.json:
        return _print_json({"models": models})
    rows: list[Row] = [("NAME", "CLASSES", "MESSAGES", "EVENT MODEL", "CREATED")]
    for model in models:
        counts = ", ".join(f"{n} {label}" for label, n in model["messages"].items())
        rows.append(
            (
                model["name"],
                ",".join(model["classes"]),
                counts,
                str(model["config"]["event_model"]),
                str(model["created_at"])[:19].replace("T", " "),
            )
        )
    _print_table(rows)
    return 0


def run_create(args: argparse.Namespace) -> int:
    classes = args.classes.split(",") if args.classes else None
    with _admin(args) as admin:
        options = _backing_as_name(parse_options(args.options))
        if args.backed_by is not None:
            options["backed_by"] = args.backed_by
        model = admin.create(args.name, classes, options)
    if args.json:
        return _print_json(model)
    backed = f", backed by {model['backed_by']}" if model.get("backed_by") else ""
    print(f"created model {model['name']} ({', '.join(model['classes'])}){backed}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        model = admin.show(args.name)
    if args.json:
        return _print_json(model)
    _print_model(model)
    return 0


def run_set(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        options = _backing_as_name(parse_options(args.options))
        model = admin.change(args.name, options)
    if args.json:
        return _print_json(model)
    _print_model(model)
    return 0


def run_delete(args: argparse.Namespace) -> int:
    if not args.yes:
        if not sys.stdin.isatty():
            print(
                f"spamsift models delete: deleting {args.name} drops everything it learned; "
                "give --yes to delete without asking",
                file=sys.stderr,
            )
            return 2
        print(
            f"Delete model {args.name} and everything it learned? This cannot be undone "
            "(spamsift backup or export first). Type its name to confirm: ",
            end="",
            file=sys.stderr,
            flush=True,
        )
        if sys.stdin.readline().strip() != args.name:
            print("spamsift models delete: not confirmed; nothing deleted", file=sys.stderr)
            return 1
    with _admin(args) as admin:
        admin.delete(args.name)
    print(f"deleted model {args.name}")
    return 0


def run_stats(args: argparse.Namespace) -> int:
    if args.name and args.model_option and args.name != args.model_option:
        raise SystemExit(
            _fail(args.command_name, BadArgument("give the model once: MODEL or --model MODEL"))
        )
    name = args.model_option or args.name or "default"
    with _admin(args) as admin:
        stats = admin.stats(name)
    if args.json:
        return _print_json(stats)
    print(f"model {stats['model']}  (generation {stats['generation']}, {stats['event_model']})")
    print()
    rows: list[Row] = [("CLASS", "MESSAGES", "TERMS")]
    rows += [(label, str(c["messages"]), str(c["terms"])) for label, c in stats["classes"].items()]
    _print_table(rows)
    vocabulary = stats["vocabulary"]
    print(f"\nvocabulary: {vocabulary['tokens']} tokens, {vocabulary['effective']} scored")
    print(f"min_learns: {stats['min_learns']} per class")
    for warning in stats.get("warnings", []):
        print(f"warning: {warning}")
    activity = stats["activity"]
    periods = list(activity)
    rows = [("ACTIVITY", *periods)]
    for key in ("trained", "forgotten", "classified", "corrections"):
        rows.append((key, *(str(activity[p].get(key, 0)) for p in periods)))
    for verdict in activity[periods[0]]["verdicts"] if periods else ():
        rows.append(
            (f"verdict {verdict}", *(str(activity[p]["verdicts"][verdict]) for p in periods))
        )
    print()
    _print_table(rows)
    for label, tokens in stats["top_tokens"].items():
        shown = ", ".join(t["token"] for t in tokens[:10])
        print(f"\nstrongest {label} tokens: {shown}")
    print(f"\ndatabase: {stats['database_bytes']} bytes")
    return 0


# -- options and output ----------------------------------------------------------------------


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """`alpha=0.5 stop_words=none min_learns=` as {"alpha": 0.5, "stop_words": "none",
    "min_learns": None}: a value is JSON when it reads as JSON, else a string; empty resets."""
    options: dict[str, Any] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise BadArgument(f"options are OPTION=VALUE, got {pair!r}")
        if value == "":
            options[name] = None
            continue
        try:
            options[name] = json.loads(value)
        except ValueError:
            options[name] = value
    return options


def _print_json(answer: Any) -> int:
    print(json.dumps(answer, ensure_ascii=False, indent=2, default=str))
    return 0


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def _print_model(model: dict[str, Any]) -> None:
    counts = ", ".join(f"{n} {label}" for label, n in model["messages"].items())
    print(f"model {model['name']}: classes {', '.join(model['classes'])}; messages {counts}")
    if model.get("backed_by"):
        trains = " (feedback trains it too)" if model.get("feedback_trains_backing") else ""
        print(f"backed by {model['backed_by']}: classified on both models' counts{trains}")
    if model.get("backs"):
        print(f"backs {', '.join(model['backs'])}")
    rows: list[Row] = [("OPTION", "VALUE")]
    rows += [(name, json.dumps(value)) for name, value in model["config"].items()]
    _print_table(rows)


# -- where the models are --------------------------------------------------------------------


@contextmanager
def _admin(args: argparse.Namespace) -> Iterator[Admin]:
    """The local database (named on stderr) or the server of --url; errors become exit 1."""
    admin: LocalAdmin | RemoteAdmin
    try:
        if args.url:
            api_key = args.api_key or os.environ.get(API_KEY_VARIABLE) or None
            from app.cli.remote import RemoteAdmin  # httpx: only for --url

            admin = RemoteAdmin(args.url, api_key=api_key)
        else:
            admin = LocalAdmin(args.command_name)
    except (CommandError, SpamsiftError) as error:
        raise SystemExit(_fail(args.command_name, error)) from None
    try:
        yield admin
    except (CommandError, SpamsiftError) as error:
        raise SystemExit(_fail(args.command_name, error)) from None
    finally:
        admin.close()


def _fail(command: str, error: Exception) -> int:
    """Say why on stderr; 2 for a bad argument (an unknown option, a value out of range),
    1 for anything else (no such model, the database or server unavailable)."""
    message = error.message if isinstance(error, SpamsiftError) else str(error)
    print(f"{command}: {message}", file=sys.stderr)
    return 2 if isinstance(error, BadArgument | InvalidInput) else 1


class LocalAdmin:
    def __init__(self, command: str) -> None:
        self.runtime: Runtime = local_runtime(command, Settings())

    def all(self) -> list[dict[str, Any]]:
        from app.service.models import MAX_PAGE, list_models

        listed: list[dict[str, Any]] = []
        after: str | None = None
        while True:  # page by page: one query each, no model loaded
            page = list_models(self.runtime, after=after, limit=MAX_PAGE)
            listed.extend(_model_json(info) for info in page.models)
            if page.next is None:
                return listed
            after = page.next

    def create(self, name: str, classes: list[str] | None, options: dict[str, Any]) -> Any:
        from app.service.models import check_model_name, create_model

        check_model_name(name)
        config, relation = _split_relation(options)
        return _model_json(
            create_model(self.runtime, name=name, classes=classes, config=config, relation=relation)
        )

    def show(self, name: str) -> dict[str, Any]:
        from app.service.models import get_model

        return _model_json(get_model(self.runtime, name=name))

    def change(self, name: str, options: dict[str, Any]) -> dict[str, Any]:
        from app.service.models import update_model

        config, relation = _split_relation(options)
        return _model_json(update_model(self.runtime, name=name, changes=config, relation=relation))

    def delete(self, name: str) -> None:
        from app.service.models import delete_model

        delete_model(self.runtime, name=name)

    def stats(self, name: str) -> dict[str, Any]:
        from app.service.dashboard import model_stats

        stats: dict[str, Any] = model_stats(self.runtime, model_name=name)
        return stats

    def close(self) -> None:
        self.runtime.close()


def _split_relation(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Scoring options apart from the backing relation's fields (`backed_by`, ...)."""
    from app.service.models import RELATION_FIELDS

    config = {name: value for name, value in options.items() if name not in RELATION_FIELDS}
    relation = {name: value for name, value in options.items() if name in RELATION_FIELDS}
    return config, relation


def _backing_as_name(options: dict[str, Any]) -> dict[str, Any]:
    """`backed_by=2024` names the model 2024 (a value is read as JSON where it can be)."""
    if isinstance(options.get("backed_by"), int | float):
        options["backed_by"] = str(options["backed_by"])
    return options


def _model_json(info: ModelInfo) -> dict[str, Any]:
    """A model as GET /v1/models/{name} answers it."""
    answer: dict[str, Any] = answer_json(info)
    return answer
