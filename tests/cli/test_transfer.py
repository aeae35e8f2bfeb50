"""`spamsift export`, `import` and `backup` as console scripts, on SQLite and PostgreSQL.

An export imported into an empty database reproduces every stored row; exports and backups
taken while `spamsift train` runs in another process are consistent snapshots (the counts
equal what the ledger they carry says)."""

from __future__ import annotations

import base64
import gzip
import json
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.config import Settings
from app.service.classification import classify
from app.service.messages import Message
from app.service.models import create_model
from app.service.runtime import Runtime
from app.service.training import apply_feedback, train_batch
from app.store.counts import count_rows
from app.store.engine import Database
from app.store.ledger import unpack
from app.store.migrate import upgrade_schema
from app.store.tables import metadata, models
from tests.builders import counts_from_ledger, stored_cells
from tests.cli.conftest import SPAMSIFT, Cli, clean_environment
from tests.cli.mailfiles import ham_bytes, latin1_ham, spam_bytes, write_mbox
from tests.postgres import POSTGRES_URL, throwaway_database

NOT_EXPORTED = {"api_keys", "api_key_models", "api_key_changes", "alembic_version"}
# The counts' layout: an import folds the journal, so they are compared as the rows an export
# carries (`count_rows`), not as stored.
COUNT_TABLES = {"count_chunks", "count_journal"}
COUNT_COLUMNS = ("token_id", "class_index", "docs", "terms", "generation")


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of its own, migrated and untouched: it holds only the empty `default`."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/empty.db"
        _migrate(url)
        yield url
        return
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL tests need SPAMSIFT_TEST_POSTGRES_URL")
    with throwaway_database(POSTGRES_URL, "spamsift_import") as url:
        _migrate(url)
        yield url


def _migrate(url: str) -> None:
    db = Database(url)
    upgrade_schema(db)
    db.dispose()


