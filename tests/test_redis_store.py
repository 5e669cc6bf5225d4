"""RedisStore against the real Redis: the FingerprintStore interface, a
model (a Python set) beside it, time windows, errors and bad input."""

import hashlib
import os
import socket
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import require_module, require_service
from crawldedup import StoreUnavailableError
from crawldedup.errors import CrawldedupError
from crawldedup.exact.stores import open_store

redis = require_module("redis")

from crawldedup.redis import RedisKeyTypeError, RedisStore  # noqa: E402


def md5(i):
    return hashlib.md5(str(i).encode()).digest()


@pytest.fixture
def name(redis_url):
    prefix = f"cdtest:{uuid.uuid4().hex[:12]}"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"*{prefix}*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def store(redis_url, name):
    with RedisStore(redis_url, name) as store:
        yield store


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def no_retry_client(port):
    """A client that fails at once (redis-py 6 retries refused connections
    with a backoff of seconds by default)."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    return redis.Redis(host="127.0.0.1", port=port, retry=Retry(NoBackoff(), 0))


def test_interface(store):
    a, b = md5(1), md5(2)
    assert store.add(a) is True
    assert store.add(a) is False
    assert a in store and b not in store
    assert len(store) == 1
    flags = store.add_many([b, a, b, md5(3)])
    assert flags.dtype == np.bool_ and flags.tolist() == [True, False, False, True]
    assert store.contains_many([a, b, md5(4)]).tolist() == [True, True, False]
    assert len(store) == 3
    store.clear()
    assert len(store) == 0 and a not in store


def test_large_batch_numpy_and_repeats_across_chunks(store):
    fps = np.array([md5(i) for i in range(10_000)], dtype="S16")
    batch = np.concatenate([fps, fps[::-1]])  # repeats land in other script calls
    flags = store.add_many(batch)
    assert flags[:10_000].all() and not flags[10_000:].any()
    assert len(store) == 10_000
    assert store.contains_many(fps).all()
    assert not store.contains_many([md5(-i) for i in range(1, 100)]).any()


@given(st.lists(st.lists(st.integers(0, 40), max_size=30), max_size=6))
def test_model(batches):
    redis_url = require_service("redis")
    name = f"cdtest:{uuid.uuid4().hex[:12]}"
    with RedisStore(redis_url, name, digest_size=4) as store:
        try:
            model = set()
            for batch in batches:
                fps = [i.to_bytes(4, "big") for i in batch]
                expected = []
                for fp in fps:
                    expected.append(fp not in model)
                    model.add(fp)
                assert store.add_many(fps).tolist() == expected
                assert len(store) == len(model)
            probe = [i.to_bytes(4, "big") for i in range(41)]
            assert store.contains_many(probe).tolist() == [fp in model for fp in probe]
        finally:
            store.clear()  # the digests; the metadata key stays
            store._transport.client.delete(store._logic.meta_key)


def test_windows_forget_after_the_window(redis_url, name):
    now = [time.time()]  # a clock the test moves forward
    with RedisStore(redis_url, name, window=100, windows=4, clock=lambda: now[0]) as store:
        assert store.add(md5(1)) is True
        now[0] += 60
        assert store.add(md5(1)) is False and md5(1) in store
        assert store.add_many([md5(2), md5(1)]).tolist() == [True, False]
        assert len(store) == 2
        now[0] += 99  # 159 s after md5(1): forgotten after window*(1 + 1/windows) at most
        assert md5(1) not in store and md5(2) in store
        assert store.add(md5(1)) is True
        now[0] += 90
        assert md5(2) not in store and md5(1) in store
        client = redis.Redis.from_url(redis_url)
        ttls = [client.pttl(k) for k in client.scan_iter(match=f"*{name}*")
                if k != f"{name}:meta".encode()]
        client.close()
        assert ttls and all(t > 0 for t in ttls)  # every time slot's key expires by itself


def test_window_arguments(redis_url, name):
    with pytest.raises(ValueError, match="window"):
        RedisStore(redis_url, name, window=0)
    with pytest.raises(TypeError, match="window"):
        RedisStore(redis_url, name, window="7d")
    with pytest.raises(ValueError, match="windows needs window"):
        RedisStore(redis_url, name, windows=3)
    with pytest.raises(ValueError, match="windows"):
        RedisStore(redis_url, name, window=10, windows=0)


def test_bad_input_changes_nothing(store):
    with pytest.raises(TypeError, match="not str"):
        store.add("https://example.com/")
    with pytest.raises(ValueError, match="exactly 16 bytes"):
        store.add_many([md5(1), b"short"])
    with pytest.raises(TypeError, match="single bytes"):
        store.add_many(md5(1))
    with pytest.raises(ValueError, match="S16"):
        store.add_many(np.zeros(3, dtype="S8"))
    assert len(store) == 0
    with pytest.raises(TypeError, match="name"):
        RedisStore("redis://127.0.0.1:6379/0", 42)
    with pytest.raises(ValueError, match="name"):
        RedisStore("redis://127.0.0.1:6379/0", "")
    with pytest.raises(TypeError, match="client_or_url"):
        RedisStore(3.5, "x")
    with pytest.raises(ValueError, match="Redis URL"):
        RedisStore("http://127.0.0.1:6379/0", "x")


def test_wrong_type_key_names_the_key(redis_url, name):
    """A name that holds another Redis type than a set (0.1.0's layout) is
    refused when the store opens, naming the key."""
    client = redis.Redis.from_url(redis_url)
    client.set(name, b"a string")
    client.close()
    with pytest.raises(RedisKeyTypeError, match=name) as info:
        RedisStore(redis_url, name)
    assert isinstance(info.value, CrawldedupError)


def test_a_bucket_of_another_type_is_named(store):
    store.add(md5(1))
    key = store._logic.bucket_key(0)
    client = store._transport.client
    client.set(key, b"not a hash")
    zeros = [bytes(16)]  # the digest of bucket 0
    with pytest.raises(RedisKeyTypeError, match=key.decode()):
        store.add_many(zeros)
    with pytest.raises(RedisKeyTypeError, match=key.decode()):
        store.contains_many(zeros)
    client.delete(key)


def test_unreachable_server_names_the_address(redis_server):
    port = free_port()
    with pytest.raises(StoreUnavailableError, match=f"127.0.0.1:{port}"):
        RedisStore(f"redis://127.0.0.1:{port}/0", "x")
    with pytest.raises(StoreUnavailableError, match=f"127.0.0.1:{port}"):
        RedisStore(no_retry_client(port), "x")  # opening reads the metadata
    client = no_retry_client(redis_server.port)
    store = RedisStore(client, "x")
    redis_server.stop()
    for call in (lambda: store.add(md5(1)), lambda: md5(1) in store, lambda: len(store),
                 lambda: store.add_many([md5(2)] * 3), store.clear):
        with pytest.raises(StoreUnavailableError, match=f"127.0.0.1:{redis_server.port}"):
            call()


def test_open_store_and_stores_export(redis_url, name):
    import crawldedup.exact.stores
    assert crawldedup.exact.stores.RedisStore is RedisStore
    with open_store(f"{redis_url.rstrip('/0')}/0/{name}") as store:
        assert isinstance(store, RedisStore) and store.name == name
        assert store.add(md5(7)) is True
    with open_store(redis_url, table=name, digest_size=16) as store:
        assert store.name == name and md5(7) in store


def test_closed_store(redis_url, name):
    store = RedisStore(redis_url, name)
    store.close()
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.add(md5(1))


def test_missing_redis_py_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['redis'] = None\n"
            "import crawldedup.exact.stores, crawldedup.redis\n"
            "try:\n"
            "    crawldedup.redis.RedisStore('redis://127.0.0.1:6379/0', 'x')\n"
            "except ImportError as exc:\n"
            "    print(exc)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout
    assert "pip install 'crawldedup[redis]'" in out


def test_on_the_cluster(redis_cluster_url):
    name = f"cdtest:{uuid.uuid4().hex[:12]}"
    now = [time.time()]
    with RedisStore(redis_cluster_url, name) as plain, \
            RedisStore(redis_cluster_url, name + ":w", window=60, windows=2,
                       clock=lambda: now[0]) as windowed:
        assert plain.address.startswith("Redis Cluster")
        fps = [md5(i) for i in range(5000)]
        for store in (plain, windowed):
            assert store.add_many(fps).all() and not store.add_many(fps).any()
            assert store.contains_many(fps[:10] + [md5(-1)]).tolist() == [True] * 10 + [False]
            assert len(store) == 5000
        now[0] += 100  # forgotten after window * (1 + 1/windows) at most
        assert not windowed.contains_many(fps).any()
        plain.clear()
        windowed.clear()
        assert len(plain) == 0
