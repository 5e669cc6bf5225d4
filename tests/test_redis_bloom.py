"""RedisBloomFilter against the real Redis: the BloomFilter interface, the
same bits as a local filter, export/import, metadata, shards, faults."""

import asyncio
import threading
import time
import uuid

import numpy as np
import pytest

from conftest import require_module
from crawldedup import BloomFilter, IncompatibleFilterError, StoreUnavailableError

redis = require_module("redis")

from crawldedup.redis import (  # noqa: E402
    AsyncRedisBloomFilter,  # noqa: E402
    RedisBloomFilter,
    RedisDataLostError,
    RedisKeyTypeError,
)
from crawldedup.redis._bloom_logic import CREATION_WAIT  # noqa: E402


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


def urls(n, host="example.com"):
    return [f"https://{host}/page/{i}" for i in range(n)]


def test_interface(redis_url, name):
    with RedisBloomFilter(redis_url, name, 1000, 0.01) as bf:
        assert bf.add("https://example.com/a") is True
        assert bf.add("https://example.com/a") is False
        assert "https://example.com/a" in bf and "https://example.com/b" not in bf
        flags = bf.add_many(["x", b"y", "x", memoryview(b"z")])
        assert flags.dtype == np.bool_ and flags.tolist() == [True, True, False, True]
        assert bf.contains_many(["x", "y", "nope"]).tolist() == [True, True, False]
        assert len(bf) == bf.estimated_count() == 4
        assert 0 < bf.fill_ratio < 0.05
        bf.clear()
        assert "x" not in bf and len(bf) == 0 and bf.fill_ratio == 0
        assert bf.add("x") is True


@pytest.mark.parametrize("shards", [1, 7])
def test_same_bits_as_a_local_filter(redis_url, name, shards):
    keys = urls(3000) + ["新闻", b"\x00\xff", ""]
    local = BloomFilter(2000, 0.01, layout="blocked", seed=5)
    with RedisBloomFilter(redis_url, name, 2000, 0.01, shards=shards, seed=5) as bf:
        assert (bf.num_bits, bf.num_hashes, bf.shards) == (local.num_bits, local.num_hashes,
                                                           shards)
        assert len(set(bf.shard_keys)) == shards
        assert bf.add_many(keys).tolist() == local.add_many(keys).tolist()
        probe = urls(3000, "other.org")
        assert bf.contains_many(probe).tolist() == local.contains_many(probe).tolist()
        copy = bf.to_bloom_filter()
        assert copy == local
        assert bf.fill_ratio == pytest.approx(local.fill_ratio)
        assert bf.estimated_count() == local.estimated_count()


def test_standard_layout_one_shard(redis_url, name):
    local = BloomFilter(500, 0.001)
    with RedisBloomFilter(redis_url, name, 500, 0.001, layout="standard") as bf:
        keys = urls(700)
        assert bf.add_many(keys).tolist() == local.add_many(keys).tolist()
        assert bf.to_bloom_filter() == local
    with pytest.raises(ValueError, match="blocked"):
        RedisBloomFilter(redis_url, name + "x", 500, 0.001, layout="standard", shards=2)


def test_export_and_import(redis_url, name, tmp_path):
    path = tmp_path / "seen.bloom"
    keys = urls(1500)
    with RedisBloomFilter(redis_url, name, 1000, 0.01, shards=3) as bf:
        bf.add_many(keys)
        bf.export(path)
    loaded = BloomFilter.load(path)
    assert loaded.layout == "blocked" and loaded.contains_many(keys).all()
    with RedisBloomFilter.import_file(path, redis_url, name + ":copy", shards=2) as copy:
        assert copy.shards == 2
        assert copy.contains_many(keys).all()
        assert copy.to_bloom_filter() == loaded
        assert copy.add(keys[0]) is False and copy.add("new one") is True
    with pytest.raises(ValueError, match="exists"):
        RedisBloomFilter.import_file(path, redis_url, name + ":copy")
    with RedisBloomFilter.import_file(path, redis_url, name + ":copy", replace=True) as again:
        assert "new one" not in again and keys[5] in again


