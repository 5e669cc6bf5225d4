# SimHash kernels, part 2 (included by _core_simhash.pxi): our text
# tokenizers, all without the GIL.
#
# Text is read straight from the storage of a ready str (kind 1, 2 or 4
# bytes per code point), and the character classes use CPython's own Unicode
# tables (Py_UNICODE_ISALNUM), which are what `str.isalnum()` and `re`'s `\w`
# use, so the pure-Python twin classifies every character the same way.
# Code points are uint32_t (what Py_UCS4 is in C): Cython gives its Py_UCS4
# type str semantics, and arithmetic on it would need the GIL.  MurmurHash3
# and its mixing steps stay in _cd_support.h (shared by every part of the
# core).

from libc.stdlib cimport realloc

cdef extern from "Python.h" nogil:
    enum:
        PyUnicode_1BYTE_KIND
        PyUnicode_2BYTE_KIND
        PyUnicode_4BYTE_KIND
    uint32_t Py_UNICODE_TOLOWER(uint32_t c)
    int Py_UNICODE_ISALNUM(uint32_t c)

cdef extern from "_cd_support.h" nogil:
    uint64_t cd_load64le(const unsigned char* p)
    uint64_t cd_rotl64(uint64_t x, int r)
    uint64_t cd_fmix64(uint64_t k)

cdef enum:
    SH_TOK_AUTO = 0
    SH_TOK_WORDS = 1
    SH_TOK_CHARS = 2
    SH_MAX_NGRAM = 16
    # A kernel's answer when the text must be lower-cased by str.lower()
    # first (see sh_lower_special).
    SH_NEEDS_PY_LOWER = -2


# ------------------------------------------------------- character classes
# A str's code points without the GIL.
ctypedef struct ShText:
    int kind
    const void* data
    Py_ssize_t length
    int lower          # lower-case while reading (see sh_lower)


cdef inline uint32_t sh_text_at(const ShText* t, Py_ssize_t i) noexcept nogil:
    if t.kind == PyUnicode_1BYTE_KIND:
        return (<const uint8_t*>t.data)[i]
    if t.kind == PyUnicode_2BYTE_KIND:
        return (<const uint16_t*>t.data)[i]
    return (<const uint32_t*>t.data)[i]


cdef inline bint sh_lower_special(uint32_t c) noexcept nogil:
    """str.lower() one code point at a time: Python's full case mapping turns
    every code point into exactly one, its simple lowercase, except U+0130
    (two code points) and U+03A3 (final sigma depends on the neighbours), for
    which the caller must use str.lower() instead.  The test suite checks
    this against str.lower() for every code point."""
    return c == 0x130 or c == 0x3A3


# What Py_UNICODE_ISALNUM and Py_UNICODE_TOLOWER say of each code point of
# the Basic Multilingual Plane, asked once at import: bit 0 for a word
# character, bit 1 for one whose lowercase differs.  A table lookup instead
# of the Unicode database's calls, for the punctuation and letters around
# the CJK text that the scans meet on every page.
cdef uint8_t _sh_bmp[0x10000]
cdef uint32_t _sh_c
for _sh_c in range(0x10000):
    _sh_bmp[_sh_c] = ((1 if Py_UNICODE_ISALNUM(_sh_c) else 0)
                      | (2 if Py_UNICODE_TOLOWER(_sh_c) != _sh_c else 0))


cdef inline uint32_t sh_lower(uint32_t c) noexcept nogil:
    if c < 128:
        return c + 32 if c >= 65 and c <= 90 else c    # 'A'..'Z'
    if c < 0x10000 and not (_sh_bmp[c] & 2):
        return c
    return Py_UNICODE_TOLOWER(c)


cdef inline bint sh_is_word(uint32_t c) noexcept nogil:
    """re's \\w on str patterns: str.isalnum() or '_' (sre's SRE_UNI_IS_WORD)."""
    if c < 128:
        return ((c >= 97 and c <= 122) or (c >= 48 and c <= 57) or (c >= 65 and c <= 90)
                or c == 95)                           # a-z, 0-9, A-Z, _
    if c < 0x10000:
        return _sh_bmp[c] & 1
    return Py_UNICODE_ISALNUM(c) != 0


