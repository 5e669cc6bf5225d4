/* SimHash kernels for crawldedup._core: MD5 (RFC 1321), bit-majority
 * accumulation, and the text tokenizers (ours, and the `simhash` package's
 * 4-gram one for crawldedup.compat.simhash).
 *
 * Everything here runs without the GIL: text is read straight from the
 * storage of a ready str (kind 1, 2 or 4 bytes per code point), and the
 * character classes use CPython's own Unicode tables (Py_UNICODE_ISALNUM),
 * which are what `str.isalnum()` and `re`'s `\w` use, so the pure-Python twin
 * classifies every character the same way.
 *
 * Requires _cd_support.h (MurmurHash3, UTF-8 encoding) to be included first.
 */
#ifndef CD_SIMHASH_H
#define CD_SIMHASH_H

#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_cd_support.h"

#include "_cd_digest.h"

/* Several short messages (at most 55 bytes each, so one padded block each)
 * at once.  MD5 is one long dependency chain per message; running
 * CD_MD5_LANES independent chains side by side lets the CPU (and the
 * compiler's vector unit) overlap them.  X[w][lane] is message word w of each
 * lane's padded block; out[j][lane] state word j. */
#define CD_MD5_LANES 8

static void cd_md5_lanes(uint32_t X[16][CD_MD5_LANES], uint32_t out[4][CD_MD5_LANES]) {
    uint32_t A[CD_MD5_LANES], B[CD_MD5_LANES], C[CD_MD5_LANES], D[CD_MD5_LANES];
    int l;
    for (l = 0; l < CD_MD5_LANES; l++) {
        A[l] = cd_md5_init[0]; B[l] = cd_md5_init[1];
        C[l] = cd_md5_init[2]; D[l] = cd_md5_init[3];
    }
#define CD_MD5_STEP(F, a, b, c, d, i)                                                  \
    for (l = 0; l < CD_MD5_LANES; l++) {                                               \
        uint32_t t = a[l] + F(b[l], c[l], d[l]) + X[cd_md5_word(i)][l] + cd_md5_T[i];  \
        a[l] = b[l] + CD_ROTL32(t, cd_md5_S[i]);                                       \
    }
#define CD_MD5_F(x, y, z) (((x) & (y)) | (~(x) & (z)))
#define CD_MD5_G(x, y, z) (((x) & (z)) | ((y) & ~(z)))
#define CD_MD5_H(x, y, z) ((x) ^ (y) ^ (z))
#define CD_MD5_I(x, y, z) ((y) ^ ((x) | ~(z)))
#define CD_MD5_ROUND(F, base)                       \
    CD_MD5_STEP(F, A, B, C, D, base + 0)            \
    CD_MD5_STEP(F, D, A, B, C, base + 1)            \
    CD_MD5_STEP(F, C, D, A, B, base + 2)            \
    CD_MD5_STEP(F, B, C, D, A, base + 3)            \
    CD_MD5_STEP(F, A, B, C, D, base + 4)            \
    CD_MD5_STEP(F, D, A, B, C, base + 5)            \
    CD_MD5_STEP(F, C, D, A, B, base + 6)            \
    CD_MD5_STEP(F, B, C, D, A, base + 7)            \
    CD_MD5_STEP(F, A, B, C, D, base + 8)            \
    CD_MD5_STEP(F, D, A, B, C, base + 9)            \
    CD_MD5_STEP(F, C, D, A, B, base + 10)           \
    CD_MD5_STEP(F, B, C, D, A, base + 11)           \
    CD_MD5_STEP(F, A, B, C, D, base + 12)           \
    CD_MD5_STEP(F, D, A, B, C, base + 13)           \
    CD_MD5_STEP(F, C, D, A, B, base + 14)           \
    CD_MD5_STEP(F, B, C, D, A, base + 15)
    CD_MD5_ROUND(CD_MD5_F, 0)
    CD_MD5_ROUND(CD_MD5_G, 16)
    CD_MD5_ROUND(CD_MD5_H, 32)
    CD_MD5_ROUND(CD_MD5_I, 48)
    for (l = 0; l < CD_MD5_LANES; l++) {
        out[0][l] = A[l] + cd_md5_init[0]; out[1][l] = B[l] + cd_md5_init[1];
        out[2][l] = C[l] + cd_md5_init[2]; out[3][l] = D[l] + cd_md5_init[3];
    }
}

static inline uint32_t cd_bswap32(uint32_t x) {
    return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}

