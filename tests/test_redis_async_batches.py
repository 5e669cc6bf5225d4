"""Big batches of the asyncio classes keep the event loop turning, and a
cancelled call (``task.cancel()``, ``asyncio.wait_for``'s timeout) stops at
its next command, leaving what it sent applied command by command: retried,
the batch answers "new" exactly for what the cut call did not store.

On a throwaway redis-server of the test's own (a million digests are ~80 MB
of server memory)."""

import asyncio
import gc
import hashlib
import time

import numpy as np
import pytest

from conftest import require_module

redis = require_module("redis")

from crawldedup.redis import (  # noqa: E402
    AsyncRedisBloomFilter,
    AsyncRedisSimhashIndex,
    AsyncRedisStore,
)

N = 1_000_000
#: The loop's longest pause allowed while a big batch runs beside it.  The
#: batch itself gives the loop a turn every few ms; the bound leaves room
#: for a loaded machine.
MAX_GAP = 0.2
#: Runs of the batches at most, the best of them counting (see the test).
ATTEMPTS = 3
#: How soon a cancelled call must have returned.
PROMPT = 1.0


def _digests(n):
    return [hashlib.md5(b"%d" % i).digest() for i in range(n)]


async def _with_ticker(work):
    """(work's result, the longest gap between ticks of a 5 ms ticker
    running beside it).

    The cyclic garbage collector is off meanwhile: its pauses are the
    interpreter's, as long as the whole process's heap of containers
    (0.1 to 0.2 s here once an index of 100,000 ids is cleared), and they
    stop any event loop whoever allocated; what is measured is whether the
    batch's own work gives the loop its turns."""
    gaps = []
    done = asyncio.Event()

    async def tick():
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    gc.collect()
    gc.disable()
    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.02)
    try:
        result = await work
    finally:
        done.set()
        await ticker
        gc.enable()
    return result, max(gaps)


def test_big_batches_keep_the_loop_turning(redis_server):
    digests = _digests(N)
    urls = [f"https://example.com/page/{i}" for i in range(N)]
    rng = np.random.default_rng(7)
    fps = rng.integers(0, 2**64, size=100_000, dtype=np.uint64)

    async def main(run):
        gaps = {}
        store = await AsyncRedisStore.open(redis_server.url, f"s{run}")
        bf = await AsyncRedisBloomFilter.open(redis_server.url, f"b{run}", 2 * N, 0.01)
        index = await AsyncRedisSimhashIndex.open(redis_server.url, f"x{run}", k=3)
        try:
            new, gaps["store.add_many (a list)"] = await _with_ticker(store.add_many(digests))
            assert new.all()
            seen, gaps["store.contains_many"] = await _with_ticker(
                store.contains_many(np.array(digests, dtype="S16")))
            assert seen.all()
            new, gaps["bloom.add_many"] = await _with_ticker(bf.add_many(urls))
            assert new.sum() > 0.99 * N
            seen, gaps["bloom.contains_many"] = await _with_ticker(bf.contains_many(urls))
            assert seen.all()
            _, gaps["simhash.add_many"] = await _with_ticker(
                index.add_many(range(len(fps)), fps))
            (offsets, ids, _), gaps["simhash.query_many"] = await _with_ticker(
                index.query_many(fps[:20_000]))
            assert len(offsets) == 20_001 and set(range(20_000)) <= set(ids.tolist())
            _, gaps["simhash.clear"] = await _with_ticker(index.clear())
            assert await index.count() == 0
        finally:
            await store.aclose()
            await bf.aclose()
            await index.aclose()
        return gaps

    # A busy machine only lengthens gaps (the process waits for a core), and
    # a batch that holds the loop does so on every run: the shortest of up
    # to ATTEMPTS runs' gaps, each call's, has to be under MAX_GAP.
    best: dict = {}
    for run in range(ATTEMPTS):
        for what, gap in asyncio.run(main(run)).items():
            best[what] = min(gap, best.get(what, gap))
        slow = {what: round(gap, 3) for what, gap in best.items() if gap >= MAX_GAP}
        if not slow:
            break
    print({what: round(gap, 3) for what, gap in best.items()})
    assert not slow, f"the event loop stood still (s): {slow}; all: {best}"


