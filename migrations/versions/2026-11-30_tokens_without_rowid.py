"""`tokens` loses the index on (model_id, generation); on SQLite it becomes WITHOUT ROWID.

Training adds about a hundred tokens a message, and each row went into four B-trees on SQLite
(the table by row id, its primary key, the text's unique index, the generation index) and
three on PostgreSQL. The change feed was the generation index's only reader; it now reads a
reader's new tokens as the ids above those it holds (ids are given out under the model's row
lock, in generation order). On SQLite the table becomes its primary key (WITHOUT ROWID): no
row id B-tree beside the key's (docs/performance.md, "The tokens table").

PostgreSQL drops (or, downgraded, builds) the index in place. SQLite builds the table anew
and copies its rows, in key order, in the migration's one transaction (a few seconds per
million rows).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

INDEX = 'ix_tokens_model_id_generation'
COLUMNS = 'model_id, token_id, text, generation'


def _rebuild_sqlite(*, with_rowid: bool) -> None:
    """SQLite: make `tokens` again, with or without its row id, keeping every row. Nothing
    refers to it (no foreign key since 0006), so dropping the old table touches no other."""
    new = '_new_tokens'
    op.create_table(
        new,
        sa.Column('model_id', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('token_id', sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column('text', sa.String(length=200), nullable=False),
        sa.Column('generation', sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint('model_id', 'token_id', name='pk_tokens'),
        sa.UniqueConstraint('model_id', 'text', name='uq_tokens_model_id_text'),
        sqlite_with_rowid=with_rowid,
    )
    op.execute(
        f'INSERT INTO {new} ({COLUMNS}) SELECT {COLUMNS} FROM tokens ORDER BY model_id, token_id'
    )
    op.drop_table('tokens')  # with its indexes
    op.rename_table(new, 'tokens')
    if with_rowid:
        op.create_index(INDEX, 'tokens', ['model_id', 'generation'])


def upgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        _rebuild_sqlite(with_rowid=False)
        return
    op.drop_index(INDEX, table_name='tokens')


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        _rebuild_sqlite(with_rowid=True)
        return
    op.create_index(INDEX, 'tokens', ['model_id', 'generation'])
