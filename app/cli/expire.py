"""`spamsift expire [--model NAME] [--max-tokens N] [--max-ledger-messages N]`: bound the
database's growth.

Deletes tokens beyond the maximum (--max-tokens if given, else each model's own max_tokens,
else SPAMSIFT_MAX_TOKENS_PER_MODEL; dead tokens, all of whose counts are zero, in any case),
ledger entries beyond the newest SPAMSIFT_MAX_LEDGER_MESSAGES_PER_MODEL (or
--max-ledger-messages) and classification records past SPAMSIFT_RETENTION_DAYS, as a server
does periodically; then (SQLite) gives the freed pages back to the file system.
app/service/expiry.py says which tokens go first.
"""

from __future__ import annotations

import argparse
import sys

from app.cli.targets import local_runtime
from app.config import Settings
from app.errors import SpamsiftError


def add_expire_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    expire = commands.add_parser(
        "expire",
        help="delete the least useful tokens beyond a maximum, and old classification records",
        description="Keep at most N tokens per model: tokens whose counts are all zero go "
        "first, then the least recently seen and least informative. Also deletes "
        "classification records older than SPAMSIFT_RETENTION_DAYS. Trained messages can "
        "still be forgotten or relabelled exactly afterwards.",
    )
    expire.add_argument("--model", help="only this model (default: every model)")
    expire.add_argument(
        "--max-tokens",
        type=int,
        help="tokens to keep per model (default: each model's own max_tokens option, else "
        "SPAMSIFT_MAX_TOKENS_PER_MODEL; where neither is set, every token that still counts)",
    )
    expire.add_argument(
        "--max-ledger-messages",
        type=int,
        help="trained messages each model's ledger keeps, the newest (default: "
        "SPAMSIFT_MAX_LEDGER_MESSAGES_PER_MODEL; 0 there keeps every one); older ones stay "
        "trained but can no longer be forgotten or relabelled",
    )
    expire.set_defaults(run=run_expire)


def run_expire(args: argparse.Namespace) -> int:
    from app.service.database import reclaim_space
    from app.service.expiry import expire_all, expire_tokens, prune_ledger, prune_ledgers

    settings = Settings()
    try:
        rt = local_runtime("spamsift expire", settings)
    except SpamsiftError as error:
        print(f"spamsift expire: {error.message}", file=sys.stderr)
        return 1
    try:
        if args.model:
            results = [expire_tokens(rt, model_name=args.model, max_tokens=args.max_tokens)]
        else:
            results = expire_all(rt, max_tokens=args.max_tokens)
        ledger_keep = (
            args.max_ledger_messages
            if args.max_ledger_messages is not None
            else settings.max_ledger_messages_per_model
        )
        prunings = []
        if ledger_keep > 0:
            prunings = (
                [prune_ledger(rt, model_name=args.model, keep=ledger_keep)]
                if args.model
                else prune_ledgers(rt, keep=ledger_keep)
            )
        records = rt.expire()
        pages = reclaim_space(rt)
    except SpamsiftError as error:
        print(f"spamsift expire: {error.message}", file=sys.stderr)
        return 1
    finally:
        rt.close()
    for result in results:
        print(
            f"model {result.model}: removed {result.removed} tokens "
            f"({result.trained_removed} still counted), {result.kept} kept"
        )
    for pruning in prunings:
        print(f"model {pruning.model}: dropped {pruning.removed} ledger entries")
    print(f"removed {records} classification records past the retention period")
    if pages:
        print(f"gave {pages} free pages back to the file system")
    return 0
