"""The persistence layer: one SQLAlchemy 2 async engine per service, the shared schema and its migrations.

Migrations: :func:`libs.persistence.migrate.migrate` (``python -m libs.persistence.migrate``).
The same code runs on SQLite (the default: a file in the local data folder) and PostgreSQL (production).
"""

from libs.persistence.database import Database, create_engine, is_sqlite

__all__ = ["Database", "create_engine", "is_sqlite"]
