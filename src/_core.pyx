# The compiled core of crawldedup, imported as ``crawldedup._core``.
#
# Pure computation on buffers, no I/O and no policy.  This file holds the key
# handling shared by every part (a key's bytes without copying, batch checks),
# MurmurHash3 x64 128 and the Bloom filter bit array (BloomBits: probing,
# batches without the GIL, lookups on several threads); the other parts are
# included at the end, one .pxi each: SimHash (_core_simhash.pxi), the exact
# Hamming-distance index (_core_index_*.pxi, its Python face _core_index.pxi), URL canonicalization and URL and
# request fingerprints (_core_url.pxi), the compact fingerprint table behind
# FingerprintSet (_core_fpset.pxi), Redis command bytes (_core_resp.pxi) and
# line splitting and hashing for the command line (_core_lines.pxi).  The
# thread runner and thread-count policy every batch kernel shares come first
# (_core_threads.pxi).
# Primitives that Cython cannot express live in the _cd_*.h headers
# (_cd_support.h holds those every part shares).
#
# Parameters are validated here only as far as memory safety needs (a core
# object can never index outside its buffer); friendly argument checking
# lives in the Python wrappers.  Every function and class here has a
# bit-for-bit twin in the package ``crawldedup._reference`` (its module
# ``bloom`` for this file, one module per .pxi); the test suite runs both.
#
# Compiler directives are set once, in setup.py.

from cpython.buffer cimport (PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_CheckBuffer, PyObject_GetBuffer)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_Check, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.pythread cimport (WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock,
                               PyThread_free_lock, PyThread_release_lock, PyThread_type_lock)
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_Check
from libc.stdint cimport UINT64_MAX, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

cimport cython

import mmap as _mmap

import numpy as _np

cdef extern from "Python.h" nogil:
    # Borrowed-pointer access for the batch loop, without reference counting
    # on every touch (field reads only, so also without the GIL).
    PyObject* _list_item "PyList_GET_ITEM" (object, Py_ssize_t)
    PyObject* _tuple_item "PyTuple_GET_ITEM" (object, Py_ssize_t)
    Py_ssize_t _list_size "PyList_GET_SIZE" (object)
    bint _is_str "PyUnicode_Check" (PyObject*)
    bint _is_bytes "PyBytes_Check" (PyObject*)
    char* _bytes_data "PyBytes_AS_STRING" (PyObject*)
    Py_ssize_t _bytes_size "PyBytes_GET_SIZE" (PyObject*)

cdef extern from "_cd_support.h" nogil:
    uint64_t cd_mulhi64(uint64_t a, uint64_t b)
    uint8_t cd_atomic_or8(uint8_t* p, uint8_t v)
    uint8_t cd_load8(const uint8_t* p)
    void cd_store8(uint8_t* p, uint8_t v)
    void cd_atomic_add64(uint64_t* p, uint64_t v)
    uint64_t cd_atomic_load64(const uint64_t* p)
    void cd_atomic_store64(uint64_t* p, uint64_t v)
    void cd_prefetch(const void* p)
    void cd_prefetch_w(const void* p)
    const uint64_t CD_LCG_MULTIPLIER
    const uint64_t CD_LCG_INCREMENT
    int cd_popcount64(uint64_t x)
    bint cd_compact_ascii(PyObject* o, const unsigned char** data, Py_ssize_t* size)
    PyObject** cd_list_items(object o)
    PyObject** cd_tuple_items(object o)
    void cd_murmur3_x64_128(const unsigned char* data, size_t length, uint32_t seed,
                            uint64_t* out1, uint64_t* out2)
    void cd_murmur3_x64_128_x2(const unsigned char* a, size_t la,
                               const unsigned char* b, size_t lb, uint32_t seed,
                               uint64_t* a1, uint64_t* a2, uint64_t* b1, uint64_t* b2)

cdef extern from "_cd_support.h":
    int cd_unicode_ready(PyObject* o) except -1
    Py_ssize_t cd_utf8_bound(PyObject* o)
    Py_ssize_t cd_utf8_encode(PyObject* o, unsigned char* out)
    bint _is_ascii "PyUnicode_IS_ASCII" (PyObject*)
    int _unicode_kind "PyUnicode_KIND" (PyObject*)
    void* _unicode_data "PyUnicode_DATA" (PyObject*)
    Py_ssize_t _unicode_length "PyUnicode_GET_LENGTH" (PyObject*)
    object PyUnicode_AsUTF8String(object)
    object cd_pylong_from_u128(uint64_t lo, uint64_t hi)

cdef extern from "_cd_support.h" nogil:
    # One rule for large allocations (see _cd_support.h).
    const size_t CD_BIG_MAP_FROM
    const size_t CD_BIG_HUGE_FROM

include "_core_threads.pxi"

IMPLEMENTATION = "core"

# k is at most 64: an error rate of 1e-19 already needs 63 hash functions.
DEF MAX_HASHES = 64
# Batch calls take the keys CHUNK at a time (a chunk's key bytes stay in
# cache between finding them and hashing them), and hash GROUP keys ahead of
# probing them so that the cache misses of a large filter overlap.  Key
# objects are prefetched PREFETCH_KEYS ahead while walking the container.
DEF CHUNK = 512
DEF GROUP = 16
DEF PREFETCH_KEYS = 8
# Storage from CD_BIG_MAP_FROM bytes on is mapped memory, zeroed lazily by
# the OS, and from CD_BIG_HUGE_FROM on asks for transparent huge pages (the
# core's one rule for large allocations, _cd_support.h).
# Lookups in filters up to this size test every bit without branching; see
# _prefetch_group.
DEF BRANCHLESS_MAX_BYTES = 8 << 20
# Batches on filters larger than the caches touch each key's line first.
DEF TOUCH_MIN_BYTES = 4 << 20
# Where the touched bytes go, so the loads are not optimised away.
cdef uint64_t _touch_sink = 0
# Benchmarks switch prefetching (and touching) off to measure what it buys.
cdef bint _prefetching = True


# Lookup batches of at least 2 * THREAD_KEYS keys are cut into slices looked
# up on several threads (_threads_for, _run_jobs).
DEF THREAD_KEYS = 16384


def _set_prefetching(enabled):
    """Turn the batch kernels' prefetches and line touches on or off (for
    benchmarks; results are the same either way); the previous setting."""
    global _prefetching
    previous = _prefetching
    _prefetching = bool(enabled)
    return previous

# Bit layouts (ids as stored in files).
DEF LAYOUT_STANDARD = 0
DEF LAYOUT_BLOCKED = 1

MAX_NUM_HASHES = MAX_HASHES
MAX_SEED = 0xFFFFFFFF


# ---------------------------------------------------------------- key access

# Non-ASCII str keys up to this many UTF-8 bytes are encoded on the stack.
DEF KEY_LOCAL = 1024

