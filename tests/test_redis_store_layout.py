"""RedisStore's layouts against the real Redis: the bucket layout held to a
Python set (hypothesis), its memory per digest, its metadata key and that
key's damage, and stores of crawldedup 0.1.0's layout (a Redis set, no
metadata key) opened by this release."""

import hashlib
import json
import time
import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples, require_module, require_service
from crawldedup.errors import CorruptStateError, IncompatibleFilterError

redis = require_module("redis")

from crawldedup.redis import RedisKeyTypeError, RedisStore  # noqa: E402
from crawldedup.redis.store import (  # noqa: E402
    ADD_SCRIPT,
    ADD_WINDOWED_SCRIPT,
    RUN,
    bucket_layout,
    buckets_of,
)


def md5(i):
    return hashlib.md5(str(i).encode()).digest()


def delete_prefixed(url, prefix):
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"*{prefix}*", count=10_000))
    for start in range(0, len(keys), 10_000):
        client.delete(*keys[start:start + 10_000])
    client.close()


@pytest.fixture
def name(redis_url):
    prefix = f"cdtest:{uuid.uuid4().hex[:12]}"
    yield prefix
    delete_prefixed(redis_url, prefix)


@pytest.fixture
def client(redis_url):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


# ---- the bucket layout

def test_sizing_follows_the_capacity():
    # (prefix bytes, multiplier): 256**prefix * multiplier buckets, at most FILL a bucket
    assert bucket_layout(1, 16) == (0, 1)
    assert bucket_layout(25_600, 16) == (1, 1)
    assert bucket_layout(1_000_000, 16) == (1, 40)  # 10,240 buckets: 98 a bucket
    assert bucket_layout(10_000_000, 16) == (2, 2)
    assert bucket_layout(10 ** 12, 16) == (3, 597)
    assert bucket_layout(10 ** 12, 2) == (1, 256)  # a 2-byte digest: at most 65,536 buckets
    assert bucket_layout(10 ** 6, 1) == (0, 256)
    for capacity in (1, 99, 5_000, 123_457, 10 ** 7, 3 * 10 ** 9):
        prefix, multiplier = bucket_layout(capacity, 16)
        assert capacity / (256 ** prefix * multiplier) <= 100


@given(st.binary(min_size=16, max_size=16), st.integers(1, 10 ** 10))
def test_a_bucket_implies_the_prefix_it_takes_off(digest, capacity):
    """Two digests with the same field (the digest without the prefix
    bytes) in the same bucket are the same digest."""
    prefix, multiplier = bucket_layout(capacity, 16)
    rows = np.frombuffer(digest, dtype=np.uint8).reshape(1, 16)
    bucket = int(buckets_of(rows, prefix, multiplier)[0])
    assert 0 <= bucket < 256 ** prefix * multiplier
    assert bucket // multiplier == int.from_bytes(digest[:prefix], "big")


def test_interface_and_layout(redis_url, name, client):
    with RedisStore(redis_url, name, capacity=50_000) as store:
        assert store.layout == "buckets" and store.capacity == 50_000
        fps = [md5(i) for i in range(20_000)]
        assert store.add_many(fps).all()
        assert not store.add_many(fps[::-1]).any()
        assert len(store) == 20_000
        assert store.contains_many(fps).all()
        assert not store.contains_many([md5(-i) for i in range(1, 500)]).any()
        meta = json.loads(client.get(f"{name}:meta"))
        assert meta == {"format": 1, "kind": "store", "layout": "buckets", "digest_size": 16,
                        "capacity": 50_000, "prefix_bytes": 1, "buckets": 512, "groups": 1,
                        "window": None, "windows": None}
        buckets = [k for k in client.scan_iter(match=f"{{{name}}}:*") if k[-4:] != b"ount"]
        assert 400 < len(buckets) <= 512
        assert {client.object("encoding", k) for k in buckets[:50]} == {b"listpack"}
        field_sizes = {len(f) for f in client.hkeys(buckets[0])}
        assert field_sizes == {15}  # the prefix byte is the bucket's
        store.clear()
        assert len(store) == 0 and not store.contains_many(fps[:100]).any()
        assert [k for k in client.scan_iter(match=f"*{name}*")] == [f"{name}:meta".encode()]


