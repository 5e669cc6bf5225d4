/* Digests for crawldedup._core: MD5 (RFC 1321) and SHA-1 (FIPS 180-4) of one
 * contiguous buffer, written from the specifications; the tests check both
 * against hashlib on inputs of every length class.  MD5 serves the `simhash`
 * package's feature hashing (crawldedup.compat.simhash) and URL
 * fingerprints; SHA-1 serves Scrapy-compatible request fingerprints. */
#ifndef CD_DIGEST_H
#define CD_DIGEST_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

/* RFC 1321, section 3.4: per-step sine constants T[i] = floor(2^32 |sin(i+1)|)
 * and per-round rotation amounts. */
static const uint32_t cd_md5_T[64] = {
    0xd76aa478u, 0xe8c7b756u, 0x242070dbu, 0xc1bdceeeu, 0xf57c0fafu, 0x4787c62au,
    0xa8304613u, 0xfd469501u, 0x698098d8u, 0x8b44f7afu, 0xffff5bb1u, 0x895cd7beu,
    0x6b901122u, 0xfd987193u, 0xa679438eu, 0x49b40821u, 0xf61e2562u, 0xc040b340u,
    0x265e5a51u, 0xe9b6c7aau, 0xd62f105du, 0x02441453u, 0xd8a1e681u, 0xe7d3fbc8u,
    0x21e1cde6u, 0xc33707d6u, 0xf4d50d87u, 0x455a14edu, 0xa9e3e905u, 0xfcefa3f8u,
    0x676f02d9u, 0x8d2a4c8au, 0xfffa3942u, 0x8771f681u, 0x6d9d6122u, 0xfde5380cu,
    0xa4beea44u, 0x4bdecfa9u, 0xf6bb4b60u, 0xbebfbc70u, 0x289b7ec6u, 0xeaa127fau,
    0xd4ef3085u, 0x04881d05u, 0xd9d4d039u, 0xe6db99e5u, 0x1fa27cf8u, 0xc4ac5665u,
    0xf4292244u, 0x432aff97u, 0xab9423a7u, 0xfc93a039u, 0x655b59c3u, 0x8f0ccc92u,
    0xffeff47du, 0x85845dd1u, 0x6fa87e4fu, 0xfe2ce6e0u, 0xa3014314u, 0x4e0811a1u,
    0xf7537e82u, 0xbd3af235u, 0x2ad7d2bbu, 0xeb86d391u};
static const int cd_md5_S[64] = {
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
    5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
    4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
    6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};

static inline uint32_t cd_rotl32(uint32_t x, int s) {  /* 0 < s < 32 */
    return (x << s) | (x >> (32 - s));
}

/* Step i of MD5 (RFC 1321 3.4) on the state v = (a, b, c, d), given f, the
 * round function's value of (b, c, d), and x, the message word it reads:
 * (a, b, c, d) <- (d, b + ((a + f + T[i] + x) <<< S[i]), b, c). */
static inline void cd_md5_step(uint32_t v[4], uint32_t f, uint32_t x, int i) {
    uint32_t t = v[0] + f + cd_md5_T[i] + x;
    v[0] = v[3];
    v[3] = v[2];
    v[2] = v[1];
    v[1] += cd_rotl32(t, cd_md5_S[i]);
}

/* One 64-byte block into the state (RFC 1321 3.4): one loop per round
 * function, so no branch sits in a round. */
static void cd_md5_compress(uint32_t st[4], const unsigned char *block) {
    uint32_t X[16], v[4];
    int i;
    for (i = 0; i < 16; i++)
        X[i] = (uint32_t)block[4 * i] | ((uint32_t)block[4 * i + 1] << 8) |
               ((uint32_t)block[4 * i + 2] << 16) | ((uint32_t)block[4 * i + 3] << 24);
    memcpy(v, st, sizeof v);
    for (i = 0; i < 16; i++) cd_md5_step(v, v[3] ^ (v[1] & (v[2] ^ v[3])), X[i], i);
    for (; i < 32; i++) cd_md5_step(v, v[2] ^ (v[3] & (v[1] ^ v[2])), X[(5 * i + 1) & 15], i);
    for (; i < 48; i++) cd_md5_step(v, v[1] ^ v[2] ^ v[3], X[(3 * i + 5) & 15], i);
    for (; i < 64; i++) cd_md5_step(v, v[2] ^ (v[1] | ~v[3]), X[(7 * i) & 15], i);
    for (i = 0; i < 4; i++) st[i] += v[i];
}

