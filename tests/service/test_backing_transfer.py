"""Export and import carry the backing relation: a replaced backing model keeps backing its
models, and a personal model imported without its backing model is refused, importing
nothing. On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import InvalidBacking
from app.service.messages import Message
from app.service.models import create_model, get_model, list_models
from app.service.runtime import Runtime
from app.service.training import train
from app.service.transfer import export_records, import_records
from app.store.engine import Database
from app.store.migrate import upgrade_schema
from tests.builders import ham_text, spam_text, stored_counts


def make_pair(rt: Runtime) -> None:
    create_model(rt, name="global", classes=None, config={})
    relation = {"backed_by": "global", "feedback_trains_backing": True}
    create_model(rt, name="alice", classes=None, config={}, relation=relation)
    for i in range(3):
        train(rt, model_name="global", message=Message(text=spam_text(i)), label="spam")
        train(rt, model_name="alice", message=Message(text=ham_text(i)), label="ham")


def test_an_export_carries_the_relation_and_a_replaced_backing_model_keeps_backing(
    runtime: Runtime,
) -> None:
    make_pair(runtime)
    runtime.flush_classifications()
    records = list(export_records(runtime.db))
    before = {name: stored_counts(runtime, name) for name in ("global", "alice")}

    models = {record["name"]: record for record in records if record["type"] == "model"}
    import_records(runtime.db, records, replace=True)
    runtime.models.forget("alice")
    runtime.models.forget("global")

    assert models["alice"]["backed_by"] == "global"
    assert models["alice"]["feedback_trains_backing"] is True
    assert models["global"]["backed_by"] is None
    alice = get_model(runtime, name="alice")
    assert alice.backed_by == "global"
    assert alice.feedback_trains_backing is True
    assert get_model(runtime, name="global").backs == ("alice",)
    assert {name: stored_counts(runtime, name) for name in ("global", "alice")} == before


def test_a_personal_model_imported_without_its_backing_model_is_refused(
    runtime: Runtime, tmp_path: Path
) -> None:
    make_pair(runtime)
    alone = list(export_records(runtime.db, model_names=["alice"]))
    elsewhere = Database(f"sqlite:///{tmp_path / 'elsewhere.db'}")
    upgrade_schema(elsewhere)
    try:
        with pytest.raises(InvalidBacking, match="export its backing model with it"):
            import_records(elsewhere, alone)
        rt = Runtime(runtime.settings.model_copy(update={"database_url": elsewhere.url}))
        try:
            assert [model.name for model in list_models(rt).models] == ["default"]
        finally:
            rt.close()
    finally:
        elsewhere.dispose()


def test_an_export_from_before_relations_imports_its_models_unbacked(runtime: Runtime) -> None:
    make_pair(runtime)
    records = [
        {key: value for key, value in record.items() if key not in ("backed_by",)}
        for record in export_records(runtime.db, model_names=["global"])
    ]
    import_records(runtime.db, records, replace=True)

    assert get_model(runtime, name="global").backed_by is None
    assert get_model(runtime, name="alice").backed_by == "global"
