"""RedisMinHashIndex against the local MinHashIndex and brute force, on the
Redis server and on the 3-master cluster the tests start; parameters kept
in Redis, batches all or nothing, concurrent writers."""

import json
import re
import uuid

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import require_module
from crawldedup import CorruptStateError, IncompatibleFilterError, StoreUnavailableError
from crawldedup.near.lsh import MinHashIndex

redis = require_module("redis")

from conftest import require_service  # noqa: E402
from crawldedup.redis import RedisKeyTypeError, RedisMinHashIndex  # noqa: E402


def signatures(n, k, seed, values=4):
    rng = np.random.default_rng(seed)
    return rng.integers(0, values, (n, k), dtype=np.uint64).astype(np.uint32)


def brute(sigs, ids, query, b, r, floor=0.0):
    out = []
    for i, sig in zip(ids, sigs):
        if any((sig[j * r:(j + 1) * r] == query[j * r:(j + 1) * r]).all() for j in range(b)):
            jac = float((sig == query).mean())
            if jac >= floor:
                out.append((i, jac))
    return sorted(out, key=lambda t: (0 if isinstance(t[0], int) else
                                      1 if isinstance(t[0], str) else 2, t[0]))


@pytest.fixture(params=["server", "cluster"])
def url(request):
    if request.param == "server":
        return require_service("redis")
    return request.getfixturevalue("redis_cluster_url")


@pytest.fixture
def client(redis_url):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def name(client):
    prefix = f"cdtest:{uuid.uuid4().hex[:12]}"
    yield prefix
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    if keys:
        client.delete(*keys)


@pytest.mark.parametrize("shards", [None, 3])
def test_equals_the_local_index(url, shards):
    sigs = signatures(300, 16, 1)
    with RedisMinHashIndex(url, f"cdtest:{uuid.uuid4().hex[:12]}", threshold=0.5,
                           num_perm=16, shards=shards) as index:
        try:
            local = MinHashIndex(threshold=0.5, num_perm=16)
            assert (index.bands, index.rows) == (local.bands, local.rows)
            index.add_many(range(300), sigs)
            local.add_many(range(300), sigs)
            assert len(index) == 300
            queries = np.concatenate([sigs[:40], signatures(40, 16, 2)])
            offsets, ids, jac = index.query_many(queries)
            lo, li, lj = local.query_many(queries)
            for q in range(len(queries)):
                mine = list(zip(ids[offsets[q]:offsets[q + 1]].tolist(),
                                jac[offsets[q]:offsets[q + 1]].tolist()))
                theirs = sorted(zip(li[lo[q]:lo[q + 1]].tolist(), lj[lo[q]:lo[q + 1]].tolist()))
                assert mine == theirs
                assert mine == brute(sigs, range(300), queries[q], index.bands, index.rows)
            assert index.query(sigs[7], min_jaccard=0.6) == \
                brute(sigs, range(300), sigs[7], index.bands, index.rows, 0.6)
            assert 5 in index and 300 not in index
            index.remove(5)
            assert 5 not in index and len(index) == 299
            assert 5 not in dict(index.query(sigs[5]))
            with pytest.raises(KeyError):
                index.remove(5)
            index.clear()
            assert len(index) == 0 and index.query(sigs[0]) == []
        finally:
            index.drop()


@given(st.lists(st.lists(st.integers(0, 2), min_size=8, max_size=8), max_size=10),
       st.lists(st.integers(0, 2), min_size=8, max_size=8))
def test_model(rows, query):
    url = require_service("redis")
    sigs = np.array(rows, dtype=np.uint32).reshape(-1, 8)
    q = np.array(query, dtype=np.uint32)
    with RedisMinHashIndex(url, f"cdtest:{uuid.uuid4().hex[:12]}", num_perm=8, bands=4,
                           rows=2) as index:
        try:
            index.add_many([f"doc{i}" for i in range(len(sigs))], sigs)
            assert index.query(q) == brute(sigs, [f"doc{i}" for i in range(len(sigs))], q, 4, 2)
        finally:
            index.drop()


def test_ids_and_bad_input(redis_url, name):
    a, b, c = signatures(3, 8, 4, values=2**32)
    with RedisMinHashIndex(redis_url, name, num_perm=8, bands=4, rows=2) as index:
        index.add("a", a)
        index.add(b"b", a)
        index.add(7, b)
        assert index.query(a) == [("a", 1.0), (b"b", 1.0)]
        with pytest.raises(ValueError, match="already in the index .*another signature"):
            index.add("a", c)
        with pytest.raises(ValueError, match="already"):
            index.add_many(["new", "a"], [c, c])
        assert "new" not in index and len(index) == 3          # all or nothing
        index.add_many(["a", 7], [a, b])            # the same pairs: nothing to do
        assert len(index) == 3
        with pytest.raises(ValueError, match="repeated"):
            index.add_many(["x", "x"], [c, c])
        with pytest.raises(ValueError, match="differ in length"):
            index.add_many(["x"], [c, c])
        with pytest.raises(TypeError, match="id"):
            index.add(1.5, c)
        with pytest.raises(ValueError, match="8 values"):
            index.add("y", np.zeros(9, dtype=np.uint32))
        with pytest.raises(ValueError, match=r"\[0, 2\*\*32\)"):
            index.add("y", np.full(8, -1))
        with pytest.raises(ValueError, match="min_jaccard"):
            index.query(a, min_jaccard=2)
        assert len(index) == 3


def test_unreachable():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    client = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
    with pytest.raises(StoreUnavailableError, match=str(port)):
        RedisMinHashIndex(client, "x")
    client.close()