cdef inline bint sh_is_unspaced(uint32_t c) noexcept nogil:
    """Scripts written without spaces between words, cut into character
    n-grams by the "auto" tokenizer: CJK ideographs (all blocks and
    extensions, and compatibility ideographs), kana, Thai, Lao, Khmer and
    Myanmar.  Hangul is written with spaces and is left to the word
    tokenizer.  Keep in sync with _UNSPACED in crawldedup._reference.simhash."""
    if c < 0x0E00:
        return False
    if c >= 0x4E00 and c <= 0x9FFF:     # CJK unified ideographs, the common case
        return True
    return ((c <= 0x0EFF)                       # Thai, Lao
            or (c >= 0x1000 and c <= 0x109F)    # Myanmar
            or (c >= 0x1780 and c <= 0x17FF)    # Khmer
            or (c >= 0x3040 and c <= 0x30FF)    # Hiragana, Katakana
            or (c >= 0x31F0 and c <= 0x31FF)    # Katakana phonetic extensions
            or (c >= 0x3400 and c <= 0x4DBF)    # CJK extension A
            or (c >= 0xF900 and c <= 0xFAFF)    # CJK compatibility ideographs
            or (c >= 0x20000 and c <= 0x3FFFF))  # CJK extensions B.., planes 2-3


# Lowercase and word-character flag of the code points below 256, from the
# functions above (filled once by sh_simhash_init; the lowercase of a
# Latin-1 character is Latin-1).
ctypedef struct ShLatin1:
    uint8_t lower
    uint8_t word

cdef ShLatin1 sh_latin1[256]


cdef void sh_simhash_init() noexcept nogil:
    cdef uint32_t c, lc
    for c in range(256):
        lc = sh_lower(c)
        sh_latin1[c].lower = <uint8_t>(lc if lc < 256 else c)
        sh_latin1[c].word = <uint8_t>sh_is_word(c)


cdef inline uint32_t sh_text_get(const ShText* t, Py_ssize_t i) noexcept nogil:
    """Code point i, lower-cased when t.lower (scripts without case skip the
    lookup; the caller has checked sh_lower_special)."""
    cdef uint32_t c = sh_text_at(t, i)
    if t.lower and (c < 128 or not sh_is_unspaced(c)):
        c = sh_lower(c)
    return c


# --------------------------------------------------------- our tokenizers
# Per-document scratch, reused across the documents of a batch.  The
# tokenizers stream: only the last n words (as index ranges into the text)
# and the last n characters of the character stream are kept (rings indexed
# modulo SH_MAX_NGRAM), so memory does not grow with the text (only the set
# of distinct features does).
ctypedef struct ShScratch:
    ShHashset seen
    ShCounter counter
    uint32_t units[16]               # ring: the last characters
    unsigned char unit_utf8[64]     # ... their UTF-8, 4 bytes each, zero-padded
    unsigned char unit_len[16]      # ... and its length
    uint32_t unit_word[16]          # ... as a little-endian word
    Py_ssize_t word_start[16]       # ring: the last words, text[start:end]
    Py_ssize_t word_end[16]
    unsigned char* buf              # UTF-8 of one feature
    size_t buf_cap


cdef int sh_buf_reserve(ShScratch* s, size_t n) noexcept nogil:
    cdef unsigned char* b
    if n <= s.buf_cap:
        return 0
    if n < 256:
        n = 256
    b = <unsigned char*>realloc(s.buf, n)
    if b == NULL:
        return -1
    s.buf = b
    s.buf_cap = n
    return 0


cdef inline int sh_scratch_init(ShScratch* s) noexcept nogil:
    memset(s, 0, sizeof(ShScratch))
    if sh_buf_reserve(s, 256) < 0:
        return -1
    return sh_hashset_init(&s.seen, 1024)


cdef inline void sh_scratch_free(ShScratch* s) noexcept nogil:
    sh_hashset_free(&s.seen)
    free(s.buf)
    s.buf = NULL


