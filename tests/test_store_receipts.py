"""FingerprintStore.add_many_once: a batch added in one transaction whose
answer the store records under a receipt, so that a retry (after a crash,
by any process) gets the first answer; on SQLite, and on PostgreSQL,
MariaDB and SQLite through SQLAlchemy, against the real servers."""

import hashlib
import re
import sqlite3
import uuid

import pytest

from crawldedup import SQLiteStore, SQLStore
from crawldedup.errors import CorruptDatabaseError, CorruptStateError
from test_stores import KINDS, make, md5, store_spec

RECEIPTS = "crawldedup_receipts"


@pytest.fixture(params=KINDS)
def spec(request, tmp_path):
    spec = store_spec(request.param, tmp_path)
    yield spec
    if spec[0] == "sql":
        with SQLStore(spec[1], table=spec[2]) as store:
            store.drop()  # its receipts too
            sa = store._sa
            with store._engine.begin() as conn:  # the receipts table, once no store uses it
                if sa.inspect(conn).has_table(RECEIPTS) and not conn.exec_driver_sql(
                        f"SELECT count(*) FROM {RECEIPTS}").scalar_one():
                    conn.exec_driver_sql(f"DROP TABLE {RECEIPTS}")


@pytest.fixture
def store(spec):
    with make(spec) as store:
        yield store


def test_a_retry_under_a_receipt_gets_the_first_answer(store):
    fps = [md5(i) for i in range(8)]
    store.add(fps[2])
    first = store.add_many_once(fps[:5], b"journal-1")
    assert first.tolist() == [True, True, False, True, True]
    store.add(fps[5])  # another writer, meanwhile
    again = store.add_many_once(fps[:5], b"journal-1")
    assert again.tolist() == first.tolist()
    assert len(store) == 6
    # Another receipt: a batch of its own, answered by the store as it is.
    assert store.add_many_once(fps[:5], b"journal-2").tolist() == [False] * 5
    # Another batch under the receipt replaces the answer it records.
    assert store.add_many_once(fps[4:8], b"journal-1").tolist() == [False, False, True, True]
    assert store.add_many_once(fps[:5], b"journal-1").tolist() == [False] * 5
    assert store.add_many_once(fps[:5], b"journal-1").tolist() == [False] * 5
    assert len(store) == 8


def test_repeats_and_an_empty_batch(store):
    a, b = md5("a"), md5("b")
    assert store.add_many_once([a, a, b], b"r").tolist() == [True, False, True]
    assert store.add_many_once([a, a, b], b"r").tolist() == [True, False, True]
    # Another order is another batch: what the store holds answers.
    assert store.add_many_once([b, a, a], b"r").tolist() == [False, False, False]
    assert store.add_many_once([], b"r").tolist() == []
    assert store.add_many_once([b, a, a], b"r").tolist() == [False, False, False]


def test_forget_and_clear_drop_receipts(store):
    fps = [md5(i) for i in range(3)]
    assert store.add_many_once(fps, b"r").all()
    store.forget_receipt(b"r")
    store.forget_receipt(b"never used")
    assert not store.add_many_once(fps, b"r").any()  # forgotten: the store answers
    store.clear()
    assert store.add_many_once(fps, b"r").all()  # cleared with the fingerprints
    assert store.add_many_once(fps, b"r").all()


def test_bad_arguments_change_nothing(store):
    good = md5(1)
    with pytest.raises(TypeError, match="receipt must be bytes"):
        store.add_many_once([good], "r")
    with pytest.raises(ValueError, match="receipt must be 1 to 64 bytes"):
        store.add_many_once([good], b"")
    with pytest.raises(ValueError, match="receipt must be 1 to 64 bytes"):
        store.add_many_once([good], b"x" * 65)
    with pytest.raises(ValueError, match="exactly 16 bytes"):
        store.add_many_once([good, b"short"], b"r")
    with pytest.raises(TypeError, match="receipt must be bytes"):
        store.forget_receipt(None)
    assert len(store) == 0


def test_a_receipt_per_table(spec):
    other = (spec[0], spec[1], spec[2] + "_b")
    try:
        with make(spec) as one, make(other) as two:
            fps = [md5(i) for i in range(3)]
            assert one.add_many_once(fps, b"r").all()
            assert two.add_many_once(fps, b"r").all()  # its own table, its own receipt
            assert one.add_many_once(fps, b"r").all()
    finally:
        if other[0] == "sql":
            with SQLStore(other[1], table=other[2]) as store:
                store.drop()


