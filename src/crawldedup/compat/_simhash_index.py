"""The index half of :mod:`crawldedup.compat.simhash`: ``SimhashIndex``
with the package's API and results, its entries in the core's exact Hamming
index where it can, in the package's Python buckets otherwise.  Import it
from :mod:`crawldedup.compat.simhash`."""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Set, cast

from crawldedup import _kernel

if TYPE_CHECKING:
    from crawldedup.compat.simhash import Simhash

__all__ = ["SimhashIndex"]


class _Buckets:
    """Where SimhashIndex keeps its entries: bucket key -> set of
    "<value hex>,<obj_id>" strings, as the package does.  The index talks to
    its storage only through these methods, so another store can replace it."""

    def __init__(self) -> None:
        self.data: Dict[str, Set[str]] = collections.defaultdict(set)

    def get(self, key: str) -> Set[str]:
        return self.data[key]  # creates an empty bucket, as the package does

    def add(self, key: str, entry: str) -> None:
        self.data[key].add(entry)

    def discard(self, key: str, entry: str) -> None:
        bucket = self.data[key]
        if entry in bucket:
            bucket.remove(entry)

    def __len__(self) -> int:
        return len(self.data)


class _CoreBuckets:
    """The same storage, for 64-bit fingerprints and k <= 8, kept in the
    core's exact Hamming index (``crawldedup.SimhashIndex``'s core) instead
    of Python sets of strings.  A query reads no bucket: it asks the index
    for the fingerprints within k, which are exactly those the buckets give
    (a fingerprint within k agrees with the query on one of the k+1 parts at
    least).  Only the size of each bucket the package would have created is
    kept, for ``bucket_size()`` and the package's log messages."""

    def __init__(self, index: "SimhashIndex") -> None:
        self.owner = index
        self.core = _kernel.HammingIndex(index.k)
        self.entries: Dict[str, Any] = {}  # entry -> (core id, value)
        self.names: Dict[int, str] = {}  # core id -> obj_id text
        self.next_id = 0
        self.sizes: Dict[str, int] = {}  # bucket key -> entries in it

    def _keys(self, value: int) -> List[str]:
        keys = self.owner._keys_of(value)
        sizes = self.sizes
        for key in keys:
            sizes.setdefault(key, 0)
        return keys

    def add(self, value: int, entry: str) -> None:
        keys = self._keys(value)
        if entry in self.entries:
            return
        cid = self.next_id
        self.next_id += 1
        self.core.add(value, cid)
        self.entries[entry] = (cid, value)
        self.names[cid] = entry.split(",", 1)[1]
        for key in keys:
            self.sizes[key] += 1

    def discard(self, value: int, entry: str) -> None:
        keys = self._keys(value)
        found = self.entries.pop(entry, None)
        if found is not None:
            self.core.remove(found[0])
            del self.names[found[0]]
            for key in keys:
                self.sizes[key] -= 1

    def near(self, value: int, log: Any) -> List[str]:
        sizes = self.sizes
        for key in self._keys(value):
            log.debug("key:%s", key)
            if sizes[key] > 200:
                log.warning("Big bucket found. key:%s, len:%s", key, sizes[key])
        names = self.names
        return list({names[cid] for cid, _ in self.core.query(value)})

    def __len__(self) -> int:
        return len(self.sizes)

    def materialize(self) -> "_Buckets":
        """Python buckets holding the same entries and keys."""
        plain = _Buckets()
        for key in self.sizes:
            plain.get(key)
        keys_of = self.owner._keys_of
        for entry, (_, value) in self.entries.items():
            for key in keys_of(value):
                plain.add(key, entry)
        return plain


