"""Faults on a throwaway redis-server the test starts: a server down, a
restart in the middle of a batch (retried batches give the same answers),
a server that lost its data; and 8 crawler processes sharing one filter."""

import hashlib
import multiprocessing
import os
import threading
import uuid

import numpy as np
import pytest

from conftest import require_module

from crawldedup import StoreUnavailableError

redis = require_module("redis")

from crawldedup.redis import RedisBloomFilter, RedisDataLostError, RedisStore  # noqa: E402


def urls(lo, hi):
    return [f"https://example.com/item/{i}" for i in range(lo, hi)]


def no_retry(url):
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    return redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0))


def test_server_down_then_restarted_without_its_data(redis_server):
    address = f"127.0.0.1:{redis_server.port}"
    client = no_retry(redis_server.url)
    bf = RedisBloomFilter(client, "f", 10_000, 0.01, shards=2)
    store = RedisStore(client, "s")
    bf.add_many(urls(0, 100))
    store.add_many([hashlib.md5(u.encode()).digest() for u in urls(0, 100)])
    redis_server.stop()
    for call in (lambda: bf.add("x"), lambda: "x" in bf, lambda: bf.add_many(urls(0, 10)),
                 bf.estimated_count, lambda: store.add(bytes(16)), lambda: len(store)):
        with pytest.raises(StoreUnavailableError, match=address):
            call()
    redis_server.start()  # empty: it kept nothing
    with pytest.raises(RedisDataLostError, match="lost its data"):
        bf.contains_many(urls(0, 100))
    with pytest.raises(RedisDataLostError):
        bf.add_many(urls(0, 100))
    bf.clear()
    assert bf.add_many(urls(0, 100)).all()
    client.close()


@pytest.mark.parametrize("kind", ["bloom", "store"])
def test_batch_cut_by_a_restart_can_be_retried(redis_server, kind):
    """With persistence (a snapshot at shutdown), a batch cut by a restart
    raises; retried, it reports new only what the cut attempt had not added,
    never a key twice."""
    redis_server.extra = ["--save", "3600 1"]
    redis_server.restart()
    keys = urls(0, 150_000)
    client = no_retry(redis_server.url)
    if kind == "bloom":
        target = RedisBloomFilter(client, "f", 300_000, 0.001, shards=4)
        batch = keys
    else:
        target = RedisStore(client, "s")
        batch = [hashlib.md5(u.encode()).digest() for u in keys]
    before = target.add_many(batch[:1000])
    assert before.sum() >= 999
    timer = threading.Timer(0.05, redis_server.stop)
    timer.start()
    with pytest.raises(StoreUnavailableError, match=str(redis_server.port)):
        for _ in range(100):  # until the server goes away in the middle of one
            target.add_many(batch)
    timer.join()
    redis_server.start()
    present = target.contains_many(batch)
    assert present[:1000].all()  # the data survived the restart: no lost-data error
    retried = target.add_many(batch)
    assert not retried[:1000].any()
    # new now exactly where the cut attempt had not stored the key
    # (a Bloom filter may also call a few never-added keys seen: false positives)
    assert not (retried & present).any()
    if kind == "store":
        assert (retried == ~present).all()
    else:
        assert (~present & ~retried).mean() < 0.002
    assert not target.add_many(batch).any()  # and never new twice
    client.close()


def _crawler(args):
    url, name, kind, lo, seed = args
    keys = urls(lo, lo + 50_000)
    order = np.random.default_rng(seed).permutation(len(keys))
    keys = [keys[i] for i in order]
    if kind == "bloom":
        target = RedisBloomFilter(url, name)
    else:
        target = RedisStore(url, name)
        keys_in = [hashlib.md5(k.encode()).digest() for k in keys]
    flags = np.zeros(len(keys), dtype=np.bool_)
    for start in range(0, len(keys), 2000):
        chunk = keys[start:start + 2000] if kind == "bloom" else keys_in[start:start + 2000]
        flags[start:start + 2000] = target.add_many(chunk)
    target.close()
    index = np.array([lo + i for i in order])
    return index[flags]


def run_crawlers(url, name, kind):
    """8 processes, each adding 50,000 of 120,000 URLs (overlapping); how many
    processes called each URL new."""
    ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    jobs = [(url, name, kind, p * 10_000, p) for p in range(8)]
    with ctx.Pool(8) as pool:
        news = pool.map(_crawler, jobs)
    counts = np.zeros(120_000, dtype=np.int64)
    for new in news:
        np.add.at(counts, new, 1)
    return counts


def check_counts(counts, error_rate):
    assert counts.max() == 1  # never two crawlers fetching one URL
    missed = (counts == 0).mean()  # every one of them a false positive
    assert missed <= error_rate


def test_eight_crawlers_one_filter(redis_url):
    name = f"cdtest:{uuid.uuid4().hex[:12]}"
    bf = RedisBloomFilter(redis_url, name, 500_000, 0.01, shards=4)
    try:
        check_counts(run_crawlers(redis_url, name, "bloom"), 0.01)
    finally:
        bf.drop()


def test_eight_crawlers_one_store(redis_url):
    name = f"cdtest:{uuid.uuid4().hex[:12]}"
    try:
        counts = run_crawlers(redis_url, name, "store")
        assert (counts == 1).all()
    finally:
        with RedisStore(redis_url, name) as store:
            store.clear()


def test_eight_crawlers_on_the_cluster(redis_cluster_url):
    name = f"cdtest:{uuid.uuid4().hex[:12]}"
    bf = RedisBloomFilter(redis_cluster_url, name, 500_000, 0.01)
    try:
        assert bf.shards == 12  # four per master
        check_counts(run_crawlers(redis_cluster_url, name, "bloom"), 0.01)
    finally:
        bf.drop()
