# ---- url: compiled fast path of w3lib.url.canonicalize_url --------------------
#
# The C code is in _cd_url.h; it handles http/https URLs with a plain host
# and returns -1 for anything else, which the wrapper (crawldedup.fingerprint)
# hands to w3lib.  The twin is canonicalize_url_fast in _reference.py.

cdef extern from "_cd_url.h" nogil:
    size_t cd_url_work_size(size_t n)
    Py_ssize_t cd_url_canonicalize(const unsigned char* s, size_t n, int keep_fragments,
                                   int keep_blank_values, void* work)
    const unsigned char* cd_url_output(void* work, size_t n)

cdef extern from "Python.h":
    const char* _cdu_utf8 "PyUnicode_AsUTF8AndSize" (object, Py_ssize_t*) except NULL
    object _cdu_decode_ascii "PyUnicode_DecodeASCII" (const char*, Py_ssize_t, const char*)

# Inputs up to this many bytes use a buffer on the stack (16 KiB).
cdef enum:
    _CDU_STACK_WORDS = 2048


def canonicalize_url_fast(url, bint keep_fragments=False, bint keep_blank_values=True):
    """w3lib.url.canonicalize_url(url, keep_blank_values, keep_fragments) for
    the URLs of the fast path (see _cd_url.h), or None for any other URL
    (including a str that is not valid UTF-8)."""
    cdef Py_ssize_t n, length
    cdef const char* data
    cdef uint64_t stack_work[_CDU_STACK_WORDS]
    cdef void* work
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
        return _cdu_decode_ascii(<const char*>cd_url_output(work, <size_t>n), length, NULL)
    finally:
        if work != <void*>stack_work:
            PyMem_Free(work)
