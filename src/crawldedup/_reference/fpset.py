"""Twin of ``src/_core_fpset.pxi`` (+ ``src/_cd_fpset.h``): ``FingerprintTable``,
an exact set of fixed-size digests.

The core keeps them in an ordered open-addressing table; here a Python set,
with the same canonical order computed by sorting.
"""

from __future__ import annotations

from typing import List, Set, Tuple

import numpy as np

from crawldedup._reference.bloom import _fmix64, holds_objects, objects_error

FP_MAX_DIGEST_SIZE = 64


def _fp_bytes(key: object) -> bytes:
    if isinstance(key, str):
        raise TypeError("a digest must be bytes-like, not str (hash the text first, e.g. "
                        "hashlib.md5(url.encode()).digest())")
    try:
        view = memoryview(key)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"a digest must be bytes-like, not {type(key).__name__}") from None
    if not view.c_contiguous:
        raise TypeError("a digest must be a contiguous buffer")
    if holds_objects(view.format):
        raise objects_error("a digest", key)
    return view.tobytes()


def fp_hash(digest: object) -> int:
    """The 64-bit hash that orders a FingerprintSet (docs/fpset.md)."""
    data = _fp_bytes(digest)
    if not 1 <= len(data) <= FP_MAX_DIGEST_SIZE:
        raise ValueError(f"digest must be 1 to {FP_MAX_DIGEST_SIZE} bytes long, "
                         f"got {len(data)}")
    acc = 0
    for i in range(0, len(data), 8):
        acc = _fmix64(acc ^ int.from_bytes(data[i:i + 8], "little"))
    return acc


def _fp_order(digest: bytes) -> Tuple[int, ...]:
    """The canonical order: h, then the digest's little-endian 64-bit words
    (the last one zero-padded)."""
    words = [int.from_bytes(digest[i:i + 8], "little") for i in range(0, len(digest), 8)]
    return (fp_hash(digest), *words)


class FingerprintTable:
    """An exact set of ``digest_size``-byte digests (pure-Python twin)."""

    def __init__(self, digest_size: int = 16) -> None:
        if isinstance(digest_size, bool) or not isinstance(digest_size, int):
            raise TypeError(f"digest_size must be an int, not {type(digest_size).__name__}")
        if not 1 <= digest_size <= FP_MAX_DIGEST_SIZE:
            raise ValueError(f"digest_size must be between 1 and {FP_MAX_DIGEST_SIZE}, "
                             f"got {digest_size}")
        self._ds = digest_size
        self._keys: Set[bytes] = set()

    @property
    def digest_size(self) -> int:
        return self._ds

    @property
    def nbytes(self) -> int:
        """An estimate: the core's table (slots of max(digest_size, 8)
        bytes) at its largest load, 19/20."""
        return len(self._keys) * max(self._ds, 8) * 20 // 19

    def reserve(self, n: int) -> None:
        """The core makes room for n digests; a set needs none: only the
        checks."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"n must be an int, not {type(n).__name__}")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if n >= 1 << 62:
            raise MemoryError(f"no room for {n} digests")

    def __len__(self) -> int:
        return len(self._keys)

    def _key(self, key: object) -> bytes:
        data = _fp_bytes(key)
        if len(data) != self._ds:
            raise ValueError(f"a digest must be exactly {self._ds} bytes long, got {len(data)}")
        return data

    def add(self, key: object) -> bool:
        data = self._key(key)
        if data in self._keys:
            return False
        self._keys.add(data)
        return True

    def contains(self, key: object) -> bool:
        return self._key(key) in self._keys

    __contains__ = contains

    def _batch(self, keys: object, adding: bool) -> np.ndarray:
        ds = self._ds
        if isinstance(keys, (str, bytes, bytearray, memoryview)):
            raise TypeError(
                f"keys must be a list of digests or a numpy S{ds} array, not a single "
                f"{type(keys).__name__}; use add()/`in` for one digest")
        if isinstance(keys, np.ndarray):
            if keys.dtype.kind == "S":
                if keys.dtype.itemsize != ds:
                    raise ValueError(f"keys: a numpy array of dtype {keys.dtype} holds "
                                     f"{keys.dtype.itemsize}-byte items; this set holds "
                                     f"{ds}-byte digests (dtype S{ds})")
                if keys.ndim != 1:
                    raise ValueError(f"keys: a numpy S{ds} array must be 1-D, got "
                                     f"{keys.ndim} dimensions")
            elif keys.dtype == np.uint8 and keys.ndim == 2:
                if keys.shape[1] != ds:
                    raise ValueError(f"keys: a 2-D uint8 array must have {ds} columns, got "
                                     f"{keys.shape[1]}")
            else:
                raise TypeError(f"keys: a numpy array must have dtype S{ds} (or be 2-D "
                                f"uint8 with {ds} columns), not {keys.dtype} with "
                                f"{keys.ndim} dimensions")
            raw = np.ascontiguousarray(keys).tobytes()
            items: List[object] = [raw[i:i + ds] for i in range(0, len(raw), ds)]
        else:
            try:
                items = list(keys)  # type: ignore[call-overload]
            except TypeError:
                raise TypeError(f"keys must be an iterable of digests, not "
                                f"{type(keys).__name__}") from None
        # Every digest is checked before the first is added, as the core does.
        digests = [self._key(key) for key in items]
        answer = self.add if adding else self.contains
        return np.array([answer(d) for d in digests], dtype=np.bool_)

    def add_many(self, keys: object) -> np.ndarray:
        return self._batch(keys, True)

    def contains_many(self, keys: object) -> np.ndarray:
        return self._batch(keys, False)

    def clear(self) -> None:
        self._keys = set()

    def to_bytes(self) -> bytes:
        """Every digest, concatenated in the canonical order (docs/fpset.md)."""
        ordered: List[bytes] = sorted(self._keys, key=_fp_order)
        return b"".join(ordered)

    def load(self, data: object) -> None:
        raw = _fp_bytes(data)
        ds = self._ds
        if len(raw) % ds:
            raise ValueError(f"data of {len(raw)} bytes is not a whole number of "
                             f"{ds}-byte digests")
        keys = [raw[i:i + ds] for i in range(0, len(raw), ds)]
        zero = bytes(ds)
        for i, key in enumerate(keys):
            if i and (key == zero or _fp_order(keys[i - 1]) >= _fp_order(key)):
                raise ValueError(f"digest {i} is out of the canonical order (or a repeat, or "
                                 f"a second all-zero digest)")
        self._keys = set(keys)

    def __reduce__(self) -> Tuple[object, ...]:
        return (_fp_table_restore, (self._ds, self.to_bytes()))


def _fp_table_restore(digest_size: int, data: bytes) -> FingerprintTable:
    t = FingerprintTable(digest_size)
    t.load(data)
    return t
