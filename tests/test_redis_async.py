"""The asyncio classes: same answers as the blocking ones, on the server and
on the cluster (they share the sans-I/O logic; this checks the transport)."""

import asyncio
import hashlib
import uuid

import pytest

from conftest import require_module
from crawldedup import BloomFilter, StoreUnavailableError

redis = require_module("redis")

from conftest import require_service  # noqa: E402
from crawldedup.redis import (  # noqa: E402
    AsyncRedisBloomFilter,
    AsyncRedisSimhashIndex,
    AsyncRedisStore,
    RedisDataLostError,
)


@pytest.fixture(params=["server", "cluster"])
def url(request):
    if request.param == "server":
        return require_service("redis")
    return request.getfixturevalue("redis_cluster_url")


def test_bloom(url):
    async def main():
        name = f"cdtest:{uuid.uuid4().hex[:12]}"
        keys = [f"https://example.com/{i}" for i in range(5000)]
        local = BloomFilter(4000, 0.01, layout="blocked")
        bf = await AsyncRedisBloomFilter.open(url, name, 4000, 0.01, shards=6)
        try:
            assert bf.shards == 6
            assert (await bf.add_many(keys)).tolist() == local.add_many(keys).tolist()
            assert await bf.add("x") is True and await bf.contains("x")
            local.add("x")
            probe = [f"https://other.org/{i}" for i in range(3000)]
            assert (await bf.contains_many(probe)).tolist() == \
                local.contains_many(probe).tolist()
            assert await bf.to_bloom_filter() == local
            assert await bf.estimated_count() == local.estimated_count()
            # several coroutines adding the same keys at once: each key new once
            other = await AsyncRedisBloomFilter.open(url, name)
            fresh = [f"https://fresh.org/{i}" for i in range(3000)]
            a, b = await asyncio.gather(bf.add_many(fresh), other.add_many(fresh[::-1]))
            assert not (a & b[::-1]).any()
            await other.aclose()
        finally:
            await bf.drop()

    asyncio.run(main())


def test_store_and_simhash(url):
    async def main():
        name = f"cdtest:{uuid.uuid4().hex[:12]}"
        async with await AsyncRedisStore.open(url, name) as store:
            fps = [hashlib.md5(str(i).encode()).digest() for i in range(1000)]
            assert (await store.add_many(fps + fps[:10])).tolist() == [True] * 1000 + [False] * 10
            assert (await store.contains_many(fps[:3] + [bytes(16)])).tolist() == \
                [True, True, True, False]
            assert await store.count() == 1000
            await store.clear()
            assert await store.count() == 0
            await store._transport.client.delete(store._logic.meta_key)  # cleared, it stays
        async with await AsyncRedisSimhashIndex.open(url, name + ":sim", k=3) as index:
            try:
                await index.add_many(["a", "b", "c"], [0, 0b111, 2 ** 64 - 1])
                assert await index.query(1) == [("a", 1), ("b", 2)]
                offsets, ids, dists = await index.query_many([0, 2 ** 64 - 2])
                assert offsets.tolist() == [0, 2, 3] and ids.tolist() == ["a", "b", "c"]
                await index.remove("a")
                assert not await index.contains("a") and await index.count() == 2
            finally:
                await index.drop()

    asyncio.run(main())


def test_faults(redis_server):
    async def main():
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff
        client = Redis(port=redis_server.port, retry=Retry(NoBackoff(), 0))
        bf = await AsyncRedisBloomFilter.open(client, "f", 1000, 0.01)
        await bf.add_many(["a", "b"])
        redis_server.stop()
        with pytest.raises(StoreUnavailableError, match=str(redis_server.port)):
            await bf.add("c")
        redis_server.start()
        with pytest.raises(RedisDataLostError):
            await bf.contains("a")
        await client.aclose()

    asyncio.run(main())
