"""Twin of ``src/_core_index.pxi`` (+ ``src/_core_index_*.pxi``): ``HammingIndex``.

The same pigeonhole search, written plainly.  The 64 bits are cut into k + 1
blocks (block 0 the highest bits, the first 64 % (k + 1) blocks one bit
wider); two fingerprints within distance k agree on at least one block, so
table t maps block t's value to the entries that have it.  Results come out
in canonical orders, so the core's bucket layout, segments and tombstones do
not show.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import numpy as np

from crawldedup._reference.bloom import _MASK64

MAX_HAMMING_K = 8


def _ix_u64(v: object, name: str) -> int:
    if isinstance(v, bool):
        raise TypeError(f"{name} must be an int, not bool")
    if not isinstance(v, int):
        index = getattr(v, "__index__", None)
        if index is None:
            raise TypeError(f"{name} must be an int, not {type(v).__name__}")
        v = index()
    assert isinstance(v, int)
    if v < 0 or v > _MASK64:
        raise ValueError(f"{name} must be in [0, 2**64), got {v}")
    return v


def _ix_u64_array(a: object, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype != np.uint64:
        if arr.size == 0:
            arr = arr.astype(np.uint64)
        elif arr.dtype.kind == "i" and (arr >= 0).all():
            arr = arr.astype(np.uint64)
        elif arr.dtype.kind != "u":
            raise TypeError(f"{name} must be an array of unsigned 64-bit integers, "
                            f"got dtype {arr.dtype}")
        else:
            arr = arr.astype(np.uint64)
    return np.ascontiguousarray(arr)


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"an integer is required for k, not {type(k).__name__}")
    if k < 0 or k > MAX_HAMMING_K:
        raise ValueError(f"k must be in [0, {MAX_HAMMING_K}], got {k}")
    return k


def hamming_blocks(k: int) -> List[Tuple[int, int]]:
    """(shift, width) of the k + 1 blocks that a HammingIndex of distance k
    cuts a fingerprint into, block 0 the highest bits, the first 64 % (k + 1)
    blocks one bit wider: two fingerprints within k agree on one at least."""
    count, top, out = _check_k(k) + 1, 64, []
    for t in range(count):
        width = 64 // count + (1 if t < 64 % count else 0)
        top -= width
        out.append((top, width))
    return out


def _is_uint64(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= _MASK64


class HammingIndex:
    """Exact index of (fingerprint, id) pairs, both uint64, searched by
    Hamming distance <= k (0 <= k <= 8).  Ids are unique."""

    def __init__(self, k: int = 3) -> None:
        self._k = _check_k(k)
        self._blocks = hamming_blocks(k)
        self._fp: Dict[int, int] = {}                      # id -> fingerprint
        # block value -> set of ids
        self._tables: List[Dict[int, Set[int]]] = [{} for _ in self._blocks]

    @property
    def k(self) -> int:
        return self._k

    @property
    def nbytes(self) -> int:
        """Rough bytes held (the twin is not built for size)."""
        return 64 + 100 * len(self._fp) * (1 + len(self._blocks))

    @property
    def segments(self) -> int:
        return 1 if self._fp else 0

    def __len__(self) -> int:
        return len(self._fp)

    def __contains__(self, id: object) -> bool:
        return _is_uint64(id) and id in self._fp

    def _block(self, fp: int, t: int) -> int:
        shift, width = self._blocks[t]
        return (fp >> shift) & ((1 << width) - 1)

    def _insert(self, fp: int, id: int) -> None:
        self._fp[id] = fp
        for t in range(len(self._blocks)):
            self._tables[t].setdefault(self._block(fp, t), set()).add(id)

    def add(self, id: object, fp: object) -> None:
        f = _ix_u64(fp, "fp")
        i = _ix_u64(id, "id")
        if i in self._fp:
            raise ValueError(f"id {i} is already in the index")
        self._insert(f, i)

    def add_many(self, ids: object, fps: object) -> None:
        """Add fps[i] under ids[i] (ids first, as every public add takes
        them); all or nothing (a repeated or present id raises ValueError and
        adds none)."""
        f = _ix_u64_array(fps, "fps")
        i = _ix_u64_array(ids, "ids")
        if f.shape[0] != i.shape[0]:
            raise ValueError(f"fps and ids differ in length: {f.shape[0]} and {i.shape[0]}")
        fl, il = f.tolist(), i.tolist()
        seen = set()
        for v in sorted(il):            # the smallest offending id is named
            if v in seen or v in self._fp:
                raise ValueError(f"id {v} is already in the index")
            seen.add(v)
        for fp, id in zip(fl, il):
            self._insert(fp, id)

    def remove(self, id: object) -> bool:
        """Remove the entry with this id; True if there was one."""
        if not _is_uint64(id) or id not in self._fp:
            return False
        fp = self._fp.pop(id)
        for t in range(len(self._blocks)):
            bucket = self._tables[t][self._block(fp, t)]
            bucket.discard(id)
            if not bucket:
                del self._tables[t][self._block(fp, t)]
        return True

    def compact(self) -> None:
        """Nothing to fold: the twin has no segments."""

    def _search(self, q: int) -> List[Tuple[int, int]]:
        found = set()
        for t in range(len(self._blocks)):
            for id in self._tables[t].get(self._block(q, t), ()):
                d = bin(self._fp[id] ^ q).count("1")
                if d <= self._k:
                    found.add((d, id))
        return [(id, d) for d, id in sorted(found)]

    def query(self, fp: object) -> List[Tuple[int, int]]:
        """[(id, distance)] of the entries within k of fp, by distance then id."""
        return self._search(_ix_u64(fp, "fp"))

    def query_many(self, fps: object,
                   threads: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets int64[m+1], ids uint64, distances uint8): the results of
        query fps[i] are ids[offsets[i]:offsets[i+1]], by distance then id.
        ``threads`` is checked as the core checks it; the twin uses one."""
        q = _ix_u64_array(fps, "fps")
        if threads is not None:
            if isinstance(threads, bool) or not isinstance(threads, int):
                raise TypeError(f"threads must be an int or None, not {type(threads).__name__}")
            if threads < 1:
                raise ValueError(f"threads must be at least 1, got {threads}")
        offsets, ids, dists = [0], [], []
        for v in q.tolist():
            for id, d in self._search(v):
                ids.append(id)
                dists.append(d)
            offsets.append(len(ids))
        return (np.array(offsets, dtype=np.int64), np.array(ids, dtype=np.uint64),
                np.array(dists, dtype=np.uint8))

    def pairs(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(a uint64, b uint64, d uint8): every pair of entries within k, a < b,
        sorted by (a, b)."""
        out = []
        for a, fp in self._fp.items():
            for b, d in self._search(fp):
                if a < b:
                    out.append((a, b, d))
        out.sort()
        return (np.array([x[0] for x in out], dtype=np.uint64),
                np.array([x[1] for x in out], dtype=np.uint64),
                np.array([x[2] for x in out], dtype=np.uint8))

    def items(self) -> Tuple[np.ndarray, np.ndarray]:
        """(fps, ids) uint64 arrays of every entry in (fingerprint, id) order."""
        pairs = sorted((fp, id) for id, fp in self._fp.items())
        return (np.array([p[0] for p in pairs], dtype=np.uint64),
                np.array([p[1] for p in pairs], dtype=np.uint64))
