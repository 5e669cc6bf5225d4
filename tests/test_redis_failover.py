"""A Redis Cluster failover (a master killed with SIGKILL, its replica
promoted) costs the objects opened before it a failed call, not a restart:
each of the Redis classes answers again, on the same object, soon after the
cluster has its new master, and no key it held is lost.  Slots moved to
another master (ASK while migrating, MOVED after) cost no call at all.

The cluster is the fixtures' own 3-master, 3-replica one (node timeout 1 s),
started for the test."""

import asyncio
import hashlib
import time

import numpy as np

from conftest import require_module
from crawldedup import StoreUnavailableError

redis = require_module("redis")

from redis.crc import key_slot  # noqa: E402

from crawldedup.recrawl import RecrawlState  # noqa: E402
from crawldedup.recrawl.redis_store import RedisRecrawlStore  # noqa: E402
from crawldedup.redis import RedisBloomFilter, RedisSimhashIndex, RedisStore  # noqa: E402
from crawldedup.redis.aio import AsyncRedisBloomFilter, AsyncRedisSimhashIndex, AsyncRedisStore  # noqa: E402

#: How long after the promotion every object must answer again.  A call
#: that meets the dead master fails at once (connection refused), and the
#: next one refreshes the slot map; the bound is generous for a loaded VM.
RECOVERY = 10.0

URLS = [f"https://example.com/page/{i}" for i in range(3000)]
DIGESTS = [hashlib.md5(u.encode()).digest() for u in URLS]
FPS = np.array([int.from_bytes(hashlib.sha1(u.encode()).digest()[:8], "little")
                for u in URLS[:500]], dtype=np.uint64)


def _recover(checks, deadline):
    """Calls each check (again) until it stops raising StoreUnavailableError
    or the deadline passes; {name: its answer} of those that answered,
    {name: the last error} of those that did not, and {name: the number of
    calls that raised}."""
    answers, errors, failures = {}, {}, dict.fromkeys(checks, 0)
    start = time.monotonic()
    while True:
        for name, check in checks.items():
            if name in answers:
                continue
            try:
                answers[name] = check()
                errors.pop(name, None)
                print(f"{name}: answered {time.monotonic() - start:.2f} s after the "
                      f"promotion, after {failures[name]} failed calls")
            except StoreUnavailableError as exc:
                errors[name] = str(exc)
                failures[name] += 1
        if not errors or time.monotonic() > deadline:
            return answers, errors, failures
        time.sleep(0.05)


def _fetches(urls, body, when):
    return [{"url": u, "status": 200, "body": body, "time": when} for u in urls]


