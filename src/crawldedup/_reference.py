"""The pure-Python twin of ``crawldedup._core``: the specification, executable.

Every function and class here computes exactly what its compiled namesake
computes, bit for bit, in short and obviously correct Python.  The package uses
it instead of the core when ``CRAWLDEDUP_PURE_PYTHON=1`` (slow, but importable
without a compiler); the test suite runs every kernel test against both.
"""

from __future__ import annotations

from typing import (Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Set,
                    Tuple, Union, cast)

import hashlib
import sys

import numpy as np

IMPLEMENTATION = "reference"

Key = Union[str, bytes, bytearray, memoryview]

MAX_NUM_HASHES = 64
MAX_SEED = 0xFFFFFFFF

_MASK64 = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


# ------------------------------------------------------------------ key access

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
        bits = self._writable()
        fresh = False
        for pos in positions:
            mask = 1 << (pos & 7)
            if not bits[pos >> 3] & mask:
                bits[pos >> 3] |= mask
                fresh = True
        return fresh

    def _probe_test(self, positions: List[int]) -> bool:
        bits = self._ready()
        return all(bits[pos >> 3] & (1 << (pos & 7)) for pos in positions)

    def add(self, key: Key) -> bool:
        """Add key; True when it was not present before (like Redis BF.ADD)."""
        self._ready()
        positions = self._positions(key)
        self._writable()
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

    def add_many(self, keys: Iterable[Key]) -> np.ndarray:
        """Add every key in order; a numpy bool array, True where the key was new."""
        if self._ready() is not None and self._readonly:
            raise ValueError("the filter is open read-only")
        all_positions = self._gather(keys)  # every key checked before any change
        out = np.zeros(len(all_positions), dtype=np.bool_)
        if all_positions:
            self._writable()
        for i, positions in enumerate(all_positions):
            if self._probe_add(positions):
                out[i] = True
        if out.any():
            self._count_add(int(out.sum()))
        return out

    def contains_many(self, keys: Iterable[Key]) -> np.ndarray:
        """A numpy bool array, True where the key is (probably) present."""
        self._ready()
        all_positions = self._gather(keys)
        return np.array([self._probe_test(p) for p in all_positions], dtype=np.bool_)

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
        merged = int.from_bytes(mine, "little") | int.from_bytes(theirs, "little")
        mine[:] = merged.to_bytes(len(mine), "little")

    def _and_from(self, other: "BloomBits") -> None:
        self._check_peer(other)
        self._writable()
        mine, theirs = self._ready(), other._ready()
        common = int.from_bytes(mine, "little") & int.from_bytes(theirs, "little")
        mine[:] = common.to_bytes(len(mine), "little")

    def _bits_equal(self, other: "BloomBits") -> bool:
        self._check_peer(other)
        return self._ready() == other._ready()

    def _clear(self) -> None:
        bits = self._writable()
        bits[:] = bytes(len(bits))
        self._set_insert_count(0)

    def _bits_view(self) -> memoryview:
        """A writable memoryview of the ``nbytes_for(num_bits)`` storage bytes."""
        return self._ready()


# ---- simhash ----
# Twins of the kernels in _core_simhash.pxi / _cd_simhash.h.


TOKENIZER_AUTO = 0
TOKENIZER_WORDS = 1
TOKENIZER_CHARS = 2
MAX_NGRAM = 16

# Scripts written without spaces, cut into character n-grams by the "auto"
# tokenizer (see cd_is_unspaced).
_UNSPACED = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x3040, 0x30FF),
             (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
             (0x20000, 0x3FFFF))


def _is_unspaced(ch: str) -> bool:
    c = ord(ch)
    return any(lo <= c <= hi for lo, hi in _UNSPACED)


def _is_word(ch: str) -> bool:
    """re's \\w on str patterns."""
    return ch.isalnum() or ch == "_"


def _check_tokenizer(mode: int, word_n: int, char_n: int) -> None:
    if mode not in (TOKENIZER_AUTO, TOKENIZER_WORDS, TOKENIZER_CHARS):
        raise ValueError(f"mode must be TOKENIZER_AUTO, _WORDS or _CHARS, got {mode}")
    if not (1 <= word_n <= MAX_NGRAM) or not (1 <= char_n <= MAX_NGRAM):
        raise ValueError(f"n-gram sizes must be in [1, {MAX_NGRAM}], got {word_n}, {char_n}")


