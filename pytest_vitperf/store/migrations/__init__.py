"""The store's schema (sql.py): Alembic's migrations in versions/, run by env.py."""
