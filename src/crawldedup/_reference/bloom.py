"""Twin of ``src/_core_bloom.pxi`` (with ``_core_keys.pxi``,
``_core_bloom_batch.pxi`` and ``_core_bloom_large.pxi``): key access,
MurmurHash3 x64 128, the Bloom filter's bit positions, and ``BloomBits``;
also the batch switches ``_set_prefetching`` (``src/_core.pyx``) and
``_set_batch_threads`` (``src/_core_threads.pxi``).

Every function and class here computes exactly what its compiled namesake
computes, bit for bit, in short and obviously correct Python.
"""

from __future__ import annotations

import re
import sys
import threading
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union, cast

import numpy as np

Key = Union[str, bytes, bytearray, memoryview]

MAX_NUM_HASHES = 64
MAX_SEED = 0xFFFFFFFF

_MASK64 = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


# ------------------------------------------------------------------ key access

def holds_objects(fmt: str) -> bool:
    """Whether a buffer of this format (struct syntax, as memoryview.format
    gives it) holds Python objects: an "O" item, field names (":name:")
    aside.  Such a buffer's bytes are object addresses, so two equal numpy
    object arrays would be two different keys."""
    return "O" in re.sub(r":[^:]*:", "", fmt)


def objects_error(what: str, key: object) -> TypeError:
    return TypeError(f"{what} must not be a {type(key).__name__} of Python objects: its "
                     f"bytes are object addresses, so equal values would be different "
                     f"keys (convert the values to str or bytes first)")


def _key_bytes(key: object) -> bytes:
    """The bytes that represent key: UTF-8 for str, raw contents otherwise."""
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, bytes):
        return bytes(key)
    try:
        view = memoryview(key)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"key must be str or bytes-like, not {type(key).__name__}") from None
    if not view.c_contiguous:
        raise TypeError(
            f"key must be str or a C-contiguous bytes-like object; "
            f"this {type(key).__name__} is not contiguous")
    if holds_objects(view.format):
        raise objects_error("key", key)
    return view.tobytes()


def _check_seed(seed: object) -> int:
    if not isinstance(seed, int):
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    if seed < 0 or seed > MAX_SEED:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    return int(seed)


# --------------------------------------------------------------------- hashing

def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    k ^= k >> 33
    return k


