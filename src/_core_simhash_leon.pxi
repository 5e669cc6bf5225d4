# SimHash kernels, part 3 (included by _core_simhash.pxi): the `simhash`
# package's (leonsim) values for crawldedup.compat.simhash, all without the
# GIL: MD5 (RFC 1321) of many short windows side by side, its tokenizer, and
# its weighted features path.  The MD5 of one buffer of any length
# (cd_md5_words) is shared with the URL fingerprints and stays in
# _cd_digest.h.

cdef extern from "_cd_digest.h" nogil:
    void cd_md5(const unsigned char* data, size_t length, unsigned char* out)
    void cd_md5_words(const unsigned char* data, size_t length, uint32_t* st)

cdef enum:
    # Several short messages (at most 55 bytes each, so one padded block
    # each) at once.  MD5 is one long dependency chain per message; running
    # SH_MD5_LANES independent chains side by side lets the CPU (and the
    # compiler's vector unit) overlap them.
    SH_MD5_LANES = 8
    SH_LEON_WIDTH = 4


# One MD5 step on every lane, one function per round function (RFC 1321
# 3.4): a = b + ((a + F(b, c, d) + x + t) <<< s), where x holds message word
# g of each lane (X[g * SH_MD5_LANES + lane]), t is the step's sine constant
# and s its rotation (4 <= s <= 23, so neither shift reaches 32).  Each is
# called with constants, so the C compiler turns every call into straight
# vector code.
cdef inline void sh_md5_f(uint32_t* a, const uint32_t* b, const uint32_t* c, const uint32_t* d,
                          const uint32_t* x, uint32_t t, int s) noexcept nogil:
    cdef int l
    cdef uint32_t v
    for l in range(SH_MD5_LANES):
        v = a[l] + ((b[l] & c[l]) | (~b[l] & d[l])) + x[l] + t
        a[l] = b[l] + ((v << s) | (v >> (32 - s)))


cdef inline void sh_md5_g(uint32_t* a, const uint32_t* b, const uint32_t* c, const uint32_t* d,
                          const uint32_t* x, uint32_t t, int s) noexcept nogil:
    cdef int l
    cdef uint32_t v
    for l in range(SH_MD5_LANES):
        v = a[l] + ((b[l] & d[l]) | (c[l] & ~d[l])) + x[l] + t
        a[l] = b[l] + ((v << s) | (v >> (32 - s)))


cdef inline void sh_md5_h(uint32_t* a, const uint32_t* b, const uint32_t* c, const uint32_t* d,
                          const uint32_t* x, uint32_t t, int s) noexcept nogil:
    cdef int l
    cdef uint32_t v
    for l in range(SH_MD5_LANES):
        v = a[l] + (b[l] ^ c[l] ^ d[l]) + x[l] + t
        a[l] = b[l] + ((v << s) | (v >> (32 - s)))


cdef inline void sh_md5_i(uint32_t* a, const uint32_t* b, const uint32_t* c, const uint32_t* d,
                          const uint32_t* x, uint32_t t, int s) noexcept nogil:
    cdef int l
    cdef uint32_t v
    for l in range(SH_MD5_LANES):
        v = a[l] + (c[l] ^ (b[l] | ~d[l])) + x[l] + t
        a[l] = b[l] + ((v << s) | (v >> (32 - s)))