/* The digest's last 16 bytes read as a big-endian 128-bit integer, split in
 * (hi, lo): what `int.from_bytes(md5(x).digest(), "big")` is. */
static inline void cd_md5_be(const uint32_t st[4], uint64_t *hi, uint64_t *lo) {
    *hi = ((uint64_t)cd_bswap32(st[0]) << 32) | cd_bswap32(st[1]);
    *lo = ((uint64_t)cd_bswap32(st[2]) << 32) | cd_bswap32(st[3]);
}

/* --------------------------------------------------------- accumulation */
/* Per-bit counts of many 64-bit values, each with weight 1, without a loop
 * over the 64 bits per value.  nib[k] holds 16 four-bit counters, lane j
 * counting bit 4j+k: adding a value is (h >> k) & 0x1111... per word, 12
 * operations for all 64 bits.  Before a nibble can overflow (every 15
 * values) the nibbles move into byte counters (byte[k][0] lane i: bit 8i+k,
 * byte[k][1] lane i: bit 8i+4+k), and before a byte can overflow (every 17
 * nibble flushes, 255 values) the bytes move into the 64-bit counts. */
#define CD_NIBBLES 0x1111111111111111ULL
#define CD_LOW_NIBBLES 0x0F0F0F0F0F0F0F0FULL

typedef struct {
    uint64_t nib[4];
    uint64_t byte[4][2];
    int nib_pending;         /* values in nib since its last flush (< 15) */
    int byte_pending;        /* nibble flushes in byte since its last flush (< 17) */
    int64_t counts[64];      /* counts[j]: values with bit j set */
    int64_t total;           /* values added */
} cd_counter;

static inline void cd_counter_init(cd_counter *c) {
    memset(c, 0, sizeof *c);
}

static inline void cd_counter_flush_bytes(cd_counter *c) {
    int k, i;
    for (k = 0; k < 4; k++) {
        for (i = 0; i < 8; i++) {
            c->counts[8 * i + k] += (int64_t)((c->byte[k][0] >> (8 * i)) & 0xff);
            c->counts[8 * i + 4 + k] += (int64_t)((c->byte[k][1] >> (8 * i)) & 0xff);
        }
        c->byte[k][0] = c->byte[k][1] = 0;
    }
    c->byte_pending = 0;
}

static inline void cd_counter_flush_nibbles(cd_counter *c) {
    int k;
    for (k = 0; k < 4; k++) {
        c->byte[k][0] += c->nib[k] & CD_LOW_NIBBLES;
        c->byte[k][1] += (c->nib[k] >> 4) & CD_LOW_NIBBLES;
        c->nib[k] = 0;
    }
    c->nib_pending = 0;
    if (++c->byte_pending == 17) cd_counter_flush_bytes(c);
}

static inline void cd_counter_flush(cd_counter *c) {
    cd_counter_flush_nibbles(c);
    cd_counter_flush_bytes(c);
}

static inline void cd_counter_add(cd_counter *c, uint64_t h) {
    c->nib[0] += h & CD_NIBBLES;
    c->nib[1] += (h >> 1) & CD_NIBBLES;
    c->nib[2] += (h >> 2) & CD_NIBBLES;
    c->nib[3] += (h >> 3) & CD_NIBBLES;
    c->total++;
    if (++c->nib_pending == 15) cd_counter_flush_nibbles(c);
}

/* Bit j of the result is set when more than half of the values have it. */
static inline uint64_t cd_counter_result(cd_counter *c) {
    uint64_t out = 0;
    int j;
    cd_counter_flush(c);
    for (j = 0; j < 64; j++)
        if (2 * c->counts[j] > c->total) out |= (uint64_t)1 << j;
    return out;
}

/* ----------------------------------------------------- character classes */
/* A str's code points without the GIL. */
typedef struct {
    int kind;
    const void *data;
    Py_ssize_t length;
    int lower;         /* lower-case while reading (see cd_lower) */
} cd_text;

static inline Py_UCS4 cd_text_at(const cd_text *t, Py_ssize_t i) {
    if (t->kind == PyUnicode_1BYTE_KIND) return ((const Py_UCS1 *)t->data)[i];
    if (t->kind == PyUnicode_2BYTE_KIND) return ((const Py_UCS2 *)t->data)[i];
    return ((const Py_UCS4 *)t->data)[i];
}

