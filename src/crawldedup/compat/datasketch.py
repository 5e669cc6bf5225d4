"""datasketch 2.x's ``MinHash`` and ``MinHashLSH`` with the same values, fast.

Change ``from datasketch import MinHash, MinHashLSH`` to
``from crawldedup.compat.datasketch import MinHash, MinHashLSH``.

``MinHash`` gives the ``hashvalues`` datasketch gives for the same
``num_perm``, ``seed``, ``scheme`` and ``hashfunc``: its permutations come
from datasketch's documented generator (``numpy.random.RandomState(seed)``),
and with the default scheme (``"affine32"``) the hashing runs in the core:
SHA-1 of each value, the MurmurHash3 32-bit finalizer, and the minimum of the
affine permutations, without a Python call per value when ``hashfunc`` is the
default.  The ``"affine64"`` and ``"legacy"`` schemes follow datasketch's
arithmetic with numpy (the same values, at datasketch's speed).

``MinHashLSH`` keeps its tables in memory (datasketch's ``"dict"`` storage)
and chooses the same bands and rows for a threshold and weights, so a query
returns the same keys.  For a persistent, batch or Redis index, see
:class:`crawldedup.near.lsh.MinHashIndex`.

>>> from crawldedup.compat.datasketch import MinHash, MinHashLSH
>>> m1, m2 = MinHash(num_perm=128), MinHash(num_perm=128)
>>> m1.update_batch([w.encode() for w in "the cat sat on the mat today".split()])
>>> m2.update_batch([w.encode() for w in "the cat sat on the mat again".split()])
>>> lsh = MinHashLSH(threshold=0.5, num_perm=128)
>>> lsh.insert("m2", m2)
>>> lsh.query(m1)
['m2']
>>> (lsh.b, lsh.r)
(25, 5)
"""

from __future__ import annotations

import copy
import functools
import hashlib
import pickle
import struct
import warnings
from typing import Any, Callable, Dict, Hashable, Iterable, Iterator, List, Optional, Set, Tuple

import numpy as np

from crawldedup import _kernel
from crawldedup.near.lsh import optimal_bands_as_datasketch

__all__ = ["MinHash", "MinHashLSH", "sha1_hash32", "sha1_hash64"]

_MERSENNE = (1 << 61) - 1
_MAX32 = (1 << 32) - 1
_SCHEMES = ("affine32", "affine64", "legacy")
_DTYPES = {"affine32": np.uint32, "affine64": np.uint64, "legacy": np.uint64}
_EMPTY = {"affine32": np.uint32(_MAX32), "affine64": np.uint64((1 << 64) - 1),
          "legacy": np.uint64(_MAX32)}


def sha1_hash32(data: bytes) -> int:
    """datasketch.hashfunc.sha1_hash32: the first 4 bytes of SHA-1, little-endian."""
    return int(struct.unpack("<I", hashlib.sha1(data).digest()[:4])[0])


def sha1_hash64(data: bytes) -> int:
    """datasketch.hashfunc.sha1_hash64: the first 8 bytes of SHA-1, little-endian."""
    return int(struct.unpack("<Q", hashlib.sha1(data).digest()[:8])[0])


def _is_default_hash32(func: Callable[..., Any]) -> bool:
    """Whether func is sha1_hash32, ours or datasketch's (whose values ours
    computes in the core)."""
    return func is sha1_hash32 or (
        getattr(func, "__module__", None) == "datasketch.hashfunc"
        and getattr(func, "__name__", None) == "sha1_hash32")