cdef void sh_md5_lanes(const uint32_t* X, uint32_t* out) noexcept nogil:
    """MD5 of SH_MD5_LANES one-block messages: X[w * SH_MD5_LANES + lane] is
    message word w of each lane's padded block; out[j * SH_MD5_LANES + lane]
    state word j.  The 64 steps in RFC 1321's order: message word g(i) and
    sine constant T[i] = floor(2^32 |sin(i + 1)|) of step i."""
    cdef uint32_t A[SH_MD5_LANES]
    cdef uint32_t B[SH_MD5_LANES]
    cdef uint32_t C[SH_MD5_LANES]
    cdef uint32_t D[SH_MD5_LANES]
    cdef int l
    for l in range(SH_MD5_LANES):
        A[l] = 0x67452301U
        B[l] = 0xefcdab89U
        C[l] = 0x98badcfeU
        D[l] = 0x10325476U
    # Round 1: F, message words in order.
    sh_md5_f(A, B, C, D, &X[0 * SH_MD5_LANES], 0xd76aa478U, 7)
    sh_md5_f(D, A, B, C, &X[1 * SH_MD5_LANES], 0xe8c7b756U, 12)
    sh_md5_f(C, D, A, B, &X[2 * SH_MD5_LANES], 0x242070dbU, 17)
    sh_md5_f(B, C, D, A, &X[3 * SH_MD5_LANES], 0xc1bdceeeU, 22)
    sh_md5_f(A, B, C, D, &X[4 * SH_MD5_LANES], 0xf57c0fafU, 7)
    sh_md5_f(D, A, B, C, &X[5 * SH_MD5_LANES], 0x4787c62aU, 12)
    sh_md5_f(C, D, A, B, &X[6 * SH_MD5_LANES], 0xa8304613U, 17)
    sh_md5_f(B, C, D, A, &X[7 * SH_MD5_LANES], 0xfd469501U, 22)
    sh_md5_f(A, B, C, D, &X[8 * SH_MD5_LANES], 0x698098d8U, 7)
    sh_md5_f(D, A, B, C, &X[9 * SH_MD5_LANES], 0x8b44f7afU, 12)
    sh_md5_f(C, D, A, B, &X[10 * SH_MD5_LANES], 0xffff5bb1U, 17)
    sh_md5_f(B, C, D, A, &X[11 * SH_MD5_LANES], 0x895cd7beU, 22)
    sh_md5_f(A, B, C, D, &X[12 * SH_MD5_LANES], 0x6b901122U, 7)
    sh_md5_f(D, A, B, C, &X[13 * SH_MD5_LANES], 0xfd987193U, 12)
    sh_md5_f(C, D, A, B, &X[14 * SH_MD5_LANES], 0xa679438eU, 17)
    sh_md5_f(B, C, D, A, &X[15 * SH_MD5_LANES], 0x49b40821U, 22)
    # Round 2: G, message words (1 + 5i) mod 16.
    sh_md5_g(A, B, C, D, &X[1 * SH_MD5_LANES], 0xf61e2562U, 5)
    sh_md5_g(D, A, B, C, &X[6 * SH_MD5_LANES], 0xc040b340U, 9)
    sh_md5_g(C, D, A, B, &X[11 * SH_MD5_LANES], 0x265e5a51U, 14)
    sh_md5_g(B, C, D, A, &X[0 * SH_MD5_LANES], 0xe9b6c7aaU, 20)
    sh_md5_g(A, B, C, D, &X[5 * SH_MD5_LANES], 0xd62f105dU, 5)
    sh_md5_g(D, A, B, C, &X[10 * SH_MD5_LANES], 0x02441453U, 9)
    sh_md5_g(C, D, A, B, &X[15 * SH_MD5_LANES], 0xd8a1e681U, 14)
    sh_md5_g(B, C, D, A, &X[4 * SH_MD5_LANES], 0xe7d3fbc8U, 20)
    sh_md5_g(A, B, C, D, &X[9 * SH_MD5_LANES], 0x21e1cde6U, 5)
    sh_md5_g(D, A, B, C, &X[14 * SH_MD5_LANES], 0xc33707d6U, 9)
    sh_md5_g(C, D, A, B, &X[3 * SH_MD5_LANES], 0xf4d50d87U, 14)
    sh_md5_g(B, C, D, A, &X[8 * SH_MD5_LANES], 0x455a14edU, 20)
    sh_md5_g(A, B, C, D, &X[13 * SH_MD5_LANES], 0xa9e3e905U, 5)
    sh_md5_g(D, A, B, C, &X[2 * SH_MD5_LANES], 0xfcefa3f8U, 9)
    sh_md5_g(C, D, A, B, &X[7 * SH_MD5_LANES], 0x676f02d9U, 14)
    sh_md5_g(B, C, D, A, &X[12 * SH_MD5_LANES], 0x8d2a4c8aU, 20)
    # Round 3: H, message words (5 + 3i) mod 16.
    sh_md5_h(A, B, C, D, &X[5 * SH_MD5_LANES], 0xfffa3942U, 4)
    sh_md5_h(D, A, B, C, &X[8 * SH_MD5_LANES], 0x8771f681U, 11)
    sh_md5_h(C, D, A, B, &X[11 * SH_MD5_LANES], 0x6d9d6122U, 16)
    sh_md5_h(B, C, D, A, &X[14 * SH_MD5_LANES], 0xfde5380cU, 23)
    sh_md5_h(A, B, C, D, &X[1 * SH_MD5_LANES], 0xa4beea44U, 4)
    sh_md5_h(D, A, B, C, &X[4 * SH_MD5_LANES], 0x4bdecfa9U, 11)
    sh_md5_h(C, D, A, B, &X[7 * SH_MD5_LANES], 0xf6bb4b60U, 16)
    sh_md5_h(B, C, D, A, &X[10 * SH_MD5_LANES], 0xbebfbc70U, 23)
    sh_md5_h(A, B, C, D, &X[13 * SH_MD5_LANES], 0x289b7ec6U, 4)
    sh_md5_h(D, A, B, C, &X[0 * SH_MD5_LANES], 0xeaa127faU, 11)
    sh_md5_h(C, D, A, B, &X[3 * SH_MD5_LANES], 0xd4ef3085U, 16)
    sh_md5_h(B, C, D, A, &X[6 * SH_MD5_LANES], 0x04881d05U, 23)
    sh_md5_h(A, B, C, D, &X[9 * SH_MD5_LANES], 0xd9d4d039U, 4)
    sh_md5_h(D, A, B, C, &X[12 * SH_MD5_LANES], 0xe6db99e5U, 11)
    sh_md5_h(C, D, A, B, &X[15 * SH_MD5_LANES], 0x1fa27cf8U, 16)
    sh_md5_h(B, C, D, A, &X[2 * SH_MD5_LANES], 0xc4ac5665U, 23)
    # Round 4: I, message words 7i mod 16.
    sh_md5_i(A, B, C, D, &X[0 * SH_MD5_LANES], 0xf4292244U, 6)
    sh_md5_i(D, A, B, C, &X[7 * SH_MD5_LANES], 0x432aff97U, 10)
    sh_md5_i(C, D, A, B, &X[14 * SH_MD5_LANES], 0xab9423a7U, 15)
    sh_md5_i(B, C, D, A, &X[5 * SH_MD5_LANES], 0xfc93a039U, 21)
    sh_md5_i(A, B, C, D, &X[12 * SH_MD5_LANES], 0x655b59c3U, 6)
    sh_md5_i(D, A, B, C, &X[3 * SH_MD5_LANES], 0x8f0ccc92U, 10)
    sh_md5_i(C, D, A, B, &X[10 * SH_MD5_LANES], 0xffeff47dU, 15)
    sh_md5_i(B, C, D, A, &X[1 * SH_MD5_LANES], 0x85845dd1U, 21)
    sh_md5_i(A, B, C, D, &X[8 * SH_MD5_LANES], 0x6fa87e4fU, 6)
    sh_md5_i(D, A, B, C, &X[15 * SH_MD5_LANES], 0xfe2ce6e0U, 10)
    sh_md5_i(C, D, A, B, &X[6 * SH_MD5_LANES], 0xa3014314U, 15)
    sh_md5_i(B, C, D, A, &X[13 * SH_MD5_LANES], 0x4e0811a1U, 21)
    sh_md5_i(A, B, C, D, &X[4 * SH_MD5_LANES], 0xf7537e82U, 6)
    sh_md5_i(D, A, B, C, &X[11 * SH_MD5_LANES], 0xbd3af235U, 10)
    sh_md5_i(C, D, A, B, &X[2 * SH_MD5_LANES], 0x2ad7d2bbU, 15)
    sh_md5_i(B, C, D, A, &X[9 * SH_MD5_LANES], 0xeb86d391U, 21)
    for l in range(SH_MD5_LANES):
        out[0 * SH_MD5_LANES + l] = A[l] + 0x67452301U
        out[1 * SH_MD5_LANES + l] = B[l] + 0xefcdab89U
        out[2 * SH_MD5_LANES + l] = C[l] + 0x98badcfeU
        out[3 * SH_MD5_LANES + l] = D[l] + 0x10325476U


