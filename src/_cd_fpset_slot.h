/* The digests of crawldedup.FingerprintSet as keys and slots (the layout
 * _cd_fpset.h describes): the table's sizes, the hash of a digest, its key
 * form (h, then its words), a slot's bytes, and the order of keys.  Included
 * by _cd_fpset.h.  No Python here: everything runs without the GIL.
 */
#ifndef CD_FPSET_SLOT_H
#define CD_FPSET_SLOT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_cd_support.h"

#define CD_FP_MAX_DIGEST 64
/* A digest in key form: h, then its nw words (the last zero-padded). */
#define CD_FP_MAX_KEY (CD_FP_MAX_DIGEST / 8 + 1)
#define CD_FP_MIN_SLOTS 16
/* Slots moved per single add while growing: a growth of n slots ends after
 * n / 64 adds, long before the next one (the set grows by 1/8 in between),
 * and the digests added meanwhile raise the old table's load by < 2%. */
#define CD_FP_MIGRATE_STEP 64
/* From this many digests on, growth is by 19/16 (dense); below, by 5/3. */
#define CD_FP_DENSE_FROM 65536
/* Tables come from cd_big_alloc: from 1 MiB on anonymous mappings, zeroed
 * lazily by the OS, so starting a growth costs no memset of the new table,
 * and the pages a growth has not reached yet take no memory. */
/* A migrating old table's memory is given back in granules of about
 * 1/512 of the table, a power of two from the page size (a huge page is
 * split for it) to 2 MiB: 512 calls and TLB flushes a growth, and little
 * held back. */
#define CD_FP_RELEASE_MAX ((size_t)2 << 20)

/* Mixing: MurmurHash3's fmix64 (cd_fmix64, _cd_support.h). */

static inline uint64_t cd_fp_word(const unsigned char* p, size_t n) {
    /* n <= 8 bytes, little-endian. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n == 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        return w;
    }
    if (n == 4) { /* the last word of a SHA-1 */
        uint32_t w;
        memcpy(&w, p, 4);
        return w;
    }
#endif
    uint64_t w = 0;
    size_t i;
    for (i = 0; i < n; i++) w |= (uint64_t)p[i] << (8 * i);
    return w;
}

static inline void cd_fp_put(unsigned char* p, uint64_t w, size_t len) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (len == 8) {
        memcpy(p, &w, 8);
        return;
    }
#endif
    size_t i;
    for (i = 0; i < len; i++) p[i] = (unsigned char)(w >> (8 * i));
}

/* h(d): fold the digest as little-endian 64-bit words (the last one
 * zero-padded) through MurmurHash3's fmix64.  h(all zero) = 0. */
static inline uint64_t cd_fp_hash(const unsigned char* d, size_t ds) {
    uint64_t acc = 0;
    size_t i = 0;
    for (; i + 8 <= ds; i += 8) acc = cd_fmix64(acc ^ cd_fp_word(d + i, 8));
    if (i < ds) acc = cd_fmix64(acc ^ cd_fp_word(d + i, ds - i));
    return acc;
}

/* The inverse of cd_fmix64 (xor-shifts by 33 undo themselves; the
 * multipliers are replaced by their inverses modulo 2**64, in reverse order). */
static inline uint64_t cd_fp_unfmix(uint64_t k) {
    return cd_xsmul33(k, 0x9cb4b2f8129337dbULL, 0x4f74430c22a54005ULL);
}

/* Bytes of word j of a ds-byte digest. */
static inline size_t cd_fp_wlen(size_t ds, size_t j) {
    return ds - 8 * j < 8 ? ds - 8 * j : 8;
}

/* Key form: key[0] = h, key[1 + j] = word j.  Comparing keys word by word
 * compares in canonical order. */
static inline void cd_fp_encode(const unsigned char* d, size_t ds, uint64_t* key) {
    size_t nw = (ds + 7) / 8, j;
    uint64_t acc = 0, w;
    for (j = 0; j < nw; j++) {
        w = cd_fp_word(d + 8 * j, cd_fp_wlen(ds, j));
        acc = cd_fmix64(acc ^ w);
        key[j + 1] = w;
    }
    key[0] = acc;
}

static inline int cd_fp_key_zero(const uint64_t* key, size_t nk) {
    size_t j;
    for (j = 0; j < nk; j++)
        if (key[j]) return 0;
    return 1;
}

/* -1, 0, 1 as a sorts before, with, after b (words compared in order). */
static inline int cd_fp_cmp(const uint64_t* a, const uint64_t* b, size_t n) {
    size_t j;
    for (j = 0; j < n; j++)
        if (a[j] != b[j]) return a[j] < b[j] ? -1 : 1;
    return 0;
}

