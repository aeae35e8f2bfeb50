"""Models keep their vocabulary size (tokens counted in at least one trained message).

/metrics and the model list read it instead of loading every model into memory.

Revision ID: 0003_i12
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003_i12'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('models') as batch:
        batch.add_column(
            sa.Column('vocabulary', sa.BigInteger(), server_default='0', nullable=False)
        )
    op.execute(
        "UPDATE models SET vocabulary = (SELECT count(DISTINCT token_id) FROM token_counts "
        "WHERE token_counts.model_id = models.id AND token_counts.docs > 0)"
    )


def downgrade() -> None:
    with op.batch_alter_table('models') as batch:
        batch.drop_column('vocabulary')