cdef inline uint32_t sh_bswap32(uint32_t x) noexcept nogil:
    # The compiler recognises the idiom and emits one byte-swap instruction.
    return (x >> 24) | ((x >> 8) & 0xff00U) | ((x << 8) & 0xff0000U) | (x << 24)


cdef inline uint32_t sh_load32le(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16)
            | (<uint32_t>p[3] << 24))


# ------------------------------------------- the `simhash` package's text
# simhash 2.1.x, Simhash(text, f): lower-case (done by the caller with
# str.lower()), keep the characters matching [\w\u4e00-\u9fcc], slide a
# 4-character window over them (one window, the whole string, when fewer
# than 4 remain), hash each window's UTF-8 with MD5 and keep the last f/8
# bytes big-endian, and set bit j when more than half of the windows have it.
# The package counts distinct windows and weights them by count, which adds
# up to the same per-bit sums.  8 <= f <= 128, f a multiple of 8.

cdef inline bint sh_leon_keep(uint32_t c) noexcept nogil:
    return sh_is_word(c) or (c >= 0x4E00 and c <= 0x9FCC)


# Windows waiting for the MD5 lanes, and the bit counts of the digests'
# last 8 bytes (lo) and, when f > 64, the 8 before them (hi).
ctypedef struct ShLeonRun:
    uint32_t X[16 * SH_MD5_LANES]
    int lane
    int f
    ShCounter lo
    ShCounter hi


