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
