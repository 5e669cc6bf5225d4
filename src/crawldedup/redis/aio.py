"""The Redis classes for asyncio crawlers, over ``redis.asyncio``.

:class:`AsyncRedisStore`, :class:`AsyncRedisBloomFilter` and
:class:`AsyncRedisSimhashIndex` run the same sans-I/O operations as the
blocking classes (the ``*Logic`` classes of store.py, bloom.py, simhash.py);
only :class:`AsyncTransport` here differs: it awaits redis-py's asyncio
connections.  Open them with ``await Class.open(...)`` (or ``async with``)::

    bf = await AsyncRedisBloomFilter.open("redis://localhost:6379/0", "seen",
                                          capacity=10_000_000, error_rate=0.001)
    new = await bf.add_many(urls)
    await bf.aclose()

A batch keeps the event loop turning: a batch of OFFLOAD keys or more (or
of unknown length) is checked, packed and decoded in a worker thread
(``asyncio.to_thread``), and the transport gives the loop a turn at least
every SLICE seconds while it sends and reads.  A call cancelled
(``task.cancel()``, ``asyncio.wait_for``'s timeout) stops before its next
command and raises CancelledError: the rest of the batch is never sent and
the connections it used are closed, but the commands already written to a
connection (at most WINDOW + 1 per connection) run on the server, each one
atomically (a chunk of a batch is tested-and-set, or not at all), possibly
a moment after the call returned.  The state is the one a batch cut by a
lost connection leaves: retried, the batch reports "new" exactly the keys
the cut call did not store.  (Work in the worker thread when the call is
cancelled finishes there and is dropped; the batch must not be changed
while the call runs.)
"""

from __future__ import annotations

import asyncio
import os
import time
import warnings
from typing import (
    Any,
    Callable,
    Dict,
    Hashable,
    Iterable,
    List,
    Optional,
    Set,
    Tuple,
    TypeVar,
    cast,
)

import numpy as np

from crawldedup._defaults import ERROR_RATE
from crawldedup.bloom.filter import BloomFilter
from crawldedup.errors import StoreUnavailableError
from crawldedup.exact.stores.base import FingerprintStore
from crawldedup.near.index import _check_fp, _fp_array
from crawldedup.near.lsh import check_signatures, min_agree
from crawldedup.redis._bloom_logic import (
    CREATION_POLL,
    CREATION_WAIT,
    BloomLogic,
    RedisDataLostError,
    key_batch,
)
from crawldedup.redis._conn import (
    WINDOW,
    Op,
    Request,
    Transport,
    describe,
    driver_errors,
    not_a_client,
    redis_module,
    routing_errors,
    split_url,
    unavailable,
)
from crawldedup.redis.minhash import MinHashLogic, MinHashParams, id_signatures, jaccard_csr
from crawldedup.redis.simhash import SimhashLogic, csr, encode_id, id_batch
from crawldedup.redis.store import StoreLogic

#: Batches of at least this many keys are prepared in a worker thread
#: (checking, packing and decoding cost about 1 to 7 us a key: a few ms here).
OFFLOAD = 2048
#: The longest the transport sends and reads without giving the loop a turn.
SLICE = 0.005

_T = TypeVar("_T")


def _size(items: Any) -> Optional[int]:
    """len(items), or None for an iterable without a length."""
    try:
        return len(items)
    except TypeError:
        return None


async def _prepare(size: Optional[int], work: Callable[..., _T], *args: Any) -> _T:
    """work(*args), in a worker thread for a big batch (or one of unknown size)."""
    if size is not None and size < OFFLOAD:
        return work(*args)
    return await asyncio.to_thread(work, *args)


def _advance(op: Op, replies: Optional[List[List[Any]]]) -> Tuple[bool, Any]:
    """One step of an operation: (False, its next requests) or (True, its
    result).  (StopIteration cannot cross a thread's future.)"""
    try:
        return False, (next(op) if replies is None else op.send(replies))
    except StopIteration as stop:
        return True, stop.value


