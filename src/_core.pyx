# The compiled core of crawldedup, imported as ``crawldedup._core``.
#
# Pure computation on buffers: MurmurHash3, Bloom filter bit probing.  No I/O
# and no policy: parameters are validated here only as far as memory safety
# needs (a core object can never index outside its buffer); friendly argument
# checking lives in the Python wrappers.  Every function and class here has a
# bit-for-bit twin in ``crawldedup/_reference.py``; the test suite runs both.
#
# Compiler directives are set once, in setup.py.

from cpython.buffer cimport (PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_CheckBuffer, PyObject_GetBuffer)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_Check
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

import numpy as _np

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object, Py_ssize_t*) except NULL
    ctypedef struct PyObject

cdef extern from "_cd_support.h" nogil:
    uint64_t cd_mulhi64(uint64_t a, uint64_t b)
    uint8_t cd_atomic_or8(uint8_t* p, uint8_t v)
    uint8_t cd_load8(const uint8_t* p)
    void cd_prefetch(const void* p)
    int cd_popcount64(uint64_t x)
    void cd_murmur3_x64_128(const unsigned char* data, size_t length, uint32_t seed,
                            uint64_t* out1, uint64_t* out2)

IMPLEMENTATION = "core"

# k is at most 64: an error rate of 1e-19 already needs 63 hash functions.
DEF MAX_HASHES = 64
# Keys hashed ahead of probing in batch calls: their bit positions are
# prefetched so that the cache misses of a large filter overlap.
DEF BATCH_AHEAD = 16

MAX_NUM_HASHES = MAX_HASHES
MAX_SEED = 0xFFFFFFFF


# ---------------------------------------------------------------- key access

cdef struct KeyView:
    const unsigned char* data
    Py_ssize_t size
    bint has_buffer
    Py_buffer view


cdef inline int _key_open(object key, KeyView* kv) except -1:
    """Point kv at the bytes that represent key: UTF-8 for str, the raw
    contents for bytes and other C-contiguous buffers."""
    kv.has_buffer = False
    if PyUnicode_Check(key):
        kv.data = <const unsigned char*>PyUnicode_AsUTF8AndSize(key, &kv.size)
        return 0
    if PyBytes_Check(key):
        kv.data = <const unsigned char*>PyBytes_AS_STRING(key)
        kv.size = PyBytes_GET_SIZE(key)
        return 0
    if PyObject_CheckBuffer(key):
        try:
            PyObject_GetBuffer(key, &kv.view, PyBUF_SIMPLE)
        except BufferError:
            raise TypeError(
                f"key must be str or a C-contiguous bytes-like object; "
                f"this {type(key).__name__} is not contiguous") from None
        kv.has_buffer = True
        kv.data = <const unsigned char*>kv.view.buf
        kv.size = kv.view.len
        return 0
    raise TypeError(f"key must be str or bytes-like, not {type(key).__name__}")


cdef inline void _key_close(KeyView* kv) noexcept:
    if kv.has_buffer:
        PyBuffer_Release(&kv.view)
        kv.has_buffer = False


cdef inline uint32_t _check_seed(object seed) except? 0:
    if not isinstance(seed, int):
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    if seed < 0 or seed > MAX_SEED:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    return <uint32_t>seed


# ------------------------------------------------------------------- hashing

def hash128(key, seed=0):
    """MurmurHash3 x64 128-bit of key (str as UTF-8, or bytes-like), unsigned.

    Equal to ``mmh3.hash128(key, seed, signed=False)``.

    >>> hash128(b"hello")
    121118445609844952839898260755277781762
    """
    cdef KeyView kv
    cdef uint64_t h1, h2
    cdef uint32_t s = _check_seed(seed)
    _key_open(key, &kv)
    cd_murmur3_x64_128(kv.data, <size_t>kv.size, s, &h1, &h2)
    _key_close(&kv)
    return (<object>h2 << 64) | <object>h1


def hash64(key, seed=0):
    """The low 64 bits of :func:`hash128`.

    >>> hash64(b"hello")
    14688674573012802306
    """
    cdef KeyView kv
    cdef uint64_t h1, h2
    cdef uint32_t s = _check_seed(seed)
    _key_open(key, &kv)
    cd_murmur3_x64_128(kv.data, <size_t>kv.size, s, &h1, &h2)
    _key_close(&kv)
    return h1