@functools.lru_cache(maxsize=64)
def _permutations(num_perm: int, seed: int, scheme: str) -> np.ndarray:
    """datasketch's permutation parameters, drawn from RandomState(seed) in
    its order: a read-only (2, num_perm) array."""
    gen = np.random.RandomState(seed)
    if scheme == "legacy":
        pairs = [(gen.randint(1, _MERSENNE, dtype=np.uint64),
                  gen.randint(0, _MERSENNE, dtype=np.uint64)) for _ in range(num_perm)]
        out: np.ndarray = np.array(pairs, dtype=np.uint64).T
    else:
        width = 32 if scheme == "affine32" else 64
        dtype = _DTYPES[scheme]
        a = gen.randint(0, 1 << (width - 1), num_perm, dtype=dtype) * dtype(2) + dtype(1)
        b = gen.randint(0, 1 << width, num_perm, dtype=dtype)
        out = np.array([a, b])
    out.flags.writeable = False
    return out


def _fmix64(hv: np.ndarray) -> np.ndarray:
    hv = hv ^ (hv >> np.uint64(33))
    hv = hv * np.uint64(0xFF51AFD7ED558CCD)
    hv = hv ^ (hv >> np.uint64(33))
    hv = hv * np.uint64(0xC4CEB9FE1A85EC53)
    out: np.ndarray = hv ^ (hv >> np.uint64(33))
    return out


def _fmix32(hv: np.ndarray) -> np.ndarray:
    hv = hv ^ (hv >> np.uint32(16))
    hv = hv * np.uint32(0x85EBCA6B)
    hv = hv ^ (hv >> np.uint32(13))
    hv = hv * np.uint32(0xC2B2AE35)
    out: np.ndarray = hv ^ (hv >> np.uint32(16))
    return out