def all_rows(database_url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every stored row of every exported table, model ids replaced by model names; the
    counts as (model, token id, class index, docs, terms, generation) under "token_counts"."""
    db = Database(database_url)
    try:
        with db.transaction(write=False) as conn:
            names = dict(conn.execute(select(models.c.id, models.c.name)).all())
            found: dict[str, list[tuple[Any, ...]]] = {"token_counts": []}
            for model_id, classes in conn.execute(select(models.c.id, models.c.classes)):
                columns = [c.tolist() for c in count_rows(conn, model_id, len(classes))]
                found["token_counts"] += [
                    tuple(sorted({**dict(zip(COUNT_COLUMNS, row, strict=True)),
                                  "model_id": names[model_id]}.items()))
                    for row in zip(*columns, strict=True)
                ]  # fmt: skip
            found["token_counts"].sort(key=repr)
            for table in metadata.sorted_tables:
                if table.name in NOT_EXPORTED | COUNT_TABLES:
                    continue
                rows = []
                for row in conn.execute(select(table)).mappings():
                    values = {key: _normal(value) for key, value in row.items()}
                    if table.name == "models":
                        values.pop("id")
                    else:
                        values["model_id"] = names[values["model_id"]]
                    rows.append(tuple(sorted(values.items(), key=lambda kv: kv[0])))
                found[table.name] = sorted(rows, key=repr)
            return found
    finally:
        db.dispose()


def _normal(value: Any) -> Any:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    return value


def fill(cli: Cli, tmp_path: Path) -> None:
    """Train two models, classify, give feedback: every exported table gets rows. (Through the
    service, which is quicker; what is under test is the export and import commands.)"""
    settings = Settings(database_url=cli.database_url, _env_file=None)  # type: ignore[call-arg]
    rt = Runtime(settings)
    try:
        spam = [Message(raw=spam_bytes(i), message_id=f"<spam{i}@x>") for i in range(6)]
        ham = [Message(raw=raw) for raw in [*(ham_bytes(i) for i in range(4)), latin1_ham(1)]]
        create_model(rt, name="second", classes=["ham", "spam", "news"], config={"alpha": 0.5})
        for model, labels in (("default", ("spam", "ham")), ("second", ("spam", "news"))):
            items = [(m, labels[0]) for m in spam] + [(m, labels[1]) for m in ham]
            train_batch(rt, model_name=model, items=items)
        classify(rt, model_name="default", message=Message(raw=ham_bytes(40), message_id="<p>"))
        rt.flush_classifications()
        apply_feedback(rt, model_name="default", label="spam", message_id="<p>", message=None)
        apply_feedback(rt, model_name="default", label="ham", message_id=None, message=spam[0])
    finally:
        rt.close()


@pytest.mark.slow
def test_an_export_imported_into_an_empty_database_reproduces_every_row(
    cli: Cli, tmp_path: Path, empty_database_url: str
) -> None:
    fill(cli, tmp_path)
    export = tmp_path / "export.jsonl.gz"

    exported = cli("export", "-o", str(export))
    imported = Cli(empty_database_url, cli.cwd)("import", str(export))

    assert exported.returncode == 0, exported.stderr.decode()
    assert imported.returncode == 0, imported.stderr.decode()
    assert b"2 models" in imported.stdout
    source, copy = all_rows(cli.database_url), all_rows(empty_database_url)
    assert {table: len(rows) for table, rows in source.items()} == {
        table: len(rows) for table, rows in copy.items()
    }
    for table in ("class_totals", "tokens", "token_counts", "trained_messages"):
        assert source[table], f"{table} is empty: the test trains nothing"
    assert source["classifications"]
    assert source["activity"]
    assert source == copy


@pytest.mark.slow
def test_export_to_stdout_and_import_from_stdin_and_one_model(cli: Cli, tmp_path: Path) -> None:
    fill(cli, tmp_path)
    exported = cli("export", "--model", "second")
    target = Cli(f"sqlite:///{tmp_path}/one.db", cli.cwd)
    _migrate(target.database_url)  # only serve and db upgrade create a database

    imported = target("import", "-", input=exported.stdout)

    assert imported.returncode == 0, imported.stderr.decode()
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [line["name"] for line in lines if line["type"] == "model"] == ["second"]
    assert lines[-1]["type"] == "end"
    rows = all_rows(target.database_url)
    source = all_rows(cli.database_url)
    for table, copied in rows.items():
        if table != "models":
            mine = [row for row in copied if ("model_id", "second") in row]
            expected = [row for row in source[table] if ("model_id", "second") in row]
            assert mine == expected, table


@pytest.mark.slow
def test_an_export_made_before_body_digests_imports_with_none(cli: Cli, tmp_path: Path) -> None:
    fill(cli, tmp_path)
    lines = [json.loads(line) for line in cli("export", "--model", "second").stdout.splitlines()]
    for line in lines:  # as an export made before the body_digest columns reads
        if line["type"] == "header":
            digests = {
                table: columns.index("body_digest")
                for table, columns in line["tables"].items()
                if "body_digest" in columns
            }
            for table in digests:
                line["tables"][table].remove("body_digest")
        elif line["type"] == "rows" and line["table"] in digests:
            for row in line["rows"]:
                del row[digests[line["table"]]]
    target = Cli(f"sqlite:///{tmp_path}/older.db", cli.cwd)
    _migrate(target.database_url)

    imported = target("import", "-", input=b"\n".join(json.dumps(x).encode() for x in lines))

    assert imported.returncode == 0, imported.stderr.decode()
    trained = all_rows(target.database_url)["trained_messages"]
    assert trained
    assert all(("body_digest", None) in row for row in trained)


@pytest.mark.slow
def test_import_refuses_a_trained_model_unless_replace(cli: Cli, tmp_path: Path) -> None:
    fill(cli, tmp_path)
    export = tmp_path / "export.jsonl"
    cli.ok("export", "-o", str(export))
    before = all_rows(cli.database_url)

    refused = cli("import", str(export))
    replaced = cli("import", "--replace", str(export))

    assert refused.returncode == 1
    assert b"--replace" in refused.stderr
    assert replaced.returncode == 0, replaced.stderr.decode()
    after = all_rows(cli.database_url)
    assert {t: r for t, r in after.items() if t != "models"} == {
        t: r for t, r in before.items() if t != "models"
    }


@pytest.mark.parametrize(
    "damage",
    [
        "drop the end line",
        "cut a rows line",
        "not json",
        "another format",
        "a negative count",
        "a class the model has not",
    ],
)
@pytest.mark.slow
def test_a_damaged_export_imports_nothing(cli: Cli, tmp_path: Path, damage: str) -> None:
    fill(cli, tmp_path)
    lines = cli("export").stdout.splitlines()
    if damage == "drop the end line":
        lines = lines[:-1]
    elif damage == "cut a rows line":
        lines = [line for line in lines if b'"table":"tokens"' not in line]
    elif damage == "not json":
        lines[3] = lines[3][:-5]
    elif damage in ("a negative count", "a class the model has not"):
        at = next(i for i, line in enumerate(lines) if b'"table":"token_counts"' in line)
        record = json.loads(lines[at])
        column = 2 if damage == "a negative count" else 1  # docs, or the class index
        record["rows"][-1][column] = -1 if damage == "a negative count" else 7
        lines[at] = json.dumps(record, separators=(",", ":")).encode()
    else:
        lines[0] = lines[0].replace(b"spamsift-export", b"other-export")
    target = Cli(f"sqlite:///{tmp_path}/damaged.db", cli.cwd)
    _migrate(target.database_url)
    before = all_rows(target.database_url)

    completed = target("import", "-", input=b"\n".join(lines) + b"\n")

    assert completed.returncode == 1
    assert completed.stderr
    if damage in ("a negative count", "a class the model has not"):
        assert b"count row" in completed.stderr, completed.stderr
    assert all_rows(target.database_url) == before


STREAM = 5000  # messages; far more than the snapshots need, so training is still going on


@contextmanager
def training_in_background(cli: Cli, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`spamsift train` in batches of one, as another process, while the test takes
    snapshots; entered once the first batch is committed. A trainer still running at the end
    is stopped: what matters is that each snapshot is consistent, not that the stream ends."""
    mbox = write_mbox(
        tmp_path / "stream.mbox",
        [spam_bytes(i) if i % 3 else ham_bytes(i) for i in range(STREAM)],
    )
    log_path = tmp_path / "trainer.log"
    with log_path.open("wb") as log:
        trainer = subprocess.Popen(
            [SPAMSIFT, "train", "--label", "spam", "--batch-size", "1", str(mbox)],
            env=clean_environment(cli.database_url),
            cwd=cli.cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        db = Database(cli.database_url)
        try:
            deadline = time.monotonic() + 120
            while trainer.poll() is None and time.monotonic() < deadline:
                if stored_cells(db)[1]:  # some class total: a batch is in
                    break
                time.sleep(0.05)
        finally:
            db.dispose()
        yield trainer
    finally:
        if trainer.poll() is None:
            trainer.terminate()
            trainer.wait(timeout=60)
        else:
            assert trainer.returncode == 0, log_path.read_text()


def mid_training(counts: list[int]) -> bool:
    return any(0 < count < STREAM for count in counts)


def consistent_export(path: Path) -> tuple[int, Counter[str]]:
    """Check an export's counts against its own ledger; return (trained messages, rows)."""
    tables: dict[str, list[list[Any]]] = {}
    header: dict[str, Any] = {}
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if record["type"] == "header":
                header = record
            elif record["type"] == "rows" and record["model"] == "default":
                tables.setdefault(record["table"], []).extend(record["rows"])
    columns = header["tables"]
    ledger = [
        dict(zip(columns["trained_messages"], row, strict=True))
        for row in tables.get("trained_messages", [])
    ]
    cells: Counter[tuple[int, int]] = Counter()
    terms: Counter[tuple[int, int]] = Counter()
    class_docs: Counter[int] = Counter()
    for message in ledger:
        ids = unpack(base64.b64decode(message["token_ids"]))
        counts = unpack(base64.b64decode(message["token_terms"]))
        for token_id, n in zip(ids.tolist(), counts.tolist(), strict=True):
            cells[(token_id, message["class_index"])] += 1
            terms[(token_id, message["class_index"])] += n
        class_docs[message["class_index"]] += 1
    stored = {
        (row[0], row[1]): (row[2], row[3])
        for row in tables.get("token_counts", [])
        if (row[2], row[3]) != (0, 0)
    }
    assert stored == {key: (cells[key], terms[key]) for key in cells}
    totals = {row[0]: row[1] for row in tables["class_totals"] if row[1]}
    assert totals == dict(class_docs)
    return len(ledger), Counter({table: len(rows) for table, rows in tables.items()})


@pytest.mark.slow
def test_exports_taken_while_training_goes_on_are_consistent_snapshots(
    cli: Cli, tmp_path: Path
) -> None:
    sizes: list[int] = []
    with training_in_background(cli, tmp_path) as trainer:
        for round_ in range(10):
            export = tmp_path / f"during-{round_}.jsonl.gz"
            cli.ok("export", "-o", str(export))
            trained, _ = consistent_export(export)
            sizes.append(trained)
            if trainer.poll() is not None or (len(sizes) >= 2 and mid_training(sizes)):
                break
            time.sleep(0.2)
    assert mid_training(sizes), f"training was not going on: {sizes}"

    target = Cli(f"sqlite:///{tmp_path}/restored.db", cli.cwd)
    _migrate(target.database_url)  # only serve and db upgrade create a database
    imported = target("import", str(tmp_path / "during-0.jsonl.gz"))
    assert imported.returncode == 0, imported.stderr.decode()
    db = Database(target.database_url)
    try:
        assert stored_cells(db) == counts_from_ledger(db)
    finally:
        db.dispose()


@pytest.mark.slow
def test_a_backup_taken_while_training_goes_on_is_sound_and_consistent(
    cli: Cli, tmp_path: Path, database_url: str
) -> None:
    if not database_url.startswith("sqlite"):
        completed = cli("backup", str(tmp_path / "copy.db"))
        assert completed.returncode == 2
        assert b"pg_dump" in completed.stderr
        return
    copies = []
    with training_in_background(cli, tmp_path) as trainer:
        for round_ in range(10):
            copy = tmp_path / f"copy-{round_}.db"
            output = cli.ok("backup", str(copy))
            assert "integrity_check ok" in output
            copies.append(copy)
            if trainer.poll() is not None or len(copies) >= 3:
                break
            time.sleep(0.2)
    trained = []
    for copy in copies:
        with sqlite3.connect(copy) as check:
            assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        db = Database(f"sqlite:///{copy}")
        try:
            cells, totals = stored_cells(db)
            assert (cells, totals) == counts_from_ledger(db)
            trained.append(sum(docs for docs, _ in totals.values()))
        finally:
            db.dispose()
    assert mid_training(trained), f"training was not going on: {trained}"
    assert not list(tmp_path.glob(".copy-*partial*"))


def test_backup_refuses_to_overwrite_a_file(cli: Cli, tmp_path: Path, database_url: str) -> None:
    if not database_url.startswith("sqlite"):
        pytest.skip("backup copies SQLite databases")
    existing = tmp_path / "exists.db"
    existing.write_bytes(b"keep me")

    completed = cli("backup", str(existing))

    assert completed.returncode == 1
    assert existing.read_bytes() == b"keep me"
