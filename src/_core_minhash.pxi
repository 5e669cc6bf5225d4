# MinHash kernels (included by _core.pyx after the SimHash part).
#
# A signature is the k minimums, over a document's 32-bit shingle hashes x,
# of the permutations a[j] * x + b[j] mod 2**32 (cd_mh_min in
# _cd_minhash.h).  Texts are cut into words and characters as the SimHash
# tokenizers cut them (the character classes and lower-casing of
# _core_simhash_text.pxi), and shingled here.  Keys are hashed with MurmurHash3 (our signatures) or with
# datasketch's SHA-1 hash and the MurmurHash3 finalizer (its "affine32"
# scheme, for crawldedup.compat.datasketch).  Twin:
# crawldedup._reference.minhash.

cdef extern from "_cd_minhash.h" nogil:
    void cd_mh_min(const uint32_t* h, size_t n, const uint32_t* a, const uint32_t* b,
                   uint32_t* mins, size_t k)
    uint32_t cd_fmix32(uint32_t h)
    uint32_t cd_sha1_hash32(const unsigned char* p, size_t n)
    const char* cd_mh_version()
    void cd_mh_min_plain(const uint32_t* h, size_t n, const uint32_t* a, const uint32_t* b,
                         uint32_t* mins, size_t k)

cdef extern from "_cd_digest.h" nogil:
    void cd_sha1_with(const unsigned char* data, size_t n, unsigned char* out, int ni)
    const char* cd_sha1_version()

# A batch of texts is cut into one job per thread when it has at least this
# many characters per thread (a 1,000-character text takes a few us).
DEF MH_CHARS_PER_THREAD = 1 << 18


cdef int _mh_check(const uint32_t[::1] a, const uint32_t[::1] b) except -1:
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"a and b must have the same length, got {a.shape[0]} and {b.shape[0]}")
    return 0


cdef int _mh_check_mins(const uint32_t[::1] a, uint32_t[::1] mins) except -1:
    if mins.shape[0] != a.shape[0]:
        raise ValueError(f"mins must have one value per permutation ({a.shape[0]}), "
                         f"got {mins.shape[0]}")
    return 0


# ------------------------------------------------------------ the sink
# Shingle hashes are buffered, and each full buffer is folded into the k
# minimums at once (cd_mh_min holds 32 minimums in registers while the
# buffer streams past).
cdef enum:
    MH_SINK_SIZE = 1024

ctypedef struct MhSink:
    uint32_t* mins
    const uint32_t* a
    const uint32_t* b
    size_t k
    size_t n                        # hashes in buf
    uint32_t buf[MH_SINK_SIZE]


cdef inline void mh_sink_flush(MhSink* m) noexcept nogil:
    if m.n:
        cd_mh_min(m.buf, m.n, m.a, m.b, m.mins, m.k)
        m.n = 0


cdef inline void mh_sink_add(MhSink* m, uint64_t h) noexcept nogil:
    m.buf[m.n] = <uint32_t>h
    m.n += 1
    if m.n == MH_SINK_SIZE:
        mh_sink_flush(m)


# ------------------------------------------------------------ shingles
# A shingle's hash is a polynomial of its units' hashes: for units u_0 ..
# u_{m-1} (m = n, or fewer for a sequence shorter than n), the sum of
# h(u_i) * B**(m - 1 - i) modulo 2**64, mixed by the MurmurHash3 finalizer.
# A word's hash is hash64 of its UTF-8; a character's (of the character
# stream) the finalizer of its code point xor a salt.  So each unit is
# hashed once, and the next shingle's sum is the last one's, less its first
# unit, times B, plus the new unit: two multiplies a shingle.
cdef uint64_t MH_BASE = 0x9E3779B97F4A7C15ULL
cdef uint64_t MH_CHAR_SALT = 0x2545F4914F6CDD1DULL

ctypedef struct MhStream:
    uint64_t acc                # the polynomial of the last min(count, n) units
    uint64_t top                # B ** (n - 1): the weight of a window's first unit
    Py_ssize_t count            # units so far
    Py_ssize_t n