def test_a_damaged_receipt_is_named(spec):
    fps = [md5(i) for i in range(3)]
    with make(spec) as store:
        store.add_many_once(fps, b"r")
        if spec[0] == "sqlite":
            with sqlite3.connect(spec[1]) as conn:
                conn.execute(f"UPDATE {RECEIPTS} SET flags = ?", (b"\x01\x07\x00",))
            with pytest.raises(CorruptDatabaseError, match=RECEIPTS) as err:
                store.add_many_once(fps, b"r")
            assert err.value.path == spec[1]
        else:
            with store._engine.begin() as conn:
                conn.exec_driver_sql(f"UPDATE {RECEIPTS} SET flags = {store._mark()} "
                                     f"WHERE tbl = {store._mark()}", (b"\x01", spec[2]))
            with pytest.raises(CorruptStateError, match="records 1 flags for this batch of 3"):
                store.add_many_once(fps, b"r")
        assert len(store) == 3


def test_the_embedded_store_keeps_receipts_in_its_file(tmp_path):
    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        assert store.supports_receipts
        assert store.add_many_once([md5(1)], b"r").tolist() == [True]
    with SQLiteStore(path) as store:  # reopened: the receipt is there
        assert store.add_many_once([md5(1)], b"r").tolist() == [True]


# ---- RedisStore: a script call per 4,096 digests, each under a field of the
# receipt (so a batch is retried call by call)


@pytest.fixture(params=["server", "cluster"])
def redis_store(request):
    from crawldedup.redis import RedisStore
    url = request.getfixturevalue("redis_url" if request.param == "server"
                                  else "redis_cluster_url")
    store = RedisStore(url, f"cdtest:{uuid.uuid4().hex[:12]}")
    yield store
    store.clear()  # the receipts too
    store._transport.client.delete(store._logic.meta_key)
    store.close()


def test_redis_a_retry_under_a_receipt_gets_the_first_answer(redis_store):
    store = redis_store
    assert store.supports_receipts
    fps = [md5(i) for i in range(10_000)]  # three script calls
    store.add(fps[2])
    first = store.add_many_once(fps, b"journal-1")
    assert first.sum() == 9_999 and not first[2]
    store.add_many(fps[5000:5010])  # another writer, meanwhile: nothing new for it
    assert store.add_many_once(fps, b"journal-1").tolist() == first.tolist()
    assert store.add_many_once(fps, b"journal-2").sum() == 0
    store.forget_receipt(b"journal-1")
    assert store.add_many_once(fps, b"journal-1").sum() == 0
    assert len(store) == 10_000
    store.clear()
    assert store.add_many_once(fps[:3], b"journal-2").all()  # cleared with the digests


def test_redis_a_call_that_ran_keeps_its_answer_alone(redis_store):
    """A killed client's batch whose first script call ran and the others
    not: the retry gets the first call's recorded answer and runs the rest."""
    from crawldedup.exact.stores.base import FingerprintStore
    store = redis_store
    fps = [md5(i) for i in range(6000)]
    batch = hashlib.md5(b"".join(fps)).digest()
    # The first call alone, as the killed client's (4,096 digests).
    store._run(store._logic.add_once_op(b"".join(fps[:4096]), 4096, b"r", batch))
    store.add_many(fps[:10] + fps[5000:5010])  # another writer, then
    again = FingerprintStore.add_many_once(store, fps, b"r")
    assert again[:4096].all()  # the first call's answer: the killed client added them
    assert not again[5000:5010].any() and again[4096:5000].all()


def test_redis_receipts_share_the_set_s_slot():
    from crawldedup.redis._bloom_logic import key_slot
    from crawldedup.redis.store import receipts_key
    for name in [b"crawldedup:fingerprints", b"{tag}rest", b"a{b}c", b"{}x", b"x{", b"}{"]:
        assert key_slot(receipts_key(name)) == key_slot(name), name