cdef inline void _indices(uint64_t h1, uint64_t h2, int k, uint64_t m,
                          uint64_t* out) noexcept nogil:
    # Enhanced double hashing (Dillinger & Manolios 2004) in 64-bit arithmetic:
    # x_i = h1 + i*h2 + (i^3 - i)/6 (mod 2^64), each mapped onto [0, m) by a
    # multiply-high.  The cubic term keeps probe sequences apart even when two
    # keys share h2.  Frozen: persisted filters depend on it (docs/format.md).
    cdef uint64_t x = h1, y = h2
    cdef int i
    for i in range(k):
        out[i] = cd_mulhi64(x, m)
        x += y
        y += <uint64_t>(i + 1)


def hash_indices(key, k, m, seed=0):
    """The k bit positions in [0, m) that a Bloom filter of m bits sets for key.

    >>> hash_indices("https://example.com/", 3, 1000)
    [707, 350, 994]
    """
    cdef KeyView kv
    cdef uint64_t h1, h2
    cdef uint64_t out[MAX_HASHES]
    cdef uint32_t s = _check_seed(seed)
    cdef int kk
    cdef uint64_t mm
    if not isinstance(k, int) or not isinstance(m, int):
        raise TypeError("k and m must be ints")
    if k < 1 or k > MAX_HASHES:
        raise ValueError(f"k must be in [1, {MAX_HASHES}], got {k}")
    if m < 1 or m >= 2 ** 64:
        raise ValueError(f"m must be in [1, 2**64), got {m}")
    kk = k
    mm = m
    _key_open(key, &kv)
    cd_murmur3_x64_128(kv.data, <size_t>kv.size, s, &h1, &h2)
    _key_close(&kv)
    _indices(h1, h2, kk, mm, out)
    return [out[i] for i in range(kk)]


# -------------------------------------------------------------- Bloom bits

cdef inline bint _probe_add(uint8_t* bits, const uint64_t* idx, int k) noexcept nogil:
    """Set the k bits; True when at least one was clear (the key was new)."""
    cdef bint fresh = False
    cdef int i
    cdef uint64_t pos
    cdef uint8_t mask
    for i in range(k):
        pos = idx[i]
        mask = <uint8_t>(1 << (pos & 7))
        # Read first: most bits of a busy filter are already set, and a plain
        # load is far cheaper than a locked read-modify-write.
        if not (cd_load8(bits + (pos >> 3)) & mask):
            if not (cd_atomic_or8(bits + (pos >> 3), mask) & mask):
                fresh = True
    return fresh


cdef inline bint _probe_test(const uint8_t* bits, const uint64_t* idx, int k) noexcept nogil:
    cdef int i
    cdef uint64_t pos
    for i in range(k):
        pos = idx[i]
        if not (cd_load8(bits + (pos >> 3)) & (1 << (pos & 7))):
            return False
    return True