static const uint32_t cd_md5_init[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};

/* MD5 of data[0:len] as the four state words (the digest is their
 * little-endian bytes, a first). */
static void cd_md5_words(const unsigned char *data, size_t len, uint32_t st[4]) {
    unsigned char tail[128];
    size_t full = len & ~(size_t)63, rest = len - full, padded, i;
    uint64_t bits = (uint64_t)len << 3;
    memcpy(st, cd_md5_init, sizeof cd_md5_init);
    for (i = 0; i < full; i += 64)
        cd_md5_compress(st, data + i);
    memset(tail, 0, sizeof tail);
    if (rest) memcpy(tail, data + full, rest);
    tail[rest] = 0x80;
    padded = rest < 56 ? 64 : 128;
    for (i = 0; i < 8; i++)
        tail[padded - 8 + i] = (unsigned char)(bits >> (8 * i));
    cd_md5_compress(st, tail);
    if (padded == 128)
        cd_md5_compress(st, tail + 64);
}

static void cd_md5(const unsigned char *data, size_t len, unsigned char out[16]) {
    uint32_t st[4];
    int i;
    cd_md5_words(data, len, st);
    for (i = 0; i < 16; i++)
        out[i] = (unsigned char)(st[i >> 2] >> (8 * (i & 3)));
}

/* ------------------------------------------------------- MD5, many at once */
/* MD5 is one long chain of dependent steps per message: a core runs it at a
 * fraction of its width.  cd_md5_many hashes many messages side by side,
 * CD_MD5_WAY at a time, each lane of a vector one message (the multi-buffer
 * method): a lane whose message ends takes the next one, so lanes stay busy
 * whatever the lengths.  GCC's and Clang's vector types compile the lanes to
 * the SIMD the target has (SSE2 at least on x86-64); other compilers hash
 * one message at a time with cd_md5. */
#if defined(__GNUC__) && !defined(CD_MD5_NO_LANES)
#define CD_MD5_WAY 8
typedef uint32_t cd_md5_vec __attribute__((vector_size(4 * CD_MD5_WAY)));

/* One 64-byte block of every lane into the lanes' states: X[w] holds word w
 * of each lane's block.  The four loops of cd_md5_compress, on vectors. */
static void cd_md5_compress_way(cd_md5_vec st[4], const cd_md5_vec X[16]) {
    cd_md5_vec a = st[0], b = st[1], c = st[2], d = st[3], t;
    int i;
    for (i = 0; i < 16; i++) {
        t = a + (d ^ (b & (c ^ d))) + cd_md5_T[i] + X[i];
        a = d; d = c; c = b; b = b + ((t << cd_md5_S[i]) | (t >> (32 - cd_md5_S[i])));
    }
    for (; i < 32; i++) {
        t = a + (c ^ (d & (b ^ c))) + cd_md5_T[i] + X[(5 * i + 1) & 15];
        a = d; d = c; c = b; b = b + ((t << cd_md5_S[i]) | (t >> (32 - cd_md5_S[i])));
    }
    for (; i < 48; i++) {
        t = a + (b ^ c ^ d) + cd_md5_T[i] + X[(3 * i + 5) & 15];
        a = d; d = c; c = b; b = b + ((t << cd_md5_S[i]) | (t >> (32 - cd_md5_S[i])));
    }
    for (; i < 64; i++) {
        t = a + (c ^ (b | ~d)) + cd_md5_T[i] + X[(7 * i) & 15];
        a = d; d = c; c = b; b = b + ((t << cd_md5_S[i]) | (t >> (32 - cd_md5_S[i])));
    }
    st[0] += a; st[1] += b; st[2] += c; st[3] += d;
}

