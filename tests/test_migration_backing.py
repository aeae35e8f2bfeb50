"""Migration 0005 (a model backed by another) upgrades a database with trained models and
downgrades again keeping every count, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import inspect

from app.service.models import create_model, get_model, update_model
from app.service.runtime import Runtime
from app.store.migrate import downgrade_schema, upgrade_schema
from app.store.schema_version import current_revision
from tests.builders import stored_counts, train_examples

BACKING_REVISION = "0005"
BEFORE = "0004"


@pytest.fixture
def rt(runtime: Runtime) -> Iterator[Runtime]:
    yield runtime
    upgrade_schema(runtime.db)  # whatever happened, leave the schema as the next test expects


def model_columns(rt: Runtime) -> set[str]:
    with rt.db.engine.connect() as conn:
        return {column["name"] for column in inspect(conn).get_columns("models")}


def test_upgrading_to_0005_keeps_trained_models_unbacked_and_downgrading_keeps_the_counts(
    rt: Runtime,
) -> None:
    train_examples(rt, 4, 4)
    rt.flush_classifications()
    before = stored_counts(rt)  # read at the head: today's code reads today's layout
    downgrade_schema(rt.db, BEFORE)
    assert "backed_by" not in model_columns(rt)

    upgrade_schema(rt.db, BACKING_REVISION)

    assert current_revision(rt.db) is not None
    assert {"backed_by", "feedback_trains_backing"} <= model_columns(rt)
    upgrade_schema(rt.db)
    assert stored_counts(rt) == before
    model = get_model(rt, name="default")
    assert model.backed_by is None
    assert model.feedback_trains_backing is False

    create_model(rt, name="alice", classes=None, config={}, relation={"backed_by": "default"})
    update_model(rt, name="alice", changes={}, relation={"feedback_trains_backing": True})
    downgrade_schema(rt.db, BEFORE)

    assert current_revision(rt.db) == BEFORE
    assert "backed_by" not in model_columns(rt)
    upgrade_schema(rt.db)
    assert get_model(rt, name="alice").backed_by is None  # the relation went with the column
    assert stored_counts(rt) == before