def test_metadata(redis_url, name, client):
    with RedisBloomFilter(redis_url, name, 5000, 0.01, shards=4) as bf:
        bf.add("kept")
    with RedisBloomFilter(redis_url, name) as reopened:  # parameters from the metadata key
        assert (reopened.capacity, reopened.error_rate, reopened.shards) == (5000, 0.01, 4)
        assert "kept" in reopened
    with pytest.raises(IncompatibleFilterError, match="capacity 6000 != 5000"):
        RedisBloomFilter(redis_url, name, 6000, 0.01)
    with pytest.raises(IncompatibleFilterError, match="error_rate"):
        RedisBloomFilter(redis_url, name, 5000, 0.02)
    with pytest.raises(IncompatibleFilterError, match="shards 2 != 4"):
        RedisBloomFilter(redis_url, name, 5000, 0.01, shards=2)
    with pytest.raises(ValueError, match="no crawldedup filter"):
        RedisBloomFilter(redis_url, name + ":none")
    client.set(name + ":bad:meta", b"not json")
    with pytest.raises(IncompatibleFilterError, match="not crawldedup filter metadata"):
        RedisBloomFilter(redis_url, name + ":bad", 10)
    client.set(name + ":v9:meta", b'{"format": 9, "kind": "bloom"}')
    with pytest.raises(IncompatibleFilterError, match="format 9"):
        RedisBloomFilter(redis_url, name + ":v9", 10)


def test_wrong_type_names_the_key(redis_url, name, client):
    client.rpush(name + ":meta", b"x")
    with pytest.raises(RedisKeyTypeError, match=f"{name}:meta"):
        RedisBloomFilter(redis_url, name, 100)
    with RedisBloomFilter(redis_url, name + "2", 100, shards=1) as bf:
        key = bf.shard_keys[0]
        client.delete(key)
        client.rpush(key, b"x")
        with pytest.raises(RedisKeyTypeError, match="bits"):
            bf.add("a")


def test_lost_shard_is_reported_not_treated_as_empty(redis_url, name, client):
    with RedisBloomFilter(redis_url, name, 1000, 0.01, shards=2) as bf:
        bf.add_many(urls(200))
        client.delete(bf.shard_keys[1])  # what a restart without persistence does
        with pytest.raises(RedisDataLostError, match="lost its data") as info:
            bf.contains_many(urls(200))
        assert isinstance(info.value, StoreUnavailableError)
        with pytest.raises(RedisDataLostError):
            bf.add_many(urls(200))
        with pytest.raises(RedisDataLostError):  # still, after the add recreated the key
            bf.add_many(urls(200))
        with pytest.raises(RedisDataLostError):
            RedisBloomFilter(redis_url, name)
        bf.clear()  # starts afresh
        assert bf.add_many(urls(200)).all()


def test_an_open_racing_the_creator_waits_for_its_shards(redis_url, name, client):
    """A creator writes the metadata key (SET NX), then the shards: a
    process opening the filter in between finds the metadata without the
    shards.  It waits for them (CREATION_WAIT) instead of reporting lost
    data; shards that never come are lost data, reported after the wait."""
    with RedisBloomFilter(redis_url, name, 1000, 0.01, shards=3) as bf:
        shards = {key: client.get(key) for key in bf.shard_keys}
    for opener in ("sync", "async"):
        client.delete(*shards)  # the moment between the creator's two steps
        creator = threading.Timer(0.3, lambda: client.mset(shards))
        creator.start()
        try:
            if opener == "sync":
                with RedisBloomFilter(redis_url, name) as other:
                    assert other.add_many(urls(100)).all()
            else:
                async def open_and_add():
                    other = await AsyncRedisBloomFilter.open(redis_url, name)
                    try:
                        return await other.add_many(urls(100))
                    finally:
                        await other.aclose()
                assert asyncio.run(open_and_add()).all()
        finally:
            creator.join()
    client.delete(bf.shard_keys[2])  # lost for good
    started = time.monotonic()
    with pytest.raises(RedisDataLostError, match="lost its data"):
        RedisBloomFilter(redis_url, name)
    assert time.monotonic() - started >= CREATION_WAIT


def test_bad_input_changes_nothing(redis_url, name):
    with RedisBloomFilter(redis_url, name, 1000) as bf:
        with pytest.raises(TypeError, match="int"):
            bf.add_many(["a", "b", 3])
        with pytest.raises(UnicodeEncodeError):
            bf.add_many(["a", "\ud800"])
        with pytest.raises(TypeError, match="single str"):
            bf.add_many("abc")
        assert bf.fill_ratio == 0
    for args, error in [((0,), ValueError), ((10, 1.5), ValueError), ((10, "x"), TypeError)]:
        with pytest.raises(error):
            RedisBloomFilter(redis_url, name + "b", *args)
    with pytest.raises(ValueError, match="shards"):
        RedisBloomFilter(redis_url, name + "c", 10, shards=0)
    with pytest.raises(TypeError, match="name"):
        RedisBloomFilter(redis_url, None, 10)


