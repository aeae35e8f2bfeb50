"""Models keep their vocabulary size, and an epoch bumped when tokens expire.

/metrics and the model list read the vocabulary size instead of loading every model into
memory; a process holding a model reloads it when its epoch moved (expired tokens are
deleted, which a change feed by generation cannot show).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


# Plain ALTER TABLE, not a batch: on SQLite a batch copies and drops `models`, and dropping
# it cascades (foreign keys are on) to every row of every model.
def upgrade() -> None:
    op.add_column(
        'models', sa.Column('vocabulary', sa.BigInteger(), server_default='0', nullable=False)
    )
    op.add_column(
        'models', sa.Column('epoch', sa.BigInteger(), server_default='0', nullable=False)
    )
    op.execute(
        "UPDATE models SET vocabulary = (SELECT count(DISTINCT token_id) FROM token_counts "
        "WHERE token_counts.model_id = models.id AND token_counts.docs > 0)"
    )


def downgrade() -> None:
    op.drop_column('models', 'epoch')  # SQLite >= 3.35 drops a column in place
    op.drop_column('models', 'vocabulary')