/* Block k of message data[0:len] as padded by MD5 (RFC 1321 3.1-3.2: 0x80,
 * zeros, the length in bits, little-endian), into lane l of X. */
static inline void cd_md5_lane_block(cd_md5_vec X[16], int l, const unsigned char *data,
                                     size_t len, size_t k, size_t blocks) {
    unsigned char tail[64];
    const unsigned char *p;
    size_t at = 64 * k, w;
    if (at + 64 <= len) {
        p = data + at;
    } else {
        uint64_t bits = (uint64_t)len << 3;
        memset(tail, 0, sizeof tail);
        if (at < len) memcpy(tail, data + at, len - at);
        if (at <= len) tail[len - at] = 0x80;
        if (k + 1 == blocks)
            for (w = 0; w < 8; w++) tail[56 + w] = (unsigned char)(bits >> (8 * w));
        p = tail;
    }
    for (w = 0; w < 16; w++) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        uint32_t v;  /* one load, where the bytes below are that word */
        memcpy(&v, p + 4 * w, 4);
        X[w][l] = v;
#else
        X[w][l] = (uint32_t)p[4 * w] | ((uint32_t)p[4 * w + 1] << 8) |
                  ((uint32_t)p[4 * w + 2] << 16) | ((uint32_t)p[4 * w + 3] << 24);
#endif
    }
}

/* The MD5 digests of the n messages ptrs[i][0:lens[i]], each written to
 * out + i * stride (16 bytes); a NULL ptrs[i] is skipped (out untouched). */
static void cd_md5_many(const char *const *ptrs, const Py_ssize_t *lens, Py_ssize_t n,
                        unsigned char *out, size_t stride) {
    cd_md5_vec st[4], X[16];
    size_t msg[CD_MD5_WAY], k[CD_MD5_WAY], blocks[CD_MD5_WAY], next = 0, j;
    const size_t count = n > 0 ? (size_t)n : 0;
    int busy[CD_MD5_WAY], l, active;
    memset(st, 0, sizeof st);
    memset(X, 0, sizeof X);
    for (l = 0; l < CD_MD5_WAY; l++) busy[l] = 0;
    for (;;) {
        active = 0;
        for (l = 0; l < CD_MD5_WAY; l++) {
            if (!busy[l]) {  /* the lane takes the next message */
                while (next < count && ptrs[next] == NULL) next++;
                if (next == count) continue;
                msg[l] = next++;
                k[l] = 0;
                blocks[l] = ((size_t)lens[msg[l]] + 72) / 64;
                for (j = 0; j < 4; j++) st[j][l] = cd_md5_init[j];
                busy[l] = 1;
            }
            cd_md5_lane_block(X, l, (const unsigned char *)ptrs[msg[l]], (size_t)lens[msg[l]],
                              k[l], blocks[l]);
            active++;
        }
        if (!active) return;
        cd_md5_compress_way(st, X);
        for (l = 0; l < CD_MD5_WAY; l++) {
            if (!busy[l] || ++k[l] < blocks[l]) continue;
            for (j = 0; j < 16; j++)
                out[msg[l] * stride + j] = (unsigned char)(st[j >> 2][l] >> (8 * (j & 3)));
            busy[l] = 0;
        }
    }
}
#else
static void cd_md5_many(const char *const *ptrs, const Py_ssize_t *lens, Py_ssize_t n,
                        unsigned char *out, size_t stride) {
    Py_ssize_t i;
    for (i = 0; i < n; i++)
        if (ptrs[i] != NULL)
            cd_md5((const unsigned char *)ptrs[i], (size_t)lens[i], out + (size_t)i * stride);
}
#endif

