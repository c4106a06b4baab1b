"""Which host and which pytest-vitperf wrote each run: a fleet's runs come from many machines."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    with op.batch_alter_table("runs") as runs:  # batch: SQLite alters a table by copying it
        runs.add_column(sa.Column("host", sa.String(200), nullable=False, server_default=""))
        runs.add_column(sa.Column("tool", sa.String(200), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("runs") as runs:
        runs.drop_column("tool")
        runs.drop_column("host")
