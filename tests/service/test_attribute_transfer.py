"""Export and import carry a model's attribute sums and each trained message's values; an
export from before attributes imports without them. On SQLite and PostgreSQL."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from app.service.messages import Message
from app.service.models import create_model
from app.service.runtime import Runtime
from app.service.training import forget, train
from app.service.transfer import export_records, import_records
from app.store.attributes import read_attribute_cells
from tests.builders import ham_text, spam_text


def cells(rt: Runtime, name: str) -> list[tuple[Any, ...]]:
    model_id = rt.models.get(name).id
    return rt.db.run(lambda conn: read_attribute_cells(conn, model_id), write=False)


def test_an_export_carries_the_attribute_sums_and_forget_after_import_stays_exact(
    runtime: Runtime,
) -> None:
    create_model(runtime, name="m", classes=None, config={})
    for i in range(3):
        for label, text in (("spam", spam_text(i)), ("ham", ham_text(i))):
            message = Message(text=text, message_id=f"{label}-{i}", attributes={"x": i / 7})
            train(runtime, model_name="m", message=message, label=label)
    before = cells(runtime, "m")
    records = list(export_records(runtime.db, model_names=["m"]))

    import_records(runtime.db, records, replace=True)
    runtime.models.forget("m")
    assert cells(runtime, "m") == before
    forget(runtime, model_name="m", message_id="spam-2")
    spam_x = [cell for cell in cells(runtime, "m") if cell[:2] == ("x", 1)]
    assert spam_x == [("x", 1, 2, Fraction(0.0) + Fraction(1 / 7), Fraction(1 / 7) ** 2)]


def test_an_export_from_before_attributes_imports_without_them(runtime: Runtime) -> None:
    create_model(runtime, name="m", classes=None, config={})
    train(runtime, model_name="m", message=Message(text=spam_text(1)), label="spam")
    records = []
    for record in export_records(runtime.db, model_names=["m"]):
        if record.get("type") == "header":
            tables = dict(record["tables"])
            tables.pop("attribute_sums")
            tables["trained_messages"] = [
                c for c in tables["trained_messages"] if c != "attributes"
            ]
            record = {**record, "tables": tables}
        elif record.get("table") == "attribute_sums":
            continue
        elif record.get("table") == "trained_messages":
            record = {**record, "rows": [row[:-1] for row in record["rows"]]}
        elif record.get("type") == "end":
            rows = {k: v for k, v in record["rows"].items() if k != "attribute_sums"}
            record = {**record, "rows": rows}
        records.append(record)
    import_records(runtime.db, records, replace=True)
    runtime.models.forget("m")
    assert cells(runtime, "m") == []
