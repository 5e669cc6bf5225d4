# ---- lines: the input splitter of `crawldedup urls` ------------------------
#
# One pass over a block of input: cut it at "\n", strip each line of ASCII
# whitespace (what bytes.strip() strips), drop blank lines, and make one bytes
# object per remaining line.  In Python that is a split, a strip per line and
# a filter: most of the command's time on 3 million URLs.
# Twin: crawldedup._reference_lines.split_lines.

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
