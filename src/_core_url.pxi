# ---- url: compiled fast path of w3lib.url.canonicalize_url --------------------
#
# The C code is in _cd_url.h; it handles http/https URLs with a plain host
# and returns -1 for anything else, which the wrapper (crawldedup.fingerprint)
# hands to w3lib.  On top of it: the MD5 of the canonical URL, Scrapy's
# request fingerprint (SHA-1 of its JSON), and batch forms of both whose loop
# runs without the GIL.  Each function returns None outside the fast path.
# Twins: the "url" section of _reference.py.

from libc.string cimport strchr
cdef extern from "_cd_url.h" nogil:
    size_t cd_url_work_size(size_t n)
    Py_ssize_t cd_url_canonicalize(const unsigned char* s, size_t n, int keep_fragments,
                                   int keep_blank_values, void* work)
    const unsigned char* cd_url_output(void* work, size_t n)
    void cd_sha1(const unsigned char* data, size_t n, unsigned char* out)
    void cd_md5(const unsigned char* data, size_t n, unsigned char* out)
    void cdu_init()

cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
    const char* _cdu_utf8 "PyUnicode_AsUTF8AndSize" (object, Py_ssize_t*) except NULL
    object _cdu_decode_ascii "PyUnicode_DecodeASCII" (const char*, Py_ssize_t, const char*)
    object _cdu_bytes "PyBytes_FromStringAndSize" (const char*, Py_ssize_t)

# Fill the byte-class table now, under the GIL at import, so the batch loops
# (which run without the GIL, maybe in several threads) only ever read it.
cdu_init()

# Inputs up to this many bytes use a buffer on the stack (16 KiB).
cdef enum:
    _CDU_STACK_WORDS = 2048


# What _cdu_run returns for a fast-path URL.
cdef enum:
    _CDU_CANONICAL = 0      # the canonical URL, str
    _CDU_URL_MD5 = 1        # MD5 of the canonical URL, 16 bytes
    _CDU_REQUEST_SHA1 = 2   # Scrapy's request fingerprint, 20 bytes

# JSON of Scrapy's fingerprint (json.dumps(..., sort_keys=True)) around the
# body's hex, the method and the canonical URL; neither needs escaping.
cdef const char* _CDU_J1 = b'{"body": "'
cdef const char* _CDU_J2 = b'", "headers": {}, "method": "'
cdef const char* _CDU_J3 = b'", "url": "'
cdef const char* _CDU_J4 = b'"}'
cdef const char* _CDU_HEXL = b"0123456789abcdef"
# RFC 9110 token characters (an HTTP method).
cdef const char* _CDU_TCHAR = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


cdef object _cdu_run(object url, bint keep_fragments, bint keep_blank_values, int what,
                     const unsigned char* method, Py_ssize_t mlen,
                     const unsigned char* body, Py_ssize_t blen):
    cdef Py_ssize_t n, length, i, jn
    cdef const char* data
    cdef uint64_t stack_work[_CDU_STACK_WORDS]
    cdef void* work
    cdef unsigned char* json = NULL
    cdef unsigned char* p
    cdef const unsigned char* canon
    cdef unsigned char digest[20]
    cdef size_t need
    if not isinstance(url, str):
        raise TypeError(f"url must be str, not {type(url).__name__}")
    try:
        data = _cdu_utf8(url, &n)
    except UnicodeEncodeError:  # lone surrogates: w3lib decides what happens
        return None
    need = cd_url_work_size(<size_t>n)
    if need <= sizeof(stack_work):
        work = <void*>stack_work
    else:
        work = PyMem_Malloc(need)
        if work == NULL:
            raise MemoryError()
    try:
        length = cd_url_canonicalize(<const unsigned char*>data, <size_t>n, keep_fragments,
                                     keep_blank_values, work)
        if length < 0:
            return None
        canon = cd_url_output(work, <size_t>n)
        if what == _CDU_CANONICAL:
            return _cdu_decode_ascii(<const char*>canon, length, NULL)
        if what == _CDU_URL_MD5:
            cd_md5(canon, <size_t>length, digest)
            return _cdu_bytes(<const char*>digest, 16)
        if blen > (PY_SSIZE_T_MAX - 128 - mlen - length) // 2:
            raise MemoryError()
        jn = 10 + 2 * blen + 29 + mlen + 11 + length + 2
        json = <unsigned char*>PyMem_Malloc(<size_t>jn)
        if json == NULL:
            raise MemoryError()
        p = json
        memcpy(p, _CDU_J1, 10); p += 10
        for i in range(blen):
            p[0] = _CDU_HEXL[body[i] >> 4]
            p[1] = _CDU_HEXL[body[i] & 15]
            p += 2
        memcpy(p, _CDU_J2, 29); p += 29
        memcpy(p, method, <size_t>mlen); p += mlen
        memcpy(p, _CDU_J3, 11); p += 11
        memcpy(p, canon, <size_t>length); p += length
        memcpy(p, _CDU_J4, 2)
        cd_sha1(json, <size_t>jn, digest)
        return _cdu_bytes(<const char*>digest, 20)
    finally:
        if json != NULL:
            PyMem_Free(json)
        if work != <void*>stack_work:
            PyMem_Free(work)


