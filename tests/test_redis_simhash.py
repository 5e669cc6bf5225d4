"""RedisSimhashIndex against brute force, on the Redis server and on the
3-master cluster the tests start."""

import uuid

import numpy as np
import pytest

from conftest import require_module
from hypothesis import given
from hypothesis import strategies as st

from crawldedup import SimhashIndex, StoreUnavailableError

redis = require_module("redis")

from conftest import require_service  # noqa: E402

from crawldedup.redis import RedisSimhashIndex  # noqa: E402


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
        finally:
            index.clear()
        assert len(index) == 0 and index.query(fps[0]) == []


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
            index.clear()


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
            index.clear()


def test_unreachable():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    client = redis.Redis(port=port, retry=Retry(NoBackoff(), 0))
    index = RedisSimhashIndex(client, "x")
    with pytest.raises(StoreUnavailableError, match=str(port)):
        index.query(5)
    client.close()