/* ---------------------------------------------------------------- SHA-1 */
static inline uint32_t cdu_rol(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void cdu_sha1_block(uint32_t h[5], const unsigned char *p) {
    uint32_t w[80], a, b, c, d, e, t;
    int i;
    for (i = 0; i < 16; i++)
        w[i] = ((uint32_t)p[4 * i] << 24) | ((uint32_t)p[4 * i + 1] << 16)
             | ((uint32_t)p[4 * i + 2] << 8) | (uint32_t)p[4 * i + 3];
    for (i = 16; i < 80; i++) w[i] = cdu_rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    a = h[0]; b = h[1]; c = h[2]; d = h[3]; e = h[4];
    /* Four loops, one per round function, so no branch sits in a round. */
#define CDU_SHA1_ROUND(f, k) \
        t = cdu_rol(a, 5) + (f) + e + (k) + w[i]; e = d; d = c; c = cdu_rol(b, 30); b = a; a = t;
    for (i = 0; i < 20; i++) { CDU_SHA1_ROUND(d ^ (b & (c ^ d)), 0x5A827999u) }
    for (; i < 40; i++) { CDU_SHA1_ROUND(b ^ c ^ d, 0x6ED9EBA1u) }
    for (; i < 60; i++) { CDU_SHA1_ROUND((b & c) | (d & (b | c)), 0x8F1BBCDCu) }
    for (; i < 80; i++) { CDU_SHA1_ROUND(b ^ c ^ d, 0xCA62C1D6u) }
#undef CDU_SHA1_ROUND
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e;
}

/* The same compression with the x86 SHA extensions (SHA-NI: Intel since Ice
 * Lake and Goldmont, AMD since Zen), four rounds an instruction, chosen at
 * run time when the CPU has them (CPUID leaf 7, EBX bit 29).  The state is
 * kept as ABCD in one register (A in the top lane) and E in the top lane of
 * another; each group of four rounds takes the next four message words,
 * and the message schedule (sha1msg1, xor, sha1msg2) runs three groups
 * ahead of the rounds that need its words. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define CD_SHA1_NI 1
#include <cpuid.h>
#include <immintrin.h>

__attribute__((target("sha,sse4.1")))
static void cdu_sha1_block_ni(uint32_t h[5], const unsigned char *p) {
    const __m128i swap = _mm_set_epi64x(0x0001020304050607LL, 0x08090a0b0c0d0e0fLL);
    __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)h), 0x1B);
    __m128i e0 = _mm_set_epi32((int)h[4], 0, 0, 0), e1;
    __m128i abcd_save = abcd, e_save = e0;
    __m128i m[4];
    int k;
    for (k = 0; k < 4; k++)
        m[k] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * k)), swap);
    /* Rounds 0-3 and 4-7 by hand (the first E is added, not derived). */
    e0 = _mm_add_epi32(e0, m[0]);
    e1 = abcd;
    abcd = _mm_sha1rnds4_epu32(abcd, e0, 0);
    e1 = _mm_sha1nexte_epu32(e1, m[1]);
    e0 = abcd;
    abcd = _mm_sha1rnds4_epu32(abcd, e1, 0);
    m[0] = _mm_sha1msg1_epu32(m[0], m[1]);
    e0 = _mm_sha1nexte_epu32(e0, m[2]);
    e1 = abcd;
    abcd = _mm_sha1rnds4_epu32(abcd, e0, 0);
    m[1] = _mm_sha1msg1_epu32(m[1], m[2]);
    m[0] = _mm_xor_si128(m[0], m[2]);
    /* Groups 3 to 19, rounds 12-79: group g uses the words m[g % 4] and
     * the E register of its parity; the round function changes every five
     * groups.  The schedule steps after group 16 make words no group reads. */
#define CDU_SHA1_NI_GROUP(g, ecur, enext)                                     \
    ecur = _mm_sha1nexte_epu32(ecur, m[(g) & 3]);                             \
    enext = abcd;                                                             \
    m[((g) + 1) & 3] = _mm_sha1msg2_epu32(m[((g) + 1) & 3], m[(g) & 3]);      \
    abcd = _mm_sha1rnds4_epu32(abcd, ecur, (g) / 5);                          \
    m[((g) + 3) & 3] = _mm_sha1msg1_epu32(m[((g) + 3) & 3], m[(g) & 3]);      \
    m[((g) + 2) & 3] = _mm_xor_si128(m[((g) + 2) & 3], m[(g) & 3]);
    CDU_SHA1_NI_GROUP(3, e1, e0)
    CDU_SHA1_NI_GROUP(4, e0, e1)
    CDU_SHA1_NI_GROUP(5, e1, e0)
    CDU_SHA1_NI_GROUP(6, e0, e1)
    CDU_SHA1_NI_GROUP(7, e1, e0)
    CDU_SHA1_NI_GROUP(8, e0, e1)
    CDU_SHA1_NI_GROUP(9, e1, e0)
    CDU_SHA1_NI_GROUP(10, e0, e1)
    CDU_SHA1_NI_GROUP(11, e1, e0)
    CDU_SHA1_NI_GROUP(12, e0, e1)
    CDU_SHA1_NI_GROUP(13, e1, e0)
    CDU_SHA1_NI_GROUP(14, e0, e1)
    CDU_SHA1_NI_GROUP(15, e1, e0)
    CDU_SHA1_NI_GROUP(16, e0, e1)
    CDU_SHA1_NI_GROUP(17, e1, e0)
    CDU_SHA1_NI_GROUP(18, e0, e1)
    CDU_SHA1_NI_GROUP(19, e1, e0)
#undef CDU_SHA1_NI_GROUP
    /* E of the result is derived from A before the last group (now in e0). */
    e0 = _mm_sha1nexte_epu32(e0, e_save);
    abcd = _mm_add_epi32(abcd, abcd_save);
    _mm_storeu_si128((__m128i *)h, _mm_shuffle_epi32(abcd, 0x1B));
    h[4] = (uint32_t)_mm_extract_epi32(e0, 3);
}

