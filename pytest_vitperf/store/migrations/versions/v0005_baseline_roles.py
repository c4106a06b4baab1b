"""The store as a baseline (--vitperf-store-baselines): what each row is to its row's baseline, and the environment
each run ran in, for the gate's "driver 570 -> 580" notes."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    with op.batch_alter_table("rows") as rows:
        # "start": a new baseline starts here (--vitperf-update-baselines); "run": one more run of the current one;
        # "flagged": the gate found a change, so the row stays out of later baselines. NULL (older runs): "run".
        rows.add_column(sa.Column("role", sa.String(20), nullable=True))
    with op.batch_alter_table("runs") as runs:
        runs.add_column(sa.Column("environment", sa.Text, nullable=True))  # JSON: driver, CUDA, torch, power limit


def downgrade() -> None:
    with op.batch_alter_table("runs") as runs:
        runs.drop_column("environment")
    with op.batch_alter_table("rows") as rows:
        rows.drop_column("role")