/* The slot of a key: h, then words 1 .. nw-1 at their own lengths. */
static inline void cd_fp_store(unsigned char* slot, const uint64_t* key, size_t ds) {
    size_t nw = (ds + 7) / 8, j;
    cd_fp_put(slot, key[0], 8);
    for (j = 1; j < nw; j++) cd_fp_put(slot + 8 * j, key[j + 1], cd_fp_wlen(ds, j));
}

/* The key of a slot.  With a_0 = fmix(w0), a_j = fmix(a_(j-1) ^ w_j) and
 * h = a_(nw-1): a_(j-1) = unfmix(a_j) ^ w_j, so peeling the stored words
 * off h from the last one down leaves a_0, and w0 = unfmix(a_0). */
static inline void cd_fp_load_key(const unsigned char* slot, size_t ds, uint64_t* key) {
    size_t nw = (ds + 7) / 8, j;
    uint64_t acc = cd_fp_word(slot, 8);
    key[0] = acc;
    for (j = nw - 1; j > 0; j--) {
        key[j + 1] = cd_fp_word(slot + 8 * j, cd_fp_wlen(ds, j));
        acc = cd_fp_unfmix(acc) ^ key[j + 1];
    }
    key[1] = cd_fp_unfmix(acc);
}

static inline void cd_fp_decode(const unsigned char* slot, size_t ds, unsigned char* out) {
    uint64_t key[CD_FP_MAX_KEY];
    size_t nw = (ds + 7) / 8, j;
    cd_fp_load_key(slot, ds, key);
    for (j = 0; j < nw; j++) cd_fp_put(out + 8 * j, key[j + 1], cd_fp_wlen(ds, j));
}

/* All-zero slot: the zero digest's, kept as a flag instead (the digest is
 * zero exactly when h and the stored words are). */
static inline int cd_fp_slot_empty(const unsigned char* s, size_t ss) {
    size_t i;
    if (cd_fp_word(s, 8)) return 0;
    for (i = 8; i + 8 <= ss; i += 8)
        if (cd_fp_word(s + i, 8)) return 0;
    return i == ss || cd_fp_word(s + i, ss - i) == 0;
}

/* Slot against key in canonical order.  Equal h and equal stored words
 * make equal digests (w0 is a function of them), so w0 is decoded only to
 * order two digests of equal h. */
static inline int cd_fp_slot_cmp(const unsigned char* slot, const uint64_t* key, size_t ds) {
    uint64_t h = cd_fp_word(slot, 8), k[CD_FP_MAX_KEY];
    size_t nw = (ds + 7) / 8, j;
    if (h != key[0]) return h < key[0] ? -1 : 1;
    for (j = 1; j < nw; j++)
        if (cd_fp_word(slot + 8 * j, cd_fp_wlen(ds, j)) != key[j + 1]) break;
    if (j == nw) return 0;
    cd_fp_load_key(slot, ds, k);
    return cd_fp_cmp(k + 1, key + 1, nw);
}

static inline void cd_fp_slot_copy(unsigned char* dst, const unsigned char* src, size_t ss) {
    /* Fixed sizes inline: a library call per slot costs more than the copy. */
    switch (ss) {
    case 8: memcpy(dst, src, 8); return;
    case 16: memcpy(dst, src, 16); return;
    case 20: memcpy(dst, src, 20); return;
    case 24: memcpy(dst, src, 24); return;
    case 32: memcpy(dst, src, 32); return;
    default: memcpy(dst, src, ss);
    }
}

static inline void cd_fp_copy(uint64_t* dst, const uint64_t* src, size_t n) {
    switch (n) {
    case 1: dst[0] = src[0]; return;
    case 2: dst[0] = src[0]; dst[1] = src[1]; return;
    case 3: dst[0] = src[0]; dst[1] = src[1]; dst[2] = src[2]; return;
    case 4: dst[0] = src[0]; dst[1] = src[1]; dst[2] = src[2]; dst[3] = src[3]; return;
    default: memcpy(dst, src, n * 8);
    }
}

/* The home slot of a key: its first word mapped onto [0, nslots). */
static inline size_t cd_fp_home(uint64_t h, size_t nslots) {
    return (size_t)cd_mulhi64(h, (uint64_t)nslots);
}

/* Home slots for n digests in a table just grown or built: load 16/19
 * (what a growth at 19/20 leaves) from CD_FP_DENSE_FROM on, 3/5 below. */
static inline uint64_t cd_fp_slots_for(uint64_t n) {
    if (n < CD_FP_DENSE_FROM) return n / 3 * 5 + n % 3 * 5 / 3 + CD_FP_MIN_SLOTS;
    return n + n / 16 * 3 + n % 16 * 3 / 16 + CD_FP_MIN_SLOTS;
}

#endif /* CD_FPSET_SLOT_H */
