"""The token tables drop their foreign key to `models`.

PostgreSQL checks a foreign key row by row, with a trigger that looks the model up: in a
batch training that was 60 % of the server's CPU for COPY into `tokens` (100,000 new tokens:
2.9-3.6 s with the key, 1.3-1.4 s without), and it ran for every new count row too. Nothing
needs it: a model's rows are only written under its row lock (taken by every write, which a
deleted model fails), and `delete_model` deletes them explicitly; the other tables keep theirs.

PostgreSQL drops the constraints in place. SQLite cannot drop a constraint: each table is
built anew and its rows copied (a few seconds per million rows), in the migration's one
transaction.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

KEYS = {'tokens': 'fk_tokens_model_id_models', 'token_counts': 'fk_token_counts_model_id_models'}


def _tokens(name: str, foreign_key: list[sa.ForeignKeyConstraint]) -> None:
    op.create_table(
        name,
        sa.Column('model_id', sa.Integer(), nullable=False),
        sa.Column('token_id', sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column('text', sa.String(length=200), nullable=False),
        sa.Column('generation', sa.BigInteger(), nullable=False),
        *foreign_key,
        sa.PrimaryKeyConstraint('model_id', 'token_id', name='pk_tokens'),
        sa.UniqueConstraint('model_id', 'text', name='uq_tokens_model_id_text'),
    )


def _token_counts(name: str, foreign_key: list[sa.ForeignKeyConstraint]) -> None:
    op.create_table(
        name,
        sa.Column('model_id', sa.Integer(), nullable=False),
        sa.Column('token_id', sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column('class_index', sa.SmallInteger(), nullable=False),
        sa.Column('docs', sa.BigInteger(), nullable=False),
        sa.Column('terms', sa.BigInteger(), nullable=False),
        sa.Column('generation', sa.BigInteger(), nullable=False),
        sa.CheckConstraint(
            'docs >= 0 AND terms >= 0', name='ck_token_counts_counts_not_negative'
        ),
        *foreign_key,
        sa.PrimaryKeyConstraint('model_id', 'token_id', 'class_index', name='pk_token_counts'),
    )


COLUMNS = {
    'tokens': 'model_id, token_id, text, generation',
    'token_counts': 'model_id, token_id, class_index, docs, terms, generation',
}
CREATE = {'tokens': _tokens, 'token_counts': _token_counts}


def _rebuild_sqlite(table: str, *, with_key: bool) -> None:
    """SQLite: make `table` again, with or without its foreign key, keeping every row.

    Nothing refers to the token tables, so dropping the old one touches no other table.
    """
    key = (
        [
            sa.ForeignKeyConstraint(
                ['model_id'], ['models.id'], name=KEYS[table], ondelete='CASCADE'
            )
        ]
        if with_key
        else []
    )
    new = f'_new_{table}'
    CREATE[table](new, key)
    op.execute(f'INSERT INTO {new} ({COLUMNS[table]}) SELECT {COLUMNS[table]} FROM {table}')
    op.drop_index(f'ix_{table}_model_id_generation', table_name=table)
    op.drop_table(table)
    op.rename_table(new, table)
    op.create_index(f'ix_{table}_model_id_generation', table, ['model_id', 'generation'])


def upgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        for table in KEYS:
            _rebuild_sqlite(table, with_key=False)
        return
    for table, key in KEYS.items():
        op.drop_constraint(key, table, type_='foreignkey')


def downgrade() -> None:
    if op.get_bind().dialect.name == 'sqlite':
        for table in KEYS:
            _rebuild_sqlite(table, with_key=True)
        return
    for table, key in KEYS.items():
        op.create_foreign_key(key, table, 'models', ['model_id'], ['id'], ondelete='CASCADE')