/* 1 when the CPU has the SHA extensions (and SSE4.1), 0 when not, -1 before
 * the first call asks; threads asking at once write the same answer. */
static int cdu_sha1_have_ni = -1;

static inline int cdu_sha1_ni(void) {
    if (cdu_sha1_have_ni < 0) {
        unsigned int a = 0, b = 0, c = 0, d = 0, ok = 0;
        if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29))) {
            if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 19)))
                ok = 1;
        }
        cdu_sha1_have_ni = (int)ok;
    }
    return cdu_sha1_have_ni;
}
#define CDU_SHA1_BLOCK(h, p) (ni ? cdu_sha1_block_ni((h), (p)) : cdu_sha1_block((h), (p)))
#else
#define CDU_SHA1_BLOCK(h, p) cdu_sha1_block((h), (p))
#endif

/* Which compression cd_sha1 runs: "sha-ni" or "plain" (for the tests). */
static inline const char *cd_sha1_version(void) {
#ifdef CD_SHA1_NI
    return cdu_sha1_ni() ? "sha-ni" : "plain";
#else
    return "plain";
#endif
}

/* out: 20 bytes; ni: whether to use the SHA extensions (cd_sha1 asks the
 * CPU; the tests run both). */
static void cd_sha1_with(const unsigned char *data, size_t n, unsigned char *out, int ni) {
    uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
    unsigned char tail[128];
    size_t full = n & ~(size_t)63, rest = n - full, tl, i;
    uint64_t bits = (uint64_t)n * 8;
    (void)ni;
    for (i = 0; i < full; i += 64) CDU_SHA1_BLOCK(h, data + i);
    memcpy(tail, data + full, rest);
    tail[rest] = 0x80;
    tl = rest + 1 + 8 <= 64 ? 64 : 128;
    memset(tail + rest + 1, 0, tl - rest - 1);
    for (i = 0; i < 8; i++) tail[tl - 1 - i] = (unsigned char)(bits >> (8 * i));
    CDU_SHA1_BLOCK(h, tail);
    if (tl == 128) CDU_SHA1_BLOCK(h, tail + 64);
    for (i = 0; i < 5; i++) {
        out[4 * i] = (unsigned char)(h[i] >> 24); out[4 * i + 1] = (unsigned char)(h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(h[i] >> 8); out[4 * i + 3] = (unsigned char)h[i];
    }
}

/* out: 20 bytes. */
static void cd_sha1(const unsigned char *data, size_t n, unsigned char *out) {
#ifdef CD_SHA1_NI
    cd_sha1_with(data, n, out, cdu_sha1_ni());
#else
    cd_sha1_with(data, n, out, 0);
#endif
}

#endif
