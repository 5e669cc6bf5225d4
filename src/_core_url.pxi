# ---- url: compiled fast path of w3lib.url.canonicalize_url --------------------
#
# The C code is in _cd_url.h; it handles http/https URLs with a plain host
# and returns -1 for anything else, which the wrappers (crawldedup.urls)
# hand to w3lib.  On top of it: the MD5 of the canonical URL, Scrapy's
# request fingerprint (SHA-1 of its JSON), and batch forms of both whose loop
# runs without the GIL.  Each function returns None outside the fast path.
# Twin: crawldedup._reference.url.  The batch calls are in _core_url_batch.pxi.

from libc.stdlib cimport realloc
from libc.string cimport strchr
cdef extern from "_cd_url.h" nogil:
    size_t cd_url_work_size(size_t n)
    Py_ssize_t cd_url_canonicalize(const unsigned char* s, size_t n, int keep_fragments,
                                   int keep_blank_values, void* work,
                                   const unsigned char** wide)
    const unsigned char* cd_url_output(void* work, size_t n)
    void cd_sha1(const unsigned char* data, size_t n, unsigned char* out)
    void cd_md5(const unsigned char* data, size_t n, unsigned char* out)
    void cd_md5_many(const char* const* ptrs, const Py_ssize_t* lens, Py_ssize_t n,
                     unsigned char* out, size_t stride)
    void cdu_init()

cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
    const char* _cdu_utf8 "PyUnicode_AsUTF8AndSize" (object, Py_ssize_t*) except NULL
    object _cdu_decode_ascii "PyUnicode_DecodeASCII" (const char*, Py_ssize_t, const char*)
    object _cdu_decode_utf8 "PyUnicode_DecodeUTF8" (const char*, Py_ssize_t, const char*)
    object _cdu_bytes "PyBytes_FromStringAndSize" (const char*, Py_ssize_t)
    object PyUnicode_New(Py_ssize_t, Py_UCS4)
    void* PyUnicode_DATA(object)

import unicodedata as _unicodedata

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


def _cdu_netloc_refused(str netloc):
    """True when urllib's urlsplit (and so w3lib) refuses netloc: it is not
    ASCII and the NFKC form of its text without "@", ":", "#" and "?" holds
    one of "/?#@:" (U+FF0F "／" is "/", U+2100 "℀" is "a/c")."""
    if netloc.isascii() or _unicodedata.is_normalized("NFKC", netloc):
        return False  # the usual case, quickly: a separator's code point is never NFKC-normal
    bare = netloc.replace("@", "").replace(":", "").replace("#", "").replace("?", "")
    normal = _unicodedata.normalize("NFKC", bare)
    if normal == bare:
        return False
    for c in "/?#@:":
        if c in normal:
            return True
    return False


cdef bint _cdu_wide_refused(const unsigned char** wide):
    """_cdu_netloc_refused of the netloc cd_url_canonicalize reported (UTF-8;
    bytes that are not become U+FFFD, which like w3lib's percent-escapes of
    them holds no separator under NFKC)."""
    return _cdu_netloc_refused(_cdu_decode_utf8(<const char*>wide[0], wide[1] - wide[0],
                                                "replace"))


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
    cdef const unsigned char* wide[2]
    if PyBytes_Check(url) and what != _CDU_REQUEST_SHA1:
        # bytes are read as UTF-8; w3lib percent-encodes the bytes that are
        # not, which is what the fast path does with every byte >= 0x80
        data = PyBytes_AS_STRING(url)
        n = PyBytes_GET_SIZE(url)
    elif not isinstance(url, str):
        raise TypeError(f"url must be str{'' if what == _CDU_REQUEST_SHA1 else ' or bytes'}, "
                        f"not {type(url).__name__}")
    else:
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
                                     keep_blank_values, work, wide)
        if length < 0 or (wide[0] != NULL and _cdu_wide_refused(wide)):
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
    (including a str that is not valid UTF-8).  url is str or bytes."""
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


# The batch calls (canonicalize_urls_fast, url_digests_packed, ...).
include "_core_url_batch.pxi"