class _Cancel:
    """Whether the running task was asked to stop since this was made.

    redis-py's send is an ``asyncio.wait_for`` (with a socket timeout), and
    up to Python 3.11 a wait_for whose inner write has just finished drops a
    cancellation that arrives then (as it does when the loop was busy): the
    task would run its batch to the end.  ``Task.cancelling()`` (3.11+)
    still counts the request, so the transport checks it after every send
    and read.  (Python 3.9 and 3.10 have no such count: there such a
    cancellation can still be lost.)"""

    __slots__ = ("_count", "_base")

    def __init__(self) -> None:
        task = asyncio.current_task()
        self._count: Optional[Callable[[], int]] = getattr(task, "cancelling", None)
        self._base = self._count() if self._count is not None else 0

    def check(self) -> None:
        if self._count is not None and self._count() > self._base:
            raise asyncio.CancelledError()


async def aconnect(client_or_url: Any) -> Tuple[Any, bool, bool]:
    """(client, is_cluster, owned) for redis.asyncio."""
    redis = redis_module()
    import redis.asyncio as aredis
    from redis.asyncio.cluster import RedisCluster
    if isinstance(client_or_url, RedisCluster):
        await client_or_url.initialize()
        return client_or_url, True, False
    if isinstance(client_or_url, aredis.Redis):
        return client_or_url, False, False
    if isinstance(client_or_url, str):
        base, _ = split_url(client_or_url)
        client = aredis.Redis.from_url(base)
        address = describe(client)
        try:
            enabled = (await client.info("cluster")).get("cluster_enabled", 0)
        except redis.exceptions.RedisError as exc:
            await _aclose(client)
            raise unavailable(address, exc) from exc
        if enabled:
            await _aclose(client)
            cluster = RedisCluster.from_url(base)
            try:
                await cluster.initialize()
            except redis.exceptions.RedisError as exc:
                raise unavailable(address, exc) from exc
            return cluster, True, True
        return client, False, True
    raise not_a_client(client_or_url, "a redis.asyncio Redis or RedisCluster client")


async def _aclose(client: Any) -> None:
    close = getattr(client, "aclose", None) or client.close
    await close()


