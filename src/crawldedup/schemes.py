"""The URL schemes that name a store, and where each kind of store is
opened for them: one table, read by :func:`crawldedup.exact.stores.open_store`,
:func:`crawldedup.recrawl.open_recrawl_store`, the command line and the
Scrapy components.

A backend is named by its module and function as text and imported when a
URL asks for it, so the stores' base knows no backend and the local library
loads no integration (redis-py, SQLAlchemy) it does not use.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, Optional

#: The schemes of a Redis server (redis-py's URL forms).
REDIS = ("redis", "rediss", "unix")
#: The scheme of an embedded SQLite file (``sqlite:///PATH``).
SQLITE = "sqlite"
#: The scheme of a DiskStore's folder (``disk:///PATH``).
DISK = "disk"
#: Any other scheme is handed to SQLAlchemy (``postgresql://``,
#: ``mysql+pymysql://``, ...), which names the ones it does not know.
SQL = "sql"

#: kind of store -> {scheme (REDIS, SQLITE or SQL): "module:callable"}.  A
#: fingerprint store's callable takes ``(url, *, table, digest_size)``; a
#: re-crawl store's takes the URL (or a redis-py client, for a Redis
#: scheme) and the keyword arguments of open_recrawl_store.
BACKENDS: Dict[str, Dict[str, str]] = {
    "fingerprints": {
        **{scheme: "crawldedup.redis.store:open_redis_url" for scheme in REDIS},
        SQLITE: "crawldedup.exact.stores.sqlite:open_sqlite_url",
        DISK: "crawldedup.exact.disk:open_disk_url",
        SQL: "crawldedup.exact.stores.sql:open_sql_url",
    },
    "recrawl": {
        **{scheme: "crawldedup.recrawl.redis_store:RedisRecrawlStore" for scheme in REDIS},
        SQLITE: "crawldedup.recrawl.stores:open_sqlite_url",
    },
}


def scheme_of(url: str) -> Optional[str]:
    """The scheme of a URL as the table knows it (``"redis"``, ``"sqlite"``, ``"disk"``,
    ``"sql"`` for any other ``SCHEME://``), or None for a plain path."""
    head, sep, _ = url.partition("://")
    if not sep or not head:
        return None
    head = head.lower()
    if head in REDIS or head in (SQLITE, DISK):
        return head
    return SQL


def is_redis(url: str) -> bool:
    """Whether ``url`` names a Redis server (redis://, rediss://, unix://)."""
    return scheme_of(url) in REDIS


def sqlite_path(url: str) -> str:
    """The file of a ``sqlite:///PATH`` URL (``sqlite:////abs`` is absolute),
    "" for another ``sqlite:`` form (it names no file), a plain path as it is."""
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///"):]
    return "" if url.lower().startswith("sqlite:") else url


def backend(kind: str, scheme: str) -> Callable[..., Any]:
    """The callable that opens a store of ``kind`` for a URL of ``scheme``."""
    module, _, name = BACKENDS[kind][scheme].partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def opener(kind: str, url: str) -> Callable[..., Any]:
    """The callable that opens a store of ``kind`` for ``url``; ValueError
    naming the schemes it takes when none of that kind takes the URL's."""
    table = BACKENDS[kind]
    scheme = scheme_of(url)
    if scheme is None or scheme not in table:
        known = ", ".join(f"{s}://" for s in table if s != SQL)
        extra = " or any SQLAlchemy URL" if SQL in table else ""
        raise ValueError(f"{url!r}: a {kind} store takes {known}{extra}")
    return backend(kind, scheme)