cdef void sh_leon_flush(ShLeonRun* r) noexcept nogil:
    """Runs the lanes filled so far."""
    cdef uint32_t st[4 * SH_MD5_LANES]
    cdef int l
    cdef uint64_t h, g
    if not r.lane:
        return
    sh_md5_lanes(r.X, st)
    for l in range(r.lane):
        # The digest (the state words' little-endian bytes) read as a
        # big-endian 128-bit integer, as int.from_bytes(digest, "big") does,
        # split in (h, g).
        h = ((<uint64_t>sh_bswap32(st[0 * SH_MD5_LANES + l]) << 32)
             | sh_bswap32(st[1 * SH_MD5_LANES + l]))
        g = ((<uint64_t>sh_bswap32(st[2 * SH_MD5_LANES + l]) << 32)
             | sh_bswap32(st[3 * SH_MD5_LANES + l]))
        sh_counter_add(&r.lo, g)
        if r.f > 64:
            sh_counter_add(&r.hi, h)
    r.lane = 0


cdef void sh_leon_window(ShLeonRun* r, const unsigned char* utf8, const unsigned char* ulen,
                         Py_ssize_t m, int width) noexcept nogil:
    """The window made of the last `width` kept characters (their UTF-8
    cached, zero-padded to 4 bytes, in the rings utf8 (4 bytes a slot) and
    ulen) into the next lane; runs the lanes when full.  A window is at most
    16 bytes, so its padded block has data in words 0-4 and its bit length in
    word 14; the other words stay 0 (set once in sh_leon_text)."""
    cdef unsigned char b[24]
    cdef size_t length = 0
    cdef Py_ssize_t k
    cdef int w
    cdef uint32_t* column = r.X + r.lane    # word w of this lane: column[w * SH_MD5_LANES]
    memset(b, 0, sizeof(b))
    for k in range(m - width, m):
        memcpy(b + length, utf8 + 4 * (k % SH_LEON_WIDTH), 4)
        length += ulen[k % SH_LEON_WIDTH]
    b[length] = 0x80
    for w in range(5):
        column[w * SH_MD5_LANES] = sh_load32le(b + 4 * w)
    column[14 * SH_MD5_LANES] = <uint32_t>(length << 3)
    r.lane += 1
    if r.lane == SH_MD5_LANES:
        sh_leon_flush(r)


