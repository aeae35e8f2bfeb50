"""Numeric attributes: a Gaussian per model, attribute and class, and each trained message's
values in the ledger.

`attribute_sums` keeps n, Σx and Σx² (exact rationals as text) per (model, attribute, class);
`trained_messages.attributes` the values a message was trained with, so forget and relabel
take exactly those. Older rows keep null: they were trained without attributes.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'attribute_sums',
        sa.Column('model_id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(64), nullable=False),
        sa.Column('class_index', sa.SmallInteger(), nullable=False),
        sa.Column('n', sa.BigInteger(), nullable=False),
        sa.Column('total', sa.Text(), nullable=False),
        sa.Column('squares', sa.Text(), nullable=False),
        sa.Column('generation', sa.BigInteger(), nullable=False),
        sa.CheckConstraint('n >= 0', name=op.f('ck_attribute_sums_attribute_n_not_negative')),
        sa.ForeignKeyConstraint(
            ['model_id'],
            ['models.id'],
            name=op.f('fk_attribute_sums_model_id_models'),
            ondelete='CASCADE',
        ),
        sa.PrimaryKeyConstraint('model_id', 'name', 'class_index', name=op.f('pk_attribute_sums')),
    )
    op.create_index(
        'ix_attribute_sums_model_id_generation', 'attribute_sums', ['model_id', 'generation']
    )
    # Plain ALTER TABLE (a nullable column), no batch copy of the table.
    op.add_column('trained_messages', sa.Column('attributes', sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column('trained_messages', 'attributes')  # SQLite >= 3.35 drops a column in place
    op.drop_index('ix_attribute_sums_model_id_generation', table_name='attribute_sums')
    op.drop_table('attribute_sums')
