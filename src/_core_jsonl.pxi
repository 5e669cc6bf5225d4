# ---- jsonl: the JSON-lines reader of `crawldedup near-dups` ----------------
#
# One pass over a block of JSON lines, without the GIL: each line is checked
# against JSON's grammar as json.loads reads it (strings' UTF-8 and escapes,
# numbers, NaN and Infinity, nesting) and the top-level object's text and id
# fields are located; then, with the GIL, the ids and texts of the lines that
# are documents become Python objects.  In Python this is a decode, a split
# and a json.loads per line, plus the checks of each line: most of the time
# of `near-dups` on a corpus once its signatures run on other threads.
# A line that is not a document (bad JSON, a missing field, a field of the
# wrong type) is handed back as bytes for the command line to read with
# json.loads and name the problem.
# Twin: crawldedup._reference.jsonl.

from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t

DEF JL_MAX_DEPTH = 100

cdef enum:
    JL_BLANK = 0
    JL_DOCUMENT = 1
    JL_OTHER = 2

cdef enum:
    JL_ABSENT = 0
    JL_STRING = 1
    JL_INTEGER = 2
    JL_ELSE = 3        # a value of another type (or a float, or NaN)

ctypedef struct JlField:
    int kind
    Py_ssize_t start, stop     # a string's content (inside the quotes), an integer's text
    bint escaped               # a string with backslash escapes

ctypedef struct JlLine:
    Py_ssize_t start, stop     # the line, without its "\n"
    int status
    JlField text, ident


# 1 for the bytes that may stand in a JSON string as themselves and need no
# further look: printable ASCII other than '"' and '\\'.
cdef unsigned char _jl_plain[256]
cdef int _jl_i
for _jl_i in range(256):
    _jl_plain[_jl_i] = 1 if (0x20 <= _jl_i < 0x80 and _jl_i != 34 and _jl_i != 92) else 0


cdef inline bint _jl_ws(unsigned char c) noexcept nogil:
    # JSON's whitespace (what json.loads skips between tokens)
    return c == 32 or c == 9 or c == 10 or c == 13


cdef inline Py_ssize_t _jl_skip_ws(const unsigned char* s, Py_ssize_t p,
                                   Py_ssize_t e) noexcept nogil:
    while p < e and _jl_ws(s[p]):
        p += 1
    return p


cdef inline int _jl_hex(unsigned char c) noexcept nogil:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


cdef inline int32_t _jl_hex4(const unsigned char* s, Py_ssize_t p, Py_ssize_t e) noexcept nogil:
    """The four hex digits at p as a number, or -1."""
    cdef int32_t v = 0
    cdef int d, i
    if p + 4 > e:
        return -1
    for i in range(4):
        d = _jl_hex(s[p + i])
        if d < 0:
            return -1
        v = (v << 4) | d
    return v


cdef inline int _jl_utf8_len(const unsigned char* s, Py_ssize_t p, Py_ssize_t e) noexcept nogil:
    """The length of the well-formed UTF-8 sequence of a non-ASCII code point
    at p (what Python's UTF-8 decoder accepts: no overlong forms, no
    surrogates, nothing above U+10FFFF), or 0."""
    cdef unsigned char c = s[p], c1
    if 0xC2 <= c <= 0xDF:
        return 2 if p + 1 < e and 0x80 <= s[p + 1] <= 0xBF else 0
    if 0xE0 <= c <= 0xEF:
        if p + 2 >= e:
            return 0
        c1 = s[p + 1]
        if c == 0xE0:
            if not (0xA0 <= c1 <= 0xBF):
                return 0
        elif c == 0xED:
            if not (0x80 <= c1 <= 0x9F):
                return 0
        elif not (0x80 <= c1 <= 0xBF):
            return 0
        return 3 if 0x80 <= s[p + 2] <= 0xBF else 0
    if 0xF0 <= c <= 0xF4:
        if p + 3 >= e:
            return 0
        c1 = s[p + 1]
        if c == 0xF0:
            if not (0x90 <= c1 <= 0xBF):
                return 0
        elif c == 0xF4:
            if not (0x80 <= c1 <= 0x8F):
                return 0
        elif not (0x80 <= c1 <= 0xBF):
            return 0
        if not (0x80 <= s[p + 2] <= 0xBF) or not (0x80 <= s[p + 3] <= 0xBF):
            return 0
        return 4
    return 0