cdef struct KeyView:
    const unsigned char* data
    Py_ssize_t size
    bint has_buffer
    Py_buffer view
    unsigned char* heap
    unsigned char local[KEY_LOCAL]


cdef inline int _str_open(PyObject* s, KeyView* kv) except -1:
    """UTF-8 bytes of a str: its own data when ASCII, else encoded into kv
    (never cached in the str, unlike PyUnicode_AsUTF8AndSize)."""
    cdef Py_ssize_t bound, n
    cdef unsigned char* buf
    cd_unicode_ready(s)
    if _is_ascii(s):
        kv.data = <const unsigned char*>_unicode_data(s)
        kv.size = _unicode_length(s)
        return 0
    bound = cd_utf8_bound(s)
    buf = kv.local
    if bound > KEY_LOCAL:
        kv.heap = <unsigned char*>PyMem_Malloc(bound)
        if kv.heap == NULL:
            raise MemoryError()
        buf = kv.heap
    n = cd_utf8_encode(s, buf)
    if n < 0:
        _key_close(kv)
        PyUnicode_AsUTF8String(<object>s)  # raises UnicodeEncodeError
        raise UnicodeError("unencodable str key")  # pragma: no cover
    kv.data = buf
    kv.size = n
    return 0


cdef inline int _key_open(object key, KeyView* kv) except -1:
    """Point kv at the bytes that represent key: UTF-8 for str, the raw
    contents for bytes and other C-contiguous buffers.  _key_close after.
    The common cases (an ASCII str, bytes) are inlined into every caller."""
    kv.has_buffer = False
    kv.heap = NULL
    if cd_compact_ascii(<PyObject*>key, &kv.data, &kv.size):
        return 0
    if PyBytes_Check(key):
        kv.data = <const unsigned char*>PyBytes_AS_STRING(key)
        kv.size = PyBytes_GET_SIZE(key)
        return 0
    return _key_open_other(key, kv)


cdef int _key_open_other(object key, KeyView* kv) except -1:
    if PyUnicode_Check(key):
        return _str_open(<PyObject*>key, kv)
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
    if kv.heap != NULL:
        PyMem_Free(kv.heap)
        kv.heap = NULL


cdef object _ZERO = 0


def check_keys(keys):
    """Raise TypeError (or UnicodeEncodeError) naming the position of the
    first key of a list or tuple that cannot be hashed; nothing otherwise.
    Batch calls that change several filters call it before the first change."""
    if type(keys) is not list and type(keys) is not tuple:
        raise TypeError(f"keys must be a list or tuple here, not {type(keys).__name__}")
    _check_batch_keys(keys, len(keys), type(keys) is list)


cdef inline uint32_t _check_seed(object seed) except? 0:
    if seed is _ZERO:  # the default, without arithmetic on Python ints
        return 0
    if not isinstance(seed, int):
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    if seed < 0 or seed > MAX_SEED:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    return <uint32_t>seed


# ------------------------------------------------------------------- hashing

cdef inline int _hash_key(object key, uint32_t seed, uint64_t* h1, uint64_t* h2) except -1:
    """MurmurHash3 x64 128 of one key, its bytes read in place."""
    cdef KeyView kv
    _key_open(key, &kv)
    cd_murmur3_x64_128(kv.data, <size_t>kv.size, seed, h1, h2)
    _key_close(&kv)
    return 0


@cython.binding(False)
def hash128(key, seed=0):
    """MurmurHash3 x64 128-bit of key (str as UTF-8, or bytes-like), unsigned.

    Equal to ``mmh3.hash128(key, seed, signed=False)``.

    >>> hash128(b"hello")
    121118445609844952839898260755277781762
    """
    # The three lines of _hash_key written out: a call to it (GCC does not
    # inline it here) costs these tiny functions about 16 instructions a
    # call, 3-5% (callgrind).
    cdef KeyView kv
    cdef uint64_t h1, h2
    cdef uint32_t s = _check_seed(seed)
    _key_open(key, &kv)
    cd_murmur3_x64_128(kv.data, <size_t>kv.size, s, &h1, &h2)
    _key_close(&kv)
    return cd_pylong_from_u128(h1, h2)


@cython.binding(False)
def hash64(key, seed=0):
    """The low 64 bits of :func:`hash128`.

    >>> hash64(b"hello")
    14688674573012802306
    """
    cdef KeyView kv
    cdef uint64_t h1, h2
    cdef uint32_t s = _check_seed(seed)
    _key_open(key, &kv)  # as in hash128
    cd_murmur3_x64_128(kv.data, <size_t>kv.size, s, &h1, &h2)
    _key_close(&kv)
    return h1


cdef inline uint64_t _unit(uint64_t m) noexcept nogil:
    """One position's width in the 64-bit space that a multiply-high maps
    onto [0, m): about 2**64 / m."""
    return UINT64_MAX / m + (1 if m > 1 else 0)


@cython.linetrace(False)
@cython.profile(False)
cdef inline void _indices(uint64_t h1, uint64_t h2, int k, uint64_t m, uint64_t unit,
                          uint64_t* out) noexcept nogil:
    # Enhanced double hashing (Dillinger & Manolios 2004) in the 64-bit space
    # that a multiply-high maps onto [0, m): x_i = h1 + i*h2 + (i^3 - i)/6
    # positions, the cubic term counted in units of one position (unit, about
    # 2**64 / m) so that it moves the probes even of a small filter, and the
    # fractional parts of h1 and h2 add variety that plain double hashing
    # modulo m lacks.  Additions only.  Frozen: persisted filters depend on it
    # (docs/format.md).
    cdef uint64_t x = h1, y = h2
    cdef int i
    for i in range(k):
        out[i] = cd_mulhi64(x, m)
        x += y
        y += <uint64_t>(i + 1) * unit


@cython.linetrace(False)
@cython.profile(False)
cdef inline void _indices_blocked(uint64_t h1, uint64_t h2, int k, uint64_t nblocks,
                                  uint64_t* out) noexcept nogil:
    # The blocked layout: every position of a key in one 512-bit block (one
    # 64-byte cache line).  The block is a multiply-high of h1 onto
    # [0, nblocks); the k offsets in the block are the top 9 bits of
    # successive states of Knuth's MMIX linear congruential generator seeded
    # with h2.  Frozen with the file format (docs/format.md).
    cdef uint64_t base = cd_mulhi64(h1, nblocks) << 9
    cdef uint64_t state = h2
    cdef int i
    for i in range(k):
        out[i] = base + (state >> 55)
        state = state * CD_LCG_MULTIPLIER + CD_LCG_INCREMENT