def test_parameters_are_stored(redis_url, name):
    sigs = signatures(50, 32, 5)
    with RedisMinHashIndex(redis_url, name, threshold=0.7, num_perm=32) as index:
        index.add_many(range(50), sigs)
        b, r = index.bands, index.rows
    with pytest.raises(IncompatibleFilterError, match="num_perm 64 != 32"):
        RedisMinHashIndex(redis_url, name, threshold=0.7, num_perm=64)
    with pytest.raises(IncompatibleFilterError, match="threshold 0.9 != 0.7"):
        RedisMinHashIndex(redis_url, name, threshold=0.9, num_perm=32)
    with pytest.raises(IncompatibleFilterError, match="shards 2 != 1"):
        RedisMinHashIndex(redis_url, name, threshold=0.7, num_perm=32, shards=2)
    with RedisMinHashIndex(redis_url, name, threshold=None, num_perm=None) as reopened:
        assert (reopened.num_perm, reopened.bands, reopened.rows, reopened.threshold) == \
            (32, b, r, 0.7)
        assert len(reopened) == 50
        assert all(i in dict(reopened.query(s)) for i, s in enumerate(sigs))
    with pytest.raises(ValueError, match="no crawldedup index"):
        RedisMinHashIndex(redis_url, name + ":none", threshold=None, num_perm=None)
    with pytest.raises(IncompatibleFilterError, match="'simhash'"):
        from crawldedup.redis import RedisSimhashIndex
        with RedisSimhashIndex(redis_url, name + ":sim", k=3):
            pass
        RedisMinHashIndex(redis_url, name + ":sim")


@pytest.mark.parametrize("field, value, match", [
    ("bands", 3, "band_values .* which bands 3"),
    ("rows", 2, "band_values .* which bands .* rows 2"),
    ("shards", 2, "id_maps .* shards 2"),
    ("num_perm", 4, "make no index"),
    ("threshold", "x", "not a number"),
    ("extra", 1, "never writes"),
])
def test_hand_edited_metadata_is_named(redis_url, name, client, field, value, match):
    with RedisMinHashIndex(redis_url, name, num_perm=32, bands=8, rows=4):
        pass
    meta = json.loads(client.get(name + ":meta"))
    meta[field] = value
    client.set(name + ":meta", json.dumps(meta))
    with pytest.raises(CorruptStateError, match=match) as info:
        RedisMinHashIndex(redis_url, name, threshold=None, num_perm=None)
    assert f"{name}:meta" in str(info.value)


def test_a_key_of_another_type_leaves_nothing_stored(redis_url, name, client):
    sigs = signatures(200, 16, 6, values=2**32)
    with RedisMinHashIndex(redis_url, name, num_perm=16, bands=4, rows=4) as index:
        index.add_many(range(100), sigs[:100])
        bucket = index._logic.bucket_keys(0, sigs[-1])[2]
        client.set(bucket, b"x")
        with pytest.raises(RedisKeyTypeError, match=re.escape(bucket.decode())):
            index.add_many(range(100, 200), sigs[100:])
        assert len(index) == 100 and not any(i in index for i in range(100, 200))
        client.delete(bucket)
        index.add_many(range(100, 200), sigs[100:])
        assert len(index) == 200


def test_an_id_taken_between_check_and_write_undoes_the_batch(redis_url, name):
    sigs = signatures(600, 16, 7, values=2**32)
    ids = list(range(600))
    with RedisMinHashIndex(redis_url, name, num_perm=16, bands=4, rows=4, shards=4) as index, \
            RedisMinHashIndex(redis_url, name, threshold=None, num_perm=None) as other:
        logic, transport = index._logic, index._transport
        from crawldedup.redis.simhash import encode_id
        op = logic.add_op([encode_id(i) for i in ids], sigs)
        checks = next(op)
        writes = op.send(transport.execute(checks))
        assert len(index) == 0
        other.add(ids[-1], sigs[-1] ^ np.uint32(0xFF))
        undo = op.send(transport.execute(writes))
        with pytest.raises(ValueError, match=f"id {ids[-1]} is already"):
            op.send(transport.execute(undo))
        assert len(index) == 1 and index.query(sigs[0]) == []
        index.add_many(ids[:-1], sigs[:-1])
        assert len(index) == 600


def test_asyncio_gives_the_same_answers(url):
    import asyncio

    from crawldedup.redis import AsyncRedisMinHashIndex
    sigs = signatures(200, 16, 9)
    name = f"cdtest:{uuid.uuid4().hex[:12]}"

    async def main():
        async with await AsyncRedisMinHashIndex.open(url, name, threshold=0.5,
                                                     num_perm=16) as index:
            try:
                await index.add_many(range(200), sigs)
                assert await index.count() == 200 and await index.contains(3)
                offsets, ids, jac = await index.query_many(sigs[:30])
                with RedisMinHashIndex(url, name, threshold=None, num_perm=None) as sync:
                    so, si, sj = sync.query_many(sigs[:30])
                    assert offsets.tolist() == so.tolist() and ids.tolist() == si.tolist()
                    assert jac.tolist() == sj.tolist()
                    assert await index.query(sigs[4], min_jaccard=0.7) == \
                        sync.query(sigs[4], min_jaccard=0.7)
                await index.remove(3)
                assert not await index.contains(3) and await index.count() == 199
                await index.add("new", sigs[0])
                assert "new" in dict(await index.query(sigs[0]))
            finally:
                await index.drop()

    asyncio.run(main())