class MinHash:
    """datasketch's ``MinHash``: the same arguments, attributes and values.

    ``gpu_mode`` is accepted ("always" raises, as datasketch does without a
    GPU); every computation runs on the CPU.
    """

    def __init__(self, num_perm: int = 128, seed: int = 1, gpu_mode: str = "disable",
                 hashfunc: Optional[Callable[..., Any]] = None, hashobj: Optional[object] = None,
                 hashvalues: Optional[Any] = None, permutations: Optional[Any] = None,
                 scheme: Optional[str] = None) -> None:
        if scheme is None:
            if hashvalues is not None or permutations is not None:
                raise ValueError(
                    "scheme must be specified explicitly when initializing from existing "
                    "hash values or permutations: pass the scheme of the MinHash they came "
                    "from, or scheme='legacy' for values created by datasketch before 2.0.0.")
            scheme = "affine32"
        elif scheme not in _SCHEMES:
            raise ValueError(f"scheme must be one of {', '.join(_SCHEMES)}, got {scheme!r}")
        if gpu_mode not in ("disable", "detect", "always"):
            raise ValueError(f"gpu_mode must be 'disable', 'detect' or 'always', got {gpu_mode!r}")
        self.scheme = scheme
        if hashvalues is not None:
            num_perm = len(hashvalues)
        if num_perm < 1:
            raise ValueError("num_perm must be positive")
        if num_perm > 1 << 32:
            raise ValueError(f"Cannot have more than {1 << 32} number of permutation functions")
        self.seed = seed
        self.num_perm = num_perm
        if hashfunc is None:
            hashfunc = sha1_hash64 if scheme == "affine64" else sha1_hash32
        if not callable(hashfunc):
            raise ValueError("The hashfunc must be a callable.")
        self.hashfunc = hashfunc
        if hashobj is not None:
            warnings.warn("hashobj is deprecated, use hashfunc instead.", DeprecationWarning,
                          stacklevel=2)
        if hashvalues is not None:
            self.hashvalues = self._parse_values(hashvalues, "hash values")
        else:
            self.hashvalues = np.full(num_perm, _EMPTY[scheme], dtype=_DTYPES[scheme])
        if permutations is not None:
            self.permutations = self._parse_permutations(permutations)
        else:
            self.permutations = _permutations(num_perm, seed, scheme)
        if len(self) != len(self.permutations[0]):
            raise ValueError("Numbers of hash values and permutations mismatch")
        self._gpu_mode = gpu_mode
        if gpu_mode == "always":
            raise RuntimeError("GPU mode 'always' requested but CuPy/CUDA device is unavailable.")

    # ------------------------------------------------------------ parsing
    def _parse_values(self, values: Any, what: str) -> np.ndarray:
        dtype = _DTYPES[self.scheme]
        if self.scheme == "legacy":
            return np.array(values, dtype=np.uint64)
        if isinstance(values, np.ndarray):
            if values.dtype.kind in "iu" and values.size and (
                    int(values.max()) > int(_EMPTY[self.scheme]) or int(values.min()) < 0):
                raise ValueError(f"{what} out of range for scheme {self.scheme!r}")
            return values.astype(dtype)
        try:
            return np.array(values, dtype=dtype)
        except OverflowError as err:
            raise ValueError(f"{what} out of range for scheme {self.scheme!r}: {err}") from err

    def _parse_permutations(self, permutations: Any) -> Any:
        if self.scheme == "legacy":
            return permutations
        dtype = _DTYPES[self.scheme]
        if (isinstance(permutations, np.ndarray) and permutations.dtype == dtype
                and permutations.ndim == 2 and permutations.shape[0] == 2):
            parsed = permutations
        else:
            parsed = np.array([self._parse_values(permutations[0], "permutation parameters"),
                               self._parse_values(permutations[1], "permutation parameters")])
        if np.any(parsed[0] & dtype(1) == 0):
            raise ValueError(
                f"all `a` permutation parameters must be odd for scheme {self.scheme!r}")
        return parsed

    def _hash_array(self, hvs: List[Any]) -> np.ndarray:
        try:
            return np.array(hvs, dtype=_DTYPES[self.scheme])
        except OverflowError as err:
            raise ValueError(
                f"hashfunc returned a value out of range for scheme {self.scheme!r}: {err}. "
                "Use a hash function matching the scheme width, or scheme='affine64' "
                "for 64-bit hash values.") from err

    def _fast(self) -> bool:
        return (self.scheme == "affine32" and isinstance(self.permutations, np.ndarray)
                and self.permutations.dtype == np.uint32
                and self.hashvalues.dtype == np.uint32 and self.hashvalues.flags.writeable
                and self.hashvalues.flags.c_contiguous)

    # ------------------------------------------------------------ updates
    def update(self, b: Any) -> None:
        """Add one value (bytes for the default hash function)."""
        self.update_batch([b])

    def update_batch(self, b: Iterable[Any]) -> None:
        """Add many values (bytes for the default hash function)."""
        items = b if isinstance(b, list) else list(b)
        if not items:
            return
        if self._fast():
            a_, b_ = self.permutations[0], self.permutations[1]
            if _is_default_hash32(self.hashfunc):
                _kernel.minhash_sha1(items, a_, b_, self.hashvalues)
            else:
                hv = self._hash_array([self.hashfunc(x) for x in items])
                _kernel.minhash_hashes(hv, a_, b_, self.hashvalues, True)
            return
        hvs = [self.hashfunc(x) for x in items]
        a, c = self.permutations
        if self.scheme == "legacy":
            hv = np.array(hvs, dtype=np.uint64, ndmin=2).T
            phv = np.bitwise_and((hv * a + c) % np.uint64(_MERSENNE), np.uint64(_MAX32))
        else:
            hv = self._hash_array(hvs).reshape(-1, 1)
            hv = _fmix32(hv) if self.scheme == "affine32" else _fmix64(hv)
            phv = hv * a + c
        self.hashvalues = np.minimum(self.hashvalues, phv.min(axis=0))

    # ------------------------------------------------------------ queries
    def _check_other(self, other: Any, what: str) -> None:
        if getattr(other, "scheme", None) != self.scheme:
            raise ValueError(f"Cannot {what} MinHash with different permutation schemes")
        if other.seed != self.seed:
            raise ValueError(f"Cannot {what} MinHash with different seeds")
        if len(self) != len(other):
            raise ValueError(
                f"Cannot {what} MinHash with different numbers of permutation functions")

    def jaccard(self, other: Any) -> float:
        """The estimated Jaccard similarity of the two sets."""
        if getattr(other, "scheme", None) != self.scheme:
            raise ValueError(
                "Cannot compute Jaccard given MinHash with different permutation schemes")
        if other.seed != self.seed:
            raise ValueError("Cannot compute Jaccard given MinHash with different seeds")
        if len(self) != len(other):
            raise ValueError("Cannot compute Jaccard given MinHash with different numbers of "
                             "permutation functions")
        return float(np.count_nonzero(self.hashvalues == other.hashvalues)) / float(len(self))

    def count(self) -> float:
        """The estimated number of distinct values added."""
        k = len(self)
        return float(k) / float(np.sum(self.hashvalues / float(_EMPTY[self.scheme]))) - 1.0

    def merge(self, other: Any) -> None:
        """Make this MinHash the union of itself and other."""
        self._check_other(other, "merge")
        self.hashvalues = np.minimum(other.hashvalues, self.hashvalues)

    def digest(self) -> np.ndarray:
        """A copy of the hash values."""
        return copy.copy(self.hashvalues)

    def is_empty(self) -> bool:
        """Whether nothing was added."""
        return not np.any(self.hashvalues != _EMPTY[self.scheme])

    def clear(self) -> None:
        """Forget every value added."""
        self.hashvalues = np.full(len(self), _EMPTY[self.scheme], dtype=_DTYPES[self.scheme])

    def copy(self) -> "MinHash":
        return type(self)(seed=self.seed, hashfunc=self.hashfunc, hashvalues=self.digest(),
                          permutations=self.permutations, gpu_mode=self._gpu_mode,
                          scheme=self.scheme)

    def __len__(self) -> int:
        return len(self.hashvalues)

    def __eq__(self, other: object) -> bool:
        return (type(self) is type(other) and self.scheme == getattr(other, "scheme", None)
                and self.seed == getattr(other, "seed", None)
                and np.array_equal(self.hashvalues, getattr(other, "hashvalues")))

    __hash__ = None  # type: ignore[assignment]  # mutable, like datasketch's

    @classmethod
    def union(cls, *mhs: Any) -> "MinHash":
        """A new MinHash of the union of the sets of mhs (at least two)."""
        if len(mhs) < 2:
            raise ValueError("Cannot union less than 2 MinHash")
        first = mhs[0]
        if any(first.seed != m.seed or len(first) != len(m) or first.scheme != m.scheme
               for m in mhs):
            raise ValueError("The unioning MinHash must have the same seed, number of "
                             "permutation functions and scheme")
        return cls(num_perm=len(first), seed=first.seed, hashfunc=first.hashfunc,
                   hashvalues=np.minimum.reduce([m.hashvalues for m in mhs]),
                   permutations=first.permutations,
                   gpu_mode=getattr(first, "_gpu_mode", "disable"), scheme=first.scheme)

    @classmethod
    def bulk(cls, b: Iterable[Iterable[Any]], **minhash_kwargs: Any) -> List["MinHash"]:
        """A MinHash of each list of values in b."""
        return list(cls.generator(b, **minhash_kwargs))

    @classmethod
    def generator(cls, b: Iterable[Iterable[Any]],
                  **minhash_kwargs: Any) -> Iterator["MinHash"]:
        """A MinHash of each list of values in b, one at a time."""
        m = cls(**minhash_kwargs)
        for values in b:
            out = m.copy()
            out.update_batch(values)
            yield out

    def __getstate__(self) -> Dict[str, Any]:
        return dict(self.__dict__)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        state.setdefault("scheme", "legacy")
        self.__dict__.update(state)