@cython.linetrace(False)
@cython.profile(False)
cdef inline void _line_of(uint64_t h1, uint64_t h2, uint64_t m, uint64_t* out) noexcept nogil:
    """A key's block in the blocked layout, as _indices_blocked finds it: the
    bit index of the block's start (so out[0] >> 3 is the byte of its line,
    as for the positions), then the generator state of its first offset."""
    out[0] = cd_mulhi64(h1, m >> 9) << 9
    out[1] = h2


@cython.linetrace(False)
@cython.profile(False)
cdef inline bint _probe_test_line(const uint8_t* bits, const uint64_t* line, int k) noexcept nogil:
    """_probe_test_all for a key given by _line_of: the offsets in its line
    generated as they are tested."""
    cdef const uint8_t* block = bits + (line[0] >> 3)
    cdef uint64_t state = line[1], off
    cdef unsigned int acc = 1
    cdef int i
    for i in range(k):
        off = state >> 55
        acc &= cd_load8(block + (off >> 3)) >> (off & 7)
        state = state * CD_LCG_MULTIPLIER + CD_LCG_INCREMENT
    return acc & 1


@cython.linetrace(False)
@cython.profile(False)
cdef inline void _positions(int layout, uint64_t h1, uint64_t h2, int k, uint64_t m,
                            uint64_t unit, uint64_t* out) noexcept nogil:
    if layout == LAYOUT_BLOCKED:
        _indices_blocked(h1, h2, k, m >> 9, out)
    else:
        _indices(h1, h2, k, m, unit, out)


def hash_indices(key, k, m, seed=0, layout="standard"):
    """The k bit positions in [0, m) that a Bloom filter of m bits sets for key.

    ``layout="blocked"`` gives the positions of the cache-line blocked layout,
    all in one 512-bit block (m must then be a multiple of 512).

    >>> hash_indices("https://example.com/", 3, 1000)
    [707, 350, 995]
    """
    cdef uint64_t h1, h2
    cdef uint64_t out[MAX_HASHES]
    cdef uint32_t s = _check_seed(seed)
    cdef int kk, code
    cdef uint64_t mm
    if not isinstance(k, int) or not isinstance(m, int):
        raise TypeError("k and m must be ints")
    if k < 1 or k > MAX_HASHES:
        raise ValueError(f"k must be in [1, {MAX_HASHES}], got {k}")
    if m < 1 or m >= 2 ** 64:
        raise ValueError(f"m must be in [1, 2**64), got {m}")
    code = _layout_code(layout)
    if code == LAYOUT_BLOCKED and m % 512:
        raise ValueError(f"m must be a multiple of 512 for the blocked layout, got {m}")
    kk = k
    mm = m
    _hash_key(key, s, &h1, &h2)
    _positions(code, h1, h2, kk, mm, _unit(mm), out)
    return [out[i] for i in range(kk)]


cdef int _layout_code(object layout) except -1:
    if layout == "standard":
        return LAYOUT_STANDARD
    if layout == "blocked":
        return LAYOUT_BLOCKED
    raise ValueError(f"layout must be 'standard' or 'blocked', got {layout!r}")


# -------------------------------------------------------------- Bloom bits

cdef inline bint _probe_add(uint8_t* bits, const uint64_t* idx, int k) noexcept nogil:
    """Set the k bits with atomic ORs; True when one was clear (the key was new).
    For storage that other processes may write at the same time."""
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


cdef inline bint _probe_add_excl(uint8_t* bits, const uint64_t* idx, int k) noexcept nogil:
    """The same with plain stores, for a writer that excludes all others (see
    BloomBits._enter), and without branches: whether a bit was clear is a coin
    toss for a new key, so a branch on it would be mispredicted about k/2
    times a key.  (A locked RMW is a full barrier on x86 that would also stall
    the overlapping cache misses batch calls depend on.)"""
    cdef unsigned int fresh = 0
    cdef int i
    cdef uint64_t pos
    cdef uint8_t byte, mask
    for i in range(k):
        pos = idx[i]
        mask = <uint8_t>(1 << (pos & 7))
        byte = cd_load8(bits + (pos >> 3))
        fresh |= (byte & mask) ^ mask
        cd_store8(bits + (pos >> 3), byte | mask)
    return fresh != 0


@cython.linetrace(False)
@cython.profile(False)
cdef inline bint _probe_test(const uint8_t* bits, const uint64_t* idx, int k) noexcept nogil:
    cdef int i
    cdef uint64_t pos
    for i in range(k):
        pos = idx[i]
        if not (cd_load8(bits + (pos >> 3)) & (1 << (pos & 7))):
            return False
    return True


@cython.linetrace(False)
@cython.profile(False)
cdef inline void _prefetch_group(const uint8_t* bits, const uint64_t* idx, Py_ssize_t count,
                                 int k, bint all_positions, bint adding,
                                 bint one_line) noexcept nogil:
    """Prefetch the bit positions of count keys: all k of them for adds and
    for lookups in filters that fit in the caches (these test every bit,
    branch-free: a branch on each random bit would be mispredicted about once
    a key); for lookups in larger filters only the first two, as an absent key
    usually stops at its first or second clear bit (half the bits are clear
    at capacity) and fetching the other k-2 lines from memory would waste
    bandwidth.  Prefetches announce the write when adding."""
    cdef Py_ssize_t j
    cdef int t, ahead = k if all_positions or k < 2 else 2
    if one_line:  # the blocked layout: a key's bits share one cache line
        ahead = 1
    for j in range(count):
        for t in range(ahead):
            if adding:
                cd_prefetch_w(bits + (idx[j * k + t] >> 3))
            else:
                cd_prefetch(bits + (idx[j * k + t] >> 3))


@cython.linetrace(False)
@cython.profile(False)
cdef inline bint _plain_key(PyObject* obj, const unsigned char** data,
                            Py_ssize_t* size) noexcept nogil:
    """Point at the bytes of an ASCII str or a bytes key, without copying;
    False for any other key."""
    if cd_compact_ascii(obj, data, size):
        return True
    if _is_bytes(obj):
        data[0] = <const unsigned char*>_bytes_data(obj)
        size[0] = _bytes_size(obj)
        return True
    return False


cdef int _batch_key_open(object key, Py_ssize_t position, KeyView* kv) except -1:
    """_key_open for the key at a position of a batch, naming the position."""
    try:
        return _key_open(key, kv)
    except TypeError as exc:
        raise TypeError(f"keys[{position}]: {exc}") from None


cdef inline bint _str_encodable(PyObject* s) noexcept:
    """False when a (ready) str holds a lone surrogate, which UTF-8 cannot
    encode; a scan, cheaper than encoding the key twice."""
    cdef Py_ssize_t i, n = _unicode_length(s)
    cdef int kind = _unicode_kind(s)
    cdef const uint16_t* u2
    cdef const uint32_t* u4
    if kind == 1:
        return True
    if kind == 2:
        u2 = <const uint16_t*>_unicode_data(s)
        for i in range(n):
            if (u2[i] & 0xF800) == 0xD800:
                return False
        return True
    u4 = <const uint32_t*>_unicode_data(s)
    for i in range(n):
        if (u4[i] & 0xFFFFF800) == 0xD800:
            return False
    return True


