"""`spamsift keys create|list|revoke`: API keys in the local database (SPEC §8, §9).

`create` writes its notes to stderr and the key alone to stdout, as the last line, so
`KEY=$(spamsift keys create --scope classify)` captures just the key.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import TYPE_CHECKING

from app.cli.targets import local_database
from app.errors import SpamsiftError

if TYPE_CHECKING:  # loaded when a keys command runs, not for every `spamsift` start
    from app.service.keys import ApiKey

SCOPES = ("classify", "train", "admin")  # as app.service.keys.SCOPES, which checks them again


def add_keys_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = commands.add_parser("keys", help="API keys: create, list, revoke")
    keys_commands = keys.add_subparsers(title="keys commands")

    create = keys_commands.add_parser(
        "create", help="make an API key; prints it once, alone on the last line"
    )
    create.add_argument(
        "--scope",
        action="append",
        dest="scopes",
        required=True,
        choices=SCOPES,
        help="what the key may do (repeatable); admin implies classify and train",
    )
    create.add_argument(
        "--model",
        action="append",
        dest="models",
        metavar="NAME",
        help="limit the key to this model (repeatable; default: every model)",
    )
    create.add_argument("--name", default="", help="a label to recognise the key by")
    create.set_defaults(run=run_keys_create)

    listing = keys_commands.add_parser("list", help="list keys (never their secret)")
    listing.set_defaults(run=run_keys_list)

    revoke = keys_commands.add_parser("revoke", help="revoke a key; it stops working at once")
    revoke.add_argument("key", metavar="KEY_ID", help="the key id `keys list` shows, or the key")
    revoke.set_defaults(run=run_keys_revoke)


def run_keys_create(args: argparse.Namespace) -> int:
    from app.service.keys import create_key

    try:
        with local_database("spamsift keys create") as db:
            key, listing = create_key(db, scopes=args.scopes, models=args.models, name=args.name)
    except SpamsiftError as error:
        print(f"spamsift keys create: {error.message}", file=sys.stderr)
        return 1
    print(f"Created API key {listing.key_id}: {_describe(listing)}.", file=sys.stderr)
    print("It is shown only this once and stored hashed: keep it now.", file=sys.stderr)
    print(key, flush=True)
    return 0


def run_keys_list(_: argparse.Namespace) -> int:
    from app.service.keys import list_keys

    try:
        with local_database("spamsift keys list") as db:
            keys = list_keys(db)
    except SpamsiftError as error:
        print(f"spamsift keys list: {error.message}", file=sys.stderr)
        return 1
    if not keys:
        print("no API keys: the server runs in development mode (every endpoint open)")
        return 0
    rows = [("KEY ID", "NAME", "SCOPES", "MODELS", "CREATED", "REVOKED")]
    rows += [
        (
            key.key_id,
            key.name or "-",
            ",".join(key.scopes),
            ",".join(key.models) if key.models is not None else "*",
            _when(key.created_at),
            _when(key.revoked_at) if key.revoked_at else "-",
        )
        for key in keys
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())
    return 0


def run_keys_revoke(args: argparse.Namespace) -> int:
    from app.service.keys import list_keys, revoke_key

    try:
        with local_database("spamsift keys revoke") as db:
            revoked = revoke_key(db, key=args.key)
            active = [key for key in list_keys(db) if key.revoked_at is None]
    except SpamsiftError as error:
        print(f"spamsift keys revoke: {error.message}", file=sys.stderr)
        return 1
    print(f"revoked API key {revoked.key_id} ({_describe(revoked)})")
    if not active:
        print(
            "no unrevoked key is left: every request but /healthz and /readyz is refused "
            "until you create one (spamsift keys create --scope admin)"
        )
    return 0


def _describe(key: ApiKey) -> str:
    models = ", ".join(key.models) if key.models is not None else "every model"
    name = f'"{key.name}", ' if key.name else ""
    return f"{name}scopes {', '.join(key.scopes)}; {models}"


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")
