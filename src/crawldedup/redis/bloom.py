"""RedisBloomFilter: a Bloom filter whose bits live in Redis strings, shared
by a fleet of crawlers, sharded over keys (and over the nodes of a Redis
Cluster), with an atomic test-and-set per key.  See docs/redis.md."""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any, Iterable, Optional, cast

import numpy as np

from crawldedup._defaults import ERROR_RATE
from crawldedup.bloom.filter import BloomFilter
from crawldedup.exact.stores.base import check_receipt
from crawldedup.redis import _resp
from crawldedup.redis._bloom_logic import CREATION_POLL, CREATION_WAIT, BloomLogic, key_batch
from crawldedup.redis._bloom_logic import RedisDataLostError as RedisDataLostError
from crawldedup.redis._conn import Request, SyncHandle


class RedisBloomFilter(SyncHandle):
    """A Bloom filter in Redis: ``RedisBloomFilter(url_or_client, name, capacity, error_rate)``.

    The interface of :class:`crawldedup.BloomFilter`: ``add(key) -> bool``
    (True when new), ``key in rbf``, ``add_many`` / ``contains_many`` (numpy
    bool arrays), ``estimated_count()``, ``fill_ratio``, ``clear()``,
    ``len()`` (the estimated count).  The bit positions are those of a local
    ``BloomFilter(capacity, error_rate, layout=..., seed=...)``, and the
    Redis strings hold the same bytes as its storage, so :meth:`export`
    writes a file that :meth:`BloomFilter.load` reads and :meth:`import_file`
    uploads one.

    * Each key's test-and-set is atomic: all its k bits are in one shard and
      set by one ``BITFIELD ... SET u1`` command, whose reply (the old bits)
      says whether the key was new.  Of any number of crawlers adding a key at
      once, exactly one is told True.
    * The default ``layout="blocked"`` keeps a key's bits in one 512-bit
      block, so the filter can be cut into ``shards`` strings (keys with hash
      tags of their own, in different cluster slots); a batch is one command
      per shard (per 8,192 keys), every node's commands in flight at once.
      ``layout="standard"`` allows one shard only.
    * A metadata key (``name:meta``) holds the parameters, the shard layout
      and the format version: opening with other parameters raises
      IncompatibleFilterError; ``capacity=None`` opens an existing filter.
      Every command also reads a guard word stored past each shard's bits,
      so a shard that lost its data (a server restarted without
      persistence) raises :class:`RedisDataLostError` instead of answering
      "not seen".
    """

    _logic: BloomLogic
    _what = "filter"

    def __init__(self, client_or_url: Any, name: Any, capacity: Optional[int] = None,
                 error_rate: float = ERROR_RATE, *, shards: Optional[int] = None,
                 layout: str = "blocked", seed: int = 0) -> None:
        self._logic = BloomLogic(name, capacity, error_rate, shards, layout, seed)
        client, is_cluster = self._attach(client_or_url)
        try:
            nodes = len(client.get_primaries()) if is_cluster else 1
            self._open(nodes)
        except BaseException:
            self.close()
            raise

    def _open(self, nodes: int) -> None:
        """Read or create the filter; shards missing just after another
        process created it are waited for (CREATION_WAIT)."""
        try:
            self._transport.run(self._logic.open_op(nodes))
        except RedisDataLostError:
            if self._logic.created:
                raise
            deadline = time.monotonic() + CREATION_WAIT
            while True:
                time.sleep(CREATION_POLL)
                try:
                    self._transport.run(self._logic.check_shards_op())
                    return
                except RedisDataLostError:
                    if time.monotonic() >= deadline:
                        raise

    # -------------------------------------------------------- parameters

    capacity = property(lambda self: int(self._logic.meta["capacity"]),
                        doc="The number of keys the filter was sized for.")
    error_rate = property(lambda self: float(self._logic.meta["error_rate"]),
                          doc="The false-positive rate at capacity.")
    num_bits = property(lambda self: self._logic.m, doc="m, the number of bits.")
    num_hashes = property(lambda self: self._logic.k, doc="k, bits per key.")
    seed = property(lambda self: self._logic.seed, doc="The hash seed.")
    layout = property(lambda self: self._logic.layout, doc="'blocked' or 'standard'.")
    shards = property(lambda self: self._logic.shards, doc="The number of shard keys.")
    shard_keys = property(lambda self: [k.decode("utf-8", "replace") for k in self._logic.keys],
                          doc="The Redis keys of the shards.")

    def __repr__(self) -> str:
        return (f"RedisBloomFilter({self.address!r}, {self.name!r}, capacity={self.capacity}, "
                f"error_rate={self.error_rate!r}, layout={self.layout!r}, "
                f"shards={self.shards}, num_bits={self.num_bits}, "
                f"num_hashes={self.num_hashes})")

    # ------------------------------------------------------------- keys

    def add(self, key: Any) -> bool:
        """Add key; True when it was new (atomically: one of concurrent adders)."""
        return bool(self.add_many([key])[0])

    def __contains__(self, key: Any) -> bool:
        return bool(self.contains_many([key])[0])

    def add_many(self, keys: Iterable[Any]) -> np.ndarray:
        """Add every key; a numpy bool array, True where the key was new
        (the first of repeats within the call counts as new)."""
        items = key_batch(keys)
        return cast(np.ndarray, self._run(self._logic.batch_op(items, True)))

    #: add_many_once / forget_receipt are there.
    supports_receipts = True

    def add_many_once(self, keys: Iterable[Any], receipt: Any) -> np.ndarray:
        """``add_many`` whose answer Redis records with the bits, under
        ``receipt`` (1 to 64 bytes naming the caller's batch): a later call
        with the same receipt and the same keys, by any process (a retry
        after a crash), returns the recorded answer and sets nothing; other
        keys under that receipt are added and their answer replaces it.
        One script call per shard per run of keys (about 8,000 BITFIELD
        arguments), each checking and recording its own field of the
        receipt in its shard's receipts hash, so a retry gets the answer of
        each call that ran and runs the others, and a crashed client's call
        that the server runs late sets nothing.  ``crawldedup urls`` records
        each piece of a chunk this way (docs/cli.md); ``forget_receipt``
        drops the receipt; ``clear()`` every receipt."""
        receipt = check_receipt(receipt)
        items = key_batch(keys)
        digest = hashlib.md5()
        for key in items:  # the batch as given: a retry gives the same
            data = key.encode("utf-8") if isinstance(key, str) else bytes(memoryview(key))
            digest.update(len(data).to_bytes(8, "little") + data)
        return cast(np.ndarray, self._run(self._logic.batch_once_op(items, receipt,
                                                                    digest.digest())))

    def forget_receipt(self, receipt: Any) -> None:
        """Drop what add_many_once recorded under receipt."""
        self._run(self._logic.forget_op(check_receipt(receipt)))

    def contains_many(self, keys: Iterable[Any]) -> np.ndarray:
        items = key_batch(keys)
        return cast(np.ndarray, self._run(self._logic.batch_op(items, False)))

    def update(self, keys: Iterable[Any]) -> None:
        self.add_many(keys)

    # ------------------------------------------------------ whole filter

    def _popcount(self) -> int:
        return int(self._run(self._logic.popcount_op()))

    @property
    def fill_ratio(self) -> float:
        """Fraction of the bits that are set."""
        return self._popcount() / self._logic.m

    def estimated_count(self) -> int:
        """Distinct keys added, estimated from the set bits (as BloomFilter's)."""
        return self._logic.estimate(self._popcount())

    def __len__(self) -> int:
        return self.estimated_count()

    def clear(self) -> None:
        """Forget every key (each shard zeroed atomically)."""
        self._run(self._logic.clear_op())

    def drop(self) -> None:
        """Delete the filter's keys from Redis (the object is unusable after)."""
        self._run(self._logic.drop_op())
        self.close()

    def to_bloom_filter(self) -> BloomFilter:
        """A local BloomFilter with the same parameters and bits."""
        data = self._run(self._logic.read_bits_op())
        bf = BloomFilter._blank(self._logic.params(), 0)
        bf._bits_view()[:] = data
        bf._set_insert_count(bf.estimated_count())
        return bf

    def export(self, path: Any) -> None:
        """Write a local state file (``BloomFilter.load`` reads it)."""
        self.to_bloom_filter().save(os.fspath(path))

    @classmethod
    def import_file(cls, path: Any, client_or_url: Any, name: Any, *,
                    shards: Optional[int] = None, replace: bool = False) -> "RedisBloomFilter":
        """Upload a BloomFilter state file as the Redis filter ``name``.

        An existing filter of that name raises ValueError unless
        ``replace=True``, which drops it first.
        """
        bf = BloomFilter.load(os.fspath(path))
        if replace:
            try:
                cls(client_or_url, name).drop()
            except ValueError:
                pass  # no such filter
        probe = BloomLogic(name, None, 0.01, None, "blocked", 0)
        self = cls.__new__(cls)
        self._logic = BloomLogic(name, bf.capacity, bf.error_rate, shards, bf.layout, bf.seed)
        client, is_cluster = self._attach(client_or_url)
        probe.address = self._transport.address
        try:
            get = Request(probe.meta_key, _resp.command(b"GET", probe.meta_key))
            if self._transport.execute([get])[0][0] is not None:
                raise ValueError(f"a filter named {self.name!r} exists at {self.address}; "
                                 f"pass replace=True to overwrite it")
            nodes = len(client.get_primaries()) if is_cluster else 1
            self._open(nodes)
            self._transport.run(self._logic.write_bits_op(bytes(bf._bits_view())))
        except BaseException:
            self.close()
            raise
        return self