class AsyncTransport(Transport):
    """SyncTransport's twin over redis.asyncio connections."""

    def __init__(self, client: Any, is_cluster: bool) -> None:
        super().__init__(client, is_cluster, asyncio.Lock())

    async def execute(self, requests: Iterable[Request]) -> List[List[Any]]:
        if self.stale:
            await self.refresh()
        results, sent, redo, asks = await self._execute_once(requests)
        for _attempt in range(3):
            if not redo:
                break
            if any(i not in asks for i in redo):
                await self.refresh()
            again = self.resends(sent, redo, asks)
            replies, _, still, asked = await self._execute_once(again)
            self.merge(results, redo, again, replies)
            asks = {redo[j]: node for j, node in asked.items()}
            redo = [redo[j] for j in still]
        if redo:
            raise self.unsettled()
        return results

    async def refresh(self) -> None:
        """Reads a cluster's slot map again (slots moved, a node failed):
        the nodes manager's, since ``RedisCluster.initialize()`` does
        nothing once the client is initialized."""
        self.stale = True
        try:
            await self.client.nodes_manager.initialize()
        except routing_errors() as exc:
            raise unavailable(self.address, exc) from exc
        self.stale = False

    async def _acquire(self, node: Any) -> Tuple[str, Any, Any]:
        """(node name, connection, release coroutine function) of a cluster
        node (None: the single server)."""
        if node is None:
            pool = self.client.connection_pool
            try:
                conn = await pool.get_connection()
            except TypeError:  # redis-py < 5.3
                conn = await pool.get_connection("_")

            async def release() -> None:
                await pool.release(conn)
            return self.address, conn, release
        conn = node.acquire_connection()

        async def release_node() -> None:
            node.release(conn)
        return node.name, conn, release_node

    def _node(self, req: Request) -> Any:
        """The cluster node a request goes to (None: the single server)."""
        if not self.is_cluster:
            return None
        if req.node is not None:
            node = self.client.get_node(host=req.node[0], port=req.node[1])
            if node is None:
                raise StoreUnavailableError(f"Redis at {self.address}: a migrating slot "
                                            f"sent a command to an unknown node {req.node}")
            return node
        return self.client.get_node_from_key(req.route)

    async def _execute_once(self, requests: Iterable[Request]
                            ) -> Tuple[List[List[Any]], List[Request], List[int],
                                       Dict[int, Tuple[str, int]]]:
        ex = redis_module().exceptions
        results: List[List[Any]] = []
        sent: List[Request] = []
        conns: Dict[str, Tuple[Any, Any, List[int]]] = {}
        name = self.address
        cancel = _Cancel()
        turn = time.monotonic() + SLICE
        redirects = self.redirects()
        redirected: Dict[int, None] = {}
        asks: Dict[int, Tuple[str, int]] = {}

        async def read(conn: Any, i: int) -> None:
            for _ in range(sent[i].replies):
                try:
                    results[i].append(await conn.read_response())
                except ex.ResponseError as exc:
                    results[i].append(exc)
                    if isinstance(exc, redirects):
                        redirected[i] = None
                        target = self.ask_target(exc)
                        if target is not None:
                            asks[i] = target
                cancel.check()

        try:
            async with self._lock:
                for req in requests:
                    if time.monotonic() > turn:  # the loop's turn (a cancellation lands here)
                        await asyncio.sleep(0)
                        turn = time.monotonic() + SLICE
                    cancel.check()
                    try:
                        target = self._node(req)
                    except routing_errors() as exc:
                        self.stale = self.is_cluster
                        raise unavailable(self.address, exc) from exc
                    node = self.address if target is None else target.name
                    if node not in conns:
                        name, conn, release = await self._acquire(target)
                        conns[node] = (conn, release, [])
                    conn, _, pending = conns[node]
                    name = node
                    results.append([])
                    sent.append(req)
                    await conn.send_packed_command(
                        req.payload if isinstance(req.payload, list) else [req.payload])
                    pending.append(len(results) - 1)
                    cancel.check()
                    while len(pending) > WINDOW:
                        await read(conn, pending.pop(0))
                for name, (conn, _, pending) in conns.items():  # noqa: B007 - named in errors
                    for i in pending:
                        await read(conn, i)
                    pending.clear()
        except driver_errors() as exc:
            self.stale = self.is_cluster
            for conn, _, _ in conns.values():
                await conn.disconnect()
            raise unavailable(name, exc) from exc
        except BaseException:
            for conn, _, _ in conns.values():
                await conn.disconnect()
            raise
        finally:
            for _, release, _ in conns.values():
                await release()
        return results, sent, sorted(redirected), asks

    async def run(self, op: Op, offload: bool = False) -> Any:
        """Drive a sans-I/O operation to its result; with ``offload`` (a big
        batch) its steps -- packing requests, decoding replies -- run in a
        worker thread."""
        replies: Optional[List[List[Any]]] = None
        while True:
            if offload:
                done, value = await asyncio.to_thread(_advance, op, replies)
            else:
                done, value = _advance(op, replies)
            if done:
                return value
            replies = await self.execute(value)

    async def close(self) -> None:
        await _aclose(self.client)


class _AsyncBase:
    _transport: AsyncTransport
    _owned: bool
    _closed: bool = False

    async def _run(self, op: Op, size: Optional[int] = 0) -> Any:
        """Runs op; a batch of ``size`` keys (None: unknown) from OFFLOAD
        on is prepared in a worker thread."""
        if self._closed:
            raise ValueError(f"the {type(self).__name__} is closed")
        return await self._transport.run(op, size is None or size >= OFFLOAD)

    async def aclose(self) -> None:
        """Close the connections if this object opened them (from a URL)."""
        if not self._closed:
            self._closed = True
            if self._owned:
                await self._transport.close()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def _attach(self: Any, client_or_url: Any, logic: Any) -> None:
    client, is_cluster, self._owned = await aconnect(client_or_url)
    self._transport = AsyncTransport(client, is_cluster)
    logic.address = self._transport.address
    self._closed = False