def test_one_bucket_beyond_runs_and_chunks(redis_url, name):
    """capacity 1: one bucket takes every digest, so a call's fields are cut
    into runs of RUN; repeats across runs and calls count new once."""
    with RedisStore(redis_url, name, capacity=1) as store:
        fps = np.array([md5(i) for i in range(3 * RUN + 17)], dtype="S16")
        batch = np.concatenate([fps, fps[:RUN + 5], fps[::-1]])
        flags = store.add_many(batch)
        assert flags[:len(fps)].all() and not flags[len(fps):].any()
        assert len(store) == len(fps)
        assert store.contains_many(batch).all()


def test_digests_that_share_a_field_in_other_buckets(redis_url, name):
    """Digests equal but for their prefix byte are different digests."""
    with RedisStore(redis_url, name, capacity=30_000) as store:
        assert store._logic.prefix == 1
        fps = [bytes([b]) + bytes(15) for b in range(256)]
        assert store.add_many(fps + fps).tolist() == [True] * 256 + [False] * 256
        assert len(store) == 256


@pytest.mark.parametrize("capacity, digest_size", [(1, 2), (1_000, 2), (1_000, 16),
                                                   (None, 16), (None, 1)])
def test_model(capacity, digest_size):
    """The store against a Python set over random sequences of add,
    add_many and contains_many, on small pools (repeats) and, with capacity
    1, one bucket."""
    redis_url = require_service("redis")

    ops = st.lists(st.tuples(st.sampled_from(["add", "add_many", "contains"]),
                             st.lists(st.integers(0, 300), max_size=60)), max_size=8)

    @settings(max_examples=examples(0.3))
    @given(ops)
    def run(steps):
        name = f"cdtest:{uuid.uuid4().hex[:12]}"
        try:
            with RedisStore(redis_url, name, digest_size, capacity=capacity) as store:
                model = set()
                for op, values in steps:
                    fps = [(v * 2654435761 % 2 ** 32).to_bytes(4, "big")[-digest_size:]
                           .rjust(digest_size, b"\x07") for v in values]
                    if op == "add":
                        for fp in fps[:3]:
                            assert store.add(fp) is (fp not in model)
                            model.add(fp)
                    elif op == "add_many":
                        expected = []
                        for fp in fps:
                            expected.append(fp not in model)
                            model.add(fp)
                        assert store.add_many(fps).tolist() == expected
                    else:
                        assert store.contains_many(fps).tolist() == [fp in model for fp in fps]
                    assert len(store) == len(model)
        finally:
            delete_prefixed(redis_url, name)

    run()


def test_windows_with_buckets(redis_url, name, client):
    now = [time.time()]
    with RedisStore(redis_url, name, capacity=1000, window=100, windows=4,
                    clock=lambda: now[0]) as store:
        assert store.layout == "buckets"
        fps = [md5(i) for i in range(300)]
        assert store.add_many(fps[:200]).all()
        now[0] += 60
        assert store.add_many(fps).tolist() == [False] * 200 + [True] * 100
        assert len(store) == 300
        keys = [k for k in client.scan_iter(match=f"*{name}*") if not k.endswith(b":meta")]
        assert keys and all(client.pttl(k) > 0 for k in keys)  # every slot's keys expire
        now[0] += 100  # the first 200 are past window * (1 + 1/windows)
        assert store.contains_many(fps).tolist() == [False] * 200 + [True] * 100
        assert store.add_many(fps[:2]).all() and len(store) == 102
        store.clear()
        assert len(store) == 0


