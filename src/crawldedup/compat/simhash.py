"""The `simhash` package (1e0ng/leonsim, 2.1.x) API with the same values, fast.

Change ``from simhash import Simhash, SimhashIndex`` to
``from crawldedup.compat.simhash import Simhash, SimhashIndex``.

``Simhash(text)`` with the default ``reg`` and ``hashfunc`` and ``8 <= f <=
128`` runs in the core (MD5 in C); feature lists with integer weights too.
Anything else (a custom ``hashfunc`` or ``reg``, float weights, ``f`` above
128, a subclass overriding ``_tokenize``...) takes a slower path that follows
the package's algorithm step by step.  One deliberate difference: where the
package under NumPy 2 raises ``OverflowError`` (a feature weight above 255 on
its large-weight path, e.g. a text in which one 4-character window occurs
more than 255 times), this module returns the exact weighted value, which is
what the package computes under NumPy 1.  Another: memory never grows with
a feature's weight (the package repeats a digest weight times when a str
feature reuses a large weight: ``Simhash([("a", 2**31), "b"])`` asks it for
16 GiB); the bits are multiplied by the count instead, the same sums.

>>> from crawldedup.compat.simhash import Simhash, SimhashIndex
>>> Simhash("How are you? I am fine. Thanks.").value
3419227768443824139
>>> a, b = Simhash("How are you? I am fine. Thanks."), Simhash("How are u? I am fine. Thanks.")
>>> a.distance(b)
9
>>> index = SimhashIndex([("1", a)], k=9)
>>> index.get_near_dups(b)
['1']
"""

from __future__ import annotations

import collections
import hashlib
import logging
import math
import numbers
import operator
import re
import sys
from collections.abc import Iterable
from itertools import groupby
from typing import Any, Dict, Iterator, List, Set, cast

import numpy as np

from crawldedup import _kernel

__all__ = ["Simhash", "SimhashIndex"]

_DEFAULT_REG = r"[\w\u4e00-\u9fcc]+"
# Integer weights summed in the core stay far from int64 overflow below this.
_FAST_WEIGHT_LIMIT = 1 << 31
_FAST_MAX_FEATURES = 1 << 28


# What np.sum of uint8 bits gives (the package's _sum_hashes): the platform's
# unsigned integer.
_SUM_DTYPE = np.sum(np.zeros(1, dtype=np.uint8)).dtype
# Past this many bytes of repeated digests Python's bytes raise OverflowError.
_SUM_LIMIT = sys.maxsize + 1


def _repeat_count(digest: bytes, w: Any) -> int:
    """How many times ``digest * w`` repeats digest (0 for w <= 0), raising
    what that repetition raises (TypeError for a float weight, OverflowError
    past the index range) without building it."""
    try:
        n = operator.index(w)
    except TypeError:
        digest * w  # raises the package's TypeError
        raise  # pragma: no cover - digest * w raised
    if n > sys.maxsize:
        digest * n  # raises OverflowError ("cannot fit 'int' into an index-sized integer")
    return max(n, 0)


def _hashfunc(x: bytes) -> bytes:
    return hashlib.md5(x).digest()


def _default_reg(reg: Any) -> bool:
    if isinstance(reg, str):
        return reg == _DEFAULT_REG
    return (isinstance(reg, re.Pattern) and reg.pattern == _DEFAULT_REG
            and reg.flags == re.UNICODE)


def _popcount(x: int) -> int:
    return bin(x).count("1")


def _check_int(name: str, value: Any) -> None:
    """An int parameter of the package's API (numpy integers too): the
    package fails on a float one later, with a less telling TypeError."""
    if not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")