cdef int _check_batch_keys(object seq, Py_ssize_t n, bint is_list) except -1:
    """Raise for the first key of a batch that cannot be hashed (naming its
    position), before an adding batch changes anything: a batch is added
    whole or not at all."""
    cdef Py_ssize_t j
    cdef PyObject* obj
    cdef const unsigned char* data
    cdef Py_ssize_t size
    cdef KeyView kv
    for j in range(n):
        obj = _list_item(seq, j) if is_list else _tuple_item(seq, j)
        if _plain_key(obj, &data, &size):
            continue
        if _is_str(obj):
            cd_unicode_ready(obj)
            if _str_encodable(obj):
                continue
        if _is_bytes(obj):
            continue
        # Anything else is opened once, so that the error is the one the
        # key itself would raise (a non-contiguous buffer, a surrogate).
        _batch_key_open(<object>obj, j, &kv)
        _key_close(&kv)
    return 0


cdef inline bint _lookup(const uint8_t* bits, uint64_t h1, uint64_t h2, int k,
                         uint64_t m, uint64_t unit) noexcept nogil:
    """Is every bit of the key set?  Positions are computed one at a time, so
    an absent key (usually rejected by its first or second bit) costs little;
    for a present key the processor runs ahead into the next probes itself.
    Same positions as _indices."""
    cdef uint64_t x = h1, y = h2, pos
    cdef int i
    for i in range(k):
        pos = cd_mulhi64(x, m)
        if not (cd_load8(bits + (pos >> 3)) & (1 << (pos & 7))):
            return False
        x += y
        y += <uint64_t>(i + 1) * unit
    return True


@cython.linetrace(False)
@cython.profile(False)
cdef inline bint _probe_test_all(const uint8_t* bits, const uint64_t* idx, int k) noexcept nogil:
    """_probe_test without early exit: no branch to mispredict on the
    random outcome of each probe, for batches whose positions are prefetched."""
    cdef int i
    cdef uint64_t pos
    cdef unsigned int acc = 1
    for i in range(k):
        pos = idx[i]
        acc &= cd_load8(bits + (pos >> 3)) >> (pos & 7)
    return acc & 1


# What a batch call needs of the filter while it runs (BloomBits._plan).
ctypedef struct BatchPlan:
    uint8_t* bits
    uint64_t m, unit
    int k, layout, stride
    bint adding, atomic, blocked, branchless, prefetch, touch, lines
    uint64_t fresh            # keys the call added
    uint64_t sink             # see _touch_sink


@cython.linetrace(False)
@cython.profile(False)
cdef inline void _key_slot(const BatchPlan* p, uint64_t h1, uint64_t h2,
                           uint64_t* at) noexcept nogil:
    """Write a key's slot (its positions, or its line for a blocked lookup)
    from its hashes, and fetch its bits while the next keys are hashed: by
    the time the chunk is probed they are in cache."""
    if p.lines:
        _line_of(h1, h2, p.m, at)
    else:
        _positions(p.layout, h1, h2, p.k, p.m, p.unit, at)
    if p.prefetch:
        _prefetch_group(p.bits, at, 1, p.stride, p.branchless, p.adding, p.blocked)


# Everything the lookup threads run is compiled without line tracing and
# profiling hooks (the decorators on it and on the helpers it calls): in a
# debug build those hooks take the GIL, which the calling thread holds while
# it waits for the threads.
ctypedef struct LookupJob:
    PyObject** items          # the batch's keys (kept alive by the caller), or
    const uint64_t* hashes    # their (h1, h2) hashes, two words a key
    Py_ssize_t start, stop    # this job's slice
    uint8_t* res              # 1 / 0, or 2 for a key left to the caller
    uint64_t* idx             # CHUNK * plan.stride words of scratch
    BatchPlan plan            # the caller's, without prefetches
    uint32_t seed


@cython.linetrace(False)
@cython.profile(False)
cdef void _lookup_slice(LookupJob* job) noexcept nogil:
    """contains_many over a slice of keys without the GIL: the keys that are
    ASCII str or bytes (immutable, their bytes read in place) are hashed and
    probed chunk by chunk, as _batch does; any other key is marked 2 for the
    caller to look up with the GIL.  With hashes, contains_hashed's slice."""
    cdef Py_ssize_t c0, c1, j
    cdef PyObject* obj
    cdef const unsigned char* data
    cdef const unsigned char* data2
    cdef Py_ssize_t size, size2
    cdef uint64_t h1, h2, g1, g2
    cdef uint64_t* at
    cdef const BatchPlan* p = &job.plan
    cdef int stride = p.stride
    c0 = job.start
    while c0 < job.stop:
        c1 = min(c0 + CHUNK, job.stop)
        j = c0
        while j < c1:
            at = &job.idx[(j - c0) * stride]
            job.res[j] = 0
            if job.hashes != NULL:
                _key_slot(p, job.hashes[2 * j], job.hashes[2 * j + 1], at)
                j += 1
                continue
            if j + PREFETCH_KEYS + 1 < c1:
                cd_prefetch(job.items[j + PREFETCH_KEYS])
                cd_prefetch(<char*>job.items[j + PREFETCH_KEYS] + 64)
                cd_prefetch(job.items[j + PREFETCH_KEYS + 1])
                cd_prefetch(<char*>job.items[j + PREFETCH_KEYS + 1] + 64)
            obj = job.items[j]
            if _plain_key(obj, &data, &size):
                if j + 1 < c1 and _plain_key(job.items[j + 1], &data2, &size2):
                    # two keys at once, as _batch hashes them
                    cd_murmur3_x64_128_x2(data, <size_t>size, data2, <size_t>size2, job.seed,
                                          &h1, &h2, &g1, &g2)
                    _key_slot(p, h1, h2, at)
                    _key_slot(p, g1, g2, at + stride)
                    job.res[j + 1] = 0
                    j += 2
                    continue
                cd_murmur3_x64_128(data, <size_t>size, job.seed, &h1, &h2)
                _key_slot(p, h1, h2, at)
            else:
                job.res[j] = 2   # no positions: skipped below
            j += 1
        if p.touch:
            for j in range(c0, c1):
                if job.res[j] != 2:
                    job.plan.sink += cd_load8(p.bits + (job.idx[(j - c0) * stride] >> 3))
        for j in range(c0, c1):
            if job.res[j] == 2:
                continue
            at = &job.idx[(j - c0) * stride]
            if p.lines:
                job.res[j] = _probe_test_line(p.bits, at, p.k)
            elif p.branchless:
                job.res[j] = _probe_test_all(p.bits, at, p.k)
            else:
                job.res[j] = _probe_test(p.bits, at, p.k)
        c0 = c1


