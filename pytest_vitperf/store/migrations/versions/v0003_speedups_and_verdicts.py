"""Each row's speedup over its reference, with its interval, and the floor verdict it got: what the nightly gates."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"

COLUMNS = (("reference", sa.String(40)), ("speedup", sa.Float), ("speedup_low", sa.Float),
           ("speedup_high", sa.Float), ("floor", sa.Float), ("verdict", sa.String(40)))  # fmt: skip


def upgrade() -> None:
    with op.batch_alter_table("rows") as rows:
        for name, kind in COLUMNS:
            rows.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rows") as rows:
        for name, _ in reversed(COLUMNS):
            rows.drop_column(name)