def murmur3_x64_128(data: bytes, seed: int) -> Tuple[int, int]:
    """MurmurHash3_x64_128 of data: the two 64-bit lanes (h1, h2)."""
    h1 = h2 = seed
    nblocks = len(data) // 16
    for i in range(nblocks):
        k1 = int.from_bytes(data[16 * i:16 * i + 8], "little")
        k2 = int.from_bytes(data[16 * i + 8:16 * i + 16], "little")
        k1 = (_rotl64((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
        h1 ^= k1
        h1 = (_rotl64(h1, 27) + h2) & _MASK64
        h1 = (h1 * 5 + 0x52DCE729) & _MASK64
        k2 = (_rotl64((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
        h2 ^= k2
        h2 = (_rotl64(h2, 31) + h1) & _MASK64
        h2 = (h2 * 5 + 0x38495AB5) & _MASK64
    tail = data[16 * nblocks:]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl64((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
    if len(tail) > 0:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl64((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    return h1, h2


def hash128(key: Key, seed: int = 0) -> int:
    """MurmurHash3 x64 128-bit of key (str as UTF-8, or bytes-like), unsigned.

    Equal to ``mmh3.hash128(key, seed, signed=False)``.

    >>> hash128(b"hello")
    121118445609844952839898260755277781762
    """
    s = _check_seed(seed)
    h1, h2 = murmur3_x64_128(_key_bytes(key), s)
    return (h2 << 64) | h1


def hash64(key: Key, seed: int = 0) -> int:
    """The low 64 bits of :func:`hash128`.

    >>> hash64(b"hello")
    14688674573012802306
    """
    s = _check_seed(seed)
    return murmur3_x64_128(_key_bytes(key), s)[0]


def _unit(m: int) -> int:
    """One position's width in the 64-bit space a multiply-high maps onto [0, m)."""
    return _MASK64 // m + (1 if m > 1 else 0)


def _indices(h1: int, h2: int, k: int, m: int) -> List[int]:
    # Enhanced double hashing in the 64-bit space that a multiply-high maps
    # onto [0, m): x_i = h1 + i*h2 + (i^3 - i)/6 * unit (mod 2^64), unit
    # being one position's width, each mapped by (x * m) >> 64.
    unit = _unit(m)
    out = []
    x, y = h1, h2
    for i in range(k):
        out.append((x * m) >> 64)
        x = (x + y) & _MASK64
        y = (y + (i + 1) * unit) & _MASK64
    return out


_LCG_MULTIPLIER = 6364136223846793005
_LCG_INCREMENT = 1442695040888963407


def _indices_blocked(h1: int, h2: int, k: int, nblocks: int) -> List[int]:
    # All k positions in one 512-bit block: the block by a multiply-high of
    # h1, the offsets as the top 9 bits of successive MMIX LCG states from h2.
    base = ((h1 * nblocks) >> 64) * 512
    out = []
    state = h2
    for _ in range(k):
        out.append(base + (state >> 55))
        state = (state * _LCG_MULTIPLIER + _LCG_INCREMENT) & _MASK64
    return out


def _layout_code(layout: object) -> str:
    if layout not in ("standard", "blocked"):
        raise ValueError(f"layout must be 'standard' or 'blocked', got {layout!r}")
    return str(layout)


def _positions(layout: str, h1: int, h2: int, k: int, m: int) -> List[int]:
    if layout == "blocked":
        return _indices_blocked(h1, h2, k, m // 512)
    return _indices(h1, h2, k, m)


def hash_indices(key: Key, k: int, m: int, seed: int = 0,
                 layout: str = "standard") -> List[int]:
    """The k bit positions in [0, m) that a Bloom filter of m bits sets for key.

    ``layout="blocked"`` gives the positions of the cache-line blocked layout,
    all in one 512-bit block (m must then be a multiple of 512).

    >>> hash_indices("https://example.com/", 3, 1000)
    [707, 350, 995]
    """
    s = _check_seed(seed)
    if not isinstance(k, int) or not isinstance(m, int):
        raise TypeError("k and m must be ints")
    if k < 1 or k > MAX_NUM_HASHES:
        raise ValueError(f"k must be in [1, {MAX_NUM_HASHES}], got {k}")
    if m < 1 or m >= 2 ** 64:
        raise ValueError(f"m must be in [1, 2**64), got {m}")
    code = _layout_code(layout)
    if code == "blocked" and m % 512:
        raise ValueError(f"m must be a multiple of 512 for the blocked layout, got {m}")
    h1, h2 = murmur3_x64_128(_key_bytes(key), s)
    return _positions(code, h1, h2, k, m)


# ------------------------------------------------------------------ Bloom bits

_prefetching = True


def _set_prefetching(enabled: object) -> bool:
    """The core's benchmark switch for batch prefetching; here it changes
    nothing but the flag (results are the same either way)."""
    global _prefetching
    previous, _prefetching = _prefetching, bool(enabled)
    return previous


_batch_threads = 0


def _set_batch_threads(n: object) -> int:
    """The core's cap on the threads of a batch call (0: the CPUs the
    process may use); checked as the core checks it, and otherwise only
    kept: the twin runs every batch on the calling thread."""
    global _batch_threads
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"threads must be an int, not {type(n).__name__}")
    if n < 0:
        raise ValueError(f"threads must be at least 0, got {n}")
    previous, _batch_threads = _batch_threads, min(n, 64)
    return previous


def nbytes_for(num_bits: int) -> int:
    """Bytes of storage for num_bits bits: whole 8-byte words."""
    return ((num_bits + 63) // 64) * 8


def check_keys(keys: Union[list, tuple]) -> None:  # type: ignore[type-arg]
    """Raise TypeError naming the position of the first key of a list or
    tuple that cannot be hashed (UnicodeEncodeError for a str with a lone
    surrogate); nothing otherwise.  See the compiled twin."""
    if type(keys) is not list and type(keys) is not tuple:
        raise TypeError(f"keys must be a list or tuple here, not {type(keys).__name__}")
    for i, key in enumerate(keys):
        try:
            _key_bytes(key)
        except TypeError as exc:
            raise TypeError(f"keys[{i}]: {exc}") from None


# Writers of the bits exclude each other (all filters of the process share
# the lock), as the core's writers do: a thread switch between reading a
# key's bits and setting them would let two threads adding one key both be
# told it is new, and one between reading and writing a byte would lose the
# bit another thread set in it.  Processes sharing a mapped file get no such
# exclusion from the twin (docs/format.md): the core's atomic adds give it.
_WRITERS = threading.Lock()


class BloomBits:
    """A bit array of ``num_bits`` bits probed by ``num_hashes`` positions per key.

    Bit ``i`` is bit ``i % 8`` of byte ``i // 8``.  See the compiled twin.
    """

    __slots__ = ("_bits", "_m", "_k", "_seed", "_count", "_layout", "_readonly", "_counter",
                 "_closed", "_write_hook")
    _write_hook: Optional[Callable[[], None]]

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._bits: Optional[memoryview] = None

    def _init_bits(self, num_bits: int, num_hashes: int, seed: int = 0,
                   buffer: object = None, layout: str = "standard",
                   readonly: bool = False) -> None:
        s = _check_seed(seed)
        code = _layout_code(layout)
        if getattr(self, "_bits", None) is not None:
            raise RuntimeError("bits are already initialised")
        if not isinstance(num_bits, int) or not isinstance(num_hashes, int):
            raise TypeError("num_bits and num_hashes must be ints")
        if num_hashes < 1 or num_hashes > MAX_NUM_HASHES:
            raise ValueError(f"num_hashes must be in [1, {MAX_NUM_HASHES}], got {num_hashes}")
        if num_bits < 1 or num_bits > (1 << 62):
            raise ValueError(f"num_bits must be in [1, 2**62], got {num_bits}")
        if code == "blocked" and num_bits % 512:
            raise ValueError(
                f"num_bits must be a multiple of 512 for the blocked layout, got {num_bits}")
        need = nbytes_for(num_bits)
        view = memoryview(bytearray(need) if buffer is None else cast(Any, buffer)).cast("B")
        if view.readonly and not readonly:
            raise TypeError("buffer must be a writable, C-contiguous bytes-like object")
        if len(view) < need:
            raise ValueError(f"buffer holds {len(view)} bytes; {need} are needed")
        self._bits = view[:need]
        self._m = num_bits
        self._k = num_hashes
        self._layout = code
        self._seed = s
        self._count = 0
        self._readonly = bool(readonly)
        self._counter: Optional[memoryview] = None
        self._closed = False

    def _ready(self) -> memoryview:
        # Subclasses need not call __init__ (the compiled twin has __cinit__).
        bits: Optional[memoryview] = getattr(self, "_bits", None)
        if bits is None:
            if getattr(self, "_closed", False):
                raise ValueError("the filter is closed")
            raise RuntimeError("BloomBits used before _init_bits()")
        return bits

    def _writable(self) -> memoryview:
        bits = self._ready()
        if self._readonly:
            raise ValueError("the filter is open read-only")
        hook = getattr(self, "_write_hook", None)
        if hook is not None:
            hook()  # may raise: the hook stays, and every later change raises too
            if self._write_hook is hook:
                self._write_hook = None
        return bits

    def _set_write_hook(self, hook: Optional[Callable[[], None]]) -> None:
        """Call hook() (once it returns) before the first change to the bits."""
        if hook is not None and not callable(hook):
            raise TypeError("the write hook must be callable or None")
        self._write_hook = hook

    def _count_add(self, n: int) -> None:
        if self._counter is not None:
            value = (int.from_bytes(self._counter, sys.byteorder) + n) & _MASK64
            self._counter[:] = value.to_bytes(8, sys.byteorder)
        else:
            self._count += n

    def _release(self) -> None:
        """Let go of the storage; every later use raises."""
        self._bits = None
        self._counter = None
        self._closed = True

    def _attach_counter(self, buffer: object) -> None:
        """Keep the insert count in buffer (8 bytes, native order)."""
        self._ready()
        if self._counter is not None:
            raise RuntimeError("a counter is already attached")
        view = memoryview(buffer).cast("B")  # type: ignore[arg-type]
        if view.readonly and not self._readonly:
            raise TypeError("counter buffer must be writable and contiguous")
        if len(view) < 8:
            raise ValueError("counter buffer must be 8 bytes, 8-byte aligned")
        self._counter = view[:8]

    @property
    def readonly(self) -> bool:
        """True for a filter opened read-only."""
        return self._readonly

    @property
    def num_bits(self) -> int:
        """Number of bits, m."""
        return self._m

    @property
    def num_hashes(self) -> int:
        """Number of bit positions per key, k."""
        return self._k

    @property
    def layout(self) -> str:
        """'standard' or 'blocked' (all of a key's bits in one cache line)."""
        return self._layout

    @property
    def seed(self) -> int:
        """Seed of the MurmurHash3 used for keys."""
        return self._seed

    @property
    def insert_count(self) -> int:
        """Number of adds that reported a new key."""
        if self._counter is not None:
            return int.from_bytes(self._counter, sys.byteorder)
        return self._count

    def _set_insert_count(self, value: int) -> None:
        if value < 0 or value >= 2 ** 64:
            raise OverflowError("insert count out of range")
        if self._counter is not None:
            self._writable()
            self._counter[:] = value.to_bytes(8, sys.byteorder)
        else:
            self._count = value

    def _positions(self, key: object) -> List[int]:
        h1, h2 = murmur3_x64_128(_key_bytes(key), self._seed)
        return _positions(self._layout, h1, h2, self._k, self._m)

    def _probe_add(self, positions: List[int]) -> bool:
        """Set the bits; True when one was clear.  The core decides on the
        last clear bit (in probe order), set last, so that of processes
        adding one key at once exactly one is told it is new; alone, that is
        "one of the bits was clear", as here."""
        bits = self._writable()
        clear = [pos for pos in positions if not bits[pos >> 3] & (1 << (pos & 7))]
        for pos in clear:
            bits[pos >> 3] |= 1 << (pos & 7)
        return bool(clear)

    def _probe_test(self, positions: List[int]) -> bool:
        bits = self._ready()
        return all(bits[pos >> 3] & (1 << (pos & 7)) for pos in positions)

    def add(self, key: Key) -> bool:
        """Add key; True when it was not present before (like Redis BF.ADD)."""
        self._ready()
        positions = self._positions(key)
        self._writable()
        with _WRITERS:
            fresh = self._probe_add(positions)
            if fresh:
                self._count_add(1)
        return fresh

    def __contains__(self, key: object) -> bool:
        self._ready()
        return self._probe_test(self._positions(key))

    def _gather(self, keys: Iterable[Key]) -> List[List[int]]:
        if isinstance(keys, (str, bytes, bytearray, memoryview)):
            raise TypeError(
                f"keys must be an iterable of keys, not a single {type(keys).__name__}; "
                f"use add()/`in` for one key")
        out = []
        for i, key in enumerate(tuple(keys)):
            try:
                out.append(self._positions(key))
            except TypeError as exc:
                raise TypeError(f"keys[{i}]: {exc}") from None
        return out

    def _hashed(self, hashes: object) -> List[List[int]]:
        """The positions of the keys whose (h1, h2) are the rows of hashes."""
        if not isinstance(hashes, np.ndarray) or hashes.dtype != np.uint64 \
                or hashes.ndim != 2 or hashes.shape[1] != 2:
            raise TypeError("hashes must be a uint64 numpy array of shape (n, 2), one (h1, h2) "
                            "row a key")
        return [_positions(self._layout, h1, h2, self._k, self._m)
                for h1, h2 in hashes.tolist()]

    def _adding(self) -> None:
        if self._ready() is not None and self._readonly:
            raise ValueError("the filter is open read-only")

    def _add_all(self, all_positions: List[List[int]]) -> np.ndarray:
        out = np.zeros(len(all_positions), dtype=np.bool_)
        if all_positions:
            self._writable()
        with _WRITERS:
            for i, positions in enumerate(all_positions):
                if self._probe_add(positions):
                    out[i] = True
            if out.any():
                self._count_add(int(out.sum()))
        return out

    def _test_all(self, all_positions: List[List[int]]) -> np.ndarray:
        return np.array([self._probe_test(p) for p in all_positions], dtype=np.bool_)

    def add_many(self, keys: Iterable[Key]) -> np.ndarray:
        """Add every key in order; a numpy bool array, True where the key was new."""
        self._adding()
        return self._add_all(self._gather(keys))  # every key checked before any change

    def contains_many(self, keys: Iterable[Key]) -> np.ndarray:
        """A numpy bool array, True where the key is (probably) present."""
        self._ready()
        return self._test_all(self._gather(keys))

    def add_hashed(self, hashes: np.ndarray) -> np.ndarray:
        """add_many for keys given by their hashes: a uint64 array of shape
        (n, 2), one row (h1, h2) a key, the low and high 64 bits of
        ``hash128(key, seed)`` (the filter's seed)."""
        self._adding()
        return self._add_all(self._hashed(hashes))

    def contains_hashed(self, hashes: np.ndarray) -> np.ndarray:
        """contains_many for keys given by their hashes (see add_hashed)."""
        self._ready()
        return self._test_all(self._hashed(hashes))

    def _popcount(self) -> int:
        return bin(int.from_bytes(self._ready(), "little")).count("1")

    def _check_peer(self, other: "BloomBits") -> None:
        self._ready()
        other._ready()
        if ((other._m, other._k, other._seed, other._layout)
                != (self._m, self._k, self._seed, self._layout)):
            raise ValueError("bit arrays differ in num_bits, num_hashes, seed or layout")

    def _or_from(self, other: "BloomBits") -> None:
        self._check_peer(other)
        self._writable()
        mine, theirs = self._ready(), other._ready()
        with _WRITERS:
            merged = int.from_bytes(mine, "little") | int.from_bytes(theirs, "little")
            mine[:] = merged.to_bytes(len(mine), "little")

    def _and_from(self, other: "BloomBits") -> None:
        self._check_peer(other)
        self._writable()
        mine, theirs = self._ready(), other._ready()
        with _WRITERS:
            common = int.from_bytes(mine, "little") & int.from_bytes(theirs, "little")
            mine[:] = common.to_bytes(len(mine), "little")

    def _bits_equal(self, other: "BloomBits") -> bool:
        self._check_peer(other)
        return self._ready() == other._ready()

    def _clear(self) -> None:
        bits = self._writable()
        with _WRITERS:
            bits[:] = bytes(len(bits))
            self._set_insert_count(0)

    def _bits_view(self) -> memoryview:
        """A writable memoryview of the ``nbytes_for(num_bits)`` storage bytes."""
        return self._ready()
