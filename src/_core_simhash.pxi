# SimHash kernels (included by _core.pyx after the Bloom part).
#
# Our 64-bit SimHash over MurmurHash3 feature hashes with the text tokenizers
# compiled (no Python call per token; the kernels in _core_simhash_count.pxi
# and _core_simhash_text.pxi), and the `simhash` package's MD5-based
# fingerprints for crawldedup.compat.simhash (_core_simhash_leon.pxi).  Texts are lower-cased
# exactly as str.lower() does (per code point in the kernels, or by
# str.lower() itself for the two code points whose lowercase depends on more
# than themselves).  The twins are in crawldedup._reference.simhash.

from libc.stdint cimport int64_t

cdef extern from "Python.h":
    int _ukind "PyUnicode_KIND" (PyObject*)

include "_core_simhash_count.pxi"
include "_core_simhash_text.pxi"
include "_core_simhash_leon.pxi"


sh_simhash_init()

TOKENIZER_AUTO = SH_TOK_AUTO
TOKENIZER_WORDS = SH_TOK_WORDS
TOKENIZER_CHARS = SH_TOK_CHARS
MAX_NGRAM = SH_MAX_NGRAM


cdef int _text_view(object text, ShText* t, str what, int lower=1) except -1:
    if not PyUnicode_Check(text):
        raise TypeError(f"{what} must be str, not {type(text).__name__}")
    cd_unicode_ready(<PyObject*>text)
    t.kind = _ukind(<PyObject*>text)
    t.data = _unicode_data(<PyObject*>text)
    t.length = _unicode_length(<PyObject*>text)
    t.lower = lower
    return 0


def lower_text(text):
    """text.lower(), computed one code point at a time the way the SimHash
    kernels lower-case (str.lower() itself when the text has a code point
    whose lowercase is not one code point on its own)."""
    cdef ShText t
    cdef Py_ssize_t i
    _text_view(text, &t, "text")
    for i in range(t.length):
        if sh_lower_special(sh_text_at(&t, i)):
            return text.lower()
    return "".join([chr(sh_lower(sh_text_at(&t, i))) for i in range(t.length)])


cdef int _check_tokenizer(int mode, int word_n, int char_n) except -1:
    if mode != SH_TOK_AUTO and mode != SH_TOK_WORDS and mode != SH_TOK_CHARS:
        raise ValueError(f"mode must be TOKENIZER_AUTO, _WORDS or _CHARS, got {mode}")
    if not (1 <= word_n <= SH_MAX_NGRAM) or not (1 <= char_n <= SH_MAX_NGRAM):
        raise ValueError(f"n-gram sizes must be in [1, {SH_MAX_NGRAM}], got {word_n}, {char_n}")
    return 0


def simhash_text(text, int mode, int word_n, int char_n):
    """64-bit SimHash of text (lower-cased as by str.lower()) with one of our
    tokenizers; see crawldedup._reference.simhash.simhash_text."""
    cdef ShText t
    cdef ShScratch s
    cdef uint64_t out = 0
    cdef int rc
    _check_tokenizer(mode, word_n, char_n)
    _text_view(text, &t, "text")
    if sh_scratch_init(&s) < 0:
        sh_scratch_free(&s)
        raise MemoryError()
    with nogil:
        rc = sh_simhash_text(&s, &t, mode, word_n, char_n, &out)
    if rc == SH_NEEDS_PY_LOWER:
        lowered = text.lower()
        _text_view(lowered, &t, "text", 0)
        with nogil:
            rc = sh_simhash_text(&s, &t, mode, word_n, char_n, &out)
    sh_scratch_free(&s)
    if rc < 0:
        raise MemoryError()
    return out


def simhash_texts(texts, int mode, int word_n, int char_n):
    """simhash_text of every str in the list texts, as a numpy uint64 array;
    the GIL is released for the whole batch."""
    cdef Py_ssize_t n, i
    cdef ShText* views
    cdef ShScratch s
    cdef uint64_t[::1] out
    cdef int rc = 0
    _check_tokenizer(mode, word_n, char_n)
    if not isinstance(texts, list):
        raise TypeError(f"texts must be a list of str, not {type(texts).__name__}")
    n = len(texts)
    result = _np.zeros(n, dtype=_np.uint64)
    if n == 0:
        return result
    out = result
    views = <ShText*>PyMem_Malloc(n * sizeof(ShText))
    if views == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            _text_view(texts[i], &views[i], f"texts[{i}]")
        if sh_scratch_init(&s) < 0:
            sh_scratch_free(&s)
            raise MemoryError()
        with nogil:
            for i in range(n):
                rc = sh_simhash_text(&s, &views[i], mode, word_n, char_n, &out[i])
                if rc == SH_NEEDS_PY_LOWER:
                    views[i].length = -1      # redone below with str.lower()
                    rc = 0
                elif rc < 0:
                    break
        if rc == 0:
            for i in range(n):
                if views[i].length == -1:
                    lowered = texts[i].lower()
                    _text_view(lowered, &views[i], "text", 0)
                    rc = sh_simhash_text(&s, &views[i], mode, word_n, char_n, &out[i])
                    if rc < 0:
                        break
        sh_scratch_free(&s)
        if rc < 0:
            raise MemoryError()
    finally:
        PyMem_Free(views)
    return result