cdef Py_ssize_t _jl_string(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                           bint* escaped) noexcept nogil:
    """p just past an opening quote: the index of the closing quote of a
    string json.loads reads (escapes it knows, no control characters,
    well-formed UTF-8), or -1."""
    cdef unsigned char c
    cdef int n
    cdef uint64_t w
    escaped[0] = False
    while True:
        # eight plain bytes at a time: none with the high bit, below 0x20,
        # '"' or '\\' (the zero-byte tests of each, on the word)
        while p + 8 <= e:
            w = cd_load64le(s + p)
            if ((w | ~((w | 0x8080808080808080ULL) - 0x2020202020202020ULL)
                 | ((w ^ 0x2222222222222222ULL) - 0x0101010101010101ULL)
                 | ((w ^ 0x5C5C5C5C5C5C5C5CULL) - 0x0101010101010101ULL))
                    & 0x8080808080808080ULL):
                break
            p += 8
        while p < e and _jl_plain[s[p]]:
            p += 1
        if p >= e:
            return -1
        c = s[p]
        if c == 34:
            return p
        if c == 92:
            escaped[0] = True
            if p + 1 >= e:
                return -1
            c = s[p + 1]
            if c == 117:                        # \u and four hex digits (a lone surrogate too)
                if _jl_hex4(s, p + 2, e) < 0:
                    return -1
                p += 6
            elif (c == 34 or c == 92 or c == 47 or c == 98 or c == 102 or c == 110
                  or c == 114 or c == 116):
                p += 2
            else:
                return -1
        elif c < 0x20:
            return -1
        else:
            # a run of non-ASCII code points (a CJK text is one) in one loop
            while True:
                n = _jl_utf8_len(s, p, e)
                if n == 0:
                    return -1
                p += n
                if p >= e or s[p] < 0x80:
                    break


cdef Py_ssize_t _jl_number(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                           bint* integer) noexcept nogil:
    """The end of the number at p (JSON's grammar, or -Infinity), or -1;
    integer: it has no fraction and no exponent."""
    cdef Py_ssize_t q = p, d
    integer[0] = False
    if q < e and s[q] == 45:
        q += 1
        if e - q >= 8 and memcmp(s + q, b"Infinity", 8) == 0:
            return q + 8
    if q >= e:
        return -1
    if s[q] == 48:
        q += 1
    elif 49 <= s[q] <= 57:
        while q < e and 48 <= s[q] <= 57:
            q += 1
    else:
        return -1
    integer[0] = True
    if q < e and s[q] == 46:
        integer[0] = False
        q += 1
        d = q
        while q < e and 48 <= s[q] <= 57:
            q += 1
        if q == d:
            return -1
    if q < e and (s[q] == 101 or s[q] == 69):
        integer[0] = False
        q += 1
        if q < e and (s[q] == 43 or s[q] == 45):
            q += 1
        d = q
        while q < e and 48 <= s[q] <= 57:
            q += 1
        if q == d:
            return -1
    return q


cdef inline Py_ssize_t _jl_word(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                                const char* word, Py_ssize_t n) noexcept nogil:
    if e - p >= n and memcmp(s + p, word, <size_t>n) == 0:
        return p + n
    return -1