class Simhash:
    """A SimHash fingerprint with the API and values of ``simhash.Simhash``.

    ``value`` may be a str (tokenized: lower-cased, the matches of ``reg``
    joined, 4-character windows counted, each hashed with ``hashfunc``), an
    iterable of features (str, (str, weight) pairs, or a dict str -> weight),
    an int (taken as the value) or another Simhash.  ``f`` is the number of
    bits, a multiple of 8.
    """

    # Constants of the package's batched numpy summation (kept for subclasses
    # and for the slow path, which follows it).
    large_weight_cutoff = 50
    batch_size = 200

    def __init__(self, value: Any, f: int = 64, reg: Any = _DEFAULT_REG,
                 hashfunc: Any = _hashfunc, log: Any = None) -> None:
        _check_int("f", f)
        if f % 8:
            raise ValueError("f must be a multiple of 8")
        self.f = f
        self.f_bytes = f // 8
        self.reg = reg
        self.value: Any = None
        self.hashfunc = hashfunc
        if hashfunc is _hashfunc:
            self.hashfunc_returns_int = False
        else:
            self.hashfunc_returns_int = isinstance(hashfunc(b"test"), numbers.Integral)
        self.log = logging.getLogger("simhash") if log is None else log

        if isinstance(value, Simhash):
            self.value = value.value
        elif isinstance(value, str):
            self.build_by_text(str(value))
        elif isinstance(value, Iterable):
            self.build_by_features(value)
        elif isinstance(value, numbers.Integral):
            self.value = value
        else:
            raise TypeError(
                f"value must be str, an iterable of features, an int or a Simhash, "
                f"not {type(value).__name__} (Bad parameter with type {type(value)})")

    def __eq__(self, other: Any) -> bool:
        return cast(bool, self.value == other.value)

    __hash__ = None  # type: ignore[assignment]  # like the package: __eq__ without __hash__

    # -- the fast path applies when nothing it replaces was customised
    def _core_ok(self) -> bool:
        cls = type(self)
        return (self.hashfunc is _hashfunc and 8 <= self.f <= 128
                and (cls is Simhash or (
                    cls._sum_hashes is Simhash._sum_hashes
                    and cls._bitarray_from_bytes is Simhash._bitarray_from_bytes
                    and cls.large_weight_cutoff == 50 and cls.batch_size == 200)))

    def _slide(self, content: str, width: int = 4) -> List[str]:
        return [content[i:i + width] for i in range(max(len(content) - width + 1, 1))]

    def _tokenize(self, content: str) -> List[str]:
        content = content.lower()
        content = "".join(re.findall(self.reg, content))
        return self._slide(content)

    def build_by_text(self, content: str) -> None:
        cls = type(self)
        if (self._core_ok() and _default_reg(self.reg)
                and (cls is Simhash or (cls._tokenize is Simhash._tokenize
                                        and cls._slide is Simhash._slide
                                        and cls.build_by_features is Simhash.build_by_features))):
            self.value = _kernel.leonsim_text(content, self.f)
            return None
        features = self._tokenize(content)
        counted = {k: sum(1 for _ in g) for k, g in groupby(sorted(features))}
        return self.build_by_features(counted)

    def build_by_features(self, features: Any) -> None:
        """``features``: str features (weight 1), (feature, weight) pairs, or a
        dict feature -> weight."""
        if isinstance(features, dict):
            features = features.items()
        if not self._core_ok():
            return self._build_by_features_exact(features)
        items = features if isinstance(features, list) else list(features)
        names: List[str] = []
        weights: List[int] = []
        w: Any = 1
        total = 0
        absolute = 0
        for item in items:
            if isinstance(item, str):
                name = item   # the package reuses the previous pair's weight here
            else:
                name, w = item
            if type(w) is not int and type(w) is not bool or not isinstance(name, str):
                return self._build_by_features_exact(items)
            names.append(name)
            weights.append(w)
            total += w
            absolute += abs(w)
        if absolute >= _FAST_WEIGHT_LIMIT or len(names) >= _FAST_MAX_FEATURES:
            return self._build_by_features_exact(items)
        self.value = _kernel.leonsim_features(names, np.array(weights, dtype=np.int64),
                                              total, self.f)
        return None

    def _digest(self, feature: Any) -> bytes:
        if self.hashfunc_returns_int:
            n = self.hashfunc(feature.encode("utf-8")) & (2 ** self.f - 1)
            return cast(bytes, n.to_bytes(self.f_bytes, "big"))
        return cast(bytes, self.hashfunc(feature.encode("utf-8"))[-self.f_bytes:])

    def _build_by_features_exact(self, features: Any) -> None:
        """The package's numpy summation, step by step (custom hashfunc,
        non-int weights, any f): batches of digests repeated weight times,
        large or non-int weights multiplied into their own bit arrays.

        A str feature takes the weight of the pair before it (as in the
        package), which can be large: the package then repeats its digest
        that many times (gigabytes for 2**31).  Here a batch keeps (digest,
        times) and sums each digest's bits times its count, the same numbers
        in the same dtype, in memory that does not depend on the weights
        (unless a subclass overrides ``_sum_hashes``, which gets the repeated
        digests it expects)."""
        partial: List[Any] = []
        batch: List[Any] = []
        count: Any = 0
        w: Any = 1
        weighted = type(self)._sum_hashes is Simhash._sum_hashes
        for item in features:
            large = False
            if not isinstance(item, str):
                item, w = item
                large = w > self.large_weight_cutoff or not isinstance(w, int)
            count += w
            digest = self._digest(item)
            if large:
                bits = self._bitarray_from_bytes(digest)
                if isinstance(w, int):  # exact, as under NumPy 1 (uint8 * int overflows on 2)
                    bits = bits.astype(np.int64)
                partial.append(bits * w)
            else:
                if weighted:
                    batch.append((digest, _repeat_count(digest, w)))
                else:
                    batch.append(digest * w)
                if len(batch) >= self.batch_size:
                    partial.append(self._sum_weighted(batch) if weighted
                                   else self._sum_hashes(batch))
                    batch = []
            if len(partial) >= self.batch_size:
                partial = [np.sum(partial, 0)]
        if batch:
            partial.append(self._sum_weighted(batch) if weighted else self._sum_hashes(batch))
        combined = np.sum(partial, 0)
        self.value = int.from_bytes(np.packbits(combined > count / 2).tobytes(), "big")

    def _sum_weighted(self, batch: List[Any]) -> Any:
        """_sum_hashes of [digest * times for digest, times in batch] without
        repeating anything: the same column sums, in the same dtype.

        The package joins the repeated digests and cuts the bits into rows
        of f.  A digest is usually f bits (one row each), but a custom
        hashfunc may return fewer bytes; then repetition k of a digest of L
        bytes starting at byte o of the stream lands at byte (o + k L) mod
        f/8 of a row, a pattern that repeats every f/8 / gcd(L, f/8)
        repetitions: each of those placements is added once, times how
        often it occurs."""
        width = self.f_bytes
        if width <= 0:
            # np.reshape(bits, (-1, f)) in the package refuses f <= 0
            raise ValueError(f"cannot reshape the digests into rows of f={self.f} bits")
        acc = np.zeros(self.f, dtype=_SUM_DTYPE)
        pos = 0
        if sum(len(d) * times for d, times in batch) >= _SUM_LIMIT:
            # The package would need that many bytes of repeated digests.
            raise OverflowError("feature weights too large: the repeated digests of one batch "
                                "would take more bytes than sys.maxsize (the package raises "
                                "OverflowError too)")
        for digest, times in batch:
            size = len(digest)
            if not size or not times:
                continue
            bits = self._bitarray_from_bytes(digest).astype(_SUM_DTYPE)
            if size == width and pos % width == 0:
                acc += bits * _SUM_DTYPE.type(times)
            else:
                cycle = width // math.gcd(size, width)
                rounds, extra = divmod(times, cycle)
                for k in range(min(times, cycle)):
                    start = ((pos + k * size) % width) * 8
                    where = (start + np.arange(8 * size)) % self.f
                    acc[where] += bits * _SUM_DTYPE.type(rounds + (k < extra))
            pos += size * times
        if pos % width:
            # np.reshape(bits, (-1, f)) in the package refuses it too
            raise ValueError(f"cannot reshape array of size {8 * pos} into shape (-1, {self.f}): "
                             f"the digests of a batch must fill whole rows of f bits")
        return acc

    def _sum_hashes(self, digests: List[bytes]) -> Any:
        bits = self._bitarray_from_bytes(b"".join(digests))
        return np.sum(np.reshape(bits, (-1, self.f)), 0)

    @staticmethod
    def _bitarray_from_bytes(b: bytes) -> Any:
        return np.unpackbits(np.frombuffer(b, dtype=">B"))

    def distance(self, another: "Simhash") -> int:
        """Number of differing bits among the low f."""
        if self.f != another.f:
            raise AssertionError(f"distance between fingerprints of {self.f} and "
                                 f"{another.f} bits")
        return _popcount((self.value ^ another.value) & ((1 << self.f) - 1))


# SimhashIndex and the two stores of its buckets.

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
        self.core.add(cid, value)
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
        _check_int("f", f)
        _check_int("k", k)
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
        plain = type(simhash).distance is Simhash.distance
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
                    d = _popcount((value ^ int(sim2, 16)) & mask)
                else:
                    d = simhash.distance(Simhash(int(sim2, 16), self.f))
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
