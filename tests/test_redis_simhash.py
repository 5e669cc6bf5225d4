"""RedisSimhashIndex against brute force, on the Redis server and on the
3-master cluster the tests start."""

import re
import uuid

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import require_module
from crawldedup import (
    CorruptStateError,
    IncompatibleFilterError,
    SimhashIndex,
    StoreUnavailableError,
)

redis = require_module("redis")

from conftest import require_service  # noqa: E402
from crawldedup.redis import RedisKeyTypeError, RedisSimhashIndex  # noqa: E402
from crawldedup.redis.simhash import id_batch  # noqa: E402


def popcount(x):
    return bin(x).count("1")


def near(rng, fp, d):
    for bit in rng.choice(64, size=d, replace=False):
        fp ^= 1 << int(bit)
    return fp


def corpus(seed, n=300):
    rng = np.random.default_rng(seed)
    base = [int(v) for v in rng.integers(0, 2 ** 63, size=n // 3, dtype=np.int64)]
    fps = list(base)
    for fp in base:
        fps.append(near(rng, fp, int(rng.integers(0, 7))))
        fps.append(near(rng, fp, int(rng.integers(0, 4))))
    return fps, rng


def brute(entries, fp, k):
    res = [(i, popcount(f ^ fp)) for i, f in entries.items() if popcount(f ^ fp) <= k]
    return sorted(res, key=lambda t: (t[1], t[0]))


@pytest.fixture(params=["server", "cluster"])
def url(request):
    if request.param == "server":
        return require_service("redis")
    return request.getfixturevalue("redis_cluster_url")


@pytest.mark.parametrize("k", [0, 3, 5])
def test_exact_against_brute_force(url, k):
    fps, rng = corpus(k)
    with RedisSimhashIndex(url, f"cdtest:{uuid.uuid4().hex[:12]}", k=k) as index:
        try:
            index.add_many(range(len(fps)), np.array(fps, dtype=np.uint64))
            entries = dict(enumerate(fps))
            assert len(index) == len(fps)
            queries = fps[:50] + [near(rng, f, 3) for f in fps[:50]]
            for q in queries[:20]:
                assert index.query(q) == brute(entries, q, k)
            offsets, ids, dists = index.query_many(queries)
            local = SimhashIndex(k)
            local.add_many(range(len(fps)), np.array(fps, dtype=np.uint64))
            lo, li, ld = local.query_many(queries)
            assert offsets.tolist() == lo.tolist()
            assert ids.tolist() == li.tolist() and dists.tolist() == ld.tolist()
            assert index.near_dup(fps[0]) and 5 in index and len(fps) not in index
            index.remove(5)
            del entries[5]
            assert 5 not in index and len(index) == len(fps) - 1
            assert index.query(fps[5]) == brute(entries, fps[5], k)
            with pytest.raises(KeyError):
                index.remove(5)
            index.clear()
            assert len(index) == 0 and index.query(fps[0]) == []
            assert index.k == k
        finally:
            index.drop()


@given(st.lists(st.integers(0, 2 ** 64 - 1), max_size=12), st.integers(0, 2 ** 64 - 1))
def test_model(fps, q):
    url = require_service("redis")
    with RedisSimhashIndex(url, f"cdtest:{uuid.uuid4().hex[:12]}", k=3) as index:
        try:
            index.add_many([f"doc{i}" for i in range(len(fps))], fps)
            expected = sorted(((f"doc{i}", popcount(f ^ q)) for i, f in enumerate(fps)
                               if popcount(f ^ q) <= 3), key=lambda t: (t[1], t[0]))
            assert index.query(q) == expected
        finally:
            index.drop()


def test_ids_and_bad_input(redis_url):
    with RedisSimhashIndex(redis_url, f"cdtest:{uuid.uuid4().hex[:12]}") as index:
        try:
            index.add("a", 1)
            index.add(b"b", 3)
            index.add(7, 2 ** 64 - 1)
            assert index.query(1) == [("a", 0), (b"b", 1)]
            with pytest.raises(ValueError, match="already"):
                index.add("a", 5)
            with pytest.raises(ValueError, match="already"):
                index.add_many(["new", "a"], [5, 6])
            assert "new" not in index and len(index) == 3  # all or nothing
            index.add_many(["a", 7], [1, 2 ** 64 - 1])  # the same pairs: nothing to do
            assert len(index) == 3 and index.query(1) == [("a", 0), (b"b", 1)]
            with pytest.raises(ValueError, match="repeated"):
                index.add_many(["x", "x"], [5, 6])
            with pytest.raises(ValueError, match="length"):
                index.add_many(["x"], [5, 6])
            with pytest.raises(TypeError, match="id"):
                index.add(1.5, 3)
            with pytest.raises(ValueError, match="fp"):
                index.add("y", -1)
            with pytest.raises(TypeError, match="fp"):
                index.query("abc")
            with pytest.raises(ValueError, match="k"):
                RedisSimhashIndex(redis_url, "x", k=99)
            assert len(index) == 3
        finally:
            index.drop()


def test_unreachable():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    client = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
    with pytest.raises(StoreUnavailableError, match=str(port)):
        RedisSimhashIndex(client, "x")
    client.close()


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


def test_parameters_are_stored(redis_url, name):
    """k is kept in the metadata key: another k is refused instead of
    answering "no near duplicate" for every stored fingerprint."""
    fps, _ = corpus(7, 100)
    with RedisSimhashIndex(redis_url, name, k=3) as index:
        index.add_many(range(len(fps)), fps)
    with pytest.raises(IncompatibleFilterError, match="k 4 != 3"):
        RedisSimhashIndex(redis_url, name, k=4)
    with pytest.raises(IncompatibleFilterError, match="shards 2 != 1"):
        RedisSimhashIndex(redis_url, name, k=3, shards=2)
    with RedisSimhashIndex(redis_url, name, k=None) as reopened:  # its own k
        assert reopened.k == 3 and len(reopened) == len(fps)
        assert all(i in dict(reopened.query(fp)) for i, fp in enumerate(fps))
    with pytest.raises(ValueError, match="no crawldedup index"):
        RedisSimhashIndex(redis_url, name + ":none", k=None)


def test_the_layout_without_metadata_is_refused(redis_url, name, client):
    client.hset(name + ":ids:3", b"i" + bytes(8), bytes(8))  # what the old layout wrote
    with pytest.raises(IncompatibleFilterError, match="without a metadata key"):
        RedisSimhashIndex(redis_url, name, k=3)
    assert not client.exists(name + ":meta")


@pytest.mark.parametrize("value, error, match", [
    (b"not json", IncompatibleFilterError, "not crawldedup index metadata"),
    (b'{"format": 9, "kind": "simhash", "k": 3, "shards": 1}', IncompatibleFilterError,
     "format 9"),
    (b'{"format": 1, "kind": "simhash", "shards": 1}', CorruptStateError, "no 'k'"),
    (b'{"format": 1, "kind": "simhash", "k": 99, "shards": 1}', CorruptStateError, "k 99"),
    (b'{"format": 1, "kind": "simhash", "k": "3", "shards": 1}', CorruptStateError, "k '3'"),
    (b'{"format": 1, "kind": "simhash", "k": 3, "shards": 0}', CorruptStateError, "shards 0"),
    (b'{"format": 1, "kind": "simhash", "k": 3, "shards": true}', CorruptStateError, "shards"),
    (b'{"format": 1, "kind": "simhash", "k": 3}', CorruptStateError, "no 'shards'"),
    (b'{"format": 1, "kind": "simhash", "k": 3, "shards": 1, "x": 1}', CorruptStateError,
     "never writes"),
], ids=["not-json", "format", "no-k", "k-range", "k-str", "shards-0", "shards-bool",
        "no-shards", "extra"])
def test_hand_edited_metadata_is_named(redis_url, name, client, value, error, match):
    client.set(name + ":meta", value)
    with pytest.raises(error, match=match) as info:
        RedisSimhashIndex(redis_url, name, k=3)
    assert f"{name}:meta" in str(info.value)


@pytest.mark.parametrize("field, value, match", [
    ("k", 4, "blocks .* which k 4 and shards 1 do not make"),
    ("k", 0, "blocks .* which k 0 and shards 1 do not make"),
    ("shards", 2, "id_maps .* which k 3 and shards 2 do not make"),
])
def test_an_edit_of_k_or_shards_alone_is_named(redis_url, name, client, field, value, match):
    """k and shards decide which buckets and shards are read: edited alone
    in the metadata key, the index would answer "no near duplicate" for its
    entries; what they make is stored beside them, so the edit is named."""
    import json
    fps, _ = corpus(3, 100)
    with RedisSimhashIndex(redis_url, name, k=3) as index:
        index.add_many(range(len(fps)), fps)
    meta = json.loads(client.get(name + ":meta"))
    meta[field] = value
    client.set(name + ":meta", json.dumps(meta))
    for k in (None, meta["k"]):
        with pytest.raises(CorruptStateError, match=match) as info:
            RedisSimhashIndex(redis_url, name, k=k)
        assert f"{name}:meta" in str(info.value)


def test_metadata_copied_to_another_name_is_named(redis_url, name, client):
    with RedisSimhashIndex(redis_url, name, k=3):
        pass
    client.set(name + ":copy:meta", client.get(name + ":meta"))
    with pytest.raises(CorruptStateError, match="id_maps"):
        RedisSimhashIndex(redis_url, name + ":copy", k=3)


def test_a_key_of_another_type_leaves_nothing_stored(redis_url, name, client):
    """Every key of a batch is checked before the first write: a bucket or
    an id map of another Redis type raises RedisKeyTypeError naming it, and
    no id of the batch is claimed."""
    fps, _ = corpus(3, 600)
    ids = [f"doc{i}" for i in range(len(fps))]
    with RedisSimhashIndex(redis_url, name, k=3) as index:
        index.add_many(ids[:100], fps[:100])
        bucket = index._logic.bucket_keys(0, fps[-1])[3]  # the last entry's last bucket
        client.set(bucket, b"x")
        with pytest.raises(RedisKeyTypeError, match=re.escape(bucket.decode())):
            index.add_many(ids[100:], fps[100:])
        assert len(index) == 100 and not any(i in index for i in ids[100:])
        assert index.query(fps[100]) == brute(dict(zip(ids[:100], fps[:100])), fps[100], 3)
    with RedisSimhashIndex(redis_url, name + ":s", k=3, shards=4) as index:
        index.add_many(ids[:100], fps[:100])
        victim = index._logic.id_keys[2]
        client.delete(victim)
        client.rpush(victim, b"x")
        before = [client.hlen(k) for k in index._logic.id_keys if k != victim]
        with pytest.raises(RedisKeyTypeError, match=re.escape(victim.decode())):
            index.add_many(ids[100:], fps[100:])
        assert [client.hlen(k) for k in index._logic.id_keys if k != victim] == before
        client.delete(victim)
        assert not any(i in index for i in ids[100:])
        index.drop()


def test_an_id_taken_between_check_and_write_undoes_the_batch(redis_url, name):
    """A concurrent writer that takes one of the batch's ids after the
    check round trip: the write of that chunk is refused, the chunks this
    call had written are removed again, and ValueError is raised."""
    fps, _ = corpus(5, 1500)
    ids = list(range(len(fps)))
    with RedisSimhashIndex(redis_url, name, k=3, shards=4) as index, \
            RedisSimhashIndex(redis_url, name, k=None) as other:
        logic, transport = index._logic, index._transport
        encs, arr = id_batch(ids, fps)
        op = logic.add_op(encs, arr)
        checks = next(op)  # the check round trip, run here by hand
        writes = op.send(transport.execute(checks))
        assert len(index) == 0
        other.add(ids[-1], fps[-1] ^ 0xFF)  # the other writer takes the last id
        undo = op.send(transport.execute(writes))  # the write: one chunk refused
        with pytest.raises(ValueError, match=f"id {ids[-1]} is already"):
            op.send(transport.execute(undo))
        assert len(index) == 1 and index.query(fps[0]) == []
        assert index.query(fps[-1] ^ 0xFF) == [(ids[-1], 0)]
        index.add_many(ids[:-1], fps[:-1])  # the rest can be stored after all
        assert len(index) == len(fps)