cdef Py_ssize_t _jl_value(const unsigned char* s, Py_ssize_t p, Py_ssize_t e, int depth,
                          JlField* f) noexcept nogil:
    """The end of the JSON value at p (a container's contents nested at most
    JL_MAX_DEPTH deep, counting from depth, the depth of the container the
    value is in), or -1; f (if not NULL) says what the value is."""
    cdef unsigned char c, close
    cdef unsigned char stack[JL_MAX_DEPTH]
    cdef int top = 0
    cdef bint flag
    cdef Py_ssize_t q
    while True:
        # a value at p
        if p >= e:
            return -1
        c = s[p]
        if c == 34:
            q = _jl_string(s, p + 1, e, &flag)
            if q < 0:
                return -1
            if f != NULL and top == 0:
                f.kind = JL_STRING
                f.start, f.stop, f.escaped = p + 1, q, flag
            p = q + 1
        elif c == 45 or 48 <= c <= 57:
            q = _jl_number(s, p, e, &flag)
            if q < 0:
                return -1
            if f != NULL and top == 0:
                f.kind = JL_INTEGER if flag else JL_ELSE
                f.start, f.stop = p, q
            p = q
        elif c == 123 or c == 91:
            if depth + top >= JL_MAX_DEPTH:
                return -1
            if f != NULL and top == 0:
                f.kind = JL_ELSE
            stack[top] = c + 2          # the closing '}' or ']'
            top += 1
            p = _jl_skip_ws(s, p + 1, e)
            if p < e and s[p] == c + 2:
                top -= 1
                p += 1
            elif c == 123:
                # the first key, then its value
                if p >= e or s[p] != 34:
                    return -1
                q = _jl_string(s, p + 1, e, &flag)
                if q < 0:
                    return -1
                p = _jl_skip_ws(s, q + 1, e)
                if p >= e or s[p] != 58:
                    return -1
                p = _jl_skip_ws(s, p + 1, e)
                continue
            else:
                p = _jl_skip_ws(s, p, e)
                continue
        else:
            if c == 116:
                q = _jl_word(s, p, e, b"true", 4)
            elif c == 102:
                q = _jl_word(s, p, e, b"false", 5)
            elif c == 110:
                q = _jl_word(s, p, e, b"null", 4)
            elif c == 78:
                q = _jl_word(s, p, e, b"NaN", 3)
            elif c == 73:
                q = _jl_word(s, p, e, b"Infinity", 8)
            else:
                q = -1
            if q < 0:
                return -1
            if f != NULL and top == 0:
                f.kind = JL_ELSE
            p = q
        # after a value: close containers, or go on to the next member
        while True:
            if top == 0:
                return p
            p = _jl_skip_ws(s, p, e)
            if p >= e:
                return -1
            close = stack[top - 1]
            if s[p] == close:
                top -= 1
                p += 1
                continue
            if s[p] != 44:
                return -1
            p = _jl_skip_ws(s, p + 1, e)
            if close == 125:            # in an object: a key and a colon first
                if p >= e or s[p] != 34:
                    return -1
                q = _jl_string(s, p + 1, e, &flag)
                if q < 0:
                    return -1
                p = _jl_skip_ws(s, q + 1, e)
                if p >= e or s[p] != 58:
                    return -1
                p = _jl_skip_ws(s, p + 1, e)
            break


cdef Py_ssize_t _jl_unescape(const unsigned char* s, Py_ssize_t p, Py_ssize_t e,
                             unsigned char* out) noexcept nogil:
    """A checked string's content s[p:e] with its escapes replaced, as UTF-8
    (a lone surrogate escape as its three bytes, for the surrogatepass
    decoder; a pair as one code point, as json.loads joins them), into out
    (at least e - p bytes: nothing grows); returns the length."""
    cdef Py_ssize_t o = 0, q
    cdef unsigned char c
    cdef int32_t u, lo
    while p < e:
        q = p
        while q < e and s[q] != 92:
            q += 1
        memcpy(out + o, s + p, <size_t>(q - p))
        o += q - p
        p = q
        if p >= e:
            break
        c = s[p + 1] if p + 1 < e else 0
        if c == 117:
            u = _jl_hex4(s, p + 2, e)
            if u < 0:
                u = 0xFFFD
            p += 6
            if 0xD800 <= u <= 0xDBFF and p + 6 <= e and s[p] == 92 and s[p + 1] == 117:
                lo = _jl_hex4(s, p + 2, e)
                if 0xDC00 <= lo <= 0xDFFF:
                    u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00)
                    p += 6
            if u < 0x80:
                out[o] = <unsigned char>u
                o += 1
            elif u < 0x800:
                out[o] = <unsigned char>(0xC0 | (u >> 6))
                out[o + 1] = <unsigned char>(0x80 | (u & 0x3F))
                o += 2
            elif u < 0x10000:
                out[o] = <unsigned char>(0xE0 | (u >> 12))
                out[o + 1] = <unsigned char>(0x80 | ((u >> 6) & 0x3F))
                out[o + 2] = <unsigned char>(0x80 | (u & 0x3F))
                o += 3
            else:
                out[o] = <unsigned char>(0xF0 | (u >> 18))
                out[o + 1] = <unsigned char>(0x80 | ((u >> 12) & 0x3F))
                out[o + 2] = <unsigned char>(0x80 | ((u >> 6) & 0x3F))
                out[o + 3] = <unsigned char>(0x80 | (u & 0x3F))
                o += 4
            continue
        if c == 98:
            c = 8
        elif c == 102:
            c = 12
        elif c == 110:
            c = 10
        elif c == 114:
            c = 13
        elif c == 116:
            c = 9
        elif c == 0:
            c = 92                      # a backslash at the very end, kept
        out[o] = c                      # '"', '\\' and '/' stand for themselves
        o += 1
        p += 2
    return o