@cython.linetrace(False)
@cython.profile(False)
cdef void _lookup_job(void* arg) noexcept nogil:
    _lookup_slice(<LookupJob*>arg)


cdef int _walk_keys(const BatchPlan* p, object seq, bint is_list, Py_ssize_t start,
                    Py_ssize_t cnt, uint32_t seed, uint64_t* idx) except -1:
    """The slots (_key_slot) of the cnt keys of seq from start, with the GIL:
    borrowed references, key objects prefetched ahead (freshly built strings
    are rarely in cache)."""
    cdef KeyView kv
    cdef Py_ssize_t j
    cdef PyObject* obj
    cdef PyObject* obj2
    cdef PyObject* obj3
    cdef const unsigned char* data
    cdef const unsigned char* data2
    cdef Py_ssize_t size, size2
    cdef uint64_t h1, h2, g1, g2
    cdef int stride = p.stride
    if is_list and _list_size(seq) < start + cnt:
        raise RuntimeError("the list of keys changed size during the call")
    j = 0
    while j < cnt:
        if j + PREFETCH_KEYS < cnt:
            obj = _list_item(seq, start + j + PREFETCH_KEYS) if is_list else \
                _tuple_item(seq, start + j + PREFETCH_KEYS)
            cd_prefetch(obj)
            cd_prefetch(<char*>obj + 64)
            cd_prefetch(<char*>obj + 128)
        obj = _list_item(seq, start + j) if is_list else _tuple_item(seq, start + j)
        # Two ASCII str or bytes keys in a row (the common case): hashed
        # together, see cd_murmur3_x64_128_x2.
        if j + 1 < cnt and _plain_key(obj, &data, &size):
            obj2 = _list_item(seq, start + j + 1) if is_list else _tuple_item(seq, start + j + 1)
            if j + 1 + PREFETCH_KEYS < cnt:
                obj3 = _list_item(seq, start + j + 1 + PREFETCH_KEYS) if is_list \
                    else _tuple_item(seq, start + j + 1 + PREFETCH_KEYS)
                cd_prefetch(obj3)
                cd_prefetch(<char*>obj3 + 64)
                cd_prefetch(<char*>obj3 + 128)
            if _plain_key(obj2, &data2, &size2):
                cd_murmur3_x64_128_x2(data, <size_t>size, data2, <size_t>size2, seed,
                                      &h1, &h2, &g1, &g2)
                _key_slot(p, h1, h2, &idx[j * stride])
                _key_slot(p, g1, g2, &idx[(j + 1) * stride])
                j += 2
                continue
        if _is_str(obj):
            kv.has_buffer = False
            kv.heap = NULL
            _str_open(obj, &kv)
            cd_murmur3_x64_128(kv.data, <size_t>kv.size, seed, &h1, &h2)
            _key_close(&kv)
        elif _is_bytes(obj):
            cd_murmur3_x64_128(<const unsigned char*>_bytes_data(obj),
                               <size_t>_bytes_size(obj), seed, &h1, &h2)
        else:
            _batch_key_open(<object>obj, start + j, &kv)
            cd_murmur3_x64_128(kv.data, <size_t>kv.size, seed, &h1, &h2)
            _key_close(&kv)
        _key_slot(p, h1, h2, &idx[j * stride])
        j += 1
    return 0


cdef const uint64_t[:, ::1] _check_hashes(object hashes) except *:
    """hashes as a C-contiguous (n, 2) uint64 view, or TypeError."""
    if not isinstance(hashes, _np.ndarray) or hashes.dtype != _np.uint64 \
            or hashes.ndim != 2 or hashes.shape[1] != 2:
        raise TypeError("hashes must be a uint64 numpy array of shape (n, 2), one (h1, h2) "
                        "row a key")
    return _np.ascontiguousarray(hashes)


