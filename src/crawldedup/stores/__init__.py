"""Persistent fingerprint stores with one interface.

``add(fp) -> bool`` (True when new), ``fp in store``, ``add_many`` and
``contains_many`` (numpy bool arrays), ``len``, ``clear``, ``close`` and use
as a context manager:

* :class:`SQLiteStore` — the embedded default: one file, WAL, batched
  transactions, safe to share between processes.
* :class:`SQLStore` — PostgreSQL, MySQL/MariaDB (or SQLite) through
  SQLAlchemy (``pip install 'crawldedup[sql]'``), with a unique key and an
  atomic insert-if-absent, so ``add`` reports "new" exactly once even with
  concurrent writers.

A database that cannot be reached raises
:class:`~crawldedup.errors.StoreUnavailableError`, never a silent "not seen".
"""

from crawldedup.stores.base import FingerprintStore, open_store
from crawldedup.stores.sql import SQLStore
from crawldedup.stores.sqlite import SQLiteStore

__all__ = ["FingerprintStore", "SQLiteStore", "SQLStore", "open_store"]
