"""The persistence layer: one SQLAlchemy 2 async engine per service, the shared schema and its migrations.

The same code runs on SQLite (the default: a file in the local data folder) and PostgreSQL (production).
"""

from libs.persistence.database import Database, create_engine, is_sqlite
from libs.persistence.migrate import migrate

__all__ = ["Database", "create_engine", "is_sqlite", "migrate"]
