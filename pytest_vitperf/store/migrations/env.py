"""Alembic's environment for the store: it migrates on the connection sql.SqlStore hands it, inside that
connection's transaction (and lock)."""

from __future__ import annotations

from alembic import context


def run_migrations() -> None:
    context.configure(connection=context.config.attributes["connection"])
    with context.begin_transaction():
        context.run_migrations()


if __name__ != "pytest_vitperf.store.migrations.env":  # run by Alembic, not imported
    run_migrations()