def test_objects_recover_after_a_master_fails_over(redis_cluster_replicated):
    cluster = redis_cluster_replicated
    url = cluster.url
    bf = RedisBloomFilter(url, "fo:bloom", 100_000, 0.001)
    store = RedisStore(url, "fo:store")
    index = RedisSimhashIndex(url, "fo:simhash", k=3)
    # The store's first slot group (its name's slot) and the recrawl state
    # (one hash tag) on the master that is killed; the store's other
    # groups, the Bloom filter's and the index's keys are on every master.
    victim = cluster.master_of_slot(key_slot(b"fo:store"))
    ranges = cluster.slot_ranges()[victim]
    prefix = next(p for p in (f"fo:recrawl{i}" for i in range(10_000))
                  if any(lo <= key_slot(p.encode()) <= hi for lo, hi in ranges))
    state = RecrawlState(url, prefix=prefix)
    recrawl = state.store
    assert isinstance(recrawl, RedisRecrawlStore)
    loop = asyncio.new_event_loop()
    aobjects = []
    try:
        abf = loop.run_until_complete(AsyncRedisBloomFilter.open(url, "fo:abloom", 100_000,
                                                                 0.001))
        aobjects.append(abf)
        astore = loop.run_until_complete(AsyncRedisStore.open(url, "fo:astore"))
        aobjects.append(astore)
        aindex = loop.run_until_complete(AsyncRedisSimhashIndex.open(url, "fo:asimhash"))
        aobjects.append(aindex)

        now = time.time()
        assert bf.add_many(URLS).all()
        assert store.add_many(DIGESTS).all()
        index.add_many(range(len(FPS)), FPS)
        state.record_many(_fetches(URLS[:200], b"v1", now))
        assert loop.run_until_complete(abf.add_many(URLS)).all()
        assert loop.run_until_complete(astore.add_many(DIGESTS)).all()
        loop.run_until_complete(aindex.add_many(range(len(FPS)), FPS))
        cluster.wait_replicated()

        checks = {
            "RedisBloomFilter": lambda: bf.contains_many(URLS).all(),
            "RedisStore": lambda: store.contains_many(DIGESTS).all(),
            "RedisSimhashIndex": lambda: all(index.query(int(f)) for f in FPS[:50])
            and len(index) == len(FPS),
            "RedisRecrawlStore": lambda: len(state.record_many(
                _fetches(URLS[:10], b"v1", now + 3600))) == 10
            and len(recrawl.get_pages(URLS[:200])) == 200
            and len(state.due(now + 400 * 86400, 1000)) == 200,
            "AsyncRedisBloomFilter": lambda: loop.run_until_complete(
                abf.contains_many(URLS)).all(),
            "AsyncRedisStore": lambda: loop.run_until_complete(
                astore.contains_many(DIGESTS)).all(),
            "AsyncRedisSimhashIndex": lambda: loop.run_until_complete(aindex.count())
            == len(FPS),
        }
        replica = cluster.kill(victim)
        # While the master is dead and not yet replaced, a crawler keeps
        # calling: a call fails (StoreUnavailableError, never a wrong
        # answer) or answers right, from the masters still up.
        failed = set()
        deadline = time.monotonic() + 30
        while not cluster.promoted(replica):
            assert time.monotonic() < deadline, "the replica was not promoted"
            for name, check in checks.items():
                try:
                    assert check(), f"{name} answered wrong while a master was down"
                except StoreUnavailableError:
                    failed.add(name)
        # The store's keys and the Bloom filter's on the dead master: their
        # calls met it.  RedisRecrawlStore goes through redis-py's cluster
        # client, whose own retries can carry a call over the
        # promotion: it then answered right, as the loop checked.
        assert {"RedisBloomFilter", "RedisStore"} <= failed
        promoted = time.monotonic()
        deadline = promoted + RECOVERY
        answers, errors, failures = _recover(checks, deadline)
        assert errors == {}, f"{sorted(errors)} still unavailable {RECOVERY} s after the promotion"
        assert answers == dict.fromkeys(checks, True), "keys lost in the failover"
        # Once the cluster has its new master, the next call answers: a
        # call that met the dead node marked the slot map to be read again.
        # (RedisRecrawlStore relies on redis-py's own refresh, which may
        # cost it one more call.)
        assert failures["RedisRecrawlStore"] <= 1
        del failures["RedisRecrawlStore"]
        assert failures == dict.fromkeys(failures, 0)
        # New writes work on the same objects, and answer exactly.
        assert bf.add_many(URLS[:10] + ["https://example.com/new"]).tolist() == \
            [False] * 10 + [True]
        assert store.add_many(DIGESTS[:10] + [bytes(16)]).tolist() == [False] * 10 + [True]
        index.add(10_000, 12345)
        assert (10_000, 0) in index.query(12345)
        state.record_many(_fetches(URLS[:10], b"v2", now + 86400))
        assert len(recrawl) == 200
        state.record_many(_fetches(["https://example.com/new"], b"v1", now + 86400))
        assert len(recrawl) == 201
        assert loop.run_until_complete(astore.add(bytes(16))) is True
    finally:
        for obj in aobjects:
            loop.run_until_complete(obj.aclose())
        loop.close()
        for obj in (bf, store, index, state):
            obj.close()


