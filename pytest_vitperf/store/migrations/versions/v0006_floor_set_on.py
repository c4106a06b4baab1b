"""Where each row's floor came from: the backend version it was set on ("torch 2.11"), also where it was carried to
a later version that has no floors of its own."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    with op.batch_alter_table("rows") as rows:
        rows.add_column(sa.Column("floor_set_on", sa.String(80), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rows") as rows:
        rows.drop_column("floor_set_on")