def test_listpack_limits_below_the_layout_s_fill_warn(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    client.config_set("hash-max-listpack-entries", 64)
    with pytest.warns(RuntimeWarning, match="hash-max-listpack-entries=64"):
        RedisStore(redis_server.url, "low").close()
    client.config_set("hash-max-listpack-entries", 512)
    client.config_set("hash-max-listpack-value", 8)
    with pytest.warns(RuntimeWarning, match="become hash tables"):
        RedisStore(redis_server.url, "low").close()
    client.close()


def test_memory_per_digest(redis_server):
    """The format's property: at most 24 bytes of Redis memory per 16-byte
    digest, summed MEMORY USAGE over the store's keys and the growth of
    used_memory, at 200,000 digests in a store of that capacity."""
    n = 200_000
    client = redis.Redis.from_url(redis_server.url)
    digests = np.random.default_rng(5).integers(0, 256, size=(n, 16), dtype=np.uint8)
    digests = np.ascontiguousarray(digests).view("S16").ravel()
    before = client.info("memory")["used_memory"]
    with RedisStore(redis_server.url, "mem", capacity=n) as store:
        for start in range(0, n, 50_000):
            assert store.add_many(digests[start:start + 50_000]).all()
        assert len(store) == n
    grown = client.info("memory")["used_memory"] - before
    keys = list(client.scan_iter(count=10_000))
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key, samples=0)
    usage = sum(pipe.execute())
    client.close()
    assert usage / n <= 24, usage / n
    assert grown / n <= 24, grown / n


# ---- the metadata key

def test_other_parameters_are_refused(redis_url, name):
    RedisStore(redis_url, name, capacity=1000).close()
    with RedisStore(redis_url, name) as store:  # capacity=None: the stored one
        assert store.capacity == 1000
    for kwargs, words in [({"capacity": 2000}, "capacity 2000 != 1000"),
                          ({"digest_size": 20}, "digest_size 20 != 16"),
                          ({"window": 60}, "window 60.0 != None")]:
        with pytest.raises(IncompatibleFilterError, match=words):
            RedisStore(redis_url, name, **kwargs)


def test_another_structure_s_metadata_is_refused(redis_url, name, client):
    client.set(f"{name}:meta", json.dumps({"format": 1, "kind": "bloom"}))
    with pytest.raises(IncompatibleFilterError, match=f"{name}:meta.*'bloom'"):
        RedisStore(redis_url, name)
    client.set(f"{name}:meta", json.dumps({"format": 2, "kind": "store"}))
    with pytest.raises(IncompatibleFilterError, match="format 2"):
        RedisStore(redis_url, name)


def _edit(meta, **changes):
    out = dict(meta, **changes)
    return {k: v for k, v in out.items() if v is not ...}


@pytest.mark.parametrize("change, words", [
    (lambda m: b"{not json", "is not crawldedup store metadata"),
    (lambda m: b"[1, 2]", "is not crawldedup store metadata"),
    (lambda m: _edit(m, layout=...), "has no 'layout'"),
    (lambda m: _edit(m, layout="list"), "holds layout 'list'"),
    (lambda m: _edit(m, digest_size="16"), "holds digest_size '16'"),
    (lambda m: _edit(m, capacity=0), "holds capacity 0"),
    (lambda m: _edit(m, capacity=10 ** 9), "holds prefix_bytes 1, not 2, which capacity"),
    (lambda m: _edit(m, buckets=1024), "holds buckets 1024, not 512"),
    (lambda m: _edit(m, groups=0), "holds groups 0"),
    (lambda m: _edit(m, windows=3), "holds windows 3"),
    (lambda m: _edit(m, window=-1), "holds window -1"),
    (lambda m: _edit(m, extra=1), "never writes: \\['extra'\\]"),
])
def test_damaged_metadata_is_named(redis_url, name, client, change, words):
    RedisStore(redis_url, name, capacity=50_000).close()
    meta = json.loads(client.get(f"{name}:meta"))
    damaged = change(meta)
    client.set(f"{name}:meta", damaged if isinstance(damaged, bytes) else json.dumps(damaged))
    with pytest.raises(CorruptStateError, match=f"{name}:meta.*{words}") as info:
        RedisStore(redis_url, name)
    assert info.value.path is None and name in info.value.where


