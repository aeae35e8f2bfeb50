"""`spamsift export`, `spamsift import` and `spamsift backup`: copies of the local database.

`export` writes JSON lines (app/service/transfer.py describes them; `.gz` names are gzipped)
from one consistent snapshot, while training may go on. `import` reads them back in one
transaction. `backup PATH` copies a SQLite database with `VACUUM INTO` and checks the copy; for
PostgreSQL use pg_dump, or export.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from app.cli.bogofilter import import_dump
from app.cli.progress import progress_bar
from app.cli.targets import local_database
from app.errors import InvalidInput, SpamsiftError

if TYPE_CHECKING:  # loaded when the command runs, not for every `spamsift` start
    from tqdm import tqdm

    from app.service.transfer import TransferSummary


def add_transfer_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser(
        "export",
        help="write models, configs, tokens, counts and the ledger as JSON lines",
        description="Export the local database's models as JSON lines, from one consistent "
        "snapshot (training may go on meanwhile).",
    )
    export.add_argument(
        "-o", "--output", default="-", metavar="FILE", help="default: stdout; FILE.gz is gzipped"
    )
    export.add_argument(
        "--model",
        action="append",
        dest="models",
        metavar="NAME",
        help="export only this model (repeatable; default: every model)",
    )
    export.set_defaults(run=run_export)

    imports = commands.add_parser(
        "import",
        help="read an export (or, with --bogofilter, a bogofilter wordlist dump)",
        description="Import a `spamsift export` file into the local database, in one "
        "transaction. A model that exists is refused unless it is empty or --replace is given.",
    )
    imports.add_argument("file", metavar="FILE", help="an export (FILE.gz too), or - for stdin")
    imports.add_argument(
        "--replace", action="store_true", help="replace models of the same name that are trained"
    )
    imports.add_argument(
        "--bogofilter",
        action="store_true",
        help="FILE is `bogoutil -d` output: import it into --model (see import-bogofilter)",
    )
    imports.add_argument("--model", default="default", help="with --bogofilter: the model")
    imports.set_defaults(run=run_import)

    backup = commands.add_parser(
        "backup",
        help="copy a SQLite database consistently, even while training goes on",
        description="Copy the SQLite database of SPAMSIFT_DATABASE_URL to PATH with VACUUM "
        "INTO (one consistent snapshot, training may go on) and check the copy with PRAGMA "
        "integrity_check. For PostgreSQL, use pg_dump, or spamsift export.",
    )
    backup.add_argument("path", type=Path, metavar="PATH", help="a new file")
    backup.set_defaults(run=run_backup)


def run_export(args: argparse.Namespace) -> int:
    from app.service.transfer import TransferSummary, export_records

    summary = TransferSummary()
    try:
        with (
            local_database("spamsift export") as db,
            _output(args.output) as output,
            progress_bar("exporting", unit=" rows", unit_scale=True) as bar,
        ):
            for record in export_records(db, model_names=args.models, summary=summary):
                output.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
                output.write("\n")
                bar.update(_rows_in(record))
    except SpamsiftError as error:
        print(f"spamsift export: {error.message}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"spamsift export: cannot write {args.output}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"exported {_describe(summary)}", file=sys.stderr)
    return 0


def run_import(args: argparse.Namespace) -> int:
    if args.bogofilter:
        return import_dump(args.file, model=args.model, command="import --bogofilter")
    from app.service.transfer import import_records

    if args.file != "-" and not Path(args.file).is_file():  # a typo: say so before anything
        print(f"spamsift import: {args.file}: no such file", file=sys.stderr)
        return 2
    try:
        with (
            local_database("spamsift import") as db,
            _input(args.file) as lines,
            progress_bar("importing", unit=" rows", unit_scale=True) as bar,
        ):
            summary = import_records(db, _counted(_records(lines), bar), replace=args.replace)
    except SpamsiftError as error:
        print(f"spamsift import: {error.message}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"spamsift import: cannot read {args.file}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"imported {_describe(summary)}")
    return 0


def run_backup(args: argparse.Namespace) -> int:
    from app.service.transfer import backup_sqlite

    try:
        with local_database("spamsift backup") as db:
            if not db.is_sqlite:
                print(
                    "spamsift backup copies SQLite databases. For PostgreSQL use pg_dump "
                    "(pg_dump -Fc -f spamsift.dump DBNAME; it reads one consistent snapshot) "
                    "or spamsift export -o spamsift.jsonl.gz",
                    file=sys.stderr,
                )
                return 2
            backup = backup_sqlite(db, args.path.absolute())
    except SpamsiftError as error:
        print(f"spamsift backup: {error.message}", file=sys.stderr)
        return 1
    print(f"backup written to {backup.path} ({backup.size_bytes} bytes, integrity_check ok)")
    return 0


def _describe(summary: TransferSummary) -> str:
    rows = ", ".join(f"{table} {count}" for table, count in summary.rows.items() if count)
    return f"{len(summary.models)} models ({', '.join(summary.models)}): {rows or 'no rows'}"


def _records(lines: IO[str]) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InvalidInput(f"line {number}: not JSON ({error.msg})") from error
        yield record


def _counted(records: Iterator[dict[str, Any]], bar: tqdm[Any]) -> Iterator[dict[str, Any]]:
    for record in records:
        yield record
        bar.update(_rows_in(record))
    bar.set_description("committing")  # the one transaction's commit, a while on big imports


def _rows_in(record: Any) -> int:
    """The table rows a record of an export carries (its `rows` records), for the bar."""
    rows = record.get("rows") if isinstance(record, dict) and record.get("type") == "rows" else None
    return len(rows) if isinstance(rows, list) else 0


@contextmanager
def _output(name: str) -> Iterator[IO[str]]:
    """stdout, or FILE written beside itself and renamed into place once complete."""
    if name == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    path = Path(name)
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        if path.suffix == ".gz":
            with gzip.open(partial, "wt", encoding="utf-8") as file:
                yield file
        else:
            with partial.open("w", encoding="utf-8") as file:
                yield file
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


@contextmanager
def _input(name: str) -> Iterator[IO[str]]:
    if name == "-":
        yield sys.stdin
        return
    path = Path(name)
    with path.open("rb") as probe:
        gzipped = probe.read(2) == b"\x1f\x8b"
    if gzipped:
        with gzip.open(path, "rt", encoding="utf-8") as file:
            yield file
    else:
        with path.open(encoding="utf-8") as file:
            yield file