async def _cut(coro, how, when):
    """Runs coro and stops it: with asyncio.wait_for's timeout of ``when``
    seconds, or by task.cancel() once ``await when()`` returns (``when`` a
    float: after that many seconds).  The seconds it took to return after
    the cut."""
    task = asyncio.ensure_future(coro)
    if how == "wait_for":
        start = time.perf_counter()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(task, when)
        start += when
    else:
        if isinstance(when, float):
            await asyncio.sleep(when)
        else:
            await when()
        start = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert task.cancelled()
    return time.perf_counter() - start


async def _settled(probe):
    """``await probe()`` once it stopped changing: the commands the cut call
    had written (at most WINDOW + 1 a connection) may still be running on
    the server when the call has returned."""
    last = await probe()
    while True:
        await asyncio.sleep(0.1)
        now = await probe()
        if now == last:
            return now
        last = now


def _sending(probe, above):
    """Until ``await probe()`` exceeds ``above``: the batch is being sent."""
    async def when():
        deadline = time.monotonic() + 60
        while await probe() <= above:
            assert time.monotonic() < deadline, "the batch never reached the server"
            await asyncio.sleep(0.005)
    return when


@pytest.mark.parametrize("how", ["cancel", "wait_for"])
def test_a_cancelled_batch_stops_wherever_it_lands(redis_server, how):
    """Cut while the batch is being prepared (the loop was busy when the
    cancellation came) or while its commands are being sent: the call
    returns within PROMPT seconds, what it sent ran whole, and the retry
    of the batch answers new exactly for the rest."""
    digests = _digests(N)
    urls = [f"https://example.com/page/{i}" for i in range(N)]

    async def main():
        store = await AsyncRedisStore.open(redis_server.url, "s")
        watch = await AsyncRedisStore.open(redis_server.url, "s")
        bf = await AsyncRedisBloomFilter.open(redis_server.url, "b", 2 * N, 0.01)
        bf_watch = await AsyncRedisBloomFilter.open(redis_server.url, "b")
        try:
            # a list: the cut lands while the batch is being checked; an
            # array (checked at once): while its commands are being sent
            mid = 0.3 if how == "wait_for" else _sending(watch.count, 0)
            for batch, when in ((digests, 0.3), (np.array(digests, dtype="S16"), mid)):
                late = await _cut(store.add_many(batch), how, when)
                assert late < PROMPT, f"returned {late:.2f} s after the cancellation"
                stored = await _settled(store.count)
                assert stored < N  # it stopped: the rest was never sent
                present = await store.contains_many(batch)
                assert present.sum() == stored
                new = await store.add_many(batch)
                assert (new == ~present).all()
                assert await store.count() == N
                await store.clear()

            start = await bf.estimated_count()
            mid = 0.6 if how == "wait_for" else _sending(bf_watch.estimated_count, start)
            for when in (0.1, mid):
                late = await _cut(bf.add_many(urls), how, when)
                assert late < PROMPT, f"returned {late:.2f} s after the cancellation"
                await _settled(bf.estimated_count)
                present = await bf.contains_many(urls)
                assert not present.all()
                new = await bf.add_many(urls)
                assert not (new & present).any()  # never new twice
                # the rest is new but for the filter's false positives
                assert new.sum() >= 0.98 * (~present).sum()
                await bf.clear()
        finally:
            for obj in (store, watch, bf, bf_watch):
                await obj.aclose()

    asyncio.run(main())


def test_a_cancelled_simhash_batch_returns_promptly(redis_server):
    rng = np.random.default_rng(8)
    fps = rng.integers(0, 2**64, size=200_000, dtype=np.uint64)

    async def main():
        index = await AsyncRedisSimhashIndex.open(redis_server.url, "x", k=3)
        try:
            late = await _cut(index.add_many(range(len(fps)), fps), "cancel", 0.3)
            assert late < PROMPT, f"returned {late:.2f} s after the cancellation"
            late = await _cut(index.query_many(fps), "wait_for", 0.3)
            assert late < PROMPT, f"returned {late:.2f} s after the cancellation"
        finally:
            await index.aclose()

    asyncio.run(main())