class SimhashIndex:
    """Near-duplicate index with the API and results of ``simhash.SimhashIndex``.

    ``objs`` is a list of (obj_id, Simhash); ``f`` the fingerprint bits; ``k``
    the largest Hamming distance that counts as a near duplicate.  The
    fingerprint is cut into k+1 parts (``offsets``); a near duplicate agrees
    with the query on at least one part, so each part value is a bucket key.
    """

    def __init__(self, objs: Any, f: int = 64, k: int = 2, log: Any = None) -> None:
        _value._check_int("f", f)
        _value._check_int("k", k)
        self.k = k
        self.f = f
        count = len(objs)
        self.log = logging.getLogger("simhash") if log is None else log
        self.log.info("Initializing %s data.", count)
        # The core index where it gives the package's results (64 bits, k
        # up to 8); Python sets otherwise, or from the first use that needs
        # them (the bucket attribute, a Simhash with its own distance).
        self._store: Any = (_CoreBuckets(self) if f == 64 and isinstance(k, int)
                            and not isinstance(k, bool) and 0 <= k <= _kernel.MAX_HAMMING_K
                            else _Buckets())
        for i, q in enumerate(objs):
            if i % 10000 == 0 or i == count - 1:
                self.log.info("%s/%s", i + 1, count)
            self.add(*q)

    def _plain_store(self) -> "_Buckets":
        """Switch to (and return) the Python buckets, for good."""
        if isinstance(self._store, _CoreBuckets):
            self._store = self._store.materialize()
        return cast("_Buckets", self._store)

    @property
    def bucket(self) -> Dict[str, Set[str]]:
        """The bucket key -> entries mapping (the package's attribute).  The
        index keeps its entries in these Python sets from then on, so that
        changes made to them count, as in the package."""
        return self._plain_store().data

    def _bucket_snapshot(self) -> Dict[str, Set[str]]:
        """A copy of what ``bucket`` holds, without leaving the core."""
        store = self._store
        plain = store.materialize() if isinstance(store, _CoreBuckets) else store
        return {key: set(entries) for key, entries in plain.data.items()}

    def _keys_of(self, value: int) -> List[str]:
        offsets = self.offsets
        last = len(offsets) - 1
        keys = []
        for i, offset in enumerate(offsets):
            width = (self.f if i == last else offsets[i + 1]) - offset
            keys.append("%x:%x" % (value >> offset & (2 ** width - 1), i))
        return keys

    def get_near_dups(self, simhash: Simhash) -> List[str]:
        """The ids (str) of indexed fingerprints within distance k of simhash."""
        if simhash.f != self.f:
            raise AssertionError(f"a {simhash.f}-bit Simhash queried in a {self.f}-bit index")
        ans = set()
        plain = type(simhash).distance is _value.Simhash.distance
        mask = (1 << simhash.f) - 1
        value = simhash.value
        if isinstance(self._store, _CoreBuckets):
            if plain and type(value) is int and 0 <= value < 1 << 64:
                return self._store.near(value, self.log)
            self._plain_store()
        for key in self.get_keys(simhash):
            dups = self._store.get(key)
            self.log.debug("key:%s", key)
            if len(dups) > 200:
                self.log.warning("Big bucket found. key:%s, len:%s", key, len(dups))
            for dup in dups:
                sim2, obj_id = dup.split(",", 1)
                if plain:
                    d = _value._popcount((value ^ int(sim2, 16)) & mask)
                else:
                    d = simhash.distance(_value.Simhash(int(sim2, 16), self.f))
                if d <= self.k:
                    ans.add(obj_id)
        return list(ans)

    def add(self, obj_id: Any, simhash: Simhash) -> None:
        self._change(obj_id, simhash, "added to", adding=True)

    def delete(self, obj_id: Any, simhash: Simhash) -> None:
        self._change(obj_id, simhash, "deleted from", adding=False)

    def _change(self, obj_id: Any, simhash: Simhash, verb: str, adding: bool) -> None:
        if simhash.f != self.f:
            raise AssertionError(f"a {simhash.f}-bit Simhash {verb} a {self.f}-bit index")
        entry = "%x,%s" % (simhash.value, obj_id)
        value = simhash.value
        keys: Any
        if isinstance(self._store, _CoreBuckets) and type(value) is int and 0 <= value < 1 << 64:
            keys = (value,)  # the core's buckets take the whole fingerprint
        else:
            if isinstance(self._store, _CoreBuckets):
                self._plain_store()
            keys = self.get_keys(simhash)
        change = self._store.add if adding else self._store.discard
        for key in keys:
            change(key, entry)

    @property
    def offsets(self) -> List[int]:
        """Bit offsets of the k+1 parts of a fingerprint."""
        return [self.f // (self.k + 1) * i for i in range(self.k + 1)]

    def get_keys(self, simhash: Simhash) -> Iterator[str]:
        """Bucket keys of simhash: "<part hex>:<part index hex>"."""
        offsets = self.offsets
        last = len(offsets) - 1
        for i, offset in enumerate(offsets):
            width = (self.f if i == last else offsets[i + 1]) - offset
            c = simhash.value >> offset & (2 ** width - 1)
            yield "%x:%x" % (c, i)

    def bucket_size(self) -> int:
        """Number of bucket keys created so far."""
        return len(self._store)


# Simhash and _popcount, read when called; imported last, so that either
# module may be imported first.
from crawldedup.compat import simhash as _value  # noqa: E402