cdef int sh_leon_text(const ShText* t, int f, uint64_t* hi, uint64_t* lo) noexcept nogil:
    """The package's value of the text in (hi[0], lo[0]); SH_NEEDS_PY_LOWER
    when the text must be lower-cased by str.lower() first."""
    cdef unsigned char utf8[4 * SH_LEON_WIDTH]
    cdef unsigned char ulen[SH_LEON_WIDTH]
    cdef Py_ssize_t i, m = 0, slot
    cdef ShLeonRun r
    cdef uint32_t c
    cdef int j
    memset(r.X, 0, sizeof(r.X))
    r.lane = 0
    r.f = f
    sh_counter_init(&r.lo)
    sh_counter_init(&r.hi)
    for i in range(t.length):
        c = sh_text_at(t, i)
        if t.lower and not (c >= 0x4E00 and c <= 0x9FCC):
            if sh_lower_special(c):
                return SH_NEEDS_PY_LOWER
            c = sh_lower(c)
        if sh_leon_keep(c):
            slot = m % SH_LEON_WIDTH
            memset(utf8 + 4 * slot, 0, 4)
            ulen[slot] = <unsigned char>sh_put_utf8(utf8 + 4 * slot, c)
            m += 1
            if m >= SH_LEON_WIDTH:
                sh_leon_window(&r, utf8, ulen, m, SH_LEON_WIDTH)
    if m < SH_LEON_WIDTH:
        sh_leon_window(&r, utf8, ulen, m, <int>m)   # possibly empty
    sh_leon_flush(&r)
    sh_counter_flush(&r.lo)
    sh_counter_flush(&r.hi)
    hi[0] = 0
    lo[0] = 0
    for j in range(f):
        if j < 64 and 2 * r.lo.counts[j] > r.lo.total:
            lo[0] |= (<uint64_t>1) << j
        if j >= 64 and 2 * r.hi.counts[j - 64] > r.lo.total:
            hi[0] |= (<uint64_t>1) << (j - 64)
    return 0


cdef void sh_leon_features(const unsigned char* data, const int64_t* offsets,
                           const int64_t* weights, Py_ssize_t n, int f, int64_t total,
                           uint64_t* hi, uint64_t* lo) noexcept nogil:
    """The features path of the `simhash` package with integer weights:
    feature i (UTF-8 in data[offsets[i]:offsets[i+1]]) adds max(w, 0) to the
    sum of each of its bits (the package repeats the digest w times, and a
    bytes object repeated w <= 0 times is empty) and w to the total.  The
    caller keeps the sums within int64."""
    cdef int64_t counts[128]
    cdef Py_ssize_t i
    cdef uint32_t st[4]
    cdef uint64_t h, g
    cdef int64_t w
    cdef int j, nlo = f if f < 64 else 64
    memset(counts, 0, sizeof(counts))
    for i in range(n):
        w = weights[i] if weights[i] > 0 else 0
        cd_md5_words(data + offsets[i], <size_t>(offsets[i + 1] - offsets[i]), st)
        h = (<uint64_t>sh_bswap32(st[0]) << 32) | sh_bswap32(st[1])
        g = (<uint64_t>sh_bswap32(st[2]) << 32) | sh_bswap32(st[3])
        for j in range(nlo):
            counts[j] += <int64_t>((g >> j) & 1) * w
        for j in range(64, f):
            counts[j] += <int64_t>((h >> (j - 64)) & 1) * w
    hi[0] = 0
    lo[0] = 0
    for j in range(f):
        if 2 * counts[j] > total:
            if j < 64:
                lo[0] |= (<uint64_t>1) << j
            else:
                hi[0] |= (<uint64_t>1) << (j - 64)