def test_redis_a_damaged_receipt_is_named(redis_store):
    store = redis_store
    fps = [md5(i) for i in range(3)]
    store.add_many_once(fps, b"r")
    client = store._transport.client
    # Each slot group's script call records its answer (the batch's digest,
    # a flag a digest) in the group's receipts hash: on a cluster the three
    # digests may fall in three.  One answer loses its last flag.
    held = [k for k in store._logic.receipt_keys if client.hget(k, b"72:0") is not None]
    assert held
    key = held[0]
    client.hset(key, b"72:0", client.hget(key, b"72:0")[:-1])
    with pytest.raises(CorruptStateError, match=re.escape(repr(key.decode()))):
        store.add_many_once(fps, b"r")


# ---- RedisBloomFilter: a script call per shard per run of keys, each under a
# field of the receipt in its shard's receipts hash


@pytest.fixture(params=[("server", 1_000_000), ("server", 50_000_000), ("cluster", 50_000_000)],
                ids=["one-shard", "shards", "cluster"])
def redis_bloom(request):
    from crawldedup.redis import RedisBloomFilter
    where, capacity = request.param
    url = request.getfixturevalue("redis_url" if where == "server" else "redis_cluster_url")
    bf = RedisBloomFilter(url, f"cdtest:{uuid.uuid4().hex[:12]}", capacity, 1e-7)
    yield bf
    bf.drop()  # the receipts too
    bf.close()


def test_redis_bloom_a_retry_under_a_receipt_gets_the_first_answer(redis_bloom):
    bf = redis_bloom
    keys = [f"https://shop.example/item/{i}".encode() for i in range(10_000)]
    bf.add(keys[2])
    first = bf.add_many_once(keys, b"journal-1")
    assert first.sum() == 9_999 and not first[2]
    bf.add_many(keys[5000:5010])
    assert bf.add_many_once(keys, b"journal-1").tolist() == first.tolist()
    assert bf.add_many_once(keys, b"journal-2").sum() == 0
    assert bf.add_many_once([b"q", b"q", "w"], b"journal-3").tolist() == [True, False, True]
    bf.forget_receipt(b"journal-1")
    assert bf.add_many_once(keys, b"journal-1").sum() == 0
    bf.clear()
    assert bf.add_many_once(keys[:3], b"journal-2").all()  # cleared with the bits


def test_redis_bloom_calls_that_ran_keep_their_answers(redis_bloom):
    """A killed client's batch of which some script calls ran: the retry
    gets their recorded answers and runs the others."""
    bf = redis_bloom
    keys = [f"https://shop.example/page/{i}".encode() for i in range(3000)]
    batch = hashlib.md5(b"".join(len(k).to_bytes(8, "little") + k for k in keys)).digest()
    op = bf._logic.batch_once_op(keys, b"r", batch)
    guards = next(op)  # the shards' guards are read first
    requests = op.send(bf._transport.execute(guards))  # then the script calls
    assert len(requests) > 1
    ran = requests[:len(requests) // 2]  # half of the calls reach the server
    bf._transport.execute(ran)
    bf.add_many(keys)  # another writer, then: every key is in the filter now
    again = bf.add_many_once(keys, b"r")
    assert 0 < again.sum() < len(keys)  # the answers of the calls that ran
    assert bf.add_many_once(keys, b"r").tolist() == again.tolist()


def test_redis_bloom_a_lost_shard_sets_nothing(redis_bloom):
    from crawldedup.redis.bloom import RedisDataLostError
    bf = redis_bloom
    client = bf._transport.client
    keys = [f"https://shop.example/x/{i}".encode() for i in range(2000)]
    before = [client.bitcount(key) for key in bf.shard_keys[:-1]]
    client.delete(bf.shard_keys[-1])
    with pytest.raises(RedisDataLostError):
        bf.add_many_once(keys, b"r")
    assert [client.bitcount(key) for key in bf.shard_keys[:-1]] == before  # nothing set


def test_redis_bloom_a_damaged_receipt_is_named(redis_bloom):
    bf = redis_bloom
    keys = [b"a", b"b", b"c"]
    bf.add_many_once(keys, b"r")
    client = bf._transport.client
    for key in bf._logic.receipt_keys:
        if client.hexists(key, b"72:0"):
            client.hset(key, b"72:0", client.hget(key, b"72:0")[:17])
    with pytest.raises(CorruptStateError, match="receipts"):
        bf.add_many_once(keys, b"r")
