"""`vitperf ab`'s verdicts: one row per judged row of an A/B run, under a `runs` row of its own."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    op.create_table(
        "ab_rows",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("side_a", sa.Text, nullable=False),  # each side's command, as long as it is
        sa.Column("side_b", sa.Text, nullable=False),
        sa.Column("device", sa.String(200), nullable=False),
        sa.Column("gpu", sa.String(40)),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("what", sa.String(40), nullable=False),
        sa.Column("rounds", sa.Integer, nullable=False),
        *(sa.Column(name, sa.Float) for name in ("ratio", "ratio_low", "ratio_high", "detectable")),
        sa.Column("threshold", sa.Float, nullable=False),
        sa.Column("confidence", sa.Float, nullable=False),
        sa.Column("verdict", sa.String(40), nullable=False),
        sa.UniqueConstraint("run_id", "name", "what", "gpu"),
    )  # fmt: skip


def downgrade() -> None:
    op.drop_table("ab_rows")