def test_false_positive_rate_within_bound(redis_url, name):
    n = 20_000
    with RedisBloomFilter(redis_url, name, n, 0.01, shards=3) as bf:
        bf.add_many(urls(n))
        fp = bf.contains_many(urls(50_000, "absent.org")).mean()
    assert fp <= 0.011


def test_unreachable_server(redis_url, name):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreUnavailableError, match=f"127.0.0.1:{port}"):
        RedisBloomFilter(f"redis://127.0.0.1:{port}/0", name, 10)


def test_a_bad_buffer_late_in_a_batch_changes_nothing(redis_url, name):
    """Every key's buffer is checked before the first command is sent, as
    the local BloomFilter checks it (the same check): a non-contiguous numpy key at position
    50,000 of 60,000 leaves the filter as it was."""
    keys = urls(60_000)
    keys[50_000] = np.arange(16, dtype=np.uint8)[::2]  # a strided view
    local = BloomFilter(100_000, 0.01, layout="blocked")
    with pytest.raises((TypeError, ValueError), match="contiguous"):
        local.add_many(keys)
    with RedisBloomFilter(redis_url, name, 100_000, 0.01, shards=3) as bf:
        with pytest.raises((TypeError, ValueError), match="contiguous"):
            bf.add_many(keys)
        with pytest.raises((TypeError, ValueError), match="contiguous"):
            bf.contains_many(keys)
        assert bf.fill_ratio == 0
        del keys[50_000]
        fresh = BloomFilter(100_000, 0.01, layout="blocked")
        assert bf.add_many(keys).tolist() == fresh.add_many(keys).tolist()
        assert bf.to_bloom_filter() == fresh


def test_lost_data_refused_before_any_bit_is_set(redis_url, name, client):
    """A batch that meets a shard that lost its data raises
    RedisDataLostError before it sends a write: the other shards keep their
    bytes and the lost shard is not recreated."""
    with RedisBloomFilter(redis_url, name, 10_000, 0.01, shards=3) as bf:
        bf.add_many(urls(500))
        lost, *kept = bf.shard_keys
        client.delete(lost)
        before = [client.get(k) for k in kept]
        for batch in (urls(50, "few.org"), urls(5000, "new.org"), urls(20_000, "big.org")):
            with pytest.raises(RedisDataLostError, match="lost its data"):
                bf.add_many(batch)
        assert [client.get(k) for k in kept] == before
        assert client.exists(lost) == 0
        refused = 0
        for key in urls(30, "one.org"):  # one key: only its own shard is read
            try:
                bf.add(key)
            except RedisDataLostError:
                refused += 1
        assert 0 < refused < 30 and client.exists(lost) == 0


@pytest.mark.parametrize("edit, field", [
    (lambda m: m.pop("num_bits"), "num_bits"),
    (lambda m: m.update(num_hashes=99), "num_hashes"),
    (lambda m: m.update(num_bits=m["num_bits"] + 512), "num_bits"),
    (lambda m: m.update(keys=m["keys"][:1]), "keys"),
    (lambda m: m.update(shards=m["shards"] + 1), "shard"),
    (lambda m: m.update(shard_bits="many"), "shard_bits"),
    (lambda m: m.update(guard=None), "guard"),
    (lambda m: m.update(capacity=-5), "capacity"),
    (lambda m: m.update(error_rate=float("nan")), "error_rate"),
    (lambda m: m.update(layout="diagonal"), "layout"),
    (lambda m: m.update(seed=2 ** 40), "seed"),
    (lambda m: m.pop("keys"), "keys"),
    # each in range, but together more than 2**62 bits or 64 hashes
    (lambda m: m.update(capacity=10 ** 20), "capacity 100000000000000000000 and error_rate"),
    (lambda m: m.update(error_rate=1e-30), "error_rate 1e-30: .* too small"),
], ids=["no-num_bits", "num_hashes", "num_bits", "keys-short", "shards", "shard_bits",
        "guard", "capacity", "error_rate-nan", "layout", "seed", "no-keys", "capacity-huge",
        "error_rate-tiny"])
def test_hand_edited_metadata_is_named(redis_url, name, client, edit, field):
    import json

    from crawldedup import CorruptStateError
    with RedisBloomFilter(redis_url, name, 5000, 0.01, shards=2):
        pass
    meta = json.loads(client.get(name + ":meta"))
    edit(meta)
    client.set(name + ":meta", json.dumps(meta))
    with pytest.raises(CorruptStateError, match=f"{name}:meta.*{field}") as info:
        RedisBloomFilter(redis_url, name)
    assert not isinstance(info.value, (KeyError, IndexError))
