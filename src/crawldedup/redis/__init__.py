"""Shared state on Redis and Redis Cluster for a fleet of crawlers.

* :class:`RedisBloomFilter` -- a Bloom filter in Redis strings, sharded,
  atomic test-and-set per key, the same bits as a local BloomFilter.
* :class:`RedisSimhashIndex` -- exact near-duplicate search, the pigeonhole
  blocks as Redis sets, one round trip per query batch.
* :class:`RedisStore` -- exact fingerprints (raw digests) in Redis sets,
  "new" reported exactly once across concurrent writers, optional time windows.

The same three for asyncio crawlers, over ``redis.asyncio``:
:class:`AsyncRedisBloomFilter`, :class:`AsyncRedisStore`,
:class:`AsyncRedisSimhashIndex` (``await Class.open(...)``); the logic is
written once (sans-I/O) and shared.

Needs redis-py: ``pip install 'crawldedup[redis]'``.  Importing this module
does not import redis-py; using a class does.
"""

from __future__ import annotations

from typing import Any

from crawldedup.redis._conn import RedisKeyTypeError

__all__ = ["AsyncRedisBloomFilter", "AsyncRedisSimhashIndex", "AsyncRedisStore",
           "RedisBloomFilter", "RedisDataLostError", "RedisKeyTypeError", "RedisSimhashIndex",
           "RedisStore"]

_LAZY = {
    "AsyncRedisBloomFilter": ("crawldedup.redis.aio", "AsyncRedisBloomFilter"),
    "AsyncRedisSimhashIndex": ("crawldedup.redis.aio", "AsyncRedisSimhashIndex"),
    "AsyncRedisStore": ("crawldedup.redis.aio", "AsyncRedisStore"),
    "RedisBloomFilter": ("crawldedup.redis.bloom", "RedisBloomFilter"),
    "RedisSimhashIndex": ("crawldedup.redis.simhash", "RedisSimhashIndex"),
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
