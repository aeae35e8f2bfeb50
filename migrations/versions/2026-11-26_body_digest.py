"""Trained and classified messages keep the digest of their body.

A user's report of a message delivered by a mail server carries header fields added after it
was classified (Received, Return-Path, Delivered-To), so the digest of its tokens differs; its
Message-ID with the body's digest finds the classification and the training of the same
message. Older rows keep null: they are found by their message key as before.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


# Plain ALTER TABLE (a nullable column), no batch copy of the tables.
def upgrade() -> None:
    op.add_column('trained_messages', sa.Column('body_digest', sa.String(64), nullable=True))
    op.add_column('classifications', sa.Column('body_digest', sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column('classifications', 'body_digest')  # SQLite >= 3.35 drops a column in place
    op.drop_column('trained_messages', 'body_digest')