def simhash_hashes(const uint64_t[::1] hashes, weights=None):
    """SimHash of 64-bit feature hashes: bit j is set when the features with
    bit j set carry more than half of the total weight.  weights None (each
    feature weight 1) or a float64 array as long as hashes, summed in order."""
    cdef Py_ssize_t n = hashes.shape[0], i
    cdef int j
    cdef ShCounter c
    cdef const double[::1] w
    cdef double sums[64]
    cdef double total = 0.0, wi
    cdef uint64_t h, out = 0
    if weights is None:
        sh_counter_init(&c)
        with nogil:
            for i in range(n):
                sh_counter_add(&c, hashes[i])
            out = sh_counter_result(&c)
        return out
    w = weights
    if w.shape[0] != n:
        raise ValueError(f"weights must have one entry per hash ({n}), got {w.shape[0]}")
    memset(sums, 0, sizeof(sums))
    with nogil:
        for i in range(n):
            h = hashes[i]
            wi = w[i]
            for j in range(64):
                if (h >> j) & 1:
                    sums[j] += wi
            total += wi
        for j in range(64):
            if 2.0 * sums[j] > total:
                out |= (<uint64_t>1) << j
    return out


def hamming_many(const uint64_t[::1] fps, uint64_t fp):
    """Hamming distance between fp and each of fps, as a numpy uint8 array."""
    cdef Py_ssize_t n = fps.shape[0], i
    result = _np.empty(n, dtype=_np.uint8)
    cdef uint8_t[::1] out = result
    with nogil:
        for i in range(n):
            out[i] = <uint8_t>cd_popcount64(fps[i] ^ fp)
    return result


def md5_digest(data):
    """MD5 (RFC 1321) of str (UTF-8) or bytes-like data: 16 bytes, equal to
    hashlib.md5(data).digest()."""
    cdef KeyView kv
    cdef unsigned char out[16]
    _key_open(data, &kv)
    with nogil:
        cd_md5(kv.data, <size_t>kv.size, out)
    _key_close(&kv)
    return (<char*>out)[:16]


cdef object _u128(uint64_t hi, uint64_t lo, int f):
    if f <= 64:
        return lo
    return cd_pylong_from_u128(lo, hi)


cdef int _check_f(int f) except -1:
    if f < 8 or f > 128 or f % 8:
        raise ValueError(f"f must be a multiple of 8 in [8, 128], got {f}")
    return 0


def leonsim_text(text, int f=64):
    """Simhash(text, f).value of the `simhash` package 2.1.x (default reg and
    hashfunc)."""
    cdef ShText t
    cdef uint64_t hi = 0, lo = 0
    cdef int rc
    _check_f(f)
    _text_view(text, &t, "text")
    with nogil:
        rc = sh_leon_text(&t, f, &hi, &lo)
    if rc == SH_NEEDS_PY_LOWER:
        lowered = text.lower()
        _text_view(lowered, &t, "text", 0)
        with nogil:
            sh_leon_text(&t, f, &hi, &lo)
    return _u128(hi, lo, f)


# Bound of leonsim_features' sums: 2 * sum stays below 2**63.
cdef int64_t _LEON_MAX_SUM = (<int64_t>1) << 62


def leonsim_features(features, const int64_t[::1] weights, total, int f=64):
    """The `simhash` package's value for the str features with integer weights
    (total = the sum of the weights); see sh_leon_features.  Time and memory
    do not depend on the weights; OverflowError when the positive weights or
    the total reach 2**62 (the sums are int64)."""
    cdef Py_ssize_t n, i, size = 0, bound
    cdef int64_t tot, positive = 0
    cdef uint64_t hi = 0, lo = 0
    cdef PyObject* item
    cdef unsigned char* data = NULL
    cdef int64_t* offsets = NULL
    cdef Py_ssize_t written
    _check_f(f)
    if not isinstance(features, list):
        raise TypeError(f"features must be a list of str, not {type(features).__name__}")
    n = len(features)
    if weights.shape[0] != n:
        raise ValueError(f"weights must have one entry per feature ({n}), got {weights.shape[0]}")
    tot = total
    # The sums (and twice them, compared with the total) stay in int64.
    if tot > _LEON_MAX_SUM or tot < -_LEON_MAX_SUM:
        raise OverflowError(f"total must be within +-2**62, got {total}")
    for i in range(n):
        if weights[i] > 0:
            if weights[i] >= _LEON_MAX_SUM - positive:
                raise OverflowError("the positive weights must sum to less than 2**62")
            positive += weights[i]
    bound = 1
    for i in range(n):
        item = _list_item(features, i)
        if not _is_str(item):
            raise TypeError(f"features[{i}] must be str, not {type(<object>item).__name__}")
        cd_unicode_ready(item)
        bound += cd_utf8_bound(item)
    data = <unsigned char*>PyMem_Malloc(bound)
    offsets = <int64_t*>PyMem_Malloc((n + 1) * sizeof(int64_t))
    try:
        if data == NULL or offsets == NULL:
            raise MemoryError()
        offsets[0] = 0
        for i in range(n):
            item = _list_item(features, i)
            written = cd_utf8_encode(item, data + size)
            if written < 0:
                PyUnicode_AsUTF8String(<object>item)  # raises UnicodeEncodeError
                raise UnicodeError("unencodable feature")  # pragma: no cover
            size += written
            offsets[i + 1] = size
        with nogil:
            sh_leon_features(data, offsets, &weights[0] if n else NULL, n, f, tot, &hi, &lo)
    finally:
        PyMem_Free(data)
        PyMem_Free(offsets)
    return _u128(hi, lo, f)