class AsyncRedisStore(_AsyncBase):
    """RedisStore for asyncio: ``store = await AsyncRedisStore.open(url, name)``;
    ``await store.add_many(fps)``, ``await store.contains_many(fps)``,
    ``await store.add(fp)``, ``await store.contains(fp)``, ``await store.count()``,
    ``await store.clear()``, ``await store.aclose()``."""

    _logic: StoreLogic
    _checker: "_Checker"
    digest_size: int

    @classmethod
    async def open(cls, client_or_url: Any, name: Any, digest_size: int = 16, *,
                   capacity: Optional[int] = None, window: Any = None,
                   windows: Optional[int] = None,
                   clock: Callable[[], float] = time.time) -> "AsyncRedisStore":
        self = cls()
        self._logic = StoreLogic(name, digest_size, window, windows, clock, capacity)
        self.digest_size = self._logic.digest_size
        self._checker = _Checker(self.digest_size)
        await _attach(self, client_or_url, self._logic)
        try:
            client = self._transport.client
            nodes = len(client.get_primaries()) if self._transport.is_cluster else 1
            await self._transport.run(self._logic.open_op(nodes))
        except BaseException:
            await self.aclose()
            raise
        if self._logic.warning:
            warnings.warn(self._logic.warning, RuntimeWarning, stacklevel=2)
        return self

    @property
    def layout(self) -> str:
        """``"buckets"`` or ``"set"`` (see RedisStore.layout)."""
        return self._logic.layout

    @property
    def capacity(self) -> Optional[int]:
        return self._logic.capacity

    def _raw(self, fps: Any) -> Tuple[bytes, int]:
        ds = self.digest_size
        if isinstance(fps, np.ndarray) and fps.dtype.kind == "S" and fps.ndim == 1 \
                and fps.dtype.itemsize == ds:
            return np.ascontiguousarray(fps).tobytes(), len(fps)
        items = self._checker._fps(fps)
        # Joined in pieces: one join of a million digests holds the GIL for
        # a few hundred ms, and this runs in a worker thread beside the loop.
        step = 1 << 15
        return b"".join([b"".join(items[i:i + step]) for i in range(0, len(items), step)]), \
            len(items)

    async def add_many(self, fps: Any) -> np.ndarray:
        raw, count = await _prepare(_size(fps), self._raw, fps)
        return cast(np.ndarray, await self._run(self._logic.add_op(raw, count), count))

    async def contains_many(self, fps: Any) -> np.ndarray:
        raw, count = await _prepare(_size(fps), self._raw, fps)
        return cast(np.ndarray, await self._run(self._logic.contains_op(raw, count), count))

    async def add(self, fp: Any) -> bool:
        return bool((await self.add_many([fp]))[0])

    async def contains(self, fp: Any) -> bool:
        return bool((await self.contains_many([fp]))[0])

    async def count(self) -> int:
        return int(await self._run(self._logic.len_op()))

    async def clear(self) -> None:
        await self._run(self._logic.clear_op())


class _Checker(FingerprintStore):
    """FingerprintStore's argument checks, for the asyncio store."""

    def __init__(self, digest_size: int) -> None:
        self.digest_size = digest_size

    def _insert(self, unique: List[bytes]) -> Set[bytes]:  # pragma: no cover - never called
        raise TypeError("not a store")

    _select = _insert

    def __len__(self) -> int:  # pragma: no cover
        return 0

    def clear(self) -> None:  # pragma: no cover
        pass

    def close(self) -> None:  # pragma: no cover
        pass