cdef inline void mh_stream_init(MhStream* st, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    st.acc = 0
    st.count = 0
    st.n = n
    st.top = 1
    for i in range(n - 1):
        st.top *= MH_BASE


cdef inline void mh_stream_push(MhSink* m, size_t* nb, MhStream* st, uint64_t* ring,
                                uint64_t h) noexcept nogil:
    """The next unit (its hash h); the shingle it ends, when there are n
    units, into m.buf at nb[0].  The scan's locals hold st, the ring (the
    hashes of the last units) and nb, so that the compiler keeps them in
    registers: m.n is written only when the buffer is full and at the end."""
    if st.count >= st.n:
        st.acc -= ring[<size_t>(st.count - st.n) & (SH_MAX_NGRAM - 1)] * st.top
    st.acc = st.acc * MH_BASE + h
    ring[<size_t>st.count & (SH_MAX_NGRAM - 1)] = h
    st.count += 1
    if st.count >= st.n:
        m.buf[nb[0]] = <uint32_t>cd_fmix64(st.acc)
        nb[0] += 1
        if nb[0] == MH_SINK_SIZE:
            m.n = nb[0]
            mh_sink_flush(m)
            nb[0] = 0


cdef inline void mh_stream_end(MhSink* m, size_t* nb, const MhStream* st) noexcept nogil:
    """A sequence of fewer units than n is one shingle, all of it."""
    if 0 < st.count < st.n:
        m.buf[nb[0]] = <uint32_t>cd_fmix64(st.acc)
        nb[0] += 1
        if nb[0] == MH_SINK_SIZE:
            m.n = nb[0]
            mh_sink_flush(m)
            nb[0] = 0


# The hashes of the CJK Unified Ideographs (U+4E00..U+9FFF), the characters
# of most Chinese text, looked up instead of computed: the same values.
DEF MH_CJK_FIRST = 0x4E00
DEF MH_CJK_COUNT = 0x5200
cdef uint64_t _mh_cjk_hash[MH_CJK_COUNT]
cdef Py_ssize_t _mh_i
for _mh_i in range(MH_CJK_COUNT):
    _mh_cjk_hash[_mh_i] = cd_fmix64(<uint64_t>(MH_CJK_FIRST + _mh_i) ^ MH_CHAR_SALT)


cdef inline uint64_t mh_char_hash(uint32_t c) noexcept nogil:
    if <uint32_t>(c - MH_CJK_FIRST) < MH_CJK_COUNT:
        return _mh_cjk_hash[c - MH_CJK_FIRST]
    return cd_fmix64(<uint64_t>c ^ MH_CHAR_SALT)


cdef inline uint64_t _mh_bytes_hash(const unsigned char* p, size_t n) noexcept nogil:
    """hash64 of p[0:n] (zero-padded to 16 bytes when shorter)."""
    cdef uint64_t h1, h2
    if n < 16:
        return sh_murmur3_short(p, n)
    cd_murmur3_x64_128(p, n, 0, &h1, &h2)
    return h1


cdef int mh_scan(ShScratch* s, MhSink* m, const ShText* t, const sh_ucs* data, int mode,
                 int word_n, int char_n) noexcept nogil:
    """Every shingle of the text into the sink: word n-grams over the words,
    character n-grams over the character stream (as sh_simhash_scan cuts
    them), and, for a sequence shorter than n, the whole sequence as one.
    -1 when out of memory, SH_NEEDS_PY_LOWER when the text must be
    lower-cased by str.lower() first."""
    cdef Py_ssize_t i, n = t.length
    cdef size_t wlen = 0
    cdef bint in_word = False, lower = t.lower
    cdef uint32_t c
    cdef bint caseless, unspaced, word
    cdef MhStream words, chars
    cdef uint64_t wring[SH_MAX_NGRAM]
    cdef uint64_t cring[SH_MAX_NGRAM]
    cdef size_t nb = m.n
    mh_stream_init(&words, word_n)
    mh_stream_init(&chars, char_n)
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
                mh_stream_push(m, &nb, &chars, cring, mh_char_hash(c))
            continue
        if word:
            if not in_word:
                in_word = True
                wlen = 0
                memset(s.buf, 0, 16)    # sh_murmur3_short reads 16 bytes
            if wlen + 4 > s.buf_cap and sh_buf_reserve(s, 2 * (wlen + 4)) < 0:
                return -1
            wlen += sh_put_utf8(s.buf + wlen, c)
        elif in_word:
            in_word = False
            mh_stream_push(m, &nb, &words, wring, _mh_bytes_hash(s.buf, wlen))
        if unspaced:
            mh_stream_push(m, &nb, &chars, cring, mh_char_hash(c))
    mh_stream_end(m, &nb, &words)
    mh_stream_end(m, &nb, &chars)
    m.n = nb
    return 0


cdef int mh_text(ShScratch* s, MhSink* m, const ShText* t, int mode, int word_n, int char_n,
                 uint32_t* mins) noexcept nogil:
    """The signature of one text into mins (m.a, m.b and m.k set); the codes
    of mh_scan (SH_NEEDS_PY_LOWER: mins is not finished)."""
    cdef int rc
    if m.k:         # (mins is NULL for no permutations)
        memset(mins, 0xFF, m.k * sizeof(uint32_t))
    m.mins = mins
    m.n = 0
    if t.kind == PyUnicode_1BYTE_KIND:
        rc = mh_scan(s, m, t, <const uint8_t*>t.data, mode, word_n, char_n)
    elif t.kind == PyUnicode_2BYTE_KIND:
        rc = mh_scan(s, m, t, <const uint16_t*>t.data, mode, word_n, char_n)
    else:
        rc = mh_scan(s, m, t, <const uint32_t*>t.data, mode, word_n, char_n)
    if rc == 0:
        mh_sink_flush(m)
    return rc


def minhash_text(text, int mode, int word_n, int char_n, const uint32_t[::1] a,
                 const uint32_t[::1] b):
    """The MinHash signature (uint32, one value per permutation) of text with
    one of the SimHash tokenizers; see crawldedup._reference.minhash."""
    cdef ShText t
    cdef ShScratch s
    cdef MhSink m
    cdef uint32_t[::1] out
    cdef int rc
    _check_tokenizer(mode, word_n, char_n)
    _mh_check(a, b)
    _text_view(text, &t, "text")
    result = _np.empty(a.shape[0], dtype=_np.uint32)
    out = result
    m.a = &a[0] if a.shape[0] else NULL
    m.b = &b[0] if b.shape[0] else NULL
    m.k = <size_t>a.shape[0]
    if sh_scratch_init(&s) < 0:
        sh_scratch_free(&s)
        raise MemoryError()
    with nogil:
        rc = mh_text(&s, &m, &t, mode, word_n, char_n, &out[0] if m.k else NULL)
    if rc == SH_NEEDS_PY_LOWER:
        lowered = text.lower()
        _text_view(lowered, &t, "text", 0)
        with nogil:
            rc = mh_text(&s, &m, &t, mode, word_n, char_n, &out[0] if m.k else NULL)
    sh_scratch_free(&s)
    if rc < 0:
        raise MemoryError()
    return result


ctypedef struct MhJob:
    ShText* views
    Py_ssize_t start, stop
    int mode, word_n, char_n
    const uint32_t* a
    const uint32_t* b
    size_t k
    uint32_t* out           # row i at out + i * k
    int rc                  # 0, or -1 when out of memory


@cython.linetrace(False)
@cython.profile(False)
cdef void _mh_job(void* arg) noexcept nogil:
    """The signatures of texts start..stop-1; a text that must be lower-cased
    by str.lower() is marked with length -1 for the caller to redo."""
    cdef MhJob* job = <MhJob*>arg
    cdef ShScratch s
    cdef MhSink* m = <MhSink*>malloc(sizeof(MhSink))
    cdef Py_ssize_t i
    cdef int rc = 0
    if m == NULL or sh_scratch_init(&s) < 0:
        if m != NULL:
            sh_scratch_free(&s)
        free(m)
        job.rc = -1
        return
    m.a = job.a
    m.b = job.b
    m.k = job.k
    for i in range(job.start, job.stop):
        rc = mh_text(&s, m, &job.views[i], job.mode, job.word_n, job.char_n,
                     job.out + <size_t>i * job.k)
        if rc == SH_NEEDS_PY_LOWER:
            job.views[i].length = -1
            rc = 0
        elif rc < 0:
            break
    sh_scratch_free(&s)
    free(m)
    job.rc = rc


def minhash_texts(texts, int mode, int word_n, int char_n, const uint32_t[::1] a,
                  const uint32_t[::1] b):
    """minhash_text of every str in the list texts, as an (n, k) uint32 array;
    the GIL is released for the whole batch, and a big batch is cut into
    parts of about equal text length, one a thread."""
    cdef Py_ssize_t n, i, chars = 0, share, acc
    cdef ShText* views
    cdef MhJob jobs[MAX_THREADS]
    cdef int nthreads, r, rc = 0
    cdef uint32_t[:, ::1] out
    cdef size_t k = <size_t>a.shape[0]
    _check_tokenizer(mode, word_n, char_n)
    _mh_check(a, b)
    if not isinstance(texts, list):
        raise TypeError(f"texts must be a list of str, not {type(texts).__name__}")
    n = len(texts)
    result = _np.empty((n, k), dtype=_np.uint32)
    if n == 0 or k == 0:
        for i in range(n):
            if not PyUnicode_Check(texts[i]):
                raise TypeError(f"texts[{i}] must be str, not {type(texts[i]).__name__}")
        return result
    out = result
    views = <ShText*>PyMem_Malloc(n * sizeof(ShText))
    if views == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            _text_view(texts[i], &views[i], f"texts[{i}]")
            chars += views[i].length
        nthreads = _threads_for(chars, MH_CHARS_PER_THREAD)
        nthreads = <int>min(<Py_ssize_t>nthreads, n)
        # Cut at about equal shares of the characters.
        share = chars // nthreads + 1
        acc = 0
        r = 0
        jobs[0].start = 0
        for i in range(n):
            if r + 1 < nthreads and acc >= share * (r + 1):
                jobs[r].stop = i
                r += 1
                jobs[r].start = i
            acc += views[i].length
        jobs[r].stop = n
        nthreads = r + 1
        for r in range(nthreads):
            jobs[r].views = views
            jobs[r].mode = mode
            jobs[r].word_n = word_n
            jobs[r].char_n = char_n
            jobs[r].a = &a[0]
            jobs[r].b = &b[0]
            jobs[r].k = k
            jobs[r].out = &out[0, 0]
            jobs[r].rc = 0
        with nogil:
            _run_jobs(_mh_job, jobs, sizeof(MhJob), nthreads)
        for r in range(nthreads):
            if jobs[r].rc < 0:
                raise MemoryError()
        for i in range(n):
            if views[i].length == -1:
                result[i] = minhash_text(texts[i], mode, word_n, char_n, a, b)
    finally:
        PyMem_Free(views)
    return result


cdef uint32_t* _mh_key_hashes(list keys, int sha1) except? NULL:
    """The 32-bit hash of every key (all checked before the caller changes
    anything), in a PyMem buffer the caller frees; NULL for no keys."""
    cdef Py_ssize_t n = len(keys), i
    cdef uint32_t* hs
    cdef KeyView kv
    cdef uint64_t h1, h2
    if n == 0:
        return NULL
    hs = <uint32_t*>PyMem_Malloc(n * sizeof(uint32_t))
    if hs == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            key = keys[i]
            if sha1 and PyUnicode_Check(key):
                # hashlib's refusal, which datasketch's sha1_hash32 passes on
                raise TypeError(f"keys[{i}]: Strings must be encoded before hashing")
            try:
                _key_open(key, &kv)
            except TypeError as e:
                raise TypeError(f"keys[{i}]: {e}") from None
            if sha1:
                hs[i] = cd_fmix32(cd_sha1_hash32(kv.data, <size_t>kv.size))
            else:
                cd_murmur3_x64_128(kv.data, <size_t>kv.size, 0, &h1, &h2)
                hs[i] = <uint32_t>h1
            _key_close(&kv)
    except BaseException:
        PyMem_Free(hs)
        raise
    return hs


cdef int _mh_fold_keys(keys, const uint32_t[::1] a, const uint32_t[::1] b, uint32_t[::1] mins,
                       int sha1) except -1:
    cdef uint32_t* hs
    cdef Py_ssize_t n
    _mh_check(a, b)
    _mh_check_mins(a, mins)
    if not isinstance(keys, list):
        raise TypeError(f"keys must be a list, not {type(keys).__name__}")
    n = len(keys)
    hs = _mh_key_hashes(keys, sha1)
    if hs == NULL:
        return 0
    if a.shape[0]:
        with nogil:
            cd_mh_min(hs, <size_t>n, &a[0], &b[0], &mins[0], <size_t>a.shape[0])
    PyMem_Free(hs)
    return 0


def minhash_keys(keys, const uint32_t[::1] a, const uint32_t[::1] b, uint32_t[::1] mins):
    """Fold the low 32 bits of hash64 of each key (str as UTF-8, or
    bytes-like) into mins; every key is checked before mins changes."""
    _mh_fold_keys(keys, a, b, mins, 0)


def minhash_sha1(keys, const uint32_t[::1] a, const uint32_t[::1] b, uint32_t[::1] mins):
    """Fold fmix32(sha1_hash32(key)) of each key (bytes-like: a str is refused
    as hashlib refuses it) into mins: datasketch's default hash function and
    its "affine32" scheme."""
    _mh_fold_keys(keys, a, b, mins, 1)


def minhash_hashes(const uint32_t[::1] hashes, const uint32_t[::1] a, const uint32_t[::1] b,
                   uint32_t[::1] mins, bint mix):
    """Fold the 32-bit hashes (through the MurmurHash3 finalizer first when
    mix) into mins."""
    cdef uint32_t buf[1024]
    cdef Py_ssize_t n = hashes.shape[0], i, j, m
    cdef size_t k = <size_t>a.shape[0]
    _mh_check(a, b)
    _mh_check_mins(a, mins)
    if n == 0 or k == 0:
        return
    with nogil:
        if not mix:
            cd_mh_min(&hashes[0], <size_t>n, &a[0], &b[0], &mins[0], k)
        else:
            i = 0
            while i < n:
                m = min(n - i, 1024)
                for j in range(m):
                    buf[j] = cd_fmix32(hashes[i + j])
                cd_mh_min(buf, <size_t>m, &a[0], &b[0], &mins[0], k)
                i += m


def _minhash_hashes_plain(const uint32_t[::1] hashes, const uint32_t[::1] a,
                          const uint32_t[::1] b, uint32_t[::1] mins):
    """minhash_hashes(..., mix=False) through the plain loop, whatever the CPU
    has (for the tests of the vector version)."""
    _mh_check(a, b)
    _mh_check_mins(a, mins)
    if hashes.shape[0] and a.shape[0]:
        cd_mh_min_plain(&hashes[0], <size_t>hashes.shape[0], &a[0], &b[0], &mins[0],
                        <size_t>a.shape[0])


def minhash_version():
    """Which version of the minimum kernel runs: "avx2" or "plain"."""
    return cd_mh_version().decode("ascii")


def _sha1_digest(const unsigned char[::1] data, bint ni):
    """SHA-1 of data through the SHA extensions (ni, where the CPU has them:
    see _sha1_version) or the plain compression, for the tests of both."""
    cdef unsigned char out[20]
    cdef unsigned char empty = 0
    if ni and cd_sha1_version() != b"sha-ni":
        raise ValueError("this CPU has no SHA extensions")
    # never NULL, even for no bytes: memcpy's arguments must not be
    cd_sha1_with(&data[0] if data.shape[0] else &empty, <size_t>data.shape[0], out, ni)
    return out[:20]


def _sha1_version():
    """Which SHA-1 compression the core runs: "sha-ni" or "plain"."""
    return cd_sha1_version().decode("ascii")
