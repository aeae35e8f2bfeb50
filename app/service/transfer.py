"""Use cases: export models as JSON lines, import them, and back up a SQLite database.

An export is a stream of JSON objects, one per line:

    {"type": "header", "format": "spamsift-export", "version": 1, "exported_at": "…",
     "tables": {"tokens": ["token_id", "text", "generation"], …}}
    {"type": "model", "name": "default", "classes": ["ham", "spam"], "config": {}, …,
     "backed_by": null, "feedback_trains_backing": false}
    {"type": "rows", "model": "default", "table": "tokens", "rows": [[0, "prize", 3], …]}
    …
    {"type": "end", "models": 1, "rows": {"tokens": 50211, …}}

Row values are listed in the order the header gives; datetimes are ISO 8601 in UTC, the
ledger's packed token ids base64. The whole export is read in one read transaction, so it is
one consistent snapshot while training goes on; an import is one write transaction, so a
truncated or inconsistent file changes nothing. Importing into an empty database reproduces
every stored row (model ids aside, which the database hands out).

A model backed by another names it (`backed_by`); an import sets the relation once every model
is in, to a model of the export or one the database has (an export without those two keys,
from before backing relations, imports its models unbacked).
"""

from __future__ import annotations

import base64
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.errors import Conflict, InvalidBacking, InvalidInput, ModelExists, ModelNotFound
from app.service.model_config import check_classes, parse_config
from app.service.models import check_model_name, set_relation
from app.store import Connection, IntegrityError
from app.store import models as store_models
from app.store.counts import read_class_totals
from app.store.engine import Database
from app.store.ledger import count_trained
from app.store.transfer import (
    LATER_COLUMNS,
    LATER_TABLES,
    MODEL_COLUMNS,
    MODEL_TABLES,
    column_kinds,
    insert_model_row,
    insert_rows,
    integrity_check,
    read_models,
    read_table,
    repoint_backing,
    table_columns,
    vacuum_into,
)

FORMAT = "spamsift-export"
VERSION = 1


@dataclass
class TransferSummary:
    """What an export or import moved: the models by name, and rows per table."""

    models: list[str] = field(default_factory=list)
    rows: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class Backup:
    path: Path
    size_bytes: int
    integrity: str


