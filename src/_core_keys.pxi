# Bloom part, 1 of 4 (included first by _core_bloom.pxi): keys and their
# hashes, which every later part uses too: a key's bytes without copying (str, bytes and
# buffers), the checks of key batches and seeds, MurmurHash3 x64 128, and the
# bit positions of a key in a Bloom filter (standard and blocked layouts).
# Twin: crawldedup._reference.bloom.

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


def holds_objects(str fmt):
    """Whether a buffer of this format (struct syntax, as memoryview.format
    gives it) holds Python objects: an "O" item, field names (":name:")
    aside.  Such a buffer's bytes are object addresses, so two equal numpy
    object arrays would be two different keys."""
    return "O" in _re.sub(r":[^:]*:", "", fmt)


def objects_error(str what, key):
    return TypeError(f"{what} must not be a {type(key).__name__} of Python objects: its "
                     f"bytes are object addresses, so equal values would be different "
                     f"keys (convert the values to str or bytes first)")


cdef int _buffer_open(object key, Py_buffer* view, str what) except -1:
    """The C-contiguous buffer of key, its format asked for, into view
    (PyBuffer_Release after); TypeError naming what for a buffer that is not
    contiguous (the BufferError of its exporter) or holds Python objects."""
    try:
        PyObject_GetBuffer(key, view, PyBUF_ND | PyBUF_FORMAT)
    except (BufferError, ValueError):
        # Not contiguous (numpy says so with a ValueError), or an exporter
        # that gives its bytes but no format: then they are bytes.  A
        # released memoryview raises its own ValueError here.
        if not memoryview(key).c_contiguous:
            raise TypeError(
                f"{what} must be str or a C-contiguous bytes-like object; "
                f"this {type(key).__name__} is not contiguous") from None
        PyObject_GetBuffer(key, view, PyBUF_SIMPLE)
    if view.format != NULL and strchr(view.format, c'O') != NULL:
        if holds_objects(view.format.decode("ascii", "replace")):
            PyBuffer_Release(view)
            raise objects_error(what, key)
    return 0


cdef int _key_open_other(object key, KeyView* kv) except -1:
    if PyUnicode_Check(key):
        return _str_open(<PyObject*>key, kv)
    if PyObject_CheckBuffer(key):
        _buffer_open(key, &kv.view, "key")
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