class AsyncRedisBloomFilter(_AsyncBase):
    """RedisBloomFilter for asyncio: ``bf = await AsyncRedisBloomFilter.open(url,
    name, capacity, error_rate)``; ``await bf.add(key)``, ``await
    bf.contains(key)``, ``await bf.add_many(keys)``, ``await
    bf.contains_many(keys)``, ``await bf.estimated_count()``, ``await
    bf.fill_ratio()``, ``await bf.clear()``, ``await bf.to_bloom_filter()``,
    ``await bf.export(path)``, ``await bf.aclose()``."""

    _logic: BloomLogic

    @classmethod
    async def open(cls, client_or_url: Any, name: Any, capacity: Optional[int] = None,
                   error_rate: float = ERROR_RATE, *, shards: Optional[int] = None,
                   layout: str = "blocked", seed: int = 0) -> "AsyncRedisBloomFilter":
        self = cls()
        self._logic = BloomLogic(name, capacity, error_rate, shards, layout, seed)
        await _attach(self, client_or_url, self._logic)
        try:
            client = self._transport.client
            nodes = len(client.get_primaries()) if self._transport.is_cluster else 1
            try:
                await self._transport.run(self._logic.open_op(nodes))
            except RedisDataLostError:  # just created by another process? (CREATION_WAIT)
                if self._logic.created:
                    raise
                deadline = time.monotonic() + CREATION_WAIT
                while True:
                    await asyncio.sleep(CREATION_POLL)
                    try:
                        await self._transport.run(self._logic.check_shards_op())
                        break
                    except RedisDataLostError:
                        if time.monotonic() >= deadline:
                            raise
        except BaseException:
            await self.aclose()
            raise
        return self

    @property
    def num_bits(self) -> int:
        return self._logic.m

    @property
    def num_hashes(self) -> int:
        return self._logic.k

    @property
    def shards(self) -> int:
        return self._logic.shards

    async def add_many(self, keys: Iterable[Any]) -> np.ndarray:
        return await self._batch(keys, True)

    async def contains_many(self, keys: Iterable[Any]) -> np.ndarray:
        return await self._batch(keys, False)

    async def _batch(self, keys: Iterable[Any], setting: bool) -> np.ndarray:
        batch = await _prepare(_size(keys), key_batch, keys)
        return cast(np.ndarray, await self._run(self._logic.batch_op(batch, setting),
                                                len(batch)))

    async def add(self, key: Any) -> bool:
        return bool((await self.add_many([key]))[0])

    async def contains(self, key: Any) -> bool:
        return bool((await self.contains_many([key]))[0])

    async def estimated_count(self) -> int:
        return self._logic.estimate(int(await self._run(self._logic.popcount_op())))

    async def fill_ratio(self) -> float:
        return int(await self._run(self._logic.popcount_op())) / self._logic.m

    async def clear(self) -> None:
        await self._run(self._logic.clear_op())

    async def drop(self) -> None:
        await self._run(self._logic.drop_op())
        await self.aclose()

    async def to_bloom_filter(self) -> Any:
        data = await self._run(self._logic.read_bits_op(), None)  # the whole filter
        bf = BloomFilter._blank(self._logic.params(), 0)
        bf._bits_view()[:] = data
        bf._set_insert_count(bf.estimated_count())
        return bf

    async def export(self, path: Any) -> None:
        (await self.to_bloom_filter()).save(os.fspath(path))


class _AsyncIndex(_AsyncBase):
    """What the asyncio Redis indexes (SimHash, MinHash LSH) share over
    their logic object: opening, and remove, contains, count, clear and
    drop."""

    _logic: SimhashLogic

    async def _open(self, logic: SimhashLogic, client_or_url: Any) -> None:
        self._logic = logic
        await _attach(self, client_or_url, logic)
        try:
            client = self._transport.client
            nodes = len(client.get_primaries()) if self._transport.is_cluster else 1
            await self._transport.run(logic.open_op(nodes))
        except BaseException:
            await self.aclose()
            raise

    async def remove(self, id: Hashable) -> None:
        await self._run(self._logic.remove_op(encode_id(id), id))

    async def contains(self, id: Hashable) -> bool:
        try:
            enc = encode_id(id)
        except (TypeError, ValueError):
            return False
        return bool(await self._run(self._logic.contains_op(enc)))

    async def count(self) -> int:
        return int(await self._run(self._logic.len_op()))

    async def clear(self) -> None:
        # Reads the whole index to find its buckets: prepared off the loop.
        await self._run(self._logic.clear_op(), None)

    async def drop(self) -> None:
        await self._run(self._logic.drop_op(), None)
        await self.aclose()