cdef class BloomBits:
    """A bit array of ``num_bits`` bits probed by ``num_hashes`` positions per key.

    The storage for :class:`crawldedup.BloomFilter`; it knows nothing of
    capacities, error rates or files.  Construct with no arguments, then call
    ``_init_bits`` exactly once (subclasses have their own constructors).
    Bit ``i`` is bit ``i % 8`` of byte ``i // 8``; the buffer is a whole
    number of 8-byte words and the padding bits past ``num_bits`` stay zero.
    """

    cdef uint8_t* _bits
    cdef Py_ssize_t _nbytes
    cdef uint64_t _m
    cdef int _k
    cdef uint32_t _seed
    cdef uint64_t _count
    cdef object _owner
    cdef Py_buffer _view
    cdef bint _has_view

    def __cinit__(self, *args, **kwargs):
        self._bits = NULL
        self._has_view = False

    def __dealloc__(self):
        if self._has_view:
            PyBuffer_Release(&self._view)
            self._has_view = False

    def _init_bits(self, num_bits, num_hashes, seed=0, buffer=None):
        """Attach storage: a new zeroed buffer, or ``buffer`` (writable, at
        least ``nbytes_for(num_bits)`` bytes, used in place)."""
        cdef uint32_t s = _check_seed(seed)
        cdef Py_ssize_t need
        if self._bits != NULL:
            raise RuntimeError("bits are already initialised")
        if not isinstance(num_bits, int) or not isinstance(num_hashes, int):
            raise TypeError("num_bits and num_hashes must be ints")
        if num_hashes < 1 or num_hashes > MAX_HASHES:
            raise ValueError(f"num_hashes must be in [1, {MAX_HASHES}], got {num_hashes}")
        if num_bits < 1 or num_bits > (1 << 62):
            raise ValueError(f"num_bits must be in [1, 2**62], got {num_bits}")
        need = nbytes_for(num_bits)
        owner = bytearray(need) if buffer is None else buffer
        try:
            PyObject_GetBuffer(owner, &self._view, PyBUF_WRITABLE)
        except BufferError:
            raise TypeError("buffer must be a writable, C-contiguous bytes-like object") from None
        self._has_view = True
        if self._view.len < need:
            PyBuffer_Release(&self._view)
            self._has_view = False
            raise ValueError(f"buffer holds {self._view.len} bytes; {need} are needed")
        self._owner = owner
        self._nbytes = need
        self._m = num_bits
        self._k = num_hashes
        self._seed = s
        self._count = 0
        self._bits = <uint8_t*>self._view.buf

    cdef inline int _ready(self) except -1:
        if self._bits == NULL:
            raise RuntimeError("BloomBits used before _init_bits()")
        return 0

    @property
    def num_bits(self):
        """Number of bits, m."""
        return self._m

    @property
    def num_hashes(self):
        """Number of bit positions per key, k."""
        return self._k

    @property
    def seed(self):
        """Seed of the MurmurHash3 used for keys."""
        return self._seed

    @property
    def insert_count(self):
        """Number of adds that reported a new key."""
        return self._count

    def _set_insert_count(self, uint64_t value):
        self._count = value

    def add(self, key):
        """Add key; True when it was not present before (like Redis BF.ADD)."""
        cdef KeyView kv
        cdef uint64_t h1, h2
        cdef uint64_t idx[MAX_HASHES]
        cdef int i
        cdef bint fresh
        self._ready()
        _key_open(key, &kv)
        cd_murmur3_x64_128(kv.data, <size_t>kv.size, self._seed, &h1, &h2)
        _key_close(&kv)
        _indices(h1, h2, self._k, self._m, idx)
        for i in range(self._k):
            cd_prefetch(self._bits + (idx[i] >> 3))
        fresh = _probe_add(self._bits, idx, self._k)
        if fresh:
            self._count += 1
        return fresh

    def __contains__(self, key):
        cdef KeyView kv
        cdef uint64_t h1, h2
        cdef uint64_t idx[MAX_HASHES]
        cdef int i
        self._ready()
        _key_open(key, &kv)
        cd_murmur3_x64_128(kv.data, <size_t>kv.size, self._seed, &h1, &h2)
        _key_close(&kv)
        _indices(h1, h2, self._k, self._m, idx)
        for i in range(self._k):
            cd_prefetch(self._bits + (idx[i] >> 3))
        return _probe_test(self._bits, idx, self._k)

    def add_many(self, keys):
        """Add every key in order; a numpy bool array, True where the key was new."""
        return self._batch(keys, True)

    def contains_many(self, keys):
        """A numpy bool array, True where the key is (probably) present."""
        return self._batch(keys, False)

    cdef object _batch(self, object keys, bint adding):
        cdef tuple items
        cdef Py_ssize_t n, i, j, base, cnt
        cdef const unsigned char** ptrs = NULL
        cdef Py_ssize_t* lens = NULL
        cdef uint8_t* res
        cdef object item
        cdef list keep = None
        cdef uint64_t h1, h2
        cdef uint64_t fresh_count = 0
        cdef uint64_t idx[BATCH_AHEAD * MAX_HASHES]
        cdef int k = self._k, t
        cdef uint64_t m = self._m
        cdef uint32_t seed = self._seed
        cdef uint8_t* bits = self._bits
        cdef bint hit
        self._ready()
        if isinstance(keys, (str, bytes, bytearray, memoryview)):
            raise TypeError(
                f"keys must be an iterable of keys, not a single {type(keys).__name__}; "
                f"use add()/`in` for one key")
        # A tuple holds strong references that no other thread can remove, so
        # the key bytes stay valid while the GIL is released below.
        items = keys if type(keys) is tuple else tuple(keys)
        n = PyTuple_GET_SIZE(items)
        out = _np.zeros(n, dtype=_np.bool_)
        if n == 0:
            return out
        cdef uint8_t[::1] outv = out.view(_np.uint8)
        res = &outv[0]
        ptrs = <const unsigned char**>PyMem_Malloc(n * sizeof(const unsigned char*))
        lens = <Py_ssize_t*>PyMem_Malloc(n * sizeof(Py_ssize_t))
        if ptrs == NULL or lens == NULL:
            PyMem_Free(ptrs)
            PyMem_Free(lens)
            raise MemoryError()
        try:
            # Phase 1, with the GIL: find every key's bytes.  Any bad key fails
            # the whole call before a single bit is touched.
            for i in range(n):
                item = <object>PyTuple_GET_ITEM(items, i)
                if PyUnicode_Check(item):
                    ptrs[i] = <const unsigned char*>PyUnicode_AsUTF8AndSize(item, &lens[i])
                elif PyBytes_Check(item):
                    ptrs[i] = <const unsigned char*>PyBytes_AS_STRING(item)
                    lens[i] = PyBytes_GET_SIZE(item)
                elif PyObject_CheckBuffer(item):
                    # A mutable buffer could be resized by another thread while
                    # the GIL is released: hash a private copy of it instead.
                    view = memoryview(item)
                    if not view.c_contiguous:
                        raise TypeError(
                            f"keys[{i}] must be str or a C-contiguous bytes-like object")
                    item = view.tobytes()
                    if keep is None:
                        keep = []
                    keep.append(item)
                    ptrs[i] = <const unsigned char*>PyBytes_AS_STRING(item)
                    lens[i] = PyBytes_GET_SIZE(item)
                else:
                    raise TypeError(
                        f"keys[{i}] must be str or bytes-like, not {type(item).__name__}")
            # Phase 2, without the GIL: hash a group of keys, prefetch all their
            # bit positions, then probe, so cache misses overlap.
            with nogil:
                base = 0
                while base < n:
                    cnt = n - base
                    if cnt > BATCH_AHEAD:
                        cnt = BATCH_AHEAD
                    for j in range(cnt):
                        cd_murmur3_x64_128(ptrs[base + j], <size_t>lens[base + j], seed, &h1, &h2)
                        _indices(h1, h2, k, m, &idx[j * k])
                        for t in range(k):
                            cd_prefetch(bits + (idx[j * k + t] >> 3))
                    for j in range(cnt):
                        if adding:
                            hit = _probe_add(bits, &idx[j * k], k)
                            if hit:
                                fresh_count += 1
                        else:
                            hit = _probe_test(bits, &idx[j * k], k)
                        res[base + j] = hit
                    base += cnt
            self._count += fresh_count
        finally:
            PyMem_Free(ptrs)
            PyMem_Free(lens)
        return out

    def _popcount(self):
        """Number of set bits."""
        cdef Py_ssize_t i
        cdef uint64_t w, total = 0
        self._ready()
        with nogil:
            for i in range(0, self._nbytes, 8):
                memcpy(&w, self._bits + i, 8)
                total += <uint64_t>cd_popcount64(w)
        return total

    cdef int _check_peer(self, BloomBits other) except -1:
        self._ready()
        other._ready()
        if other._m != self._m or other._k != self._k or other._seed != self._seed:
            raise ValueError("bit arrays differ in num_bits, num_hashes or seed")
        return 0

    def _or_from(self, BloomBits other):
        """self |= other, bit by bit."""
        cdef Py_ssize_t i
        cdef uint64_t a, b
        self._check_peer(other)
        for i in range(0, self._nbytes, 8):
            memcpy(&a, self._bits + i, 8)
            memcpy(&b, other._bits + i, 8)
            a |= b
            memcpy(self._bits + i, &a, 8)

    def _and_from(self, BloomBits other):
        """self &= other, bit by bit."""
        cdef Py_ssize_t i
        cdef uint64_t a, b
        self._check_peer(other)
        for i in range(0, self._nbytes, 8):
            memcpy(&a, self._bits + i, 8)
            memcpy(&b, other._bits + i, 8)
            a &= b
            memcpy(self._bits + i, &a, 8)

    def _bits_equal(self, BloomBits other):
        self._check_peer(other)
        return self._bits_view() == other._bits_view()

    def _clear(self):
        self._ready()
        memset(self._bits, 0, self._nbytes)
        self._count = 0

    def _bits_view(self):
        """A writable memoryview of the ``nbytes_for(num_bits)`` storage bytes."""
        self._ready()
        return memoryview(self._owner).cast("B")[:self._nbytes]


def nbytes_for(num_bits):
    """Bytes of storage for num_bits bits: whole 8-byte words."""
    return ((num_bits + 63) // 64) * 8
