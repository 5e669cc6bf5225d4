"""Twin of ``src/_core_lsh.pxi``: MinHash LSH band keys and tables.

A signature of k values is cut into b bands of r values.  Two signatures
are candidates when all r values of some band are equal; the band's key
(``lsh_key``) only finds them fast.
"""

from __future__ import annotations

from typing import Any, Dict, List, Set, Tuple

import numpy as np

_MASK64 = (1 << 64) - 1


def _fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _MASK64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _MASK64
    return h ^ (h >> 33)


def lsh_key(values: List[int], band: int) -> int:
    """The key of one band of r values: start from the band number and r,
    then fold in each pair of values (first value low, second high; a last
    odd value alone) with the MurmurHash3 finalizer."""
    r = len(values)
    h = _fmix64((((band + 1) * 0x9E3779B97F4A7C15) & _MASK64) ^ r)
    for i in range(0, r - 1, 2):
        h = _fmix64(h ^ (values[i] | (values[i + 1] << 32)))
    if r % 2:
        h = _fmix64(h ^ values[-1])
    return h


def _check_shape(b: int, r: int, k: int) -> None:
    if b < 1 or r < 1:
        raise ValueError(f"bands and rows must be at least 1, got {b} and {r}")
    if b * r > k:
        raise ValueError(f"bands * rows must be at most num_perm ({k}), got {b} * {r}")


def _sigs(sigs: Any) -> np.ndarray:
    a = np.asarray(sigs)
    if a.dtype != np.uint32 or a.ndim != 2:
        raise TypeError("signatures must be a two-dimensional uint32 array")
    return a


def lsh_keys(sigs: Any, bands: int, rows: int) -> np.ndarray:
    """The band keys of each signature: an (n, bands) uint64 array."""
    s = _sigs(sigs)
    _check_shape(bands, rows, s.shape[1])
    return np.array([[lsh_key([int(v) for v in row[j * rows:(j + 1) * rows]], j)
                      for j in range(bands)] for row in s], dtype=np.uint64).reshape(-1, bands)


def lsh_agree(a: Any, b: Any) -> np.ndarray:
    """For each i, how many values of a[i] and b[i] are equal (uint32)."""
    x, y = _sigs(a), _sigs(b)
    if x.shape != y.shape:
        raise ValueError(f"a and b must have the same shape, got {x.shape} and {y.shape}")
    out: np.ndarray = np.count_nonzero(x == y, axis=1).astype(np.uint32)
    return out


class BandTable:
    """Per band, a dict from the band's values to the rows that have them."""

    def __init__(self, bands: int, rows: int, num_perm: int) -> None:
        _check_shape(bands, rows, num_perm)
        self.bands, self.rows, self.num_perm = bands, rows, num_perm
        self._tables: List[Dict[Tuple[int, ...], List[int]]] = [{} for _ in range(bands)]
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        return 0

    def _band(self, sig: np.ndarray, j: int) -> Tuple[int, ...]:
        return tuple(int(v) for v in sig[j * self.rows:(j + 1) * self.rows])

    def _check_stored(self, stored: np.ndarray, alive: Any) -> None:
        if stored.shape[1] != self.num_perm or stored.shape[0] < self._n:
            raise ValueError(f"stored must hold the {self._n} signatures added "
                             f"({self.num_perm} values each), got shape {stored.shape}")
        if len(alive) < self._n:
            raise ValueError(f"alive must have an entry per row ({self._n}), got {len(alive)}")

    def add_many(self, sigs: Any) -> int:
        s = _sigs(sigs)
        if s.shape[1] != self.num_perm:
            raise ValueError(f"signatures must have {self.num_perm} values, got {s.shape[1]}")
        first = self._n
        for i, sig in enumerate(s):
            for j, table in enumerate(self._tables):
                table.setdefault(self._band(sig, j), []).append(first + i)
        self._n += len(s)
        return first

    def query_many(self, queries: Any, stored: Any,
                   alive: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        q = _sigs(queries)
        st = _sigs(stored)
        if q.shape[1] != self.num_perm:
            raise ValueError(f"signatures must have {self.num_perm} values, got {q.shape[1]}")
        self._check_stored(st, alive)
        offsets = [0]
        rows: List[int] = []
        agree: List[int] = []
        for sig in q:
            found: Set[int] = set()
            for j, table in enumerate(self._tables):
                found.update(r for r in table.get(self._band(sig, j), []) if alive[r])
            for r in sorted(found):
                rows.append(r)
                agree.append(int(np.count_nonzero(st[r] == sig)))
            offsets.append(len(rows))
        return (np.array(offsets, dtype=np.int64), np.array(rows, dtype=np.uint32),
                np.array(agree, dtype=np.uint32))

    def pairs(self, stored: Any, alive: Any) -> Tuple[np.ndarray, np.ndarray]:
        self._check_stored(_sigs(stored), alive)
        found: Set[Tuple[int, int]] = set()
        for table in self._tables:
            for members in table.values():
                live = [r for r in members if alive[r]]
                for x in range(len(live)):
                    for y in range(x + 1, len(live)):
                        found.add((min(live[x], live[y]), max(live[x], live[y])))
        ordered = sorted(found)
        return (np.array([p[0] for p in ordered], dtype=np.uint32),
                np.array([p[1] for p in ordered], dtype=np.uint32))
