"""Persistent fingerprint stores with one interface.

``add(fp) -> bool`` (True when new), ``fp in store``, ``add_many`` and
``contains_many`` (numpy bool arrays), ``len``, ``clear``, ``close`` and use
as a context manager:

* :class:`SQLiteStore` — the embedded default: one file, WAL, batched
  transactions, safe to share between processes.
* :class:`RedisStore` — raw digests in small Redis hashes (about 22 bytes
  of Redis memory a 16-byte digest), shared by a fleet of crawlers, optional
  time windows (``pip install 'crawldedup[redis]'``; imported on first use).
* :class:`SQLStore` — PostgreSQL, MySQL/MariaDB (or SQLite) through
  SQLAlchemy (``pip install 'crawldedup[sql]'``), with a unique key and an
  atomic insert-if-absent, so ``add`` reports "new" exactly once even with
  concurrent writers.

A database that cannot be reached raises
:class:`~crawldedup.errors.StoreUnavailableError`, never a silent "not seen".
"""

from typing import TYPE_CHECKING

from crawldedup._lazy import lazy_names
from crawldedup.exact.stores.base import FingerprintStore, open_store

if TYPE_CHECKING:
    from crawldedup.exact.stores.sql import SQLStore
    from crawldedup.exact.stores.sqlite import SQLiteStore
    from crawldedup.redis.store import RedisStore

__all__ = ["FingerprintStore", "RedisStore", "SQLiteStore", "SQLStore", "open_store"]

# The backends on first use: importing the stores loads neither sqlite3 nor
# redis-py, and open_store imports the one its URL names (crawldedup.schemes).
__getattr__, __dir__ = lazy_names(__name__, {
    "RedisStore": "crawldedup.redis.store",
    "SQLStore": "crawldedup.exact.stores.sql",
    "SQLiteStore": "crawldedup.exact.stores.sqlite",
}, __all__)