def export_records(
    db: Database,
    *,
    model_names: Sequence[str] | None = None,
    summary: TransferSummary | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield the export of every model (or of `model_names`) from one consistent snapshot."""
    summary = summary if summary is not None else TransferSummary()
    with db.transaction(write=False) as conn:
        found = read_models(conn, model_names)
        missing = sorted(set(model_names or ()) - {model["name"] for model in found})
        if missing:
            raise ModelNotFound(f"no model named {', '.join(map(repr, missing))}")
        yield {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "exported_at": datetime.now(UTC).isoformat(),
            "tables": {name: table_columns(name) for name in MODEL_TABLES},
        }
        for model in found:
            summary.models.append(model["name"])
            yield {
                "type": "model",
                **{column: _encode(model[column]) for column in MODEL_COLUMNS},
                "backed_by": model["backed_by"],
                "feedback_trains_backing": model["feedback_trains_backing"],
            }
            for name in MODEL_TABLES:
                for chunk in read_table(conn, name, model["id"]):
                    summary.rows[name] += len(chunk)
                    yield {
                        "type": "rows",
                        "model": model["name"],
                        "table": name,
                        "rows": [[_encode(value) for value in row] for row in chunk],
                    }
        yield {"type": "end", "models": len(found), "rows": dict(summary.rows)}


def import_records(
    db: Database, records: Iterable[dict[str, Any]], *, replace: bool = False
) -> TransferSummary:
    """Import an export in one transaction; return what it held.

    A model of the export that exists already is refused (ModelExists) unless it is empty (no
    token, no trained message: a fresh database's `default`) or `replace` is set.
    """
    importer = _Importer(replace=replace)
    try:
        with db.transaction(write=True) as conn:
            for number, record in enumerate(records, start=1):
                importer.take(conn, number, record)
            importer.finish(conn)
    except IntegrityError as error:
        raise InvalidInput(f"the export does not fit the database: {error.orig}") from error
    return importer.summary


def backup_sqlite(db: Database, path: Path) -> Backup:
    """Copy a SQLite database to `path` through SQLite (`VACUUM INTO`), consistent while
    training goes on, and check the copy with `PRAGMA integrity_check`."""
    if not db.is_sqlite:
        raise InvalidInput(
            "backup copies SQLite databases; for PostgreSQL use pg_dump (or spamsift export)"
        )
    if path.exists():
        raise Conflict(f"{path} exists; give a new file name")
    if not path.parent.is_dir():
        raise InvalidInput(f"no folder {path.parent} to write the backup in")
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    partial.unlink(missing_ok=True)
    try:
        vacuum_into(db, partial)
        problems = integrity_check(partial)
        if problems != ["ok"]:
            raise InvalidInput(f"the copy failed PRAGMA integrity_check: {'; '.join(problems)}")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return Backup(path=path, size_bytes=path.stat().st_size, integrity="ok")


class _Importer:
    """Reads an export record by record inside the import's transaction."""

    def __init__(self, *, replace: bool) -> None:
        self.replace = replace
        self.summary = TransferSummary()
        self.columns: dict[str, list[str]] | None = None
        self.model: str | None = None
        self.model_id = 0
        self.ended = False
        self.relations: dict[str, dict[str, Any]] = {}  # set once every model is in
        self.backed_by_replaced: dict[str, int] = {}  # name -> id of the model it replaced

    def take(self, conn: Connection, number: int, record: dict[str, Any]) -> None:
        kind = record.get("type") if isinstance(record, dict) else None
        where = f"line {number}"
        if self.ended:
            raise InvalidInput(f"{where}: nothing may follow the end line")
        if self.columns is None:
            self._header(where, record, kind)
        elif kind == "model":
            self._model(conn, where, record)
        elif kind == "rows":
            self._rows(conn, where, record)
        elif kind == "end":
            self._end(where, record)
        else:
            raise InvalidInput(f"{where}: unknown line type {kind!r}")

    def finish(self, conn: Connection) -> None:
        if self.columns is None:
            raise InvalidInput("the export is empty")
        if not self.ended:
            raise InvalidInput("the export ends early (no end line): nothing was imported")
        for name in self.summary.models:  # the running totals an export does not carry
            store_models.recount_vocabulary(conn, store_models.find_model(conn, name))
        for name, old_id in self.backed_by_replaced.items():
            repoint_backing(conn, old_id, store_models.find_model(conn, name).id)
        for name, relation in self.relations.items():
            try:
                set_relation(conn, store_models.find_model(conn, name), relation)
            except InvalidBacking as error:
                raise InvalidBacking(
                    f"model {name!r}: {error.message} (export its backing model with it)"
                ) from error

    def _header(self, where: str, record: dict[str, Any], kind: object) -> None:
        if kind != "header" or record.get("format") != FORMAT:
            raise InvalidInput(f"{where}: not a spamsift export (no header line)")
        if record.get("version") != VERSION:
            raise InvalidInput(f"{where}: export version {record.get('version')!r}, not {VERSION}")
        given = record.get("tables")
        if not _readable_tables(given):
            raise InvalidInput(f"{where}: the export's tables differ from this database's")
        assert isinstance(given, dict)
        self.columns = {str(name): list(columns) for name, columns in given.items()}

    def _model(self, conn: Connection, where: str, record: dict[str, Any]) -> None:
        try:
            name = str(record["name"])
            check_model_name(name)
            classes = check_classes(list(record["classes"]))
            parse_config(dict(record["config"]), classes=classes)
            model = {
                "name": name,
                "classes": list(classes),
                "config": dict(record["config"]),
                "generation": int(record["generation"]),
                "n_tokens": int(record["n_tokens"]),
                "created_at": _datetime(record["created_at"]),
            }
            backed_by = record.get("backed_by")
            if backed_by is not None:
                self.relations[name] = {
                    "backed_by": str(backed_by),
                    "feedback_trains_backing": bool(record.get("feedback_trains_backing")),
                }
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidInput(f"{where}: a model line needs {', '.join(MODEL_COLUMNS)}") from error
        except InvalidInput as error:
            raise InvalidInput(f"{where}: {error.message}") from error
        if name in self.summary.models:
            raise InvalidInput(f"{where}: model {name!r} comes twice")
        self._make_room(conn, where, model)
        self.model_id = insert_model_row(conn, model)
        self.model = name
        self.summary.models.append(name)

    def _make_room(self, conn: Connection, where: str, model: dict[str, Any]) -> None:
        """Delete an existing model of that name if it is empty or `replace` is set."""
        try:
            existing = store_models.find_model(conn, model["name"])
        except ModelNotFound:
            return
        class_docs, _ = read_class_totals(conn, existing.id, len(existing.classes))
        empty = (
            existing.n_tokens == 0 and not class_docs.any() and not count_trained(conn, existing.id)
        )
        if not (empty or self.replace):
            raise ModelExists(
                f"{where}: model {model['name']!r} exists and is trained; import --replace "
                "replaces it"
            )
        if store_models.names_backed_by(conn, existing.id):  # they stay backed by its new self
            self.backed_by_replaced[model["name"]] = existing.id
        store_models.delete_model(conn, existing.id)
        if existing.created_at == model["created_at"]:
            # A server holding the old model tells models apart by id and created_at: make
            # the import a new model to it, so it reloads instead of reading a change feed.
            model["created_at"] = datetime.now(UTC)

    def _rows(self, conn: Connection, where: str, record: dict[str, Any]) -> None:
        assert self.columns is not None
        table = record.get("table")
        if record.get("model") != self.model or self.model is None:
            raise InvalidInput(f"{where}: rows of model {record.get('model')!r} out of place")
        if table not in self.columns:
            raise InvalidInput(f"{where}: unknown table {table!r}")
        columns = self.columns[table]
        kinds = column_kinds(table)
        rows = record.get("rows")
        if not isinstance(rows, list):
            raise InvalidInput(f"{where}: rows must be a list")
        decoded = []
        for row in rows:
            if not isinstance(row, list) or len(row) != len(columns):
                raise InvalidInput(f"{where}: a {table} row has the columns {columns}")
            try:
                decoded.append(
                    {
                        column: _decode(value, kinds[column])
                        for column, value in zip(columns, row, strict=True)
                    }
                )
            except (TypeError, ValueError) as error:
                raise InvalidInput(f"{where}: a {table} row cannot be read ({error})") from error
        try:
            insert_rows(conn, table, self.model_id, decoded)
        except ValueError as error:  # counts no constraint of the database can check
            raise InvalidInput(f"{where}: {error}") from error
        self.summary.rows[table] += len(decoded)

    def _end(self, where: str, record: dict[str, Any]) -> None:
        expected_rows = {table: count for table, count in self.summary.rows.items() if count}
        given_rows = {table: n for table, n in dict(record.get("rows") or {}).items() if n}
        if record.get("models") != len(self.summary.models) or given_rows != expected_rows:
            raise InvalidInput(
                f"{where}: the export says it holds {record.get('models')} models and rows "
                f"{given_rows}, but {len(self.summary.models)} and {expected_rows} came"
            )
        self.ended = True


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def _decode(value: Any, kind: str) -> Any:
    if kind == "datetime":
        return _datetime(value)
    if kind == "bytes":
        return base64.b64decode(str(value), validate=True)
    return value


def _datetime(value: Any) -> datetime:
    moment = datetime.fromisoformat(str(value))
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _readable_tables(given: object) -> bool:
    """Whether an export's tables are this database's, or an older export's: without some of
    the tables and columns added since exports began (their rows import empty or null)."""
    if not isinstance(given, dict) or not set(MODEL_TABLES) - LATER_TABLES <= set(given):
        return False
    for name, columns in given.items():
        if name not in MODEL_TABLES or not isinstance(columns, list):
            return False
        expected = table_columns(name)
        if columns != [c for c in expected if c in columns or c not in LATER_COLUMNS]:
            return False
    return True
