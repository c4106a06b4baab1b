"""The store's schema (sql.py): Alembic's migrations in versions/, run by env.py, and the tables as the current
revision leaves them, for the queries."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlalchemy as sa


@cache
def tables() -> tuple[sa.Table, sa.Table]:
    """`runs` (one a pytest session) and `rows` (one a measured engine), as the head revision defines them."""
    import sqlalchemy as sa

    meta = sa.MetaData()
    runs = sa.Table(
        "runs", meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("uid", sa.String(36), nullable=False, unique=True),
        sa.Column("time", sa.String(32), nullable=False),
        sa.Column("host", sa.String(200), nullable=False, server_default=""),
        sa.Column("tool", sa.String(200), nullable=False, server_default=""),
    )  # fmt: skip
    rows = sa.Table(
        "rows", meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        *(sa.Column(name, sa.String(200), nullable=False) for name in
          ("backend", "backend_version", "gpu", "gpu_uuid", "model", "entry", "precision")),
        sa.Column("batch", sa.Integer, nullable=False),
        sa.Column("median_ms", sa.Float, nullable=False),
        sa.Column("cov", sa.Float),
        sa.Column("n", sa.Integer),
        sa.Column("sm_mhz", sa.Float),
        sa.Column("reference", sa.String(40)),  # the precision its speedup is over (0003), where it has one
        *(sa.Column(name, sa.Float) for name in ("speedup", "speedup_low", "speedup_high", "floor")),
        sa.Column("verdict", sa.String(40)),
        sa.UniqueConstraint("run_id", "model", "entry", "backend", "gpu_uuid"),
    )  # fmt: skip
    return runs, rows
