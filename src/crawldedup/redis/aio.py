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
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Hashable, Iterable, List, Optional, Set, Tuple, cast

import numpy as np

from crawldedup.index import _check_fp, _fp_array
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
from crawldedup.redis._bloom_logic import BloomLogic, key_batch
from crawldedup.redis.simhash import SimhashLogic, csr, encode_id, id_batch
from crawldedup.redis.store import StoreLogic
from crawldedup.stores.base import FingerprintStore


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
        import asyncio
        super().__init__(client, is_cluster, asyncio.Lock())

    async def execute(self, requests: Iterable[Request]) -> List[List[Any]]:
        if self.stale:
            await self.refresh()
        results, sent = await self._execute_once(requests)
        for _attempt in range(3):
            redo = self.to_resend(results)
            if not redo:
                break
            await self.refresh()
            again, _ = await self._execute_once([sent[i] for i in redo])
            for i, r in zip(redo, again):
                results[i] = r
        return self.settled(results)

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

    async def _acquire(self, key: bytes) -> Tuple[str, Any, Any]:
        """(node name, connection, release coroutine function)."""
        if not self.is_cluster:
            pool = self.client.connection_pool
            try:
                conn = await pool.get_connection()
            except TypeError:  # redis-py < 5.3
                conn = await pool.get_connection("_")

            async def release() -> None:
                await pool.release(conn)
            return self.address, conn, release
        node = self.client.get_node_from_key(key)
        conn = node.acquire_connection()

        async def release_node() -> None:
            node.release(conn)
        return node.name, conn, release_node

    async def _execute_once(self, requests: Iterable[Request]
                            ) -> Tuple[List[List[Any]], List[Request]]:
        ex = redis_module().exceptions
        results: List[List[Any]] = []
        sent: List[Request] = []
        conns: Dict[str, Tuple[Any, Any, List[int]]] = {}
        name = self.address

        async def read(conn: Any, i: int) -> None:
            for _ in range(sent[i].replies):
                try:
                    results[i].append(await conn.read_response())
                except ex.ResponseError as exc:
                    results[i].append(exc)

        try:
            async with self._lock:
                for req in requests:
                    try:
                        node = self.client.get_node_from_key(req.route).name \
                            if self.is_cluster else self.address
                    except routing_errors() as exc:
                        self.stale = self.is_cluster
                        raise unavailable(self.address, exc) from exc
                    if node not in conns:
                        name, conn, release = await self._acquire(req.route)
                        conns[node] = (conn, release, [])
                    conn, _, pending = conns[node]
                    name = node
                    results.append([])
                    sent.append(req)
                    await conn.send_packed_command(
                        req.payload if isinstance(req.payload, list) else [req.payload])
                    pending.append(len(results) - 1)
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
        return results, sent

    async def run(self, op: Op) -> Any:
        try:
            requests = next(op)
            while True:
                requests = op.send(await self.execute(requests))
        except StopIteration as stop:
            return stop.value

    async def close(self) -> None:
        await _aclose(self.client)


class _AsyncBase:
    _transport: AsyncTransport
    _owned: bool
    _closed: bool = False

    async def _run(self, op: Op) -> Any:
        if self._closed:
            raise ValueError(f"the {type(self).__name__} is closed")
        return await self._transport.run(op)

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
                   window: Any = None, windows: Optional[int] = None,
                   clock: Callable[[], float] = time.time) -> "AsyncRedisStore":
        self = cls()
        self._logic = StoreLogic(name, digest_size, window, windows, clock)
        self.digest_size = self._logic.digest_size
        self._checker = _Checker(self.digest_size)
        await _attach(self, client_or_url, self._logic)
        return self

    def _raw(self, fps: Any) -> Tuple[bytes, int]:
        ds = self.digest_size
        if isinstance(fps, np.ndarray) and fps.dtype.kind == "S" and fps.ndim == 1 \
                and fps.dtype.itemsize == ds:
            return np.ascontiguousarray(fps).tobytes(), len(fps)
        items = self._checker._fps(fps)
        return b"".join(items), len(items)

    async def add_many(self, fps: Any) -> np.ndarray:
        raw, count = self._raw(fps)
        return cast(np.ndarray, await self._run(self._logic.add_op(raw, count)))

    async def contains_many(self, fps: Any) -> np.ndarray:
        raw, count = self._raw(fps)
        return cast(np.ndarray, await self._run(self._logic.contains_op(raw, count)))

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
                   error_rate: float = 0.01, *, shards: Optional[int] = None,
                   layout: str = "blocked", seed: int = 0) -> "AsyncRedisBloomFilter":
        self = cls()
        self._logic = BloomLogic(name, capacity, error_rate, shards, layout, seed)
        await _attach(self, client_or_url, self._logic)
        try:
            client = self._transport.client
            nodes = len(client.get_primaries()) if self._transport.is_cluster else 1
            await self._transport.run(self._logic.open_op(nodes))
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
        return cast(np.ndarray, await self._run(self._logic.batch_op(key_batch(keys), True)))

    async def contains_many(self, keys: Iterable[Any]) -> np.ndarray:
        return cast(np.ndarray, await self._run(self._logic.batch_op(key_batch(keys), False)))

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
        from crawldedup.bloom import BloomFilter
        data = await self._run(self._logic.read_bits_op())
        bf = BloomFilter._blank(self._logic.params(), 0)
        bf._bits_view()[:] = data
        bf._set_insert_count(bf.estimated_count())
        return bf

    async def export(self, path: Any) -> None:
        import os
        (await self.to_bloom_filter()).save(os.fspath(path))


class AsyncRedisSimhashIndex(_AsyncBase):
    """RedisSimhashIndex for asyncio: ``index = await
    AsyncRedisSimhashIndex.open(url, name, k=3)``; ``await index.add(id, fp)``,
    ``add_many``, ``remove``, ``query``, ``query_many``, ``near_dup``,
    ``contains``, ``count``, ``clear`` (all awaited)."""

    _logic: SimhashLogic

    @classmethod
    async def open(cls, client_or_url: Any, name: Any, k: int = 3) -> "AsyncRedisSimhashIndex":
        self = cls()
        self._logic = SimhashLogic(name, k)
        await _attach(self, client_or_url, self._logic)
        return self

    async def add(self, id: Hashable, fp: int) -> None:
        await self._run(self._logic.add_op([encode_id(id)],
                                           np.array([_check_fp(fp)], dtype=np.uint64)))

    async def add_many(self, ids: Iterable[Hashable], fps: Any) -> None:
        encs, f = id_batch(ids, fps)
        if encs:
            await self._run(self._logic.add_op(encs, f))

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

    async def query(self, fp: int) -> List[Tuple[Hashable, int]]:
        f = _check_fp(fp)
        return cast("List[Tuple[Hashable, int]]",
                    (await self._run(self._logic.query_op(np.array([f], dtype=np.uint64))))[0])

    async def near_dup(self, fp: int) -> bool:
        return bool(await self.query(fp))

    async def query_many(self, fps: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        return csr(await self._run(self._logic.query_op(_fp_array(fps))))

    async def clear(self) -> None:
        await self._run(self._logic.clear_op())