def canonicalize_url_fast(url, bint keep_fragments=False, bint keep_blank_values=True):
    """w3lib.url.canonicalize_url(url, keep_blank_values, keep_fragments) for
    the URLs of the fast path (see _cd_url.h), or None for any other URL
    (including a str that is not valid UTF-8)."""
    return _cdu_run(url, keep_fragments, keep_blank_values, _CDU_CANONICAL, NULL, 0, NULL, 0)


def url_fingerprint_fast(url, bint keep_fragments=False, bint keep_blank_values=True):
    """MD5 (16 bytes) of canonicalize_url_fast(url, ...), or None outside the
    fast path."""
    return _cdu_run(url, keep_fragments, keep_blank_values, _CDU_URL_MD5, NULL, 0, NULL, 0)


def request_fingerprint_fast(url, method, body, bint keep_fragments=False):
    """Scrapy's fingerprint (SHA-1 of its JSON, no headers) of a request whose
    canonical URL comes from the fast path, or None outside it.  method is
    used as given (an HTTP token: ValueError otherwise); body is bytes."""
    cdef Py_ssize_t mlen, i
    cdef const char* m
    if not isinstance(method, str):
        raise TypeError(f"method must be str, not {type(method).__name__}")
    if not PyBytes_Check(body):
        raise TypeError(f"body must be bytes, not {type(body).__name__}")
    m = _cdu_utf8(method, &mlen)
    if mlen == 0:
        raise ValueError("method must be an HTTP method name, got ''")
    for i in range(mlen):
        if m[i] == 0 or strchr(_CDU_TCHAR, m[i]) == NULL:
            raise ValueError(f"method must be an HTTP method name (a token), got {method!r}")
    return _cdu_run(url, keep_fragments, True, _CDU_REQUEST_SHA1, <const unsigned char*>m, mlen,
                    <const unsigned char*>PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body))


