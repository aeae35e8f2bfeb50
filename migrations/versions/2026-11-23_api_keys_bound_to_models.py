"""API keys limited to models are bound to the models' ids, not their names; key changes
bump a generation that server processes poll.

A key made for the name `alice` kept working for a new model of that name after the first
was deleted. Existing limited keys are bound to the models that bear their names now; a key
none of whose models exists any more is revoked (its models are gone).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    api_key_models = op.create_table(
        'api_key_models',
        sa.Column('api_key_id', sa.Integer(), nullable=False),
        sa.Column('model_id', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ['api_key_id'],
            ['api_keys.id'],
            name=op.f('fk_api_key_models_api_key_id_api_keys'),
            ondelete='CASCADE',
        ),
        sa.ForeignKeyConstraint(
            ['model_id'],
            ['models.id'],
            name=op.f('fk_api_key_models_model_id_models'),
            ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint('api_key_id', 'model_id', name=op.f('pk_api_key_models')),
    )
    op.create_index('ix_api_key_models_model_id', 'api_key_models', ['model_id'])
    api_key_changes = op.create_table(
        'api_key_changes',
        sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('generation', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_api_key_changes')),
    )
    op.bulk_insert(api_key_changes, [{'id': 1, 'generation': 0}])

    conn = op.get_bind()
    keys = sa.table(
        'api_keys',
        sa.column('id', sa.Integer()),
        sa.column('models', sa.JSON()),
        sa.column('revoked_at', sa.DateTime(timezone=True)),
    )
    models = sa.table('models', sa.column('id', sa.Integer()), sa.column('name', sa.String()))
    model_ids = dict(conn.execute(sa.select(models.c.name, models.c.id)).all())
    bindings = []
    for key_row_id, names, revoked_at in conn.execute(
        sa.select(keys.c.id, keys.c.models, keys.c.revoked_at).where(keys.c.models.is_not(None))
    ).all():
        ids = sorted({model_ids[name] for name in names or () if name in model_ids})
        bindings += [{'api_key_id': key_row_id, 'model_id': model_id} for model_id in ids]
        if not ids and revoked_at is None:
            conn.execute(
                sa.update(keys).where(keys.c.id == key_row_id).values(revoked_at=datetime.now(UTC))
            )
    if bindings:
        op.bulk_insert(api_key_models, bindings)


def downgrade() -> None:
    op.drop_table('api_key_changes')
    op.drop_index('ix_api_key_models_model_id', table_name='api_key_models')
    op.drop_table('api_key_models')
