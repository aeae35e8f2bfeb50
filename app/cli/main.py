"""The `spamsift` command: serve, db upgrade, evaluate, keys."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from app.cli.keys import add_keys_commands
from app.config import Settings


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:
        status: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spamsift", description="Self-hosted naive Bayes spam filter."
    )
    commands = parser.add_subparsers(title="commands")

    serve = commands.add_parser("serve", help="run the HTTP API (brings the schema up to date)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1)
    serve.set_defaults(run=run_serve)

    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(title="db commands")
    upgrade = db_commands.add_parser("upgrade", help="apply pending schema migrations")
    upgrade.set_defaults(run=run_db_upgrade)

    add_keys_commands(commands)

    evaluate = commands.add_parser(
        "evaluate", help="train and test in memory on a labelled corpus (.jsonl[.gz])"
    )
    evaluate.add_argument("corpus", type=Path)
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON")
    evaluate.add_argument(
        "--event-model",
        action="append",
        dest="event_models",
        choices=["multinomial", "bernoulli", "robinson-fisher"],
        help="scorer to measure (repeatable; default: all three)",
    )
    evaluate.add_argument("--alpha", type=float, default=1.0)
    evaluate.add_argument("--prior", choices=["mle", "laplace", "uniform"], default="mle")
    evaluate.add_argument("--min-df", type=int, default=1)
    evaluate.add_argument("--max-vocab", type=int, default=None)
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
    evaluate.set_defaults(run=run_evaluate)
    return parser


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.store.engine import Database
    from app.store.migrate import upgrade_schema

    settings = Settings()
    db = Database(settings.database_url, lock_timeout_seconds=settings.lock_timeout_seconds)
    upgrade_schema(db)  # before the workers start: they never migrate on import
    db.dispose()
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=settings.log_level,
    )
    return 0


def run_db_upgrade(_: argparse.Namespace) -> int:
    from app.store.engine import Database
    from app.store.migrate import current_revision, upgrade_schema

    settings = Settings()
    db = Database(settings.database_url, lock_timeout_seconds=settings.lock_timeout_seconds)
    upgrade_schema(db)
    print(f"database at revision {current_revision(db)}")
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from app.cli.corpora import read_jsonl
    from app.cli.report import print_evaluation
    from app.service.evaluation import EVENT_MODELS, evaluate
    from app.service.model_config import ModelConfig

    if not args.corpus.exists():
        print(f"spamsift evaluate: no such corpus file: {args.corpus}", file=sys.stderr)
        return 3
    stop_words = (
        args.stop_words
        if args.stop_words in ("english", "none")
        else [word.strip() for word in args.stop_words.split(",") if word.strip()]
    )
    config = ModelConfig(
        alpha=args.alpha,
        prior=args.prior,
        min_df=args.min_df,
        max_vocab=args.max_vocab,
        stop_words=stop_words,
    ).to_engine()
    name = args.corpus.parent.name if args.corpus.name.startswith("messages.") else args.corpus.name
    report = evaluate(
        read_jsonl(args.corpus),
        corpus=name,
        config=config,
        event_models=tuple(args.event_models or EVENT_MODELS),
        text_only_view=args.text_only,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print_evaluation(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
