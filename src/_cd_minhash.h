/* MinHash primitives for crawldedup._core: the minimum of k affine
 * permutations over a block of 32-bit hashes, the MurmurHash3 32-bit
 * finalizer, and datasketch's default hash function (the first four bytes
 * of a SHA-1 digest).
 *
 * Permutation j maps a 32-bit hash x to a[j] * x + b[j] modulo 2**32 (a[j]
 * odd, so it is a bijection: no two hashes collide).  cd_mh_min folds n
 * hashes into the k minimums.  On x86-64 with GCC or Clang it runs an AVX2
 * version when the CPU has AVX2 (asked once): 32 permutations at a time held
 * in registers while the hashes stream past, so a hash costs four multiplies
 * per 32 permutations.  Elsewhere the plain loop, which compilers vectorize
 * where the target has 32-bit vector multiplies (NEON, SSE4.1). */
#ifndef CRAWLDEDUP_MINHASH_H
#define CRAWLDEDUP_MINHASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_cd_digest.h"

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define CD_MH_AVX2 1
#include <immintrin.h>
#endif

static inline uint32_t cd_fmix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x85EBCA6BU;
    h ^= h >> 13;
    h *= 0xC2B2AE35U;
    h ^= h >> 16;
    return h;
}

static void cd_mh_min_plain(const uint32_t *h, size_t n, const uint32_t *a,
                            const uint32_t *b, uint32_t *mins, size_t k) {
    size_t i, j;
    for (j = 0; j < k; j++) {
        uint32_t m = mins[j], aj = a[j], bj = b[j];
        for (i = 0; i < n; i++) {
            uint32_t v = aj * h[i] + bj;
            m = v < m ? v : m;
        }
        mins[j] = m;
    }
}

#ifdef CD_MH_AVX2
__attribute__((target("avx2")))
static void cd_mh_min_avx2(const uint32_t *h, size_t n, const uint32_t *a,
                           const uint32_t *b, uint32_t *mins, size_t k) {
    size_t i, j = 0;
    for (; j + 32 <= k; j += 32) {
        __m256i a0 = _mm256_loadu_si256((const __m256i *)(a + j));
        __m256i a1 = _mm256_loadu_si256((const __m256i *)(a + j + 8));
        __m256i a2 = _mm256_loadu_si256((const __m256i *)(a + j + 16));
        __m256i a3 = _mm256_loadu_si256((const __m256i *)(a + j + 24));
        __m256i b0 = _mm256_loadu_si256((const __m256i *)(b + j));
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + j + 8));
        __m256i b2 = _mm256_loadu_si256((const __m256i *)(b + j + 16));
        __m256i b3 = _mm256_loadu_si256((const __m256i *)(b + j + 24));
        __m256i m0 = _mm256_loadu_si256((const __m256i *)(mins + j));
        __m256i m1 = _mm256_loadu_si256((const __m256i *)(mins + j + 8));
        __m256i m2 = _mm256_loadu_si256((const __m256i *)(mins + j + 16));
        __m256i m3 = _mm256_loadu_si256((const __m256i *)(mins + j + 24));
        for (i = 0; i < n; i++) {
            __m256i x = _mm256_set1_epi32((int)h[i]);
            m0 = _mm256_min_epu32(m0, _mm256_add_epi32(_mm256_mullo_epi32(a0, x), b0));
            m1 = _mm256_min_epu32(m1, _mm256_add_epi32(_mm256_mullo_epi32(a1, x), b1));
            m2 = _mm256_min_epu32(m2, _mm256_add_epi32(_mm256_mullo_epi32(a2, x), b2));
            m3 = _mm256_min_epu32(m3, _mm256_add_epi32(_mm256_mullo_epi32(a3, x), b3));
        }
        _mm256_storeu_si256((__m256i *)(mins + j), m0);
        _mm256_storeu_si256((__m256i *)(mins + j + 8), m1);
        _mm256_storeu_si256((__m256i *)(mins + j + 16), m2);
        _mm256_storeu_si256((__m256i *)(mins + j + 24), m3);
    }
    for (; j + 8 <= k; j += 8) {
        __m256i a0 = _mm256_loadu_si256((const __m256i *)(a + j));
        __m256i b0 = _mm256_loadu_si256((const __m256i *)(b + j));
        __m256i m0 = _mm256_loadu_si256((const __m256i *)(mins + j));
        for (i = 0; i < n; i++) {
            __m256i x = _mm256_set1_epi32((int)h[i]);
            m0 = _mm256_min_epu32(m0, _mm256_add_epi32(_mm256_mullo_epi32(a0, x), b0));
        }
        _mm256_storeu_si256((__m256i *)(mins + j), m0);
    }
    if (j < k)
        cd_mh_min_plain(h, n, a + j, b + j, mins + j, k - j);
}

/* 1 when the CPU has AVX2, 0 when not, -1 before the first call asks.  A
 * race between threads asking at once writes the same answer. */
static int cd_mh_have_avx2 = -1;
#endif

/* mins[j] = min(mins[j], min over i of a[j] * h[i] + b[j] mod 2**32). */
static inline void cd_mh_min(const uint32_t *h, size_t n, const uint32_t *a,
                             const uint32_t *b, uint32_t *mins, size_t k) {
#ifdef CD_MH_AVX2
    if (cd_mh_have_avx2 < 0) {
        __builtin_cpu_init();
        cd_mh_have_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    if (cd_mh_have_avx2) {
        cd_mh_min_avx2(h, n, a, b, mins, k);
        return;
    }
#endif
    cd_mh_min_plain(h, n, a, b, mins, k);
}

/* Which version cd_mh_min runs: "avx2" or "plain" (for the tests, which run
 * the plain one too through cd_mh_min_plain). */
static inline const char *cd_mh_version(void) {
#ifdef CD_MH_AVX2
    if (cd_mh_have_avx2 < 0) {
        __builtin_cpu_init();
        cd_mh_have_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return cd_mh_have_avx2 ? "avx2" : "plain";
#else
    return "plain";
#endif
}

/* datasketch.hashfunc.sha1_hash32: the first four bytes of the SHA-1 digest
 * (cd_sha1 in _cd_digest.h) read as a little-endian integer. */
static inline uint32_t cd_sha1_hash32(const unsigned char *p, size_t n) {
    unsigned char d[20];
    cd_sha1(p, n, d);
    return (uint32_t)d[0] | ((uint32_t)d[1] << 8) | ((uint32_t)d[2] << 16)
           | ((uint32_t)d[3] << 24);
}

#endif