def _ngrams(units: List[str], n: int, sep: str) -> List[str]:
    """n-grams of units joined by sep; the whole sequence when shorter."""
    if not units:
        return []
    n = min(n, len(units))
    return [sep.join(units[i:i + n]) for i in range(len(units) - n + 1)]


def _majority(hashes: Iterable[int]) -> int:
    counts = [0] * 64
    total = 0
    for h in hashes:
        total += 1
        for j in range(64):
            counts[j] += (h >> j) & 1
    return sum(1 << j for j in range(64) if 2 * counts[j] > total)


def lower_text(text: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    return text.lower()


def simhash_text(text: str, mode: int, word_n: int, char_n: int) -> int:
    """64-bit SimHash of text, lower-cased by str.lower().

    Word characters are those of re's \\w.  TOKENIZER_AUTO: the words (runs
    of word characters outside the unspaced scripts) make word n-grams joined
    by one space, and the unspaced-script characters, concatenated, make
    character n-grams.  TOKENIZER_WORDS: word n-grams over runs of all word
    characters.  TOKENIZER_CHARS: character n-grams over all word characters
    concatenated.  A sequence shorter than n gives one feature, itself.
    Features are hashed as hash64 of their UTF-8; each distinct word n-gram
    counts once, each character n-gram at every occurrence; bit j is set when
    more than half of the counted features have it.
    """
    _check_tokenizer(mode, word_n, char_n)
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    text = text.lower()
    words: List[str] = []
    units: List[str] = []
    current: List[str] = []
    for ch in text:
        unspaced = mode == TOKENIZER_AUTO and _is_unspaced(ch)
        word = not unspaced and _is_word(ch)
        if mode == TOKENIZER_CHARS:
            if word:
                units.append(ch)
            continue
        if word:
            current.append(ch)
        elif current:
            words.append("".join(current))
            current = []
        if unspaced:
            units.append(ch)
    if current:
        words.append("".join(current))
    hashes: List[int] = []
    if mode != TOKENIZER_CHARS:
        hashes += dict.fromkeys(hash64(f.encode("utf-8")) for f in _ngrams(words, word_n, " "))
    if mode != TOKENIZER_WORDS:
        hashes += [hash64(f.encode("utf-8")) for f in _ngrams(units, char_n, "")]
    return _majority(hashes)


def simhash_texts(texts: List[str], mode: int, word_n: int, char_n: int) -> np.ndarray:
    _check_tokenizer(mode, word_n, char_n)
    if not isinstance(texts, list):
        raise TypeError(f"texts must be a list of str, not {type(texts).__name__}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, not {type(t).__name__}")
    return np.array([simhash_text(t, mode, word_n, char_n) for t in texts], dtype=np.uint64)


def simhash_hashes(hashes: Any, weights: Any = None) -> int:
    """Bit j is set when the features with bit j set carry more than half of
    the total weight (weights summed in order as float64; None: all 1)."""
    hs = [int(h) for h in np.asarray(hashes, dtype=np.uint64)]
    if weights is None:
        return _majority(hs)
    ws = [float(w) for w in np.asarray(weights, dtype=np.float64)]
    if len(ws) != len(hs):
        raise ValueError(f"weights must have one entry per hash ({len(hs)}), got {len(ws)}")
    sums = [0.0] * 64
    total = 0.0
    for h, w in zip(hs, ws):
        for j in range(64):
            if (h >> j) & 1:
                sums[j] += w
        total += w
    return sum(1 << j for j in range(64) if 2.0 * sums[j] > total)


def hamming_many(fps: Any, fp: int) -> np.ndarray:
    """Hamming distance between fp and each of fps (numpy uint8)."""
    return np.array([bin(int(x) ^ fp).count("1") for x in np.asarray(fps, dtype=np.uint64)],
                    dtype=np.uint8)


def md5_digest(data: Key) -> bytes:
    return hashlib.md5(_key_bytes(data)).digest()


def _check_f(f: int) -> None:
    if f < 8 or f > 128 or f % 8:
        raise ValueError(f"f must be a multiple of 8 in [8, 128], got {f}")


def _leon_value(pairs: Iterable[Tuple[bytes, int]], total: int, f: int) -> int:
    """Bit j of the last f/8 bytes of md5 (big-endian) is set when the
    features having it carry more than half of total; a feature adds
    max(weight, 0) to each of its bits (see cd_leon_features)."""
    sums = [0] * f
    for data, w in pairs:
        h = int.from_bytes(hashlib.md5(data).digest()[-(f // 8):], "big")
        for j in range(f):
            if (h >> j) & 1:
                sums[j] += max(w, 0)
    return sum(1 << j for j in range(f) if 2 * sums[j] > total)


def leonsim_text(text: str, f: int = 64) -> int:
    """Simhash(text, f).value of the `simhash` package 2.1.x: lower-case,
    keep [\\w\\u4e00-\\u9fcc], 4-character windows."""
    _check_f(f)
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    text = text.lower()
    kept = "".join(ch for ch in text if _is_word(ch) or "\u4e00" <= ch <= "\u9fcc")
    windows = [kept[i:i + 4] for i in range(max(len(kept) - 3, 1))]
    return _leon_value(((w.encode("utf-8"), 1) for w in windows), len(windows), f)


def leonsim_features(features: List[str], weights: Any, total: int, f: int = 64) -> int:
    _check_f(f)
    if not isinstance(features, list):
        raise TypeError(f"features must be a list of str, not {type(features).__name__}")
    ws = [int(w) for w in np.asarray(weights, dtype=np.int64)]
    if len(ws) != len(features):
        raise ValueError(f"weights must have one entry per feature ({len(features)}), "
                         f"got {len(ws)}")
    # The core sums in int64: the same bounds here.
    if not -(1 << 62) <= total <= (1 << 62):
        raise OverflowError(f"total must be within +-2**62, got {total}")
    if sum(w for w in ws if w > 0) >= 1 << 62:
        raise OverflowError("the positive weights must sum to less than 2**62")
    for i, feat in enumerate(features):
        if not isinstance(feat, str):
            raise TypeError(f"features[{i}] must be str, not {type(feat).__name__}")
    return _leon_value(((s.encode("utf-8"), w) for s, w in zip(features, ws)), total, f)
# ---- index ----
# Twin of HammingIndex in src/_core_index.pxi (+ src/_cd_index.h): the same
# pigeonhole search, written plainly.  The 64 bits are cut into k + 1 blocks
# (block 0 the highest bits, the first 64 % (k + 1) blocks one bit wider); two
# fingerprints within distance k agree on at least one block, so table t maps
# block t's value to the entries that have it.  Results come out in canonical
# orders, so the core's bucket layout, segments and tombstones do not show.

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


def _ix_blocks(k: int) -> List[Tuple[int, int]]:
    """(shift, width) of each block, block 0 at the top."""
    count, top, out = k + 1, 64, []
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
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"an integer is required for k, not {type(k).__name__}")
        if k < 0 or k > MAX_HAMMING_K:
            raise ValueError(f"k must be in [0, {MAX_HAMMING_K}], got {k}")
        self._k = k
        self._blocks = _ix_blocks(k)
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

    def add(self, fp: object, id: object) -> None:
        f = _ix_u64(fp, "fp")
        i = _ix_u64(id, "id")
        if i in self._fp:
            raise ValueError(f"id {i} is already in the index")
        self._insert(f, i)

    def add_many(self, fps: object, ids: object) -> None:
        """Add fps[i] under ids[i]; all or nothing (a repeated or present id
        raises ValueError and adds none)."""
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
# ---- url ----
# Twin of the URL fast path in _core_url.pxi / _cd_url.h: w3lib 2.5's
# canonicalize_url for http, https and ftp URLs with a plain or IPv6 host,
# None otherwise.

_URL_UNRESERVED = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# w3lib's _PATH_SAFE_CHARS (kept when re-quoting a path) and
# _PATH_SAFEST_CHARS (kept when quoting ;params and fragments).
_URL_PATH_SAFE = _URL_UNRESERVED | frozenset(b":/?[]@!$&'()*+,;=|%")
_URL_SAFEST = _URL_UNRESERVED | frozenset(b":/?@!$&'()*+,;=%")
_URL_HEX = b"0123456789ABCDEFabcdef"
# w3lib's _USERINFO_SAFEST_CHARS.
_URL_USERINFO = _URL_UNRESERVED | frozenset(b"!$&'()*+,")
# The special schemes that split ";params" off the path (ws and wss do not).
_URL_SCHEMES = (b"http", b"https", b"ftp")
_URL_KEPT_ESCAPES = frozenset((0x25, 0x2F, 0x3B, 0x3F))  # % / ; ? stay escaped in a path


def _url_quote(data: bytes, safe: FrozenSet[int]) -> bytes:
    return b"".join(bytes((b,)) if b in safe else b"%%%02X" % b for b in data)


def _url_escape_at(data: bytes, i: int, end: int) -> Optional[int]:
    """The byte of a valid "%HH" at data[i] (which must end before end), else None."""
    if data[i] == 0x25 and i + 2 < end and data[i + 1] in _URL_HEX and data[i + 2] in _URL_HEX:
        return int(data[i + 1:i + 3], 16)
    return None


def _url_unquote_plus(data: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(data):
        v = _url_escape_at(data, i, len(data))
        if v is not None:
            out.append(v)
            i += 3
        else:
            out.append(0x20 if data[i] == 0x2B else data[i])
            i += 1
    return bytes(out)


def _url_quote_plus(data: bytes) -> bytes:
    return b"".join(bytes((b,)) if b in _URL_UNRESERVED else b"+" if b == 0x20
                    else b"%%%02X" % b for b in data)


def _url_unquote(data: bytes) -> bytes:
    """Valid "%HH" escapes decoded, the rest as it is."""
    out = bytearray()
    i = 0
    while i < len(data):
        v = _url_escape_at(data, i, len(data))
        if v is None:
            out.append(data[i])
            i += 1
        else:
            out.append(v)
            i += 3
    return bytes(out)


def _url_strip(s: bytes) -> Optional[bytes]:
    """w3lib's _strip and _urlsplit's first steps: C0 controls and spaces
    stripped from both ends, tabs and newlines removed, "\\" read as "/"
    before the first "?" or "#"; None for another control byte or DEL."""
    s = s.strip(bytes(range(0x21)))
    s = s.replace(b"\t", b"").replace(b"\n", b"").replace(b"\r", b"")
    if any(b < 0x20 or b == 0x7F for b in s):
        return None
    cut = min([len(s)] + [s.index(c) for c in b"?#" if c in s])
    return s[:cut].replace(b"\\", b"/") + s[cut:]


def _url_ipv6(text: bytes) -> Optional[bytes]:
    """An IPv6 address of 16-bit groups as Python's ipaddress writes it
    (RFC 5952), or None: not one (by Python's rules), scoped, dotted, or
    IPv4-mapped (which Python 3.13 writes ::ffff:a.b.c.d and older ones not)."""
    if not text or any(b != 0x3A and b not in _URL_HEX for b in text):
        return None
    parts = text.split(b":")
    if not 3 <= len(parts) <= 9:
        return None
    empty = [i for i in range(1, len(parts) - 1) if not parts[i]]
    if len(empty) > 1:
        return None
    if empty:
        hi, lo = parts[:empty[0]], parts[empty[0] + 1:]
        if hi == [b""]:
            hi = []
        if lo == [b""]:
            lo = []
        if len(hi) + len(lo) > 7:
            return None
        groups_text = hi + [b"0"] * (8 - len(hi) - len(lo)) + lo
    else:
        if len(parts) != 8:
            return None
        groups_text = parts
    if any(not g or len(g) > 4 for g in groups_text):
        return None
    groups = [int(g, 16) for g in groups_text]
    if groups[:6] == [0, 0, 0, 0, 0, 0xFFFF]:
        return None
    best, best_len, run = -1, 0, 0
    for i, g in enumerate(groups):
        run = 0 if g else run + 1
        if run > best_len:
            best, best_len = i - run + 1, run
    words = [b"%x" % g for g in groups]
    if best_len > 1:
        words[best:best + best_len] = [b""]
        if best == 0:
            words.insert(0, b"")
        if best + best_len == 8:
            words.append(b"")
    return b":".join(words)


def _url_path(path: bytes) -> bytes:
    """Decode escapes (but %25 %2F %3B %3F, upper-cased) and re-quote."""
    out = []
    i = 0
    while i < len(path):
        v = _url_escape_at(path, i, len(path))
        if v is None:
            out.append(_url_quote(path[i:i + 1], _URL_PATH_SAFE))
            i += 1
        else:
            out.append(b"%%%02X" % v if v in _URL_KEPT_ESCAPES
                       else _url_quote(bytes((v,)), _URL_PATH_SAFE))
            i += 3
    return b"".join(out)


def _url_dot_segments(path: bytes) -> bytes:
    """RFC 3986 5.2.4 for a path starting with "/", as w3lib resolves it."""
    segments = path[1:].split(b"/")
    out: List[bytes] = []
    for seg in segments[:-1]:
        if seg == b"..":
            if out:
                out.pop()
        elif seg != b".":
            out.append(seg)
    last = segments[-1]
    if last in (b".", b".."):
        if last == b".." and out:
            out.pop()
        out.append(b"")
    else:
        out.append(last)
    return b"/" + b"/".join(out)


def _url_utf8(url: object) -> Optional[bytes]:
    """The bytes the fast path reads: a str as UTF-8 (None when it cannot
    be: lone surrogates), bytes as they are (read as UTF-8; w3lib
    percent-encodes the bytes that are not, as the fast path does every byte
    >= 0x80)."""
    if isinstance(url, bytes):
        return url
    if not isinstance(url, str):
        raise TypeError(f"url must be str or bytes, not {type(url).__name__}")
    try:
        return url.encode("utf-8")
    except UnicodeEncodeError:
        return None


# A port of more digits goes to w3lib: its int(port) raises ValueError past
# Python's digit limit (4300), and maps shorter ones (leading zeros) to 0..65535.
_URL_MAX_PORT_DIGITS = 5


def canonicalize_url_fast(url: object, keep_fragments: bool = False,
                          keep_blank_values: bool = True) -> Optional[str]:
    """w3lib.url.canonicalize_url(url, keep_blank_values, keep_fragments) for
    http/https URLs with a plain host, None for any other URL.  url is str
    or bytes."""
    s = _url_utf8(url)
    if s is None:
        return None
    s = _url_strip(s)
    if s is None:
        return None
    scheme, colon, rest = s.partition(b":")
    scheme = scheme.lower()
    if not colon or scheme not in _URL_SCHEMES or not rest.startswith(b"//"):
        return None
    rest = rest[2:]
    cut = min([len(rest)] + [rest.index(c) for c in b"/?#" if c in rest])
    authority, rest = rest[:cut], rest[cut:]
    userinfo, at, hostport = authority.rpartition(b"@")
    if b"[" in userinfo or b"]" in userinfo:
        return None
    if hostport.startswith(b"["):
        address, bracket, port_part = hostport[1:].partition(b"]")
        host = _url_ipv6(address) if bracket else None
        if host is None or (port_part and not port_part.startswith(b":")):
            return None
        host, port = b"[" + host + b"]", port_part[1:]
    else:
        host, colon, port = hostport.partition(b":")
        if not host or any(b not in _URL_UNRESERVED for b in host):
            return None
        host = host.lower()
    if port and (not port.isdigit() or len(port) > _URL_MAX_PORT_DIGITS
                 or int(port) > 65535):
        return None
    out = scheme + b"://"
    if at:
        user, colon, password = userinfo.partition(b":")
        out += _url_quote(_url_unquote(user), _URL_USERINFO)
        if colon:
            out += b":" + _url_quote(_url_unquote(password), _URL_USERINFO)
        out += b"@"
    out += host + (b":%d" % int(port) if port else b"")

    rest, hash_, fragment = rest.partition(b"#")
    path, question, query = rest.partition(b"?")
    if not path:
        out += b"/"
    else:
        semi = path.find(b";", path.rfind(b"/") + 1)
        params = b""
        if semi != -1:
            path, params = path[:semi], path[semi + 1:]
        out += _url_dot_segments(_url_path(path))
        if params:
            out += b";" + _url_quote(params, _URL_SAFEST)
    fields = []
    for field in query.split(b"&"):
        if not field:
            continue
        key, eq, value = field.partition(b"=")
        if keep_blank_values or (eq and value):
            fields.append((_url_unquote_plus(key), _url_unquote_plus(value)))
    if fields:
        fields.sort()
        out += b"?" + b"&".join(_url_quote_plus(k) + b"=" + _url_quote_plus(v) for k, v in fields)
    if keep_fragments and fragment:
        out += b"#" + _url_quote(fragment, _URL_SAFEST)
    return out.decode("ascii")


_URL_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789"
                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def url_fingerprint_fast(url: object, keep_fragments: bool = False,
                         keep_blank_values: bool = True) -> Optional[bytes]:
    """MD5 (16 bytes) of canonicalize_url_fast(url, ...), None outside the fast path."""
    canonical = canonicalize_url_fast(url, keep_fragments, keep_blank_values)
    return None if canonical is None else hashlib.md5(canonical.encode("ascii")).digest()


def request_fingerprint_fast(url: object, method: object, body: object,
                             keep_fragments: bool = False) -> Optional[bytes]:
    """Scrapy's request fingerprint (SHA-1 of its sort_keys JSON, no headers)
    when url is on the fast path, else None; method used as given (an HTTP
    token), body bytes."""
    if not isinstance(url, str):
        raise TypeError(f"url must be str, not {type(url).__name__}")
    if not isinstance(method, str):
        raise TypeError(f"method must be str, not {type(method).__name__}")
    if not isinstance(body, bytes):
        raise TypeError(f"body must be bytes, not {type(body).__name__}")
    if not method:
        raise ValueError("method must be an HTTP method name, got ''")
    if any(c not in _URL_TCHAR for c in method):
        raise ValueError(f"method must be an HTTP method name (a token), got {method!r}")
    canonical = canonicalize_url_fast(url, keep_fragments, True)
    if canonical is None:
        return None
    data = ('{"body": "' + body.hex() + '", "headers": {}, "method": "' + method
            + '", "url": "' + canonical + '"}')
    return hashlib.sha1(data.encode("ascii")).digest()


def _url_batch(urls: object) -> List[Any]:
    if not isinstance(urls, list):
        raise TypeError(f"urls must be a list, not {type(urls).__name__}")
    return list(urls)


def url_fingerprints_fast(urls: object, keep_fragments: bool = False,
                          keep_blank_values: bool = True) -> List[Optional[bytes]]:
    """[url_fingerprint_fast(u, ...) for u in urls], None for items that are
    neither str nor bytes."""
    return [url_fingerprint_fast(u, keep_fragments, keep_blank_values)
            if isinstance(u, (str, bytes)) else None for u in _url_batch(urls)]


def canonicalize_urls_fast(urls: object, keep_fragments: bool = False,
                           keep_blank_values: bool = True,
                           as_bytes: bool = False) -> List[Union[str, bytes, None]]:
    """[canonicalize_url_fast(u, ...) for u in urls], None for items that are
    neither str nor bytes; bytes results (ASCII) with as_bytes."""
    out: List[Union[str, bytes, None]] = []
    for u in _url_batch(urls):
        c = canonicalize_url_fast(u, keep_fragments, keep_blank_values) \
            if isinstance(u, (str, bytes)) else None
        out.append(c.encode("ascii") if as_bytes and c is not None else c)
    return out


def url_digests_fast(urls: object) -> List[Optional[bytes]]:
    """[MD5 of the UTF-8 bytes of u for u in urls] (no canonicalization), None
    for items that are neither str nor bytes and for a str that is not valid
    UTF-8."""
    out: List[Optional[bytes]] = []
    for u in _url_batch(urls):
        data = _url_utf8(u) if isinstance(u, (str, bytes)) else None
        out.append(None if data is None else hashlib.md5(data).digest())
    return out


def url_digests_packed(urls: object, canonical: bool = False) -> Tuple[bytes, List[int]]:
    """The digests of url_digests_fast(urls) (of url_fingerprints_fast(urls)
    with canonical) end to end, 16 bytes each (zeros where those give None),
    and the indexes where those give None."""
    if not isinstance(urls, list):
        raise TypeError(f"urls must be a list, not {type(urls).__name__}")
    digests = url_fingerprints_fast(urls) if canonical else url_digests_fast(urls)
    missing = [i for i, d in enumerate(digests) if d is None]
    return b"".join(bytes(16) if d is None else d for d in digests), missing


def request_fingerprints_fast(urls: object, method: object,
                              keep_fragments: bool = False) -> List[Optional[bytes]]:
    """[request_fingerprint_fast(u, method, b"", keep_fragments) for u in urls],
    None for items that are not str."""
    urls = _url_batch(urls)
    request_fingerprint_fast("http:", method, b"")  # checks method
    return [request_fingerprint_fast(u, method, b"", keep_fragments) if isinstance(u, str)
            else None for u in urls]
# ---- fpset ----
# FingerprintTable: an exact set of fixed-size digests.  The core keeps them
# in an ordered open-addressing table; here a Python set, with the same
# canonical order computed by sorting.

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
        out = np.zeros(len(items), dtype=np.bool_)
        for i, key in enumerate(items):
            out[i] = self.add(key) if adding else self.contains(key)
        return out

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
from crawldedup._reference_resp import bloom_resp as bloom_resp  # noqa: E402
from crawldedup._reference_lines import split_lines as split_lines  # noqa: E402