cdef bint _jl_key_is(const unsigned char* s, Py_ssize_t p, Py_ssize_t q, bint escaped,
                     const unsigned char* key, Py_ssize_t n, unsigned char* scratch) noexcept nogil:
    """Whether the key whose content is s[p:q] decodes to key (UTF-8, n
    bytes); scratch holds at least q - p bytes."""
    cdef Py_ssize_t m
    if not escaped:
        return q - p == n and memcmp(s + p, key, <size_t>n) == 0
    if q - p < n:
        return False
    m = _jl_unescape(s, p, q, scratch)
    return m == n and memcmp(scratch, key, <size_t>n) == 0


cdef void _jl_line(const unsigned char* s, JlLine* line, const unsigned char* tkey,
                   Py_ssize_t tn, const unsigned char* ikey, Py_ssize_t in_,
                   unsigned char* scratch) noexcept nogil:
    """The status and fields of one line."""
    cdef Py_ssize_t p = line.start, e = line.stop, q, ks
    cdef bint blank = True, flag, is_text, is_id
    cdef JlField f
    for q in range(p, e):
        if not (s[q] == 32 or 9 <= s[q] <= 13):
            blank = False
            break
    line.text.kind = JL_ABSENT
    line.ident.kind = JL_ABSENT
    if blank:
        line.status = JL_BLANK
        return
    line.status = JL_OTHER
    p = _jl_skip_ws(s, p, e)
    if p >= e or s[p] != 123:
        return
    p = _jl_skip_ws(s, p + 1, e)
    if p < e and s[p] == 125:
        return                          # {}: no fields
    while True:
        if p >= e or s[p] != 34:
            return
        ks = p + 1
        q = _jl_string(s, ks, e, &flag)
        if q < 0:
            return
        is_text = _jl_key_is(s, ks, q, flag, tkey, tn, scratch)
        is_id = _jl_key_is(s, ks, q, flag, ikey, in_, scratch)
        p = _jl_skip_ws(s, q + 1, e)
        if p >= e or s[p] != 58:
            return
        p = _jl_skip_ws(s, p + 1, e)
        f.kind = JL_ELSE
        p = _jl_value(s, p, e, 1, &f)
        if p < 0:
            return
        if is_text:                     # a later field of the same name wins
            line.text = f
        if is_id:
            line.ident = f
        p = _jl_skip_ws(s, p, e)
        if p >= e:
            return
        if s[p] == 125:
            break
        if s[p] != 44:
            return
        p = _jl_skip_ws(s, p + 1, e)
    if _jl_skip_ws(s, p + 1, e) != e:
        return
    if line.text.kind == JL_STRING and (line.ident.kind == JL_STRING
                                        or line.ident.kind == JL_INTEGER):
        line.status = JL_DOCUMENT


