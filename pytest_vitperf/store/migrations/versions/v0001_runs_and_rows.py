"""The first schema: runs, and a row per measured engine."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("uid", sa.String(36), nullable=False, unique=True),
        sa.Column("time", sa.String(32), nullable=False),
    )
    op.create_table(
        "rows",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        *(sa.Column(name, sa.String(200), nullable=False) for name in
          ("backend", "backend_version", "gpu", "gpu_uuid", "model", "entry", "precision")),
        sa.Column("batch", sa.Integer, nullable=False),
        sa.Column("median_ms", sa.Float, nullable=False),
        sa.Column("cov", sa.Float),
        sa.Column("n", sa.Integer),
        sa.Column("sm_mhz", sa.Float),
        sa.UniqueConstraint("run_id", "model", "entry", "backend", "gpu_uuid"),
    )  # fmt: skip
    op.create_index("rows_by_series", "rows", ["backend", "gpu", "model", "entry"])


def downgrade() -> None:
    op.drop_table("rows")
    op.drop_table("runs")
