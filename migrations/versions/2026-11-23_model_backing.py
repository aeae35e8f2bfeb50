"""A model may be backed by another (a personal model by a global one).

`backed_by` is the id of the backing model (NULL: none); `feedback_trains_backing` says whether
feedback on the model also trains the backing one. There is no foreign key: SQLite cannot drop
a column a foreign key uses (the downgrade), and the service refuses deleting a model that
backs others under the same write lock that sets a backing.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


# Plain ALTER TABLE, not a batch: on SQLite a batch copies and drops `models`, and dropping
# it cascades (foreign keys are on) to every row of every model.
def upgrade() -> None:
    op.add_column('models', sa.Column('backed_by', sa.Integer(), nullable=True))
    op.add_column(
        'models',
        sa.Column(
            'feedback_trains_backing', sa.Boolean(), server_default=sa.false(), nullable=False
        ),
    )
    op.create_index('ix_models_backed_by', 'models', ['backed_by'])


def downgrade() -> None:
    op.drop_index('ix_models_backed_by', table_name='models')
    op.drop_column('models', 'feedback_trains_backing')  # SQLite >= 3.35 drops in place
    op.drop_column('models', 'backed_by')