def _scheme_of(known: Optional[str], minhash: Any) -> Optional[str]:
    scheme: Optional[str] = getattr(minhash, "scheme", None)
    if scheme is None:
        return known
    if known is None:
        return scheme
    if scheme != known:
        raise ValueError(f"MinHash scheme {scheme!r} does not match scheme {known!r} of the "
                         "MinHash previously given to this index")
    return known


class MinHashLSH:
    """datasketch's ``MinHashLSH`` with its ``"dict"`` storage: the same bands
    and rows for a threshold and weights, the same keys from a query.

    ``storage_config`` other than ``{"type": "dict"}`` is refused: the Redis
    and Cassandra storages are datasketch's own.
    """

    def __init__(self, threshold: float = 0.9, num_perm: int = 128,
                 weights: Tuple[float, float] = (0.5, 0.5),
                 params: Optional[Tuple[int, int]] = None,
                 storage_config: Optional[Dict[str, Any]] = None,
                 prepickle: Optional[bool] = None,
                 hashfunc: Optional[Callable[[bytes], Any]] = None) -> None:
        storage_config = storage_config if storage_config else {"type": "dict"}
        if storage_config.get("type") != "dict":
            raise ValueError("crawldedup.compat.datasketch.MinHashLSH keeps its tables in "
                             "memory (storage_config type 'dict'); for an index shared on "
                             "Redis use crawldedup.near.lsh.RedisMinHashIndex")
        self._buffer_size = 50000
        if threshold > 1.0 or threshold < 0.0:
            raise ValueError("threshold must be in [0.0, 1.0]")
        if num_perm < 2:
            raise ValueError("Too few permutation functions")
        if any(w < 0.0 or w > 1.0 for w in weights):
            raise ValueError("Weight must be in [0.0, 1.0]")
        if sum(weights) != 1.0:
            raise ValueError("Weights must sum to 1.0")
        self.h = num_perm
        if params is not None:
            self.b, self.r = params
            if self.b * self.r > num_perm:
                raise ValueError(
                    f"The product of b and r in params is {self.b} * {self.r} = "
                    f"{self.b * self.r} -- it must be less than num_perm {num_perm}. "
                    "Did you forget to specify num_perm?")
        else:
            self.b, self.r = optimal_bands_as_datasketch(threshold, num_perm, weights)
        if self.b < 2:
            raise ValueError("The number of bands are too small (b < 2)")
        self.prepickle = False if prepickle is None else prepickle
        self.hashfunc = hashfunc
        self.hashranges = [(i * self.r, (i + 1) * self.r) for i in range(self.b)]
        self.hashtables: List[Dict[Any, Set[Hashable]]] = [{} for _ in range(self.b)]
        self.keys: Dict[Hashable, List[Any]] = {}
        self._minhash_scheme: Optional[str] = None

    @property
    def buffer_size(self) -> int:
        return self._buffer_size

    @buffer_size.setter
    def buffer_size(self, value: int) -> None:
        self._buffer_size = value

    def _bands(self, minhash: Any) -> List[Any]:
        """The band keys of a MinHash: the bytes of each band's values, as
        datasketch makes them (byte-swapped), through hashfunc if given."""
        if len(minhash) != self.h:
            raise ValueError(f"Expecting minhash with length {self.h}, got {len(minhash)}")
        values = np.asarray(minhash.hashvalues)
        raw = values[:self.b * self.r].byteswap().tobytes()
        step = self.r * values.dtype.itemsize
        keys = [raw[i * step:(i + 1) * step] for i in range(self.b)]
        if self.hashfunc is not None:
            return [self.hashfunc(k) for k in keys]
        return keys

    def insert(self, key: Hashable, minhash: Any, check_duplication: bool = True) -> None:
        """Index minhash under key."""
        self._minhash_scheme = _scheme_of(self._minhash_scheme, minhash)
        if self.prepickle:
            key = pickle.dumps(key)
        if check_duplication and key in self.keys:
            raise ValueError("The given key already exists")
        bands = self._bands(minhash)
        self.keys.setdefault(key, []).extend(bands)
        for band, table in zip(bands, self.hashtables):
            table.setdefault(band, set()).add(key)

    def insertion_session(self, buffer_size: int = 50000) -> "_Session":
        return _Session(self, buffer_size)

    def deletion_session(self, buffer_size: int = 50000) -> "_Session":
        return _Session(self, buffer_size)

    def merge(self, other: "MinHashLSH", check_overlap: bool = False) -> None:
        """Add every key of other (built with the same num_perm, b and r)."""
        if type(self) is not type(other):
            raise ValueError(f"Cannot merge type MinHashLSH and type {type(other).__name__}.")
        if (self.h, self.b, self.r) != (other.h, other.b, other.r):
            raise ValueError("Cannot merge MinHashLSH with different initialization parameters.")
        known, other_known = self._minhash_scheme, other._minhash_scheme
        if known is not None and other_known is not None and known != other_known:
            raise ValueError(f"Cannot merge MinHashLSH indexed with MinHash scheme "
                             f"{other_known!r} into one indexed with scheme {known!r}")
        if check_overlap and set(self.keys).intersection(other.keys):
            raise ValueError("The keys are overlapping, duplicate key exists.")
        if known is None:
            self._minhash_scheme = other_known
        for key, bands in other.keys.items():
            self.keys.setdefault(key, []).extend(bands)
            for band, table in zip(bands, self.hashtables):
                table.setdefault(band, set()).add(key)

    def query(self, minhash: Any) -> List[Hashable]:
        """The keys sharing at least one band with minhash."""
        _scheme_of(self._minhash_scheme, minhash)
        candidates: Set[Hashable] = set()
        for band, table in zip(self._bands(minhash), self.hashtables):
            found = table.get(band)
            if found:
                candidates.update(found)
        if self.prepickle:
            return [pickle.loads(k) for k in candidates]  # type: ignore[arg-type]
        return list(candidates)

    def __contains__(self, key: Hashable) -> bool:
        if self.prepickle:
            key = pickle.dumps(key)
        return key in self.keys

    def remove(self, key: Hashable) -> None:
        """Remove key; ValueError when it is not indexed."""
        if self.prepickle:
            key = pickle.dumps(key)
        if key not in self.keys:
            raise ValueError("The given key does not exist")
        for band, table in zip(self.keys[key], self.hashtables):
            found = table.get(band)
            if found is not None:
                found.discard(key)
                if not found:
                    del table[band]
        del self.keys[key]

    def is_empty(self) -> bool:
        """Whether a band table is empty (datasketch's test)."""
        return any(len(t) == 0 for t in self.hashtables)

    def get_counts(self) -> List[Dict[Any, int]]:
        """For each band, the number of keys in each bucket."""
        return [{band: len(keys) for band, keys in table.items()} for table in self.hashtables]

    def get_subset_counts(self, *keys: Hashable) -> List[Dict[Any, int]]:
        """get_counts restricted to keys."""
        chosen = [pickle.dumps(k) for k in set(keys)] if self.prepickle else list(set(keys))
        tables: List[Dict[Any, Set[Hashable]]] = [{} for _ in range(self.b)]
        for key in chosen:
            for band, table in zip(self.keys[key], tables):
                table.setdefault(band, set()).add(key)
        return [{band: len(ks) for band, ks in table.items()} for table in tables]


class _Session:
    """insertion_session / deletion_session: with the dict storage there is
    nothing to buffer, so each call goes straight to the index."""

    def __init__(self, lsh: MinHashLSH, buffer_size: int) -> None:
        self.lsh = lsh
        lsh.buffer_size = buffer_size

    def __enter__(self) -> "_Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    def insert(self, key: Hashable, minhash: Any, check_duplication: bool = True) -> None:
        self.lsh.insert(key, minhash, check_duplication=check_duplication)

    def remove(self, key: Hashable) -> None:
        self.lsh.remove(key)
