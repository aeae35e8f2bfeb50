"""`spamsift evaluate CORPUS`: measure a configuration in memory on a labelled corpus.

Batch split by default; `--online` streams the corpus through the TREC immediate-feedback
protocol (score each message, then train it as `--train-mode` says).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.bayes.scorers import EVENT_MODELS


def add_evaluate_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    evaluate = commands.add_parser(
        "evaluate", help="train and test in memory on a labelled corpus (.jsonl[.gz])"
    )
    evaluate.add_argument(
        "corpus", type=Path, help="a labelled corpus, one JSON message per line (.jsonl[.gz])"
    )
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON")
    evaluate.add_argument(
        "--event-model",
        action="append",
        dest="event_models",
        choices=EVENT_MODELS,
        help="scorer to measure (repeatable; default: all three)",
    )
    evaluate.add_argument(
        "--alpha",
        type=float,
        default=1.0,
        help="additive smoothing of multinomial and Bernoulli naive Bayes (default 1)",
    )
    evaluate.add_argument(
        "--prior",
        choices=["mle", "laplace", "uniform"],
        default="mle",
        help="class prior: trained share of each class (mle, default), laplace or uniform",
    )
    evaluate.add_argument(
        "--min-df",
        type=int,
        default=1,
        help="ignore tokens seen in fewer trained messages when scoring (default 1)",
    )
    evaluate.add_argument(
        "--max-vocab",
        type=int,
        default=None,
        help="score with only this many tokens, those in most messages (default: all)",
    )
    evaluate.add_argument(
        "--stop-words", default="english", help="english, none, or a comma-separated list"
    )
    evaluate.add_argument(
        "--rf-strength",
        type=float,
        default=None,
        help="Robinson-Fisher strength s (default: the model default)",
    )
    evaluate.add_argument(
        "--rf-assumed", type=float, default=None, help="Robinson-Fisher assumed probability x"
    )
    evaluate.add_argument(
        "--rf-min-dev", type=float, default=None, help="Robinson-Fisher minimum deviation from 0.5"
    )
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


def run_evaluate(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from app.cli.corpora import read_jsonl
    from app.cli.report import print_evaluation, print_online_evaluation
    from app.service.evaluation import evaluate, evaluate_online, tokenize_corpus
    from app.service.model_config import ModelConfig

    if not args.corpus.exists():
        print(f"spamsift evaluate: no such corpus file: {args.corpus}", file=sys.stderr)
        return 3
    stop_words = (
        args.stop_words
        if args.stop_words in ("english", "none")
        else [word.strip() for word in args.stop_words.split(",") if word.strip()]
    )
    options: dict[str, Any] = {
        "alpha": args.alpha,
        "prior": args.prior,
        "min_df": args.min_df,
        "max_vocab": args.max_vocab,
        "stop_words": stop_words,
    }
    # Only the Robinson-Fisher options given on the command line: the rest keep the defaults.
    for option in ("rf_strength", "rf_assumed", "rf_min_dev"):
        if getattr(args, option) is not None:
            options[option] = getattr(args, option)
    try:
        config = ModelConfig(**options).to_engine()
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        print(f"spamsift evaluate: --{field.replace('_', '-')}: {first['msg']}", file=sys.stderr)
        return 2
    name = args.corpus.parent.name if args.corpus.name.startswith("messages.") else args.corpus.name
    if args.online:
        examples = tokenize_corpus(read_jsonl(args.corpus), text_only_view=args.text_only)
        models = tuple(args.event_models or (config.event_model,))
        reports = [
            evaluate_online(
                examples,
                corpus=name,
                config=replace(config, event_model=model),
                train_mode=args.train_mode,
                shuffle_seed=None if args.in_order else args.shuffle_seed,
                text_only_view=args.text_only,
            )
            for model in models
        ]
        if args.json:
            dicts = [report.to_dict() for report in reports]
            print(json.dumps(dicts[0] if len(dicts) == 1 else dicts, indent=2))
        else:
            for report in reports:
                print_online_evaluation(report)
        return 0
    batch = evaluate(
        read_jsonl(args.corpus),
        corpus=name,
        config=config,
        event_models=tuple(args.event_models or EVENT_MODELS),
        text_only_view=args.text_only,
    )
    if args.json:
        print(json.dumps(batch.to_dict(), indent=2))
    else:
        print_evaluation(batch)
    return 0