/* str.lower() one code point at a time.  Python's full case mapping turns
 * every code point into exactly one, its simple lowercase, except U+0130
 * (two code points) and U+03A3 (final sigma depends on the neighbours):
 * cd_lower_special says when the caller must use str.lower() instead.  The
 * test suite checks this against str.lower() for every code point. */
static inline int cd_lower_special(Py_UCS4 c) {
    return c == 0x130 || c == 0x3A3;
}

static inline Py_UCS4 cd_lower(Py_UCS4 c) {
    if (c < 128) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    return Py_UNICODE_TOLOWER(c);
}

#define CD_NEEDS_PY_LOWER (-2)

/* re's \w on str patterns: str.isalnum() or '_' (sre's SRE_UNI_IS_WORD). */
static inline int cd_is_word(Py_UCS4 c) {
    if (c < 128)
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
               c == '_';
    return Py_UNICODE_ISALNUM(c) != 0;
}

/* Scripts written without spaces between words, cut into character n-grams
 * by the "auto" tokenizer: CJK ideographs (all blocks and extensions, and
 * compatibility ideographs), kana, Thai, Lao, Khmer and Myanmar.  Hangul is
 * written with spaces and is left to the word tokenizer.  Keep in sync with
 * _reference._UNSPACED. */
static inline int cd_is_unspaced(Py_UCS4 c) {
    if (c < 0x0E00) return 0;
    if (c >= 0x4E00 && c <= 0x9FFF) return 1;   /* CJK unified ideographs, the common case */
    return (c <= 0x0EFF) ||                     /* Thai, Lao */
           (c >= 0x1000 && c <= 0x109F) ||     /* Myanmar */
           (c >= 0x1780 && c <= 0x17FF) ||     /* Khmer */
           (c >= 0x3040 && c <= 0x30FF) ||     /* Hiragana, Katakana */
           (c >= 0x31F0 && c <= 0x31FF) ||     /* Katakana phonetic extensions */
           (c >= 0x3400 && c <= 0x4DBF) ||     /* CJK extension A */
           (c >= 0xF900 && c <= 0xFAFF) ||     /* CJK compatibility ideographs */
           (c >= 0x20000 && c <= 0x3FFFF);     /* CJK extensions B.., planes 2-3 */
}

/* Lowercase and word-character flag of the code points below 256, from the
 * functions above (filled once by cd_simhash_init; the lowercase of a
 * Latin-1 character is Latin-1). */
typedef struct {
    uint8_t lower;
    uint8_t word;
} cd_latin1_class;

static cd_latin1_class cd_latin1[256];

static void cd_simhash_init(void) {
    Py_UCS4 c;
    for (c = 0; c < 256; c++) {
        Py_UCS4 lc = cd_lower(c);
        cd_latin1[c].lower = (uint8_t)(lc < 256 ? lc : c);
        cd_latin1[c].word = (uint8_t)cd_is_word(c);
    }
}

/* Code point i, lower-cased when t->lower (scripts without case skip the
 * lookup; the caller has checked cd_lower_special). */
static inline Py_UCS4 cd_text_get(const cd_text *t, Py_ssize_t i) {
    Py_UCS4 c = cd_text_at(t, i);
    if (t->lower && (c < 128 || !cd_is_unspaced(c))) c = cd_lower(c);
    return c;
}

/* ----------------------------------------------------- feature hash sets */
/* Distinct 64-bit feature hashes of one document (open addressing, linear
 * probing, grows at half load).  0 marks an empty slot; the hash 0 itself is
 * tracked by a flag. */
typedef struct {
    uint64_t *slots;
    size_t mask;      /* capacity - 1, capacity a power of two */
    size_t used;
    int has_zero;
} cd_hashset;

static inline int cd_hashset_init(cd_hashset *s, size_t capacity) {
    size_t cap = 64;
    while (cap < capacity) cap <<= 1;
    s->slots = (uint64_t *)calloc(cap, sizeof(uint64_t));
    if (!s->slots) return -1;
    s->mask = cap - 1;
    s->used = 0;
    s->has_zero = 0;
    return 0;
}

static inline void cd_hashset_clear(cd_hashset *s) {
    if (s->used) memset(s->slots, 0, (s->mask + 1) * sizeof(uint64_t));
    s->used = 0;
    s->has_zero = 0;
}

static inline void cd_hashset_free(cd_hashset *s) {
    free(s->slots);
    s->slots = NULL;
}

