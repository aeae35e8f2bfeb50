"""Initial schema: models, counts, ledgers, activity; and the `default` ham/spam model.

Revision ID: 0001
Revises: 
Create Date: 2026-11-21
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('models',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('classes', sa.JSON(), nullable=False),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('generation', sa.BigInteger(), nullable=False),
    sa.Column('n_tokens', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_models')),
    sa.UniqueConstraint('name', name=op.f('uq_models_name'))
    )
    op.create_table('activity',
    sa.Column('model_id', sa.Integer(), nullable=False),
    sa.Column('hour', sa.DateTime(timezone=True), nullable=False),
    sa.Column('event', sa.String(length=80), nullable=False),
    sa.Column('count', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_activity_model_id_models'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model_id', 'hour', 'event', name=op.f('pk_activity'))
    )
    op.create_table('class_totals',
    sa.Column('model_id', sa.Integer(), nullable=False),
    sa.Column('class_index', sa.SmallInteger(), nullable=False),
    sa.Column('docs', sa.BigInteger(), nullable=False),
    sa.Column('terms', sa.BigInteger(), nullable=False),
    sa.CheckConstraint('docs >= 0 AND terms >= 0', name=op.f('ck_class_totals_totals_not_negative')),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_class_totals_model_id_models'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model_id', 'class_index', name=op.f('pk_class_totals'))
    )
    op.create_table('classifications',
    sa.Column('model_id', sa.Integer(), nullable=False),
    sa.Column('message_key', sa.String(length=64), nullable=False),
    sa.Column('message_id', sa.String(length=255), nullable=False),
    sa.Column('token_ids', sa.LargeBinary(), nullable=False),
    sa.Column('token_terms', sa.LargeBinary(), nullable=False),
    sa.Column('verdict', sa.String(length=64), nullable=False),
    sa.Column('classified_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_classifications_model_id_models'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model_id', 'message_key', name=op.f('pk_classifications'))
    )
    with op.batch_alter_table('classifications', schema=None) as batch_op:
        batch_op.create_index('ix_classifications_classified_at', ['classified_at'], unique=False)
        batch_op.create_index('ix_classifications_model_id_message_id', ['model_id', 'message_id'], unique=False)

    op.create_table('token_counts',
    sa.Column('model_id', sa.Integer(), nullable=False),
    sa.Column('token_id', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('class_index', sa.SmallInteger(), nullable=False),
    sa.Column('docs', sa.BigInteger(), nullable=False),
    sa.Column('terms', sa.BigInteger(), nullable=False),
    sa.Column('generation', sa.BigInteger(), nullable=False),
    sa.CheckConstraint('docs >= 0 AND terms >= 0', name=op.f('ck_token_counts_counts_not_negative')),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_token_counts_model_id_models'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model_id', 'token_id', 'class_index', name=op.f('pk_token_counts'))
    )
    with op.batch_alter_table('token_counts', schema=None) as batch_op:
        batch_op.create_index('ix_token_counts_model_id_generation', ['model_id', 'generation'], unique=False)

    op.create_table('tokens',
    sa.Column('model_id', sa.Integer(), nullable=False),
    sa.Column('token_id', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('text', sa.String(length=200), nullable=False),
    sa.Column('generation', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_tokens_model_id_models'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model_id', 'token_id', name=op.f('pk_tokens')),
    sa.UniqueConstraint('model_id', 'text', name='uq_tokens_model_id_text')
    )
    with op.batch_alter_table('tokens', schema=None) as batch_op:
        batch_op.create_index('ix_tokens_model_id_generation', ['model_id', 'generation'], unique=False)

    op.create_table('trained_messages',
    sa.Column('model_id', sa.Integer(), nullable=False),
    sa.Column('message_key', sa.String(length=64), nullable=False),
    sa.Column('message_id', sa.String(length=255), nullable=False),
    sa.Column('class_index', sa.SmallInteger(), nullable=False),
    sa.Column('token_ids', sa.LargeBinary(), nullable=False),
    sa.Column('token_terms', sa.LargeBinary(), nullable=False),
    sa.Column('trained_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['models.id'], name=op.f('fk_trained_messages_model_id_models'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model_id', 'message_key', name=op.f('pk_trained_messages'))
    )
    with op.batch_alter_table('trained_messages', schema=None) as batch_op:
        batch_op.create_index('ix_trained_messages_model_id_message_id', ['model_id', 'message_id'], unique=False)

    # SPEC §6: a fresh database has the ham/spam model `default`. Its stored config is empty:
    # a model stores only the options set for it, the rest are the current defaults.
    models = sa.table(
        'models', sa.column('name', sa.String), sa.column('classes', sa.JSON),
        sa.column('config', sa.JSON), sa.column('generation', sa.BigInteger),
        sa.column('n_tokens', sa.BigInteger), sa.column('created_at', sa.DateTime(timezone=True)),
    )
    op.bulk_insert(models, [{
        'name': 'default', 'classes': ['ham', 'spam'], 'config': {}, 'generation': 0,
        'n_tokens': 0, 'created_at': datetime.now(UTC),
    }])
    model_id = op.get_bind().execute(sa.text("SELECT id FROM models WHERE name = 'default'")).scalar_one()
    class_totals = sa.table(
        'class_totals', sa.column('model_id', sa.Integer), sa.column('class_index', sa.SmallInteger),
        sa.column('docs', sa.BigInteger), sa.column('terms', sa.BigInteger),
    )
    op.bulk_insert(class_totals, [
        {'model_id': model_id, 'class_index': index, 'docs': 0, 'terms': 0} for index in (0, 1)
    ])



def downgrade() -> None:
    with op.batch_alter_table('trained_messages', schema=None) as batch_op:
        batch_op.drop_index('ix_trained_messages_model_id_message_id')

    op.drop_table('trained_messages')
    with op.batch_alter_table('tokens', schema=None) as batch_op:
        batch_op.drop_index('ix_tokens_model_id_generation')

    op.drop_table('tokens')
    with op.batch_alter_table('token_counts', schema=None) as batch_op:
        batch_op.drop_index('ix_token_counts_model_id_generation')

    op.drop_table('token_counts')
    with op.batch_alter_table('classifications', schema=None) as batch_op:
        batch_op.drop_index('ix_classifications_model_id_message_id')
        batch_op.drop_index('ix_classifications_classified_at')

    op.drop_table('classifications')
    op.drop_table('class_totals')
    op.drop_table('activity')
    op.drop_table('models')