class AsyncRedisSimhashIndex(_AsyncIndex):
    """RedisSimhashIndex for asyncio: ``index = await
    AsyncRedisSimhashIndex.open(url, name, k=3)``; ``await index.add(id, fp)``,
    ``add_many``, ``remove``, ``query``, ``query_many``, ``near_dup``,
    ``contains``, ``count``, ``clear``, ``drop`` (all awaited)."""

    _logic: SimhashLogic

    @classmethod
    async def open(cls, client_or_url: Any, name: Any, k: Optional[int] = 3, *,
                   shards: Optional[int] = None) -> "AsyncRedisSimhashIndex":
        self = cls()
        await self._open(SimhashLogic(name, k, shards), client_or_url)
        return self

    async def add(self, id: Hashable, fp: int) -> None:
        await self._run(self._logic.add_op([encode_id(id)],
                                           np.array([_check_fp(fp)], dtype=np.uint64)))

    async def add_many(self, ids: Iterable[Hashable], fps: Any) -> None:
        encs, f = await _prepare(_size(ids), id_batch, ids, fps)
        if encs:
            await self._run(self._logic.add_op(encs, f), len(encs))

    async def query(self, fp: int) -> List[Tuple[Hashable, int]]:
        f = _check_fp(fp)
        return cast("List[Tuple[Hashable, int]]",
                    (await self._run(self._logic.query_op(np.array([f], dtype=np.uint64))))[0])

    async def near_dup(self, fp: int) -> bool:
        return bool(await self.query(fp))

    async def query_many(self, fps: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        f = await _prepare(_size(fps), _fp_array, fps)
        results = await self._run(self._logic.query_op(f), len(f))
        return await _prepare(len(f), csr, results)


class AsyncRedisMinHashIndex(MinHashParams, _AsyncIndex):
    """RedisMinHashIndex for asyncio: ``index = await
    AsyncRedisMinHashIndex.open(url, name, threshold=0.8, num_perm=128)``;
    ``await index.add(id, signature)``, ``add_many``, ``remove``, ``query``,
    ``query_many``, ``contains``, ``count``, ``clear``, ``drop`` (all
    awaited)."""

    _logic: MinHashLogic

    @classmethod
    async def open(cls, client_or_url: Any, name: Any, threshold: Optional[float] = 0.8,
                   num_perm: Optional[int] = 128, *, bands: Optional[int] = None,
                   rows: Optional[int] = None, weights: Tuple[float, float] = (0.5, 0.5),
                   shards: Optional[int] = None) -> "AsyncRedisMinHashIndex":
        self = cls()
        await self._open(MinHashLogic(name, threshold, num_perm, bands, rows, weights, shards),
                         client_or_url)
        return self

    async def add(self, id: Hashable, signature: Any) -> None:
        await self._run(self._logic.add_op(
            [encode_id(id)], check_signatures(signature, self.num_perm, "signature")))

    async def add_many(self, ids: Iterable[Hashable], signatures: Any) -> None:
        encs, sigs = await _prepare(_size(ids), id_signatures, ids, signatures, self.num_perm)
        if encs:
            await self._run(self._logic.add_op(encs, sigs), len(encs))

    async def query(self, signature: Any,
                    min_jaccard: Optional[float] = None) -> List[Tuple[Hashable, float]]:
        floor = min_agree(min_jaccard, self.num_perm)
        sig = check_signatures(signature, self.num_perm, "signature")
        return cast("List[Tuple[Hashable, float]]",
                    (await self._run(self._logic.query_op(sig, floor)))[0])

    async def query_many(self, signatures: Any, min_jaccard: Optional[float] = None
                         ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        floor = min_agree(min_jaccard, self.num_perm)
        sigs = await _prepare(_size(signatures), check_signatures, signatures, self.num_perm,
                              "signatures")
        results = await self._run(self._logic.query_op(sigs, floor), len(sigs))
        return await _prepare(len(sigs), jaccard_csr, results)