cdef inline size_t sh_put_utf8(unsigned char* p, uint32_t c) noexcept nogil:
    if c < 0x80:
        p[0] = <unsigned char>c
        return 1
    if c < 0x800:
        p[0] = <unsigned char>(0xC0 | (c >> 6))
        p[1] = <unsigned char>(0x80 | (c & 0x3F))
        return 2
    if c < 0x10000:
        p[0] = <unsigned char>(0xE0 | (c >> 12))
        p[1] = <unsigned char>(0x80 | ((c >> 6) & 0x3F))
        p[2] = <unsigned char>(0x80 | (c & 0x3F))
        return 3
    p[0] = <unsigned char>(0xF0 | (c >> 18))
    p[1] = <unsigned char>(0x80 | ((c >> 12) & 0x3F))
    p[2] = <unsigned char>(0x80 | ((c >> 6) & 0x3F))
    p[3] = <unsigned char>(0x80 | (c & 0x3F))
    return 4


cdef inline uint32_t sh_utf8_word(uint32_t c, unsigned* length) noexcept nogil:
    """The UTF-8 of c as a little-endian word (first byte lowest), its length
    in length[0]."""
    if c < 0x80:
        length[0] = 1
        return c
    if c < 0x800:
        length[0] = 2
        return (0xC0 | (c >> 6)) | ((0x80 | (c & 0x3F)) << 8)
    if c < 0x10000:
        length[0] = 3
        return ((0xE0 | (c >> 12)) | ((0x80 | ((c >> 6) & 0x3F)) << 8)
                | ((0x80 | (c & 0x3F)) << 16))
    length[0] = 4
    return ((0xF0 | (c >> 18)) | ((0x80 | ((c >> 12) & 0x3F)) << 8)
            | ((0x80 | ((c >> 6) & 0x3F)) << 16) | ((<uint32_t>(0x80 | (c & 0x3F))) << 24))


cdef inline uint64_t sh_murmur3_short(const unsigned char* p, size_t n) noexcept nogil:
    """The low half of cd_murmur3_x64_128(p, n, seed 0) for n < 16 (no whole
    block, only the tail), with p zero-padded to 16 bytes: the tail words are
    then whole loads."""
    cdef uint64_t h1 = 0, h2 = 0, k1 = cd_load64le(p), k2 = cd_load64le(p + 8)
    if n > 8:
        k2 *= 0x4cf5ad432745937fULL
        k2 = cd_rotl64(k2, 33)
        k2 *= 0x87c37b91114253d5ULL
        h2 ^= k2
    if n > 0:
        k1 *= 0x87c37b91114253d5ULL
        k1 = cd_rotl64(k1, 31)
        k1 *= 0x4cf5ad432745937fULL
        h1 ^= k1
    h1 ^= <uint64_t>n
    h2 ^= <uint64_t>n
    h1 += h2
    h2 += h1
    h1 = cd_fmix64(h1)
    h2 = cd_fmix64(h2)
    return h1 + h2


cdef inline uint64_t sh_murmur3_word(uint64_t k1, size_t n) noexcept nogil:
    """sh_murmur3_short for n <= 8, the bytes given as the little-endian word
    k1."""
    cdef uint64_t h1 = 0, h2
    if n > 0:
        k1 *= 0x87c37b91114253d5ULL
        k1 = cd_rotl64(k1, 31)
        k1 *= 0x4cf5ad432745937fULL
        h1 = k1
    h1 ^= <uint64_t>n
    h2 = <uint64_t>n
    h1 += h2
    h2 += h1
    h1 = cd_fmix64(h1)
    h2 = cd_fmix64(h2)
    return h1 + h2


cdef inline void sh_feature_tf(ShScratch* s, const unsigned char* p, size_t n) noexcept nogil:
    """Count the feature p[0:n] at every occurrence (character n-grams)."""
    cdef uint64_t h1, h2
    cd_murmur3_x64_128(p, n, 0, &h1, &h2)
    sh_counter_add(&s.counter, h1)