static int cd_hashset_grow(cd_hashset *s) {
    size_t cap = (s->mask + 1) * 2, i;
    uint64_t *old = s->slots, *slots = (uint64_t *)calloc(cap, sizeof(uint64_t));
    if (!slots) return -1;
    for (i = 0; i <= s->mask; i++) {
        uint64_t h = old[i];
        if (h) {
            size_t j = (size_t)(h >> 7) & (cap - 1);   /* low bits feed the counters */
            while (slots[j]) j = (j + 1) & (cap - 1);
            slots[j] = h;
        }
    }
    free(old);
    s->slots = slots;
    s->mask = cap - 1;
    return 0;
}

/* 1 when h was new, 0 when already present, -1 when out of memory. */
static inline int cd_hashset_add(cd_hashset *s, uint64_t h) {
    size_t j;
    if (h == 0) {
        if (s->has_zero) return 0;
        s->has_zero = 1;
        return 1;
    }
    j = (size_t)(h >> 7) & s->mask;
    while (s->slots[j]) {
        if (s->slots[j] == h) return 0;
        j = (j + 1) & s->mask;
    }
    s->slots[j] = h;
    if (++s->used * 2 > s->mask + 1 && cd_hashset_grow(s) < 0) return -1;
    return 1;
}

/* ------------------------------------------------------ our tokenizers */
#define CD_TOK_AUTO 0
#define CD_TOK_WORDS 1
#define CD_TOK_CHARS 2
#define CD_MAX_NGRAM 16

/* Per-document scratch, reused across the documents of a batch.  The
 * tokenizers stream: only the last n words (as index ranges into the text)
 * and the last n characters of the character stream are kept, so memory does
 * not grow with the text (only the set of distinct features does). */
typedef struct {
    cd_hashset seen;
    cd_counter counter;
    Py_UCS4 units[CD_MAX_NGRAM];          /* ring: the last characters */
    unsigned char unit_utf8[CD_MAX_NGRAM][4];  /* ... their UTF-8, zero-padded */
    unsigned char unit_len[CD_MAX_NGRAM];      /* ... and its length */
    uint32_t unit_word[CD_MAX_NGRAM];          /* ... as a little-endian word */
    Py_ssize_t word_start[CD_MAX_NGRAM];  /* ring: the last words, text[start:end] */
    Py_ssize_t word_end[CD_MAX_NGRAM];
    unsigned char *buf;                   /* UTF-8 of one feature */
    size_t buf_cap;
} cd_shscratch;

static int cd_buf_reserve(cd_shscratch *s, size_t n);

static inline int cd_shscratch_init(cd_shscratch *s) {
    memset(s, 0, sizeof *s);
    cd_counter_init(&s->counter);
    if (cd_buf_reserve(s, 256) < 0) return -1;
    return cd_hashset_init(&s->seen, 1024);
}

static inline void cd_shscratch_free(cd_shscratch *s) {
    cd_hashset_free(&s->seen);
    free(s->buf);
    s->buf = NULL;
}

static int cd_buf_reserve(cd_shscratch *s, size_t n) {
    unsigned char *b;
    if (n <= s->buf_cap) return 0;
    if (n < 256) n = 256;
    b = (unsigned char *)realloc(s->buf, n);
    if (!b) return -1;
    s->buf = b;
    s->buf_cap = n;
    return 0;
}

