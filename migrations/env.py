"""Alembic environment: targets app.store.tables.metadata; the connection comes from
app.store.migrate, which holds the migration lock."""

from __future__ import annotations

from alembic import context

from app.store.tables import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=True,  # SQLite alters tables by "move and copy"; PostgreSQL directly
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
