# ---- lines: the input splitter of `crawldedup urls` ------------------------
#
# One pass over a block of input: cut it at "\n", strip each line of ASCII
# whitespace (what bytes.strip() strips), drop blank lines, and make one bytes
# object per remaining line.  In Python that is a split, a strip per line and
# a filter: most of the command's time on 3 million URLs.
# Twin: crawldedup._reference.lines.

cdef inline bint _cdl_space(unsigned char c) noexcept nogil:
    # bytes.isspace(): space, \t, \n, \v, \f, \r
    return c == 32 or (9 <= c <= 13)


def split_lines(data, bint final):
    """(lines, used) for a bytes object data: the stripped, non-blank lines
    of its complete lines (each ended by "\\n"; with final, the unended tail
    too), and how many bytes of data they took (the rest is an unended line
    that the next block continues)."""
    cdef const unsigned char* s
    cdef Py_ssize_t n, end, start, stop, i, line_end
    cdef list out = []
    if not PyBytes_Check(data):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    s = <const unsigned char*>PyBytes_AS_STRING(data)
    n = PyBytes_GET_SIZE(data)
    end = n
    if not final:
        while end > 0 and s[end - 1] != 10:
            end -= 1
    i = 0
    while i < end:
        line_end = i
        while line_end < end and s[line_end] != 10:
            line_end += 1
        start = i
        stop = line_end
        while start < stop and _cdl_space(s[start]):
            start += 1
        while stop > start and _cdl_space(s[stop - 1]):
            stop -= 1
        if stop > start:
            out.append(_cdu_bytes(<const char*>(s + start), stop - start))
        i = line_end + 1
    return out, end


cdef inline void _cdl_put64(unsigned char* p, uint64_t w) noexcept nogil:
    # little-endian, whatever the machine (a constant loop the compiler
    # turns into one store on a little-endian one)
    cdef int j
    for j in range(8):
        p[j] = <unsigned char>(w >> (8 * j))


def line_hashes(lines):
    """The 128-bit MurmurHash3 (seed 0, hash128's digest) of each bytes object
    of the list lines, end to end in one bytes object: 16 bytes each, h1
    then h2, little-endian.  ``crawldedup urls --canonical`` uses them to
    know a line met before in the run without canonicalizing it again."""
    cdef list items
    cdef Py_ssize_t n, i
    cdef object obj, blob
    cdef uint64_t h1, h2
    cdef unsigned char* out
    if not isinstance(lines, list):
        raise TypeError(f"lines must be a list, not {type(lines).__name__}")
    items = lines
    n = len(items)
    for i in range(n):
        obj = items[i]
        if not PyBytes_Check(obj):
            raise TypeError(f"lines[{i}] must be bytes, not {type(obj).__name__}")
    blob = _cdu_bytes(NULL, n * 16)
    out = <unsigned char*>PyBytes_AS_STRING(blob)
    for i in range(n):
        obj = items[i]
        cd_murmur3_x64_128(<const unsigned char*>PyBytes_AS_STRING(obj),
                           <size_t>PyBytes_GET_SIZE(obj), 0, &h1, &h2)
        _cdl_put64(out + 16 * i, h1)
        _cdl_put64(out + 16 * i + 8, h2)
    return blob


# ---- lines as spans: the command's exact modes keep a chunk as one bytes
# object and the [start, stop) of each line, and make no object per line.

from libc.stdint cimport int64_t
from libc.string cimport memchr


def line_spans(data, bint final):
    """(spans, used): where split_lines(data, final) finds its lines, as an
    int64 array of shape (n, 2), one [start, stop) row a line, and the same
    used.  The scan runs without the GIL."""
    cdef const unsigned char* s
    cdef Py_ssize_t n, end, got, rows
    cdef int64_t[:, ::1] v
    if not PyBytes_Check(data):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    s = <const unsigned char*>PyBytes_AS_STRING(data)
    n = PyBytes_GET_SIZE(data)
    end = n
    if not final:
        while end > 0 and s[end - 1] != 10:
            end -= 1
    with nogil:
        rows = _cdl_count_lines(s, end)
    arr = _np.empty((rows, 2), dtype=_np.int64)
    v = arr
    with nogil:
        got = _cdl_scan(s, end, &v[0, 0])
    return arr[:got], end


cdef Py_ssize_t _cdl_count_lines(const unsigned char* s, Py_ssize_t end) noexcept nogil:
    """Newlines in s[:end], plus one: the most lines there can be."""
    cdef Py_ssize_t i = 0, rows = 1
    cdef const unsigned char* nl
    while i < end:
        nl = <const unsigned char*>memchr(s + i, 10, <size_t>(end - i))
        if nl == NULL:
            break
        rows += 1
        i = nl - s + 1
    return rows


@cython.boundscheck(False)
@cython.wraparound(False)
cdef Py_ssize_t _cdl_scan(const unsigned char* s, Py_ssize_t end, int64_t* out) noexcept nogil:
    """Write [start, stop) of each stripped non-blank line of s[:end] to out
    (room for one row per newline, plus one); returns how many."""
    cdef Py_ssize_t i = 0, start, stop, got = 0
    cdef const unsigned char* nl
    while i < end:
        nl = <const unsigned char*>memchr(s + i, 10, <size_t>(end - i))
        stop = end if nl == NULL else nl - s
        start = i
        i = stop + 1
        while start < stop and _cdl_space(s[start]):
            start += 1
        while stop > start and _cdl_space(s[stop - 1]):
            stop -= 1
        if stop > start:
            out[2 * got] = start
            out[2 * got + 1] = stop
            got += 1
    return got