static inline size_t cd_put_utf8(unsigned char *p, Py_UCS4 c) {
    if (c < 0x80) { p[0] = (unsigned char)c; return 1; }
    if (c < 0x800) {
        p[0] = (unsigned char)(0xC0 | (c >> 6)); p[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        p[0] = (unsigned char)(0xE0 | (c >> 12));
        p[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        p[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    p[0] = (unsigned char)(0xF0 | (c >> 18));
    p[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
    p[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    p[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

/* The low half of cd_murmur3_x64_128(p, n, seed 0) for n < 16 (no whole
 * block, only the tail), with p zero-padded to 16 bytes: the tail words are
 * then whole loads. */
static inline uint64_t cd_murmur3_short(const unsigned char *p, size_t n) {
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    uint64_t h1 = 0, h2 = 0, k1 = cd_load64le(p), k2 = cd_load64le(p + 8);
    if (n > 8) { k2 *= c2; k2 = cd_rotl64(k2, 33); k2 *= c1; h2 ^= k2; }
    if (n > 0) { k1 *= c1; k1 = cd_rotl64(k1, 31); k1 *= c2; h1 ^= k1; }
    h1 ^= (uint64_t)n; h2 ^= (uint64_t)n;
    h1 += h2; h2 += h1;
    h1 = cd_fmix64(h1); h2 = cd_fmix64(h2);
    return h1 + h2;
}

/* The UTF-8 of c as a little-endian word (first byte lowest), its length in
 * *len. */
static inline uint32_t cd_utf8_word(Py_UCS4 c, unsigned *len) {
    if (c < 0x80) { *len = 1; return c; }
    if (c < 0x800) { *len = 2; return (0xC0 | (c >> 6)) | ((0x80 | (c & 0x3F)) << 8); }
    if (c < 0x10000) {
        *len = 3;
        return (0xE0 | (c >> 12)) | ((0x80 | ((c >> 6) & 0x3F)) << 8) |
               ((0x80 | (c & 0x3F)) << 16);
    }
    *len = 4;
    return (0xF0 | (c >> 18)) | ((0x80 | ((c >> 12) & 0x3F)) << 8) |
           ((0x80 | ((c >> 6) & 0x3F)) << 16) | ((uint32_t)(0x80 | (c & 0x3F)) << 24);
}

/* cd_murmur3_short for n <= 8, the bytes given as the little-endian word k1. */
static inline uint64_t cd_murmur3_word(uint64_t k1, size_t n) {
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    uint64_t h1 = 0, h2;
    if (n > 0) { k1 *= c1; k1 = cd_rotl64(k1, 31); k1 *= c2; h1 = k1; }
    h1 ^= (uint64_t)n; h2 = (uint64_t)n;
    h1 += h2; h2 += h1;
    h1 = cd_fmix64(h1); h2 = cd_fmix64(h2);
    return h1 + h2;
}

/* Count the feature p[0:n] at every occurrence (character n-grams). */
static inline void cd_feature_tf(cd_shscratch *s, const unsigned char *p, size_t n) {
    uint64_t h1, h2;
    cd_murmur3_x64_128(p, n, 0, &h1, &h2);
    cd_counter_add(&s->counter, h1);
}

/* Count the feature p[0:n] once per document (word n-grams).  p has at
 * least 16 bytes, zero after the feature when n < 16. */
static inline int cd_feature(cd_shscratch *s, const unsigned char *p, size_t n) {
    uint64_t h1, h2;
    int r;
    if (n < 16) h1 = cd_murmur3_short(p, n);
    else cd_murmur3_x64_128(p, n, 0, &h1, &h2);
    r = cd_hashset_add(&s->seen, h1);
    if (r > 0) cd_counter_add(&s->counter, h1);
    return r < 0 ? -1 : 0;
}

/* The character n-gram made of the last n characters seen (m in all). */
static inline void cd_push_unit(cd_shscratch *s, size_t m, Py_UCS4 c) {
    size_t slot = m % CD_MAX_NGRAM;
    s->units[slot] = c;
    memset(s->unit_utf8[slot], 0, 4);
    s->unit_len[slot] = (unsigned char)cd_put_utf8(s->unit_utf8[slot], c);
    s->unit_word[slot] = (uint32_t)s->unit_utf8[slot][0] |
                         ((uint32_t)s->unit_utf8[slot][1] << 8) |
                         ((uint32_t)s->unit_utf8[slot][2] << 16) |
                         ((uint32_t)s->unit_utf8[slot][3] << 24);
}

static inline int cd_emit_chars(cd_shscratch *s, size_t m, size_t n) {
    unsigned char b[4 * CD_MAX_NGRAM + 4];
    size_t len = 0, k;
    if (n == 2) {   /* the default: two characters of up to 4 bytes each */
        size_t a = (m - 2) % CD_MAX_NGRAM, z = (m - 1) % CD_MAX_NGRAM;
        len = (size_t)s->unit_len[a] + s->unit_len[z];
        if (len <= 8) {
            uint64_t word = (uint64_t)s->unit_word[a] |
                            ((uint64_t)s->unit_word[z] << (8 * s->unit_len[a]));
            cd_counter_add(&s->counter, cd_murmur3_word(word, len));
            return 0;
        }
        len = 0;
    }
    if (n <= 4) {
        /* At most 16 bytes: copy each character's zero-padded 4 bytes (the
         * next one overwrites the padding) and hash with whole-word loads. */
        memset(b, 0, 16);
        for (k = m - n; k < m; k++) {
            memcpy(b + len, s->unit_utf8[k % CD_MAX_NGRAM], 4);
            len += s->unit_len[k % CD_MAX_NGRAM];
        }
        if (len < 16) {
            cd_counter_add(&s->counter, cd_murmur3_short(b, len));
            return 0;
        }
        len = 0;
    }
    for (k = m - n; k < m; k++) len += cd_put_utf8(b + len, s->units[k % CD_MAX_NGRAM]);
    cd_feature_tf(s, b, len);
    return 0;
}

/* The word n-gram made of the last n words seen (nw in all), joined by one
 * space. */
static int cd_emit_words(cd_shscratch *s, const cd_text *t, Py_ssize_t nw, int n) {
    Py_ssize_t k, j;
    size_t len = 0, need = 0;
    for (k = nw - n; k < nw; k++)
        need += 4 * (size_t)(s->word_end[k % CD_MAX_NGRAM] - s->word_start[k % CD_MAX_NGRAM]) + 1;
    if (cd_buf_reserve(s, need + 16) < 0) return -1;
    memset(s->buf, 0, 16);
    for (k = nw - n; k < nw; k++) {
        if (k > nw - n) s->buf[len++] = ' ';
        for (j = s->word_start[k % CD_MAX_NGRAM]; j < s->word_end[k % CD_MAX_NGRAM]; j++)
            len += cd_put_utf8(s->buf + len, cd_text_get(t, j));
    }
    return cd_feature(s, s->buf, len);
}

#if defined(_MSC_VER)
#define CD_ALWAYS_INLINE __forceinline
#elif defined(__GNUC__) || defined(__clang__)
#define CD_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define CD_ALWAYS_INLINE inline
#endif

/* The scan of cd_simhash_text for one storage kind (a constant after
 * inlining, so each kind gets its own loop without a per-character switch).
 * Word unigrams, the default, are encoded into s->buf while scanning and
 * hashed when the word ends; longer word n-grams are re-read from the text. */
static CD_ALWAYS_INLINE int cd_simhash_scan(cd_shscratch *s, const cd_text *t, const int kind,
                                            int mode, int word_n, int char_n) {
    Py_ssize_t i, m = 0, nw = 0, start = -1;
    size_t wlen = 0;
    const int unigrams = (word_n == 1);
    const int bigrams = (mode == CD_TOK_AUTO && char_n == 2);
    uint64_t prev_word = 0;
    unsigned prev_len = 0;
    const Py_ssize_t length = t->length;
    for (i = 0; i <= length; i++) {
        Py_UCS4 c;
        int caseless, unspaced, word;
        if (i == length) c = ' ';   /* a final separator */
        else if (kind == PyUnicode_1BYTE_KIND) c = ((const Py_UCS1 *)t->data)[i];
        else if (kind == PyUnicode_2BYTE_KIND) c = ((const Py_UCS2 *)t->data)[i];
        else c = ((const Py_UCS4 *)t->data)[i];
        if (c < 256) {              /* Latin-1: one table lookup */
            caseless = unspaced = 0;
            if (t->lower) c = cd_latin1[c].lower;
            word = cd_latin1[c].word;
        } else {
            caseless = c >= 0x0E00 && cd_is_unspaced(c);
            unspaced = (mode == CD_TOK_AUTO) && caseless;
            if (t->lower && !caseless) {
                if (cd_lower_special(c)) return CD_NEEDS_PY_LOWER;
                c = cd_lower(c);
            }
            word = !unspaced && cd_is_word(c);
        }
        if (mode == CD_TOK_CHARS) {
            if (word) {
                cd_push_unit(s, (size_t)m++, c);
                if (m >= char_n) cd_emit_chars(s, (size_t)m, (size_t)char_n);
            }
            continue;
        }
        if (word) {
            if (start < 0) {
                start = i;
                wlen = 0;
                if (unigrams) memset(s->buf, 0, 16);   /* see cd_feature */
            }
            if (unigrams) {
                if (wlen + 4 > s->buf_cap && cd_buf_reserve(s, 2 * (wlen + 4)) < 0) return -1;
                wlen += cd_put_utf8(s->buf + wlen, c);
            }
        } else if (start >= 0) {
            if (unigrams) {
                if (cd_feature(s, s->buf, wlen) < 0) return -1;
            } else {
                s->word_start[nw % CD_MAX_NGRAM] = start;
                s->word_end[nw % CD_MAX_NGRAM] = i;
                nw++;
                if (nw >= word_n && cd_emit_words(s, t, nw, word_n) < 0) return -1;
            }
            start = -1;
        }
        if (unspaced) {
            if (bigrams) {
                /* The default: each bigram from the previous character's
                 * UTF-8 word and this one's, in registers. */
                unsigned len;
                uint32_t w = cd_utf8_word(c, &len);
                if (m++) cd_counter_add(&s->counter, cd_murmur3_word(
                    prev_word | ((uint64_t)w << (8 * prev_len)), prev_len + len));
                prev_word = w;
                prev_len = len;
            } else {
                cd_push_unit(s, (size_t)m++, c);
                if (m >= char_n) cd_emit_chars(s, (size_t)m, (size_t)char_n);
            }
        }
    }
    if (nw > 0 && nw < word_n && cd_emit_words(s, t, nw, (int)nw) < 0) return -1;
    if (bigrams && m == 1) cd_counter_add(&s->counter, cd_murmur3_word(prev_word, prev_len));
    else if (m > 0 && m < char_n) cd_emit_chars(s, (size_t)m, (size_t)m);
    return 0;
}

/* The fingerprint of a text (lower-cased while reading when t->lower); -1 on
 * out of memory, CD_NEEDS_PY_LOWER when the text must be lower-cased by
 * str.lower() first (then *out is untouched).  See _reference.simhash_text
 * for the definition: word n-grams over the words, character n-grams over the
 * character stream, the whole sequence as one feature when it is shorter
 * than n. */
static int cd_simhash_text(cd_shscratch *s, const cd_text *t, int mode, int word_n,
                           int char_n, uint64_t *out) {
    int rc;
    cd_hashset_clear(&s->seen);
    cd_counter_init(&s->counter);
    if (t->kind == PyUnicode_1BYTE_KIND)
        rc = cd_simhash_scan(s, t, PyUnicode_1BYTE_KIND, mode, word_n, char_n);
    else if (t->kind == PyUnicode_2BYTE_KIND)
        rc = cd_simhash_scan(s, t, PyUnicode_2BYTE_KIND, mode, word_n, char_n);
    else
        rc = cd_simhash_scan(s, t, PyUnicode_4BYTE_KIND, mode, word_n, char_n);
    if (rc < 0) return rc;
    *out = cd_counter_result(&s->counter);
    return 0;
}

/* ------------------------------------------- the `simhash` package's text */
/* simhash 2.1.x, Simhash(text, f): lower-case (done by the caller with
 * str.lower()), keep the characters matching [\w\u4e00-\u9fcc], slide a
 * 4-character window over them (one window, the whole string, when fewer
 * than 4 remain), hash each window's UTF-8 with MD5 and keep the last f/8
 * bytes big-endian, and set bit j when more than half of the windows have it.
 * The package counts distinct windows and weights them by count, which adds
 * up to the same per-bit sums.  8 <= f <= 128, f a multiple of 8.
 * Returns -1 on out of memory; the value in (*hi, *lo). */
#define CD_LEON_WIDTH 4

static inline int cd_leon_keep(Py_UCS4 c) {
    return cd_is_word(c) || (c >= 0x4E00 && c <= 0x9FCC);
}

typedef struct {
    int64_t counts[128];
    int64_t total;
} cd_leon_acc;

static inline void cd_leon_add(cd_leon_acc *acc, uint64_t hi, uint64_t lo, int f,
                               int64_t w) {
    int j;
    int nlo = f < 64 ? f : 64;
    for (j = 0; j < nlo; j++) acc->counts[j] += (int64_t)((lo >> j) & 1) * w;
    for (j = 64; j < f; j++) acc->counts[j] += (int64_t)((hi >> (j - 64)) & 1) * w;
}

static inline void cd_leon_result(const cd_leon_acc *acc, int f, uint64_t *hi, uint64_t *lo) {
    int j;
    *hi = 0; *lo = 0;
    for (j = 0; j < f; j++) {
        if (2 * acc->counts[j] > acc->total) {
            if (j < 64) *lo |= (uint64_t)1 << j;
            else *hi |= (uint64_t)1 << (j - 64);
        }
    }
}

/* One window (w[0:len] code points) into the MD5 lanes; runs the lanes when
 * full. */
typedef struct {
    uint32_t X[16][CD_MD5_LANES];
    int lane;
    int f;
    cd_counter lo, hi;
} cd_leon_run;

static void cd_leon_flush(cd_leon_run *r) {
    uint32_t st[4][CD_MD5_LANES];
    int l;
    if (!r->lane) return;
    cd_md5_lanes(r->X, st);
    for (l = 0; l < r->lane; l++) {
        uint32_t s4[4] = {st[0][l], st[1][l], st[2][l], st[3][l]};
        uint64_t h, g;
        cd_md5_be(s4, &h, &g);
        cd_counter_add(&r->lo, g);
        if (r->f > 64) cd_counter_add(&r->hi, h);
    }
    r->lane = 0;
}

static inline uint32_t cd_load32le(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

/* The window made of the last `width` kept characters (their UTF-8 cached,
 * zero-padded to 4 bytes, in utf8/ulen rings).  A window is at most 16
 * bytes, so its padded block has data in words 0-4 and its bit length in
 * word 14; the other words stay 0 (set once in cd_leon_text). */
static void cd_leon_window(cd_leon_run *r, unsigned char (*utf8)[4], const unsigned char *ulen,
                           Py_ssize_t m, int width) {
    unsigned char b[24];
    size_t len = 0;
    Py_ssize_t k;
    int w;
    memset(b, 0, sizeof b);
    for (k = m - width; k < m; k++) {
        memcpy(b + len, utf8[k % CD_LEON_WIDTH], 4);
        len += ulen[k % CD_LEON_WIDTH];
    }
    b[len] = 0x80;
    for (w = 0; w < 5; w++) r->X[w][r->lane] = cd_load32le(b + 4 * w);
    r->X[14][r->lane] = (uint32_t)(len << 3);
    if (++r->lane == CD_MD5_LANES) cd_leon_flush(r);
}

static int cd_leon_text(const cd_text *t, int f, uint64_t *hi, uint64_t *lo) {
    unsigned char utf8[CD_LEON_WIDTH][4], ulen[CD_LEON_WIDTH];
    Py_ssize_t i, m = 0;
    cd_leon_run r;
    int j;
    memset(r.X, 0, sizeof r.X);
    r.lane = 0;
    r.f = f;
    cd_counter_init(&r.lo);
    cd_counter_init(&r.hi);
    for (i = 0; i < t->length; i++) {
        Py_UCS4 c = cd_text_at(t, i);
        if (t->lower && !(c >= 0x4E00 && c <= 0x9FCC)) {
            if (cd_lower_special(c)) return CD_NEEDS_PY_LOWER;
            c = cd_lower(c);
        }
        if (cd_leon_keep(c)) {
            Py_ssize_t slot = m % CD_LEON_WIDTH;
            memset(utf8[slot], 0, 4);
            ulen[slot] = (unsigned char)cd_put_utf8(utf8[slot], c);
            m++;
            if (m >= CD_LEON_WIDTH) cd_leon_window(&r, utf8, ulen, m, CD_LEON_WIDTH);
        }
    }
    if (m < CD_LEON_WIDTH) cd_leon_window(&r, utf8, ulen, m, (int)m);  /* possibly empty */
    cd_leon_flush(&r);
    cd_counter_flush(&r.lo);
    cd_counter_flush(&r.hi);
    *hi = 0; *lo = 0;
    for (j = 0; j < f; j++) {
        if (j < 64 && 2 * r.lo.counts[j] > r.lo.total) *lo |= (uint64_t)1 << j;
        if (j >= 64 && 2 * r.hi.counts[j - 64] > r.lo.total) *hi |= (uint64_t)1 << (j - 64);
    }
    return 0;
}

/* The features path of the `simhash` package with integer weights: feature i
 * (UTF-8 in data[offsets[i]:offsets[i+1]]) adds max(w, 0) to the sum of each
 * of its bits (the package repeats the digest w times, and a bytes object
 * repeated w <= 0 times is empty) and w to the total.  The caller keeps the
 * sums within int64. */
static void cd_leon_features(const unsigned char *data, const int64_t *offsets,
                             const int64_t *weights, Py_ssize_t n, int f, int64_t total,
                             uint64_t *hi, uint64_t *lo) {
    cd_leon_acc acc;
    Py_ssize_t i;
    memset(&acc, 0, sizeof acc);
    for (i = 0; i < n; i++) {
        uint32_t st[4];
        uint64_t h, g;
        int64_t w = weights[i] > 0 ? weights[i] : 0;
        cd_md5_words(data + offsets[i], (size_t)(offsets[i + 1] - offsets[i]), st);
        cd_md5_be(st, &h, &g);
        cd_leon_add(&acc, h, g, f, w);
    }
    acc.total = total;
    cd_leon_result(&acc, f, hi, lo);
}

#endif
