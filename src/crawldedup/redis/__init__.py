"""Shared state on Redis and Redis Cluster for a fleet of crawlers.

* :class:`RedisBloomFilter` -- a Bloom filter in Redis strings, sharded,
  atomic test-and-set per key, the same bits as a local BloomFilter.
* :class:`RedisStore` -- exact fingerprints (raw digests) in Redis sets,
  "new" reported exactly once across concurrent writers, optional time windows.

Needs redis-py: ``pip install 'crawldedup[redis]'``.  Importing this module
does not import redis-py; using a class does.
"""

from __future__ import annotations

from typing import Any

from crawldedup.redis._conn import RedisKeyTypeError

__all__ = ["RedisBloomFilter", "RedisDataLostError", "RedisKeyTypeError", "RedisStore"]

_LAZY = {
    "RedisBloomFilter": ("crawldedup.redis.bloom", "RedisBloomFilter"),
    "RedisDataLostError": ("crawldedup.redis.bloom", "RedisDataLostError"),
    "RedisStore": ("crawldedup.redis.store", "RedisStore"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'crawldedup.redis' has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(__all__))