def test_objects_follow_slots_moved_to_another_master(redis_cluster_replicated):
    """Resharding: the slots of a store's slot groups, a Bloom filter shard,
    the shards of the index and a recrawl state move to another master.
    While a slot migrates, its old owner answers ASK for the keys already
    moved: the command goes to the new owner after ASKING.  Once moved, the
    old owner answers MOVED: the slot map is read again and the command
    resent.  Both replies mean the command was not run, so resending changes
    no answer: every answer is right, and the only calls refused are those
    docs/redis.md ("Faults") allows while their own slot migrates."""
    cluster = redis_cluster_replicated
    url = cluster.url
    bf = RedisBloomFilter(url, "mv:bloom", 100_000, 0.001)
    store = RedisStore(url, "mv:store")
    index = RedisSimhashIndex(url, "mv:simhash", k=3)
    state = RecrawlState(url, prefix="mv:recrawl")
    loop = asyncio.new_event_loop()
    astore = loop.run_until_complete(AsyncRedisStore.open(url, "mv:store"))
    abf = loop.run_until_complete(AsyncRedisBloomFilter.open(url, "mv:bloom"))
    aindex = loop.run_until_complete(AsyncRedisSimhashIndex.open(url, "mv:simhash"))
    try:
        now = time.time()
        assert bf.add_many(URLS[:2000]).all()
        assert store.add_many(DIGESTS[:1000]).all()
        index.add_many(range(len(FPS)), FPS)
        state.record_many(_fetches(URLS[:100], b"v1", now))
        index_slots = {key_slot(k) for k in index._logic.id_keys}
        # The store's keys: its buckets, counter and receipts of each slot
        # group, in the group's slot (four groups a master).
        store_slots = {key_slot(p) for p in store._logic.prefixes}
        assert len(store_slots) == len(store._logic.prefixes) > 1
        keys = [bf.shard_keys[0].encode(), *index._logic.id_keys, b"mv:recrawl"]
        slots = sorted(store_slots | {key_slot(k) for k in keys})
        added = [1000]
        refused = [False]
        pages = [100]

        def check(step):
            """Every object answers right; each step adds new keys too."""
            lo, hi = added[0], added[0] + 100
            try:
                assert store.contains_many(DIGESTS[:lo]).all(), step
                before = loop.run_until_complete(astore.count())
                new = store.add_many(DIGESTS[lo:hi])
                assert loop.run_until_complete(astore.add(DIGESTS[0])) is False, step
            except StoreUnavailableError:
                # A call reads and writes several keys of a slot group in
                # one script: while the group's slot migrates, Redis answers
                # TRYAGAIN when only some of them have moved, or when one
                # (a new bucket) exists on neither node.  Refused, never
                # answered wrong: the batch is sent again at the next step.
                assert step in {f"slot {s} migrating" for s in store_slots}, step
                refused[0] = True
            else:
                # The refused batch's calls to the other groups ran: the
                # digests they added are not new when it is sent again, and
                # each digest of the batch is reported new once in all.
                assert before == lo or refused[0], step
                assert int(new.sum()) == hi - before, step
                assert loop.run_until_complete(astore.count()) == hi, step
                assert store.contains_many(DIGESTS[:hi]).all(), step
                assert len(store) == hi, step
                refused[0] = False
                added[0] = hi
            assert bf.contains_many(URLS[:2000]).all(), step
            assert loop.run_until_complete(abf.contains_many(URLS[:2000])).all(), step
            try:
                assert len(index) == len(FPS) and all(index.query(int(f)) for f in FPS[:20]), step
                assert loop.run_until_complete(aindex.count()) == len(FPS), step
            except StoreUnavailableError:
                # A query reads several bucket keys of a shard in one script:
                # while the shard's slot migrates, Redis answers a command
                # over keys of which only some have moved TRYAGAIN until the
                # move ends.  Refused, never answered wrong, and fine again
                # once moved (the "moved" step checks that).
                assert step in {f"slot {s} migrating" for s in index_slots}, step
            assert len(state.store.get_pages(URLS[:pages[0]])) == pages[0], step
            try:
                state.record_many(_fetches(URLS[pages[0]:pages[0] + 10], b"v1", now))
                pages[0] += 10
            except StoreUnavailableError:
                # RedisRecrawlStore writes through redis-py's MULTI/EXEC,
                # which follows no ASK: refused (the transaction discarded,
                # nothing written) while its own slot migrates.
                assert step == f"slot {key_slot(b'mv:recrawl')} migrating", step
            assert len(state.store) == pages[0], step

        for slot in slots:
            src = cluster.master_of_slot(slot)
            dst = next(m for m in cluster.masters() if m is not src)
            cluster.begin_move(slot, dst)  # every key moved, the slot still src's: ASK
            check(f"slot {slot} migrating")
            cluster.end_move(slot, dst)  # the slot dst's: MOVED
            assert cluster.master_of_slot(slot) is dst
            check(f"slot {slot} moved")  # every object answers, the store too
    finally:
        for obj in (astore, abf, aindex):
            loop.run_until_complete(obj.aclose())
        loop.close()
        for obj in (bf, store, index, state):
            obj.close()