cdef inline int sh_feature(ShScratch* s, const unsigned char* p, size_t n) noexcept nogil:
    """Count the feature p[0:n] once per document (word n-grams).  p has at
    least 16 bytes, zero after the feature when n < 16."""
    cdef uint64_t h1, h2
    cdef int r
    if n < 16:
        h1 = sh_murmur3_short(p, n)
    else:
        cd_murmur3_x64_128(p, n, 0, &h1, &h2)
    r = sh_hashset_add(&s.seen, h1)
    if r > 0:
        sh_counter_add(&s.counter, h1)
    return -1 if r < 0 else 0


cdef inline void sh_push_unit(ShScratch* s, size_t m, uint32_t c) noexcept nogil:
    """Character m of the character stream into the ring."""
    cdef size_t slot = m % SH_MAX_NGRAM
    cdef unsigned char* u = &s.unit_utf8[4 * slot]
    s.units[slot] = c
    memset(u, 0, 4)
    s.unit_len[slot] = <unsigned char>sh_put_utf8(u, c)
    s.unit_word[slot] = (<uint32_t>u[0] | (<uint32_t>u[1] << 8) | (<uint32_t>u[2] << 16)
                         | (<uint32_t>u[3] << 24))


cdef inline void sh_emit_chars(ShScratch* s, size_t m, size_t n) noexcept nogil:
    """The character n-gram made of the last n characters seen (m in all)."""
    cdef unsigned char b[4 * SH_MAX_NGRAM + 4]
    cdef size_t length = 0, k, a, z
    cdef uint64_t word
    if n == 2:      # the default: two characters of up to 4 bytes each
        a = (m - 2) % SH_MAX_NGRAM
        z = (m - 1) % SH_MAX_NGRAM
        length = <size_t>s.unit_len[a] + s.unit_len[z]
        if length <= 8:
            word = <uint64_t>s.unit_word[a] | (<uint64_t>s.unit_word[z] << (8 * s.unit_len[a]))
            sh_counter_add(&s.counter, sh_murmur3_word(word, length))
            return
        length = 0
    if n <= 4:
        # At most 16 bytes: copy each character's zero-padded 4 bytes (the
        # next one overwrites the padding) and hash with whole-word loads.
        memset(b, 0, 16)
        for k in range(m - n, m):
            memcpy(b + length, &s.unit_utf8[4 * (k % SH_MAX_NGRAM)], 4)
            length += s.unit_len[k % SH_MAX_NGRAM]
        if length < 16:
            sh_counter_add(&s.counter, sh_murmur3_short(b, length))
            return
        length = 0
    for k in range(m - n, m):
        length += sh_put_utf8(b + length, s.units[k % SH_MAX_NGRAM])
    sh_feature_tf(s, b, length)


cdef int sh_emit_words(ShScratch* s, const ShText* t, Py_ssize_t nw, int n) noexcept nogil:
    """The word n-gram made of the last n words seen (nw in all), joined by
    one space."""
    cdef Py_ssize_t k, j
    cdef size_t length = 0, need = 0
    for k in range(nw - n, nw):
        need += 4 * <size_t>(s.word_end[k % SH_MAX_NGRAM] - s.word_start[k % SH_MAX_NGRAM]) + 1
    if sh_buf_reserve(s, need + 16) < 0:
        return -1
    memset(s.buf, 0, 16)
    for k in range(nw - n, nw):
        if k > nw - n:
            s.buf[length] = 32      # ' '
            length += 1
        for j in range(s.word_start[k % SH_MAX_NGRAM], s.word_end[k % SH_MAX_NGRAM]):
            length += sh_put_utf8(s.buf + length, sh_text_get(t, j))
    return sh_feature(s, s.buf, length)


# One storage kind of a str: the scan below is compiled once per kind, so
# each kind gets its own loop without a per-character switch.
ctypedef fused sh_ucs:
    uint8_t
    uint16_t
    uint32_t