cdef list _cdu_batch(list urls, bint keep_fragments, bint keep_blank_values, int what,
                     object method):
    """The batch form of _cdu_run for MD5 URL fingerprints or request
    fingerprints with an empty body: a list with the digest of each URL on the
    fast path and None for every other item (not a str, not UTF-8, outside
    the fast path).  The canonicalization and hashing run without the GIL."""
    cdef list items = list(urls)  # our own references: nothing frees a str mid-loop
    cdef Py_ssize_t n = len(items), i, maxlen = 0, length, mlen = 0, jn
    cdef Py_ssize_t width = 16 if what == _CDU_URL_MD5 else 20
    cdef const char** ptrs = NULL
    cdef Py_ssize_t* lens = NULL
    cdef unsigned char* digests = NULL
    cdef unsigned char* done = NULL
    cdef void* work = NULL
    cdef unsigned char* json = NULL
    cdef unsigned char* p
    cdef const unsigned char* canon
    cdef const char* m = NULL
    cdef object item
    cdef list out
    if what == _CDU_REQUEST_SHA1:
        m = _cdu_utf8(method, &mlen)
    try:
        ptrs = <const char**>PyMem_Malloc((n + 1) * sizeof(const char*))
        lens = <Py_ssize_t*>PyMem_Malloc((n + 1) * sizeof(Py_ssize_t))
        digests = <unsigned char*>PyMem_Malloc((n + 1) * 20)
        done = <unsigned char*>PyMem_Malloc(n + 1)
        if ptrs == NULL or lens == NULL or digests == NULL or done == NULL:
            raise MemoryError()
        for i in range(n):
            item = items[i]
            ptrs[i] = NULL
            lens[i] = 0
            done[i] = 0
            if isinstance(item, str):
                try:
                    ptrs[i] = _cdu_utf8(item, &lens[i])
                except UnicodeEncodeError:
                    ptrs[i] = NULL
                if ptrs[i] != NULL and lens[i] > maxlen:
                    maxlen = lens[i]
        work = PyMem_Malloc(cd_url_work_size(<size_t>maxlen))
        # The request JSON around an empty body: fixed text, method, URL.
        jn = 10 + 29 + mlen + 11 + (4 * maxlen + 64) + 2
        json = <unsigned char*>PyMem_Malloc(<size_t>jn)
        if work == NULL or json == NULL:
            raise MemoryError()
        with nogil:
            for i in range(n):
                if ptrs[i] == NULL:
                    continue
                length = cd_url_canonicalize(<const unsigned char*>ptrs[i], <size_t>lens[i],
                                             keep_fragments, keep_blank_values, work)
                if length < 0:
                    continue
                canon = cd_url_output(work, <size_t>lens[i])
                if what == _CDU_URL_MD5:
                    cd_md5(canon, <size_t>length, digests + 20 * i)
                else:
                    p = json
                    memcpy(p, _CDU_J1, 10); p += 10
                    memcpy(p, _CDU_J2, 29); p += 29
                    memcpy(p, m, <size_t>mlen); p += mlen
                    memcpy(p, _CDU_J3, 11); p += 11
                    memcpy(p, canon, <size_t>length); p += length
                    memcpy(p, _CDU_J4, 2); p += 2
                    cd_sha1(json, <size_t>(p - json), digests + 20 * i)
                done[i] = 1
        out = [None] * n
        for i in range(n):
            if done[i]:
                out[i] = _cdu_bytes(<const char*>(digests + 20 * i), width)
        return out
    finally:
        PyMem_Free(ptrs)
        PyMem_Free(lens)
        PyMem_Free(digests)
        PyMem_Free(done)
        PyMem_Free(work)
        PyMem_Free(json)


def url_fingerprints_fast(urls, bint keep_fragments=False, bint keep_blank_values=True):
    """[url_fingerprint_fast(u, ...) for u in urls], with None for items that
    are not str; the hashing loop releases the GIL."""
    if not isinstance(urls, list):
        raise TypeError(f"urls must be a list, not {type(urls).__name__}")
    return _cdu_batch(urls, keep_fragments, keep_blank_values, _CDU_URL_MD5, None)


def request_fingerprints_fast(urls, method, bint keep_fragments=False):
    """[request_fingerprint_fast(u, method, b"", keep_fragments) for u in
    urls], with None for items that are not str; the loop releases the GIL."""
    cdef Py_ssize_t mlen, i
    cdef const char* m
    if not isinstance(urls, list):
        raise TypeError(f"urls must be a list, not {type(urls).__name__}")
    if not isinstance(method, str):
        raise TypeError(f"method must be str, not {type(method).__name__}")
    m = _cdu_utf8(method, &mlen)
    if mlen == 0:
        raise ValueError("method must be an HTTP method name, got ''")
    for i in range(mlen):
        if m[i] == 0 or strchr(_CDU_TCHAR, m[i]) == NULL:
            raise ValueError(f"method must be an HTTP method name (a token), got {method!r}")
    return _cdu_batch(urls, keep_fragments, True, _CDU_REQUEST_SHA1, method)