@cython.no_gc_clear
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
    cdef uint64_t _unit
    cdef int _k
    cdef int _layout
    cdef uint32_t _seed
    cdef uint64_t _count
    cdef object _owner
    cdef Py_buffer _view
    cdef bint _has_view
    # Writers without the GIL, counted and changed only with the GIL held;
    # they set bits only while holding _lock.  See _enter.
    cdef Py_ssize_t _nogil_writers
    cdef PyThread_type_lock _lock
    # Storage given by the caller may be shared with other processes: every
    # write is then an atomic OR.
    cdef bint _atomic
    cdef bint _readonly
    # Calls running without the GIL on the storage; _release waits for none.
    cdef Py_ssize_t _active
    # The insert count in shared storage (a file's header), when attached.
    cdef uint64_t* _shared_count
    cdef Py_buffer _count_view
    cdef bint _has_count_view
    # Called once before the first change to the bits (see _set_write_hook).
    cdef object _write_hook

    def __cinit__(self, *args, **kwargs):
        self._bits = NULL
        self._has_view = False
        self._nogil_writers = 0
        self._atomic = False
        self._readonly = False
        self._active = 0
        self._shared_count = NULL
        self._has_count_view = False
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError()

    def __dealloc__(self):
        self._drop_buffers()
        if self._lock != NULL:
            PyThread_free_lock(self._lock)
            self._lock = NULL

    cdef void _drop_buffers(self) noexcept:
        self._bits = NULL
        self._shared_count = NULL
        if self._has_count_view:
            PyBuffer_Release(&self._count_view)
            self._has_count_view = False
        if self._has_view:
            PyBuffer_Release(&self._view)
            self._has_view = False

    def _release(self):
        """Let go of the storage (so that a mapping can be closed); every
        later use raises.  Refused while another thread runs a batch call."""
        if self._active:
            raise BufferError("the filter is in use by a batch call in another thread")
        self._drop_buffers()
        self._owner = None

    def _attach_counter(self, buffer):
        """Keep the insert count in buffer (8 bytes, native order, e.g. a
        mapped file's header), updated atomically by every attached writer."""
        self._ready()
        if self._has_count_view:
            raise RuntimeError("a counter is already attached")
        flags = PyBUF_SIMPLE if self._readonly else PyBUF_WRITABLE
        try:
            PyObject_GetBuffer(buffer, &self._count_view, flags)
        except BufferError:
            raise TypeError("counter buffer must be writable and contiguous") from None
        self._has_count_view = True
        if self._count_view.len < 8 or (<size_t>self._count_view.buf) % 8:
            PyBuffer_Release(&self._count_view)
            self._has_count_view = False
            raise ValueError("counter buffer must be 8 bytes, 8-byte aligned")
        self._shared_count = <uint64_t*>self._count_view.buf

    # Writers exclude each other so that bits can be set with plain stores.
    # A writer holding the GIL may write directly when no GIL-free writer is
    # counted (none can start while it holds the GIL).  Otherwise it counts
    # itself, waits for the lock without the GIL, writes, and unlocks.  No
    # thread ever waits for the lock while holding the GIL, and the lock
    # holder never needs the GIL to let go, so there is no deadlock.

    cdef inline bint _enter(self) noexcept:
        """Called with the GIL; True when the caller now holds _lock."""
        if self._nogil_writers == 0:
            return False
        self._nogil_writers += 1
        with nogil:
            PyThread_acquire_lock(self._lock, WAIT_LOCK)
        return True

    cdef inline void _leave(self, bint locked) noexcept:
        if locked:
            PyThread_release_lock(self._lock)
            self._nogil_writers -= 1

    def _init_bits(self, num_bits, num_hashes, seed=0, buffer=None, layout="standard",
                   readonly=False):
        """Attach storage: a new zeroed buffer, or ``buffer`` (at least
        ``nbytes_for(num_bits)`` bytes, used in place; writable unless
        ``readonly``, when every add raises)."""
        cdef uint32_t s = _check_seed(seed)
        cdef int code = _layout_code(layout)
        cdef Py_ssize_t need
        if self._bits != NULL:
            raise RuntimeError("bits are already initialised")
        if not isinstance(num_bits, int) or not isinstance(num_hashes, int):
            raise TypeError("num_bits and num_hashes must be ints")
        if num_hashes < 1 or num_hashes > MAX_HASHES:
            raise ValueError(f"num_hashes must be in [1, {MAX_HASHES}], got {num_hashes}")
        if num_bits < 1 or num_bits > (1 << 62):
            raise ValueError(f"num_bits must be in [1, 2**62], got {num_bits}")
        if code == LAYOUT_BLOCKED and num_bits % 512:
            raise ValueError(
                f"num_bits must be a multiple of 512 for the blocked layout, got {num_bits}")
        need = nbytes_for(num_bits)
        # Blocks must be whole cache lines: mapped memory is page-aligned.
        owner = _zeroed(need, code == LAYOUT_BLOCKED) if buffer is None else buffer
        try:
            PyObject_GetBuffer(owner, &self._view, PyBUF_SIMPLE if readonly else PyBUF_WRITABLE)
        except BufferError:
            raise TypeError("buffer must be a writable, C-contiguous bytes-like object") from None
        self._has_view = True
        if self._view.len < need:
            PyBuffer_Release(&self._view)
            self._has_view = False
            raise ValueError(f"buffer holds {self._view.len} bytes; {need} are needed")
        self._owner = owner
        self._atomic = buffer is not None
        self._readonly = bool(readonly)
        self._nbytes = need
        self._m = num_bits
        self._unit = _unit(self._m)
        self._k = num_hashes
        self._layout = code
        self._seed = s
        self._count = 0
        self._bits = <uint8_t*>self._view.buf

    cdef inline int _ready(self) except -1:
        if self._bits == NULL:
            if self._nbytes:
                raise ValueError("the filter is closed")
            raise RuntimeError("BloomBits used before _init_bits()")
        return 0

    cdef inline int _writable(self) except -1:
        if self._bits == NULL:
            self._ready()
        if self._readonly:
            raise ValueError("the filter is open read-only")
        if self._write_hook is not None:
            self._run_write_hook()
        return 0

    cdef int _run_write_hook(self) except -1:
        hook = self._write_hook
        hook()  # may raise: the hook stays, and every later change raises too
        if self._write_hook is hook:
            self._write_hook = None
        return 0

    def _set_write_hook(self, hook):
        """Call hook() (once it returns) before the first change to the bits:
        a mapped file checks and marks itself there.  None removes it."""
        if hook is not None and not callable(hook):
            raise TypeError("the write hook must be callable or None")
        self._write_hook = hook

    cdef inline void _count_add(self, uint64_t n) noexcept nogil:
        if self._shared_count != NULL:
            cd_atomic_add64(self._shared_count, n)
        else:
            self._count += n

    @property
    def num_bits(self):
        """Number of bits, m."""
        return self._m

    @property
    def num_hashes(self):
        """Number of bit positions per key, k."""
        return self._k

    @property
    def layout(self):
        """'standard' or 'blocked' (all of a key's bits in one cache line)."""
        return "blocked" if self._layout == LAYOUT_BLOCKED else "standard"

    @property
    def seed(self):
        """Seed of the MurmurHash3 used for keys."""
        return self._seed

    @property
    def insert_count(self):
        """Number of adds that reported a new key."""
        if self._shared_count != NULL:
            return cd_atomic_load64(self._shared_count)
        return self._count

    @property
    def readonly(self):
        """True for a filter opened read-only."""
        return self._readonly

    def _set_insert_count(self, uint64_t value):
        if self._shared_count != NULL:
            self._writable()
            cd_atomic_store64(self._shared_count, value)
        else:
            self._count = value

    def add(self, key):
        """Add key; True when it was not present before (like Redis BF.ADD)."""
        cdef uint64_t h1, h2
        cdef uint64_t idx[MAX_HASHES]
        cdef int i
        cdef bint fresh, locked
        self._ready()
        _hash_key(key, self._seed, &h1, &h2)
        self._writable()
        _positions(self._layout, h1, h2, self._k, self._m, self._unit, idx)
        for i in range(self._k):
            cd_prefetch(self._bits + (idx[i] >> 3))
        if self._atomic:
            fresh = _probe_add(self._bits, idx, self._k)
        else:
            locked = self._enter()
            fresh = _probe_add_excl(self._bits, idx, self._k)
            self._leave(locked)
        if fresh:
            self._count_add(1)
        return fresh

    def __contains__(self, key):
        cdef uint64_t h1, h2
        cdef uint64_t idx[MAX_HASHES]
        self._ready()
        _hash_key(key, self._seed, &h1, &h2)
        if self._layout == LAYOUT_BLOCKED:
            _indices_blocked(h1, h2, self._k, self._m >> 9, idx)
            return _probe_test_all(self._bits, idx, self._k)
        return _lookup(self._bits, h1, h2, self._k, self._m, self._unit)

    def add_many(self, keys):
        """Add every key in order; a numpy bool array, True where the key was new."""
        return self._batch(keys, True)

    def contains_many(self, keys):
        """A numpy bool array, True where the key is (probably) present."""
        return self._batch(keys, False)

    def add_hashed(self, hashes):
        """add_many for keys given by their hashes: ``hashes`` is a uint64
        numpy array of shape (n, 2), one row (h1, h2) a key, where h1 and h2
        are the low and high 64 bits of ``hash128(key, seed)`` (the filter's
        seed).  Sets the same bits and gives the same answers as
        ``add_many(keys)``."""
        return self._batch_hashed(hashes, True)

    def contains_hashed(self, hashes):
        """contains_many for keys given by their hashes (see add_hashed)."""
        return self._batch_hashed(hashes, False)

    cdef int _plan(self, BatchPlan* p, bint adding) except -1:
        """What a batch call needs of the filter, for _key_slot and
        _probe_chunk (after _writable for an adding call)."""
        p.bits = self._bits
        p.m = self._m
        p.unit = self._unit
        p.k = self._k
        p.layout = self._layout
        p.adding = adding
        p.atomic = self._atomic
        p.blocked = self._layout == LAYOUT_BLOCKED
        # See _prefetch_group.
        p.branchless = adding or p.blocked or self._nbytes <= BRANCHLESS_MAX_BYTES
        p.prefetch = _prefetching
        p.touch = p.prefetch and self._nbytes > TOUCH_MIN_BYTES
        # Lookups in the blocked layout keep a key's line and generator state
        # (see _line_of) instead of its k positions.
        p.lines = p.blocked and not adding
        # idx holds stride words a key: its k positions, or its line (2 words).
        p.stride = 2 if p.lines and p.k < 2 else p.k
        p.fresh = 0
        p.sink = 0
        return 0

    cdef int _probe_chunk(self, BatchPlan* p, const uint64_t* idx, Py_ssize_t cnt,
                          uint8_t* res) except -1:
        """Probe (or set) the bits of cnt keys whose slots (_key_slot) are in
        idx, without the GIL: res[j] is the answer for key j."""
        # Everything in locals: res may alias anything, p included.
        cdef Py_ssize_t j, g, gcnt
        cdef int stride = p.stride, k = p.k
        cdef uint8_t* bits = p.bits
        cdef bint adding = p.adding, atomic = p.atomic, hit
        cdef bint lines = p.lines, branchless = p.branchless, touch = p.touch
        cdef uint64_t sink = 0, fresh = 0
        if adding and not atomic:
            self._nogil_writers += 1
        self._active += 1
        with nogil:
            if adding and not atomic:
                PyThread_acquire_lock(self._lock, WAIT_LOCK)
            # Touch each key's first line in a loop of a few instructions per
            # key, so the processor has many misses in flight at once (the
            # probes below take tens of instructions a key, which bounds how
            # far out-of-order execution reaches ahead); software prefetches
            # alone left most of the latency exposed.
            if touch:
                for j in range(cnt):
                    sink += cd_load8(bits + (idx[j * stride] >> 3))
            g = 0
            while g < cnt:
                gcnt = cnt - g
                if gcnt > GROUP:
                    gcnt = GROUP
                for j in range(g, g + gcnt):
                    if adding:
                        if atomic:
                            hit = _probe_add(bits, &idx[j * stride], k)
                        else:
                            hit = _probe_add_excl(bits, &idx[j * stride], k)
                        fresh += hit
                    else:
                        if lines:
                            hit = _probe_test_line(bits, &idx[j * stride], k)
                        elif branchless:
                            hit = _probe_test_all(bits, &idx[j * stride], k)
                        else:
                            hit = _probe_test(bits, &idx[j * stride], k)
                    res[j] = hit
                g += gcnt
            if adding and not atomic:
                PyThread_release_lock(self._lock)
        if adding and not atomic:
            self._nogil_writers -= 1
        self._active -= 1
        p.sink += sink
        p.fresh += fresh
        return 0

    cdef int _finish(self, BatchPlan* p) noexcept:
        """Account for a batch call's probes (also after an error)."""
        global _touch_sink
        _touch_sink += p.sink
        if p.fresh:
            self._count_add(p.fresh)
        p.sink = 0
        p.fresh = 0
        return 0

    cdef object _batch_hashed(self, object hashes, bint adding):
        cdef const uint64_t[:, ::1] v
        self._ready()
        if adding and self._readonly:
            raise ValueError("the filter is open read-only")
        v = _check_hashes(hashes)
        return self._run(None, False, v, v.shape[0], adding, True)

    cdef object _batch(self, object keys, bint adding, bint may_thread=True):
        cdef object seq
        self._ready()
        if adding and self._readonly:
            raise ValueError("the filter is open read-only")
        if isinstance(keys, (str, bytes, bytearray, memoryview)):
            raise TypeError(
                f"keys must be an iterable of keys, not a single {type(keys).__name__}; "
                f"use add()/`in` for one key")
        if type(keys) is list or type(keys) is tuple:
            seq = keys
        else:
            seq = list(keys)
        return self._run(seq, type(seq) is list, None, len(seq), adding, may_thread)

    cdef object _run(self, object seq, bint is_list, const uint64_t[:, ::1] hashes,
                     Py_ssize_t n, bint adding, bint may_thread):
        # The batch calls, over n keys given as a list or tuple seq, or by
        # their hashes (the rows of hashes).  Chunk by chunk: with the GIL,
        # compute each key's bit positions (_walk_keys, or from its row) and
        # start fetching them (_key_slot); then, without the GIL, probe
        # (_probe_chunk), so the cache misses of a large filter overlap.
        # Key bytes are only read while the GIL is held, so no other thread
        # can free or resize a key under us.
        cdef BatchPlan p
        cdef uint64_t* idx
        cdef Py_ssize_t start, cnt, j
        cdef const unsigned char* data
        cdef Py_ssize_t size
        cdef uint8_t* res
        cdef int threads
        cdef const uint64_t* rows = NULL
        out = _np.empty(n, dtype=_np.bool_)
        if n == 0:
            return out
        cdef uint8_t[::1] outv = out.view(_np.uint8)
        res = &outv[0]
        if adding:
            if seq is not None:
                _check_batch_keys(seq, n, is_list)
            self._writable()
        self._plan(&p, adding)
        if not adding and may_thread:
            threads = _threads_for(n, THREAD_KEYS)
            # The threads read ASCII str and bytes keys only (the rest is
            # left to this thread): a batch with other keys among 64
            # spread samples stays on this thread.
            j = 0
            while seq is not None and threads > 1 and j < 64:
                if not _plain_key(_list_item(seq, j * (n // 64)) if is_list
                                  else _tuple_item(seq, j * (n // 64)), &data, &size):
                    threads = 1
                j += 1
            if threads > 1:
                if seq is None:
                    rows = &hashes[0, 0]
                self._lookup_on_threads(seq, n, res, threads, &p, rows)
                return out
        idx = <uint64_t*>PyMem_Malloc(CHUNK * p.stride * sizeof(uint64_t))
        if idx == NULL:
            raise MemoryError()
        start = 0
        try:
            while start < n:
                cnt = min(n - start, CHUNK)
                if seq is None:
                    # without the GIL: the other thread of the command
                    # (KeysAhead) runs meanwhile
                    rows = &hashes[start, 0]
                    with nogil:
                        for j in range(cnt):
                            _key_slot(&p, rows[2 * j], rows[2 * j + 1], &idx[j * p.stride])
                else:
                    _walk_keys(&p, seq, is_list, start, cnt, self._seed, idx)
                self._probe_chunk(&p, idx, cnt, res + start)
                start += cnt
        finally:
            PyMem_Free(idx)
            self._finish(&p)
        return out

    cdef int _lookup_on_threads(self, object seq, Py_ssize_t n, uint8_t* res,
                                int threads, const BatchPlan* plan,
                                const uint64_t* hashes) except -1:
        """contains_many of a large batch: slices of it looked up at once on
        threads threads (the calling one included), then the keys that are
        neither ASCII str nor bytes (with hashes, contains_hashed's: no keys
        left).  The calling thread keeps the GIL throughout, so no Python
        code can change the keys while the other threads read them (a copy of
        the list, with a new reference to every key, would make the other
        threads read lines this one just wrote)."""
        cdef object held = seq
        cdef PyObject** items = NULL
        cdef LookupJob* jobs
        cdef Py_ssize_t i, per, at = 0
        cdef int r
        global _touch_sink
        if hashes != NULL:
            pass
        elif type(held) is list:
            items = cd_list_items(held)
        else:
            items = cd_tuple_items(held)
        jobs = <LookupJob*>PyMem_Malloc(threads * sizeof(LookupJob))
        if jobs == NULL:
            raise MemoryError()
        memset(jobs, 0, threads * sizeof(LookupJob))
        try:
            per = n // threads
            for r in range(threads):
                jobs[r].items = items
                jobs[r].hashes = hashes
                jobs[r].start = at
                jobs[r].stop = n if r == threads - 1 else at + per
                at = jobs[r].stop
                jobs[r].res = res
                jobs[r].plan = plan[0]
                jobs[r].plan.prefetch = False
                jobs[r].plan.sink = 0
                jobs[r].seed = self._seed
                jobs[r].idx = <uint64_t*>malloc(CHUNK * plan.stride * sizeof(uint64_t))
                if jobs[r].idx == NULL:
                    raise MemoryError()
            self._active += 1
            try:
                # the GIL held while waiting (see above)
                _run_jobs(_lookup_job, jobs, sizeof(LookupJob), threads)
            finally:
                self._active -= 1
            for r in range(threads):
                _touch_sink += jobs[r].plan.sink
            # The keys the threads left (non-ASCII str, buffers...): one
            # batch on this thread; a bad key is named by its own position.
            left = [i for i in range(n) if res[i] == 2]
            if left:
                try:
                    found = self._batch([<object>items[i] for i in left], False, False)
                except TypeError:
                    for i in left:
                        try:
                            BloomBits.__contains__(self, <object>items[i])
                        except TypeError as exc:
                            raise TypeError(f"keys[{i}]: {exc}") from None
                    raise
                for i, hit in zip(left, found.tolist()):
                    res[i] = hit
        finally:
            for r in range(threads):
                free(jobs[r].idx)
            PyMem_Free(jobs)
        return 0

    def _popcount(self):
        """Number of set bits."""
        cdef Py_ssize_t i
        cdef uint64_t w, total = 0
        cdef const uint8_t* bits = self._bits
        cdef Py_ssize_t nbytes = self._nbytes
        self._ready()
        self._active += 1
        with nogil:
            for i in range(0, nbytes, 8):
                memcpy(&w, bits + i, 8)
                total += <uint64_t>cd_popcount64(w)
        self._active -= 1
        return total

    cdef int _check_peer(self, BloomBits other) except -1:
        self._ready()
        other._ready()
        if (other._m != self._m or other._k != self._k or other._seed != self._seed
                or other._layout != self._layout):
            raise ValueError("bit arrays differ in num_bits, num_hashes, seed or layout")
        return 0

    def _or_from(self, BloomBits other):
        """self |= other, bit by bit."""
        self._merge_from(other, True)

    def _and_from(self, BloomBits other):
        """self &= other, bit by bit."""
        self._merge_from(other, False)

    cdef int _merge_from(self, BloomBits other, bint union) except -1:
        # One loop for both (the compiler unswitches it on union).
        cdef Py_ssize_t i
        cdef uint64_t a, b
        cdef bint locked
        self._check_peer(other)
        self._writable()
        locked = self._enter()
        for i in range(0, self._nbytes, 8):
            memcpy(&a, self._bits + i, 8)
            memcpy(&b, other._bits + i, 8)
            if union:
                a |= b
            else:
                a &= b
            memcpy(self._bits + i, &a, 8)
        self._leave(locked)
        return 0

    def _bits_equal(self, BloomBits other):
        self._check_peer(other)
        return self._bits_view() == other._bits_view()

    def _clear(self):
        cdef bint locked
        self._writable()
        locked = self._enter()
        memset(self._bits, 0, self._nbytes)
        self._leave(locked)
        self._set_insert_count(0)

    def _bits_view(self):
        """A memoryview of the ``nbytes_for(num_bits)`` storage bytes
        (writable unless the filter is read-only)."""
        self._ready()
        return memoryview(self._owner).cast("B")[:self._nbytes]


cdef object _zeroed(Py_ssize_t size, bint aligned):
    """size zero bytes of private, writable memory.  Large buffers come from
    an anonymous mapping, whose pages the OS zeroes only when first touched:
    a 100-million-key filter is created at once and occupies memory as it
    fills.  MAP_PRIVATE keeps a forked child's copy apart, as for any object."""
    if size < <Py_ssize_t>CD_BIG_MAP_FROM and not aligned:
        return bytearray(size)
    if hasattr(_mmap, "MAP_PRIVATE"):
        mem = _mmap.mmap(-1, size, flags=_mmap.MAP_PRIVATE)
    else:
        mem = _mmap.mmap(-1, size)
    _huge_pages(mem, size)
    return mem


cdef _huge_pages(object mem, Py_ssize_t size):
    """Ask for transparent huge pages on a large mapping: a random probe into a
    100-million-key filter otherwise costs a TLB miss (and a page-table walk
    that itself misses the cache) on top of the cache miss."""
    if size >= <Py_ssize_t>CD_BIG_HUGE_FROM and hasattr(_mmap, "MADV_HUGEPAGE"):
        try:
            mem.madvise(_mmap.MADV_HUGEPAGE)
        except (OSError, ValueError):  # not supported here: a hint only
            pass


def nbytes_for(num_bits):
    """Bytes of storage for num_bits bits: whole 8-byte words."""
    return ((num_bits + 63) // 64) * 8
include "_core_simhash.pxi"
include "_core_index_seg.pxi"
include "_core_index_sort.pxi"
include "_core_index_query.pxi"
include "_core_index_join.pxi"
include "_core_index_ops.pxi"
include "_core_index.pxi"
include "_core_url.pxi"
include "_core_fpset.pxi"
include "_core_resp.pxi"
include "_core_lines.pxi"
