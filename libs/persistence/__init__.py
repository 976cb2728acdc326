"""The persistence layer: one SQLAlchemy 2 async engine per service, the shared schema and its migrations.

Migrations: :func:`libs.persistence.migrate.migrate` (``python -m libs.persistence.migrate``).
The same code runs on SQLite (the default: a file in the local data folder) and PostgreSQL (production).
A database that cannot serve (down, restarting, out of connections, locked) is answered ``UNAVAILABLE``
with retry guidance, not ``INTERNAL`` (:mod:`libs.persistence.failures`).
"""

from libs.persistence import failures  # registers the classifier: an unreachable database is UNAVAILABLE
from libs.persistence.database import Database, create_engine, is_sqlite

__all__ = ["Database", "create_engine", "failures", "is_sqlite"]