@pytest.mark.parametrize("window", [None, 3600])
def test_lost_metadata_beside_remaining_buckets_is_named(redis_url, name, client, window):
    """Deleted metadata is not a new store: another capacity would map the
    digests to other buckets and answer "new" for stored ones."""
    kwargs = {} if window is None else {"window": window}
    with RedisStore(redis_url, name, capacity=50_000, **kwargs) as store:
        store.add_many([md5(i) for i in range(1000)])
    client.delete(f"{name}:meta")
    with pytest.raises(CorruptStateError, match=f"{name}:meta.*missing"):
        RedisStore(redis_url, name, capacity=5_000_000, **kwargs)
    assert client.get(f"{name}:meta") is None  # nothing written


def test_a_metadata_key_of_another_type_is_named(redis_url, name, client):
    client.hset(f"{name}:meta", "a", "b")
    with pytest.raises(RedisKeyTypeError, match=f"{name}:meta"):
        RedisStore(redis_url, name)


def test_a_damaged_counter_is_named(redis_url, name, client):
    with RedisStore(redis_url, name, capacity=1000) as store:
        store.add(md5(1))
        client.set(store._logic._counters(0)[0], b"many")
        with pytest.raises(CorruptStateError, match="count"):
            len(store)


def test_concurrent_opens_agree(redis_url, name):
    stores = [RedisStore(redis_url, name, capacity=5000) for _ in range(4)]
    try:
        flags = [s.add_many([md5(i) for i in range(100)]) for s in stores]
        assert flags[0].all() and not any(f.any() for f in flags[1:])
    finally:
        for s in stores:
            s.close()


# ---- stores of crawldedup 0.1.0's layout: a Redis set, no metadata key

def test_a_set_of_the_old_layout_is_kept(redis_url, name, client):
    """A store that 0.1.0's code path wrote (its script, its set, no
    metadata key) is opened in the set layout, and stays in it."""
    old = [md5(i) for i in range(5000)]
    for start in range(0, len(old), 4096):  # 0.1.0's add: its script, 4,096 a call
        client.eval(ADD_SCRIPT, 1, name, *old[start:start + 4096])
    assert client.exists(f"{name}:meta") == 0
    with RedisStore(redis_url, name) as store:
        assert store.layout == "set" and store.capacity is None
        assert len(store) == 5000 and store.contains_many(old).all()
        assert store.add_many([old[0], md5(-1), md5(-1)]).tolist() == [False, True, False]
        assert client.scard(name) == 5001  # the same set
        assert store.add_many_once([md5(-2), old[1]], b"r").tolist() == [True, False]
        assert store.add_many_once([md5(-2), old[1]], b"r").tolist() == [True, False]
        store.clear()
    assert json.loads(client.get(f"{name}:meta"))["layout"] == "set"
    with RedisStore(redis_url, name) as store:  # cleared, it keeps its layout
        assert store.layout == "set" and store.add(md5(3)) and client.scard(name) == 1
    # a 0.1.0 crawler still writing the set meanwhile: both see each other's
    client.eval(ADD_SCRIPT, 1, name, md5(4))
    with RedisStore(redis_url, name) as store:
        assert md5(4) in store


def test_a_windowed_set_of_the_old_layout_is_kept(redis_url, name, client):
    now = time.time()
    slot = int(now // 50)
    key = f"{{{name}}}:{slot}"
    expire = int((slot + 3) * 50 * 1000)
    client.eval(ADD_WINDOWED_SCRIPT, 1, key, expire, md5(1), md5(2))
    with RedisStore(redis_url, name, window=100, windows=2, clock=lambda: now) as store:
        assert store.layout == "set"
        assert store.add_many([md5(1), md5(3)]).tolist() == [False, True]
        assert client.scard(key) == 3 and len(store) == 3


def test_a_new_name_gets_buckets_and_an_old_one_keeps_its_set_concurrently(redis_url, name,
                                                                          client):
    client.sadd(name, md5(1))
    stores = [RedisStore(redis_url, name) for _ in range(3)]
    try:
        assert {s.layout for s in stores} == {"set"}
        assert [s.add(md5(2)) for s in stores] == [True, False, False]
    finally:
        for s in stores:
            s.close()