cdef object _jl_text(const unsigned char* s, const JlField* f, unsigned char* scratch):
    """A checked string field as str, as json.loads gives it."""
    cdef Py_ssize_t m
    if not f.escaped:
        return PyUnicode_DecodeUTF8(<const char*>(s + f.start), f.stop - f.start, NULL)
    m = _jl_unescape(s, f.start, f.stop, scratch)
    return PyUnicode_DecodeUTF8(<const char*>scratch, m, b"surrogatepass")


cdef object _jl_integer(const unsigned char* s, const JlField* f):
    cdef Py_ssize_t p = f.start, n = f.stop - f.start
    cdef int64_t v = 0
    cdef bint negative = s[p] == 45
    if negative:
        p += 1
    if f.stop - p > 18:
        return int(PyBytes_FromStringAndSize(<const char*>(s + f.start), n))
    while p < f.stop:
        v = v * 10 + (s[p] - 48)
        p += 1
    return -v if negative else v


def jsonl_documents(data, text_key, id_key):
    """(status, ids, texts), one entry per line of the bytes object data:
    status[i] 0 for a blank line, 1 for a document (ids[i] and texts[i] its
    id and text, as json.loads reads them), 2 for anything else (texts[i]
    the line's bytes); see crawldedup._reference.jsonl.  The lines are
    checked without the GIL."""
    cdef const unsigned char* s
    cdef const unsigned char* tk
    cdef const unsigned char* ik
    cdef Py_ssize_t n, tn, in_, rows, i, p, longest = 0
    cdef const unsigned char* nl
    cdef JlLine* lines
    cdef unsigned char* scratch
    if not PyBytes_Check(data):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    if not PyBytes_Check(text_key):
        raise TypeError(f"text_key must be bytes, not {type(text_key).__name__}")
    if not PyBytes_Check(id_key):
        raise TypeError(f"id_key must be bytes, not {type(id_key).__name__}")
    s = <const unsigned char*>PyBytes_AS_STRING(data)
    n = PyBytes_GET_SIZE(data)
    tk = <const unsigned char*>PyBytes_AS_STRING(text_key)
    tn = PyBytes_GET_SIZE(text_key)
    ik = <const unsigned char*>PyBytes_AS_STRING(id_key)
    in_ = PyBytes_GET_SIZE(id_key)
    with nogil:
        rows = _cdl_count_lines(s, n)
    if n == 0 or s[n - 1] == 10:
        rows -= 1                       # no line after the last "\n"
    lines = <JlLine*>PyMem_Malloc(<size_t>max(rows, 1) * sizeof(JlLine))
    if lines == NULL:
        raise MemoryError()
    scratch = NULL
    try:
        p = 0
        for i in range(rows):
            nl = <const unsigned char*>memchr(s + p, 10, <size_t>(n - p))
            lines[i].start = p
            lines[i].stop = (nl - s) if nl != NULL else n
            longest = max(longest, lines[i].stop - p)
            p = lines[i].stop + 1
        scratch = <unsigned char*>PyMem_Malloc(<size_t>longest + 1)
        if scratch == NULL:
            raise MemoryError()
        with nogil:
            for i in range(rows):
                _jl_line(s, &lines[i], tk, tn, ik, in_, scratch)
        status = PyBytes_FromStringAndSize(NULL, rows)
        ids = [None] * rows
        texts = [None] * rows
        for i in range(rows):
            (<unsigned char*>PyBytes_AS_STRING(status))[i] = <unsigned char>lines[i].status
            if lines[i].status == JL_DOCUMENT:
                texts[i] = _jl_text(s, &lines[i].text, scratch)
                if lines[i].ident.kind == JL_STRING:
                    ids[i] = _jl_text(s, &lines[i].ident, scratch)
                else:
                    ids[i] = _jl_integer(s, &lines[i].ident)
            elif lines[i].status == JL_OTHER:
                texts[i] = PyBytes_FromStringAndSize(<const char*>(s + lines[i].start),
                                                     lines[i].stop - lines[i].start)
    finally:
        PyMem_Free(lines)
        PyMem_Free(scratch)
    return status, ids, texts