cdef int sh_simhash_scan(ShScratch* s, const ShText* t, const sh_ucs* data, int mode,
                         int word_n, int char_n) noexcept nogil:
    """The scan of sh_simhash_text for one storage kind.  Word unigrams, the
    default, are encoded into s.buf while scanning and hashed when the word
    ends; longer word n-grams are re-read from the text."""
    cdef Py_ssize_t i, m = 0, nw = 0, start = -1
    cdef size_t wlen = 0
    cdef bint unigrams = word_n == 1
    cdef bint bigrams = mode == SH_TOK_AUTO and char_n == 2
    cdef bint lower = t.lower
    cdef uint64_t prev_word = 0
    cdef unsigned prev_len = 0, length
    cdef uint32_t w
    cdef Py_ssize_t n = t.length
    cdef uint32_t c
    cdef bint caseless, unspaced, word
    for i in range(n + 1):
        if i == n:
            c = 32      # a final separator
        else:
            c = data[i]
        if c < 256:     # Latin-1: one table lookup
            caseless = unspaced = False
            if lower:
                c = sh_latin1[c].lower
            word = sh_latin1[c].word
        else:
            caseless = c >= 0x0E00 and sh_is_unspaced(c)
            unspaced = mode == SH_TOK_AUTO and caseless
            if lower and not caseless:
                if sh_lower_special(c):
                    return SH_NEEDS_PY_LOWER
                c = sh_lower(c)
            word = not unspaced and sh_is_word(c)
        if mode == SH_TOK_CHARS:
            if word:
                sh_push_unit(s, <size_t>m, c)
                m += 1
                if m >= char_n:
                    sh_emit_chars(s, <size_t>m, <size_t>char_n)
            continue
        if word:
            if start < 0:
                start = i
                wlen = 0
                if unigrams:
                    memset(s.buf, 0, 16)    # see sh_feature
            if unigrams:
                if wlen + 4 > s.buf_cap and sh_buf_reserve(s, 2 * (wlen + 4)) < 0:
                    return -1
                wlen += sh_put_utf8(s.buf + wlen, c)
        elif start >= 0:
            if unigrams:
                if sh_feature(s, s.buf, wlen) < 0:
                    return -1
            else:
                s.word_start[nw % SH_MAX_NGRAM] = start
                s.word_end[nw % SH_MAX_NGRAM] = i
                nw += 1
                if nw >= word_n and sh_emit_words(s, t, nw, word_n) < 0:
                    return -1
            start = -1
        if unspaced:
            if bigrams:
                # The default: each bigram from the previous character's
                # UTF-8 word and this one's, in registers.
                w = sh_utf8_word(c, &length)
                if m:
                    sh_counter_add(&s.counter, sh_murmur3_word(
                        prev_word | (<uint64_t>w << (8 * prev_len)), prev_len + length))
                m += 1
                prev_word = w
                prev_len = length
            else:
                sh_push_unit(s, <size_t>m, c)
                m += 1
                if m >= char_n:
                    sh_emit_chars(s, <size_t>m, <size_t>char_n)
    if nw > 0 and nw < word_n and sh_emit_words(s, t, nw, <int>nw) < 0:
        return -1
    if bigrams and m == 1:
        sh_counter_add(&s.counter, sh_murmur3_word(prev_word, prev_len))
    elif m > 0 and m < char_n:
        sh_emit_chars(s, <size_t>m, <size_t>m)
    return 0


cdef int sh_simhash_text(ShScratch* s, const ShText* t, int mode, int word_n, int char_n,
                         uint64_t* out) noexcept nogil:
    """The fingerprint of a text (lower-cased while reading when t.lower); -1
    on out of memory, SH_NEEDS_PY_LOWER when the text must be lower-cased by
    str.lower() first (then out[0] is untouched).  See simhash_text in
    crawldedup._reference.simhash for the definition: word n-grams over the words,
    character n-grams over the character stream, the whole sequence as one
    feature when it is shorter than n."""
    cdef int rc
    sh_hashset_clear(&s.seen)
    sh_counter_init(&s.counter)
    if t.kind == PyUnicode_1BYTE_KIND:
        rc = sh_simhash_scan(s, t, <const uint8_t*>t.data, mode, word_n, char_n)
    elif t.kind == PyUnicode_2BYTE_KIND:
        rc = sh_simhash_scan(s, t, <const uint16_t*>t.data, mode, word_n, char_n)
    else:
        rc = sh_simhash_scan(s, t, <const uint32_t*>t.data, mode, word_n, char_n)
    if rc < 0:
        return rc
    out[0] = sh_counter_result(&s.counter)
    return 0
