"""Shared state on Redis and Redis Cluster for a fleet of crawlers.

* :class:`RedisBloomFilter` -- a Bloom filter in Redis strings, sharded,
  atomic test-and-set per key, the same bits as a local BloomFilter.
* :class:`RedisSimhashIndex` -- exact near-duplicate search, the pigeonhole
  blocks as Redis sets, one round trip per query batch.
* :class:`RedisMinHashIndex` -- MinHash LSH, the bands as Redis sets, two
  round trips per query batch.
* :class:`RedisStore` -- exact fingerprints (raw digests) in small Redis
  hashes, buckets chosen by the digest's first bytes (a store crawldedup
  0.1.0 wrote keeps its Redis set), "new" reported exactly once across
  concurrent writers, optional time windows.

The same for asyncio crawlers, over ``redis.asyncio``:
:class:`AsyncRedisBloomFilter`, :class:`AsyncRedisStore`,
:class:`AsyncRedisSimhashIndex`, :class:`AsyncRedisMinHashIndex` (``await
Class.open(...)``); the logic is written once (sans-I/O) and shared.

Needs redis-py: ``pip install 'crawldedup[redis]'``.  Importing this module
does not import redis-py; using a class does.
"""

from __future__ import annotations

from crawldedup._lazy import lazy_names
from crawldedup.redis._conn import RedisKeyTypeError

__all__ = ["AsyncRedisBloomFilter", "AsyncRedisMinHashIndex", "AsyncRedisSimhashIndex",
           "AsyncRedisStore",
           "RedisBloomFilter", "RedisDataLostError", "RedisKeyTypeError", "RedisMinHashIndex",
           "RedisSimhashIndex", "RedisStore"]

_HOMES = {
    "AsyncRedisBloomFilter": "crawldedup.redis.aio",
    "AsyncRedisSimhashIndex": "crawldedup.redis.aio",
    "AsyncRedisMinHashIndex": "crawldedup.redis.aio",
    "AsyncRedisStore": "crawldedup.redis.aio",
    "RedisBloomFilter": "crawldedup.redis.bloom",
    "RedisSimhashIndex": "crawldedup.redis.simhash",
    "RedisMinHashIndex": "crawldedup.redis.minhash",
    "RedisDataLostError": "crawldedup.redis.bloom",
    "RedisStore": "crawldedup.redis.store",
}

__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