cdef const int64_t[:, ::1] _cdl_spans(object data, object spans) except *:
    """spans as a checked (n, 2) int64 view: each row a [start, stop) of data."""
    cdef const int64_t[:, ::1] v
    cdef Py_ssize_t i, size
    if not PyBytes_Check(data):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    if not isinstance(spans, _np.ndarray) or spans.dtype != _np.int64 or spans.ndim != 2 \
            or spans.shape[1] != 2:
        raise TypeError("spans must be an int64 numpy array of shape (n, 2)")
    v = _np.ascontiguousarray(spans)
    size = PyBytes_GET_SIZE(data)
    for i in range(v.shape[0]):
        if not 0 <= v[i, 0] <= v[i, 1] <= size:
            raise ValueError(f"spans[{i}] = [{v[i, 0]}, {v[i, 1]}) is not within the "
                             f"{size} bytes of data")
    return v


cdef object _cdl_span_batch(object data, const int64_t[:, ::1] v, int what, uint32_t seed):
    """_cdu_execute's packed answer for the lines data[a:b] of the rows of v
    (canonical forms: keep_fragments False, keep_blank_values True)."""
    cdef Py_ssize_t n = v.shape[0], i
    cdef const char* base = PyBytes_AS_STRING(data)
    cdef const char** ptrs = NULL
    cdef Py_ssize_t* lens = NULL
    try:
        ptrs = <const char**>PyMem_Malloc((n + 1) * sizeof(const char*))
        lens = <Py_ssize_t*>PyMem_Malloc((n + 1) * sizeof(Py_ssize_t))
        if ptrs == NULL or lens == NULL:
            raise MemoryError()
        for i in range(n):
            ptrs[i] = base + v[i, 0]
            lens[i] = <Py_ssize_t>(v[i, 1] - v[i, 0])
        return _cdu_execute(ptrs, lens, n, False, True, what, None, True, seed)
    finally:
        PyMem_Free(ptrs)
        PyMem_Free(lens)


def span_digests(data, spans, bint canonical=False):
    """url_digests_packed([data[a:b] for a, b in spans], canonical), without
    an object per line: (the 16-byte digests end to end, the indexes left to
    the wrapper)."""
    cdef const int64_t[:, ::1] v = _cdl_spans(data, spans)
    return _cdl_span_batch(data, v, _CDU_B_URL_MD5 if canonical else _CDU_B_RAW_MD5, 0)


def span_key_hashes(data, spans, seed=0, bint canonical=False):
    """(hashes, missing): the MurmurHash3 x64 128 (h1, h2) with seed of each
    line data[a:b] of the rows of spans, as a uint64 array of shape (n, 2)
    (what a BloomFilter with that seed computes for the line as a key: its
    contains_hashed / add_hashed take them).  With canonical, of the line's
    canonical form (canonicalize_urls_fast(lines, as_bytes=True)), in the
    compiled pass without the GIL, on several threads for big blocks; the
    indexes of the lines it leaves to the wrapper are in missing (their rows
    zeros).  Without canonical missing is empty."""
    cdef const int64_t[:, ::1] v = _cdl_spans(data, spans)
    cdef uint32_t s = _check_seed(seed)
    cdef Py_ssize_t n = v.shape[0]
    if canonical:
        blob, missing = _cdl_span_batch(data, v, _CDU_B_URL_MURMUR, s)
        return _np.frombuffer(blob, dtype=_np.uint64).reshape(n, 2), missing
    blob = _cdl_span_murmur(data, v, s)  # little-endian words: native ones here
    return _np.frombuffer(blob, dtype="<u8").reshape(n, 2).astype(_np.uint64, copy=False), []


def gather_spans(data, spans):
    """The lines data[a:b] for each row (a, b) of spans, each followed by
    b"\\n", in one bytes object (the output and the journal of a chunk)."""
    cdef const int64_t[:, ::1] v = _cdl_spans(data, spans)
    cdef Py_ssize_t n = v.shape[0], i, total = 0, length
    cdef const char* base = PyBytes_AS_STRING(data)
    cdef char* o
    for i in range(n):
        total += <Py_ssize_t>(v[i, 1] - v[i, 0]) + 1
    blob = _cdu_bytes(NULL, total)
    o = PyBytes_AS_STRING(blob)
    with nogil:
        for i in range(n):
            length = <Py_ssize_t>(v[i, 1] - v[i, 0])
            memcpy(o, base + v[i, 0], <size_t>length)
            o[length] = 10
            o += length + 1
    return blob


cdef bytes _cdl_span_murmur(bytes data, const int64_t[:, ::1] v, uint32_t seed):
    """The MurmurHash3 x64 128 with seed of each line data[a:b] of the rows
    of v, as h1 and h2 in little-endian bytes, 16 a line end to end."""
    cdef Py_ssize_t n = v.shape[0], i
    cdef const unsigned char* base = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef uint64_t h1, h2
    cdef unsigned char* out
    blob = _cdu_bytes(NULL, n * 16)
    out = <unsigned char*>PyBytes_AS_STRING(blob)
    with nogil:
        for i in range(n):
            cd_murmur3_x64_128(base + v[i, 0], <size_t>(v[i, 1] - v[i, 0]), seed, &h1, &h2)
            _cdl_put64(out + 16 * i, h1)
            _cdl_put64(out + 16 * i + 8, h2)
    return blob


def span_hashes(data, spans):
    """line_hashes([data[a:b] for a, b in spans]), without the line objects."""
    return _cdl_span_murmur(data, _cdl_spans(data, spans), 0)
