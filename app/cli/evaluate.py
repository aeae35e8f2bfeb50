"""`spamsift evaluate CORPUS`: measure a configuration in memory on a labelled corpus.

Batch split by default; `--online` streams the corpus through the TREC immediate-feedback
protocol (score each message, then train it as `--train-mode` says).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from types import NoneType
from typing import Any, Literal, get_args, get_origin

from pydantic.fields import FieldInfo

from app.service.model_config import evaluated_options, shown_default

# Messages between two token expiry runs in an online evaluation with --max-tokens or
# --pair-probation.
EXPIRE_EVERY = 100


def add_evaluate_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    evaluate = commands.add_parser(
        "evaluate", help="train and test in memory on a labelled corpus (.jsonl[.gz])"
    )
    evaluate.add_argument(
        "corpus", type=Path, help="a labelled corpus, one JSON message per line (.jsonl[.gz])"
    )
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON")
    add_scoring_flags(evaluate)
    evaluate.add_argument(
        "--text-only",
        action="store_true",
        help="tokenize only the decoded Subject and the text of text/* parts",
    )
    evaluate.add_argument(
        "--online",
        action="store_true",
        help="score each message in stream order, then train it with its label (TREC protocol)",
    )
    evaluate.add_argument(
        "--train-mode",
        choices=["all", "error", "unsure"],
        default="all",
        help="online: train every message (all), those scored at or beyond even odds on the "
        "wrong side (error), or every message not called right, wrong or unsure (unsure)",
    )
    evaluate.add_argument(
        "--max-tokens",
        type=_count,
        metavar="N",
        help="online: token expiry as a server with SPAMSIFT_MAX_TOKENS_PER_MODEL=N runs it, "
        "the least recently seen tokens deleted past N tokens (default: no expiry)",
    )
    evaluate.add_argument(
        "--pair-probation",
        type=_count,
        metavar="K",
        help="online: token expiry as a server runs it for a model with pair_probation=K, a "
        "word pair counted in one trained message deleted once K newer messages were trained "
        "(default: pairs kept)",
    )
    evaluate.add_argument(
        "--expire-every",
        type=_count,
        metavar="M",
        help="with --max-tokens or --pair-probation: messages between two expiry runs, the "
        "mail a model gets in "
        f"the 5 minutes between a server's runs (default {EXPIRE_EVERY})",
    )
    order = evaluate.add_mutually_exclusive_group()
    order.add_argument(
        "--shuffle-seed",
        type=int,
        default=0,
        help="online: stream in the fixed shuffle of this seed (sha256 of 'seed:id'; default 0)",
    )
    order.add_argument(
        "--in-order",
        action="store_true",
        help="online: stream in file order (for corpora in delivery order)",
    )
    evaluate.set_defaults(run=run_evaluate)


def add_scoring_flags(evaluate: argparse.ArgumentParser) -> None:
    """One flag per scoring and learning option, from its declaration in ModelConfig."""
    for name, field in evaluated_options().items():
        flag = "--" + name.replace("_", "-")
        if name == "event_model":
            evaluate.add_argument(
                flag,
                action="append",
                dest="event_models",
                choices=get_args(field.annotation),
                help="scorer to measure (repeatable; default: all of them)",
            )
            continue
        described = field.description or ""
        if field.default is not None:  # None is described: "`null`: no limit"
            described += f" (default {shown_default(field.default)})"
        evaluate.add_argument(
            flag, dest=name, default=None, help=described.replace("`", ""), **_parsing(field)
        )


def _parsing(field: FieldInfo) -> dict[str, Any]:
    """argparse's `type` and `choices` for an option of this type."""
    if get_origin(field.annotation) is Literal:
        return {"choices": get_args(field.annotation)}
    kinds = [kind for kind in get_args(field.annotation) if kind is not NoneType]
    kind = kinds[0] if kinds else field.annotation
    if kind in (int, float):
        return {"type": kind}
    if kind is bool:  # --word-pairs false
        return {"type": _boolean, "metavar": "{true,false}"}
    # stop_words: a list's name, or its words separated by commas
    names = get_args(kind)
    return {"type": lambda value: value if value in names else _words(value)}


def _boolean(value: str) -> bool:
    if value.lower() in ("true", "on", "yes", "1"):
        return True
    if value.lower() in ("false", "off", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def _count(value: str) -> int:
    """A whole number of at least 1 (argparse reports the flag with the message)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def _words(value: str) -> list[str]:
    return [word.strip() for word in value.split(",") if word.strip()]


def run_evaluate(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from app.bayes.scorers import EVENT_MODELS
    from app.cli.corpora import read_jsonl
    from app.cli.report import print_evaluation, print_online_evaluation
    from app.config import Settings
    from app.service.evaluation import (
        StreamExpiry,
        evaluate,
        evaluate_online,
        tokenize_corpus,
    )
    from app.service.model_config import ModelConfig
    from app.text.core import resolve

    if not args.corpus.exists():
        print(f"spamsift evaluate: no such corpus file: {args.corpus}", file=sys.stderr)
        return 3
    # Only the options given on the command line: the rest keep their declared defaults.
    options: dict[str, Any] = {
        name: getattr(args, name)
        for name in evaluated_options()
        if name != "event_model" and getattr(args, name) is not None
    }
    try:
        options_given = ModelConfig(**options)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        print(f"spamsift evaluate: --{field.replace('_', '-')}: {first['msg']}", file=sys.stderr)
        return 2
    config = options_given.to_engine()
    families = options_given.token_families()
    expiry = None
    expiring = args.max_tokens is not None or args.pair_probation is not None
    if args.expire_every is not None and not expiring:
        print(
            "spamsift evaluate: --expire-every needs --max-tokens or --pair-probation",
            file=sys.stderr,
        )
        return 2
    if expiring:
        if not args.online:
            flag = "--max-tokens" if args.max_tokens is not None else "--pair-probation"
            print(f"spamsift evaluate: {flag} needs --online", file=sys.stderr)
            return 2
        every = EXPIRE_EVERY if args.expire_every is None else args.expire_every
        expiry = StreamExpiry(
            max_tokens=args.max_tokens, every=every, pair_probation=args.pair_probation
        )
    core = resolve(Settings().tokenizer)  # checked by main, as every setting
    name = args.corpus.parent.name if args.corpus.name.startswith("messages.") else args.corpus.name
    if args.online:
        examples = tokenize_corpus(
            read_jsonl(args.corpus), core=core, text_only_view=args.text_only, families=families
        )
        models = tuple(args.event_models or (config.event_model,))
        reports = [
            evaluate_online(
                examples,
                corpus=name,
                config=replace(config, event_model=model),
                train_mode=args.train_mode,
                shuffle_seed=None if args.in_order else args.shuffle_seed,
                text_only_view=args.text_only,
                expiry=expiry,
            )
            for model in models
        ]
        if args.json:
            dicts = [asdict(report) for report in reports]
            print(json.dumps(dicts[0] if len(dicts) == 1 else dicts, indent=2))
        else:
            for report in reports:
                print_online_evaluation(report)
        return 0
    batch = evaluate(
        read_jsonl(args.corpus),
        corpus=name,
        config=config,
        core=core,
        event_models=tuple(args.event_models or EVENT_MODELS),
        text_only_view=args.text_only,
        families=families,
    )
    if args.json:
        print(json.dumps(asdict(batch), indent=2))
    else:
        print_evaluation(batch)
    return 0
