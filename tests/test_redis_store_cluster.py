"""RedisStore on the fixtures' 3-master Redis Cluster: the buckets spread
over the masters, one script call per slot group per chunk, the receipts
of a call in its keys' slot, and the asyncio store on the same keys."""

import asyncio
import hashlib
import uuid

import numpy as np
import pytest

from conftest import require_module

redis = require_module("redis")

from redis.cluster import RedisCluster  # noqa: E402

from crawldedup.redis import RedisStore  # noqa: E402
from crawldedup.redis._keys import key_slot  # noqa: E402
from crawldedup.redis.aio import AsyncRedisStore  # noqa: E402
from crawldedup.redis.store import CHUNK  # noqa: E402


def md5(i):
    return hashlib.md5(str(i).encode()).digest()


@pytest.fixture
def store(redis_cluster_url):
    with RedisStore(redis_cluster_url, f"cdtest:{uuid.uuid4().hex[:12]}",
                    capacity=100_000) as store:
        yield store
        store.clear()
        store._transport.client.delete(f"{store.name}:meta")


def _keys_by_master(url, name):
    cluster = RedisCluster.from_url(url)
    try:
        return {node.name: [k for k in cluster.get_redis_connection(node).scan_iter(
            match=f"*{name}*", count=1000) if not k.endswith(b":meta")]
            for node in cluster.get_primaries()}
    finally:
        cluster.close()


def test_buckets_spread_over_every_master(redis_cluster_url, store):
    assert store.layout == "buckets" and store._logic.groups == 12  # four a master
    fps = [md5(i) for i in range(50_000)]
    assert store.add_many(fps).all() and not store.add_many(fps[:1000]).any()
    assert store.contains_many(fps).all() and len(store) == 50_000
    keys = _keys_by_master(redis_cluster_url, store.name)
    counts = sorted(len(v) for v in keys.values())
    assert len(counts) == 3 and counts[0] > 0.2 * sum(counts), counts
    # each slot group's keys in one slot, twelve slots in all
    slots = {key_slot(k) for v in keys.values() for k in v}
    assert len(slots) == 12


def test_one_script_call_per_slot_group_per_chunk(store):
    logic = store._logic
    n = 3 * CHUNK
    raw = b"".join(md5(i) for i in range(n))
    requests = next(logic.add_op(raw, n))
    # a batch is sorted by group: each group's digests make ceil(share / CHUNK) calls
    assert logic.groups <= len(requests) <= logic.groups * 2
    for req in requests:
        assert len({key_slot(req.route), key_slot(req.key)}) == 1
    once = next(logic.add_once_op(raw, n, b"r", bytes(16)))
    # add_many_once: a call per group per CHUNK digests of the batch
    assert logic.groups * 2 < len(once) <= logic.groups * 3
    for req in once:
        payload = req.payload if isinstance(req.payload, bytes) else b"".join(req.payload)
        assert key_slot(req.route) == key_slot(req.key)  # the receipts: the group's slot
        group = next(g for g, p in enumerate(logic.prefixes) if req.key.startswith(p))
        assert logic.prefixes[group] in payload  # its buckets: that group's keys


def test_receipts_live_in_their_group_s_slot(store):
    fps = [md5(i) for i in range(10_000)]
    first = store.add_many_once(fps, b"journal")
    assert first.all()
    assert store.add_many_once(fps, b"journal").all()  # the recorded answer
    for prefix, receipts in zip(store._logic.prefixes, store._logic.receipt_keys):
        assert key_slot(receipts) == key_slot(prefix + b"00")
    store.forget_receipt(b"journal")
    assert not store.add_many_once(fps, b"journal").any()


def test_the_asyncio_store_shares_the_keys(redis_cluster_url, store):
    fps = [md5(i) for i in range(3000)]
    assert store.add_many(fps[:1000]).all()

    async def run():
        astore = await AsyncRedisStore.open(redis_cluster_url, store.name)
        try:
            assert astore.layout == "buckets" and astore.capacity == 100_000
            flags = await astore.add_many(np.array(fps, dtype="S16"))
            assert not flags[:1000].any() and flags[1000:].all()
            assert await astore.count() == 3000
            assert await astore.contains(fps[2999])
        finally:
            await astore.aclose()

    asyncio.run(run())
    assert len(store) == 3000
