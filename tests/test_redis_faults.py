"""Faults on a throwaway redis-server the test starts: a server down, a
restart in the middle of a batch (retried batches give the same answers),
a server that lost its data, a server or a client killed in the middle of
a SimHash index batch; and 8 crawler processes sharing one filter."""

import hashlib
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import pytest

from conftest import require_module
from crawldedup import StoreUnavailableError

redis = require_module("redis")

from crawldedup.redis import RedisBloomFilter, RedisDataLostError, RedisSimhashIndex, RedisStore  # noqa: E402


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
            store._transport.client.delete(store._logic.meta_key)  # cleared, it stays


def test_eight_crawlers_on_the_cluster(redis_cluster_url):
    name = f"cdtest:{uuid.uuid4().hex[:12]}"
    bf = RedisBloomFilter(redis_cluster_url, name, 500_000, 0.01)
    try:
        assert bf.shards == 12  # four per master
        check_counts(run_crawlers(redis_cluster_url, name, "bloom"), 0.01)
    finally:
        bf.drop()


# ------------------------------------------------- SimHash index: cut batches

def fingerprints(n, seed=11):
    return np.random.default_rng(seed).integers(0, 2 ** 63, size=n, dtype=np.int64) \
        .astype(np.uint64)


def self_found(index, fps):
    """How many of ids 0..n-1 a query of their own fingerprint finds."""
    offsets, ids, dists = index.query_many(fps)
    hits = 0
    for i in range(len(fps)):
        lo, hi = offsets[i], offsets[i + 1]
        hits += bool(((ids[lo:hi] == i) & (dists[lo:hi] == 0)).any())
    return hits


def kill_when_writing(kill, watch_url, threshold=2000, timeout=120):
    """kill() once the server holds more than threshold keys: the batch is
    then in the middle of its writes (they create the bucket keys)."""
    watcher = redis.Redis.from_url(watch_url)
    deadline = time.monotonic() + timeout
    try:
        while watcher.dbsize() <= threshold:
            assert time.monotonic() < deadline, "the batch never started writing"
    finally:
        watcher.close()
    kill()


def check_whole_then_retry(url, name, ids, fps):
    """After a cut batch: every stored entry is found by its fingerprint
    (none claimed without its buckets); the same batch sent again stores
    the rest, and then every fingerprint is found."""
    client = no_retry(url)
    with RedisSimhashIndex(client, name, k=3) as index:
        stored = len(index)
        assert self_found(index, fps) == stored
        assert 0 < stored < len(fps)  # the kill did cut the batch
        index.add_many(ids, fps)  # the retry: the same answer, no error
        assert len(index) == len(fps)
        assert self_found(index, fps) == len(fps)
        index.add_many(ids, fps)  # and again: nothing to do
        assert len(index) == len(fps)
    client.close()


def test_simhash_batch_cut_by_a_killed_server(redis_server):
    """kill -9 of the server (every write logged: appendfsync always) in the
    middle of an add_many: what it had stored is whole, and the retry of
    the batch completes it."""
    redis_server.extra = ["--appendonly", "yes", "--appendfsync", "always"]
    redis_server.restart()
    n = 40_000
    fps, ids = fingerprints(n), np.arange(n, dtype=np.uint64)
    client = no_retry(redis_server.url)
    index = RedisSimhashIndex(client, "sim", k=3)
    killer = threading.Thread(target=kill_when_writing,
                              args=(redis_server.proc.kill, redis_server.url))
    killer.start()
    with pytest.raises(StoreUnavailableError, match=str(redis_server.port)):
        index.add_many(ids, fps)
    killer.join()
    index.close()
    client.close()
    redis_server.proc.wait()
    redis_server.start()  # reloads the append-only file
    check_whole_then_retry(redis_server.url, "sim", ids, fps)


CLIENT = """
import sys
import numpy as np
from crawldedup.redis import RedisSimhashIndex
n = int(sys.argv[2])
fps = np.random.default_rng(11).integers(0, 2 ** 63, size=n, dtype=np.int64).astype(np.uint64)
with RedisSimhashIndex(sys.argv[1], "sim", k=3) as index:
    index.add_many(np.arange(n, dtype=np.uint64), fps)
"""


def test_simhash_batch_cut_by_a_killed_client(redis_server, tmp_path):
    """kill -9 of a crawler in the middle of its add_many: the entries it
    stored are whole, and the batch sent again by another process
    completes it."""
    n = 40_000
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    proc = subprocess.Popen([sys.executable, str(script), redis_server.url, str(n)],
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        kill_when_writing(proc.kill, redis_server.url)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:  # pragma: no cover - only when the test failed
            proc.kill()
            proc.wait()
    check_whole_then_retry(redis_server.url, "sim", np.arange(n, dtype=np.uint64),
                           fingerprints(n))
