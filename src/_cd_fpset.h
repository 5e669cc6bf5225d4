/* The table behind crawldedup.FingerprintSet: an exact set of fixed-size
 * digests in one flat buffer.
 *
 * Layout ("ordered linear probing"): the table has `nslots` home slots plus
 * a pad of overflow slots at the end (no wrap-around).  A digest d has the
 * 64-bit hash h(d) (cd_fp_hash, written down in docs/fpset.md) and the home
 * slot mulhi(h, nslots).  Digests sit in the table in increasing canonical
 * order ((h, then the digest's little-endian words w0, w1, ...)), each at or
 * after its home slot, with no empty slot between its home and itself.  So a
 * lookup scans from the home slot and stops at an empty slot or at the first
 * digest that sorts after the one sought, and the order of the digests in
 * the table is a function of the set alone (not of the insertion order):
 * the canonical order of a set, used by iteration and files, is this order.
 *
 * A slot is max(ds, 8) bytes: h, then w1 .. w(nw-1), the last one with its
 * own length (20 bytes for a SHA-1); w0 is implied (cd_fp_load_key peels it
 * out of h).  An all-zero slot is empty; the all-zero digest, whose slot
 * that would be, is kept as a flag.  A bit per slot (occ) marks the full
 * ones, so an insertion finds the end of its run 64 slots at a time.
 *
 * Growth keeps the table dense (at most 24 bytes of slot per 20-byte
 * digest at any size): when the load would pass 19/20, a table of 19/16
 * the size (load 16/19 = 0.84) is made and the old slots move over, in
 * order, CD_FP_MIGRATE_STEP per single add.  Moving in order appends to the
 * new table, so it is written front to back while the old table's pages
 * behind the move are given back to the OS: the memory held follows the
 * data, not the sum of both tables.  Meanwhile a digest up to the last one
 * moved is looked for and added in the new table, any larger one in the
 * old table's part still to move.  Batch adds finish a migration at once.
 * Small sets (below CD_FP_DENSE_FROM digests) grow by 5/3 instead.
 *
 * No Python here: everything runs without the GIL.
 */
#ifndef CD_FPSET_H
#define CD_FPSET_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_cd_support.h"
#if !defined(_WIN32)
#include <sys/mman.h>
#include <unistd.h>
#endif

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

typedef struct {
    unsigned char* slots; /* cap * ss bytes, NULL when absent */
    size_t nslots;        /* home slots */
    size_t cap;           /* home slots + overflow pad */
    size_t bytes;
    uint64_t* occ;        /* bit i set: slot i holds a digest (ceil(cap / 64) words) */
    size_t released;      /* leading bytes given back to the OS (migrating old table) */
    size_t granule;       /* ... in pieces of this many bytes (mapped tables) */
    int mapped;
} cd_fptab;

static inline void cd_fp_occupy(uint64_t* occ, size_t i) {
    occ[i >> 6] |= (uint64_t)1 << (i & 63);
}

/* The first slot at or after i that holds no digest (cap when none): a
 * run's end, found a word of 64 slots at a time. */
static inline size_t cd_fp_next_free(const uint64_t* occ, size_t i, size_t cap) {
    size_t w = i >> 6, nwords = (cap + 63) >> 6;
    uint64_t x;
    if (i >= cap) return cap;
    x = ~occ[w] & (~(uint64_t)0 << (i & 63));
    while (!x) {
        if (++w >= nwords) return cap;
        x = ~occ[w];
    }
#if defined(__GNUC__) || defined(__clang__)
    i = w * 64 + (size_t)__builtin_ctzll(x);
#else
    i = w * 64;
    while (!(x & 1)) {
        x >>= 1;
        i++;
    }
#endif
    return i < cap ? i : cap;
}

typedef struct {
    cd_fptab cur;
    cd_fptab old; /* the table being migrated from, or slots == NULL */
    size_t mig;   /* next slot of old to move */
    size_t next;  /* while migrating: the slot after cur's largest digest (0: none) */
    size_t ds;    /* digest size */
    size_t nw;    /* words per digest; a key is nw + 1 words */
    size_t ss;    /* bytes per slot: max(ds, 8) */
    int has_zero;
    uint64_t nz; /* digests other than all-zero in the set */
} cd_fpset;

static void cd_fptab_free(cd_fptab* t) {
    cd_big_free(t->slots);
    free(t->occ);
    memset(t, 0, sizeof(*t));
}

static inline size_t cd_fptab_occ_bytes(const cd_fptab* t) {
    return t->slots ? (t->cap + 63) / 64 * 8 : 0;
}

static void cd_fptab_set_granule(cd_fptab* t) {
    size_t g = 4096;
#if !defined(_WIN32)
    long page = sysconf(_SC_PAGESIZE);
    if (page > 0) g = (size_t)page;
#endif
    while (g < CD_FP_RELEASE_MAX && g * 1024 <= t->bytes) g *= 2;
    t->granule = g;
}

/* Give the whole granules of t's memory before byte `upto` back to the OS
 * (they read as zero afterwards).  Only for a mapped table being migrated
 * from, whose slots before the migration point are never read again. */
static void cd_fptab_release_before(cd_fptab* t, size_t upto) {
#if !defined(_WIN32) && defined(MADV_DONTNEED)
    uintptr_t base, end, start;
    if (!t->mapped || upto - t->released < t->granule) return;
    base = (uintptr_t)t->slots;
    end = (base + upto) & ~(uintptr_t)(t->granule - 1);
    start = base + t->released;
    if (end > start && madvise((void*)start, end - start, MADV_DONTNEED) == 0)
        t->released = end - base;
#else
    (void)t;
    (void)upto;
#endif
}

/* 0, or -1 when out of memory (t untouched). */
static int cd_fptab_init(cd_fptab* t, size_t nslots, size_t ss) {
    size_t pad, cap;
    int mapped;
    unsigned char* p;
    if (nslots < CD_FP_MIN_SLOTS) nslots = CD_FP_MIN_SLOTS;
    /* A run can spill past the last home slot; at load 19/20 the spill is
     * a few hundred slots at most in practice (cd_fptab_extend otherwise). */
    pad = 32 + nslots / 256;
    if (nslots > (SIZE_MAX / 4) / ss) return -1;
    cap = nslots + pad;
    p = (unsigned char*)cd_big_alloc(cap * ss, 1);
    if (!p) return -1;
    mapped = cd_big_mapped(p);
    memset(t, 0, sizeof(*t));
    t->occ = (uint64_t*)calloc((cap + 63) / 64, 8);
    if (!t->occ) {
        cd_big_free(p);
        return -1;
    }
    t->slots = p;
    t->nslots = nslots;
    t->cap = cap;
    t->bytes = cap * ss;
    t->mapped = mapped;
    cd_fptab_set_granule(t);
    return 0;
}

/* Double the overflow pad (positions do not move), copying the first
 * `keep` slots (the others are empty).  0, or -1 (t untouched). */
static int cd_fptab_extend(cd_fptab* t, size_t ss, size_t keep) {
    cd_fptab bigger;
    size_t cap = t->cap + (t->cap - t->nslots) + 32;
    int mapped;
    if (cap > (SIZE_MAX / 4) / ss) return -1;
    memset(&bigger, 0, sizeof(bigger));
    bigger.occ = (uint64_t*)calloc((cap + 63) / 64, 8);
    if (!bigger.occ) return -1;
    bigger.slots = (unsigned char*)cd_big_alloc(cap * ss, 1);
    if (!bigger.slots) {
        free(bigger.occ);
        return -1;
    }
    mapped = cd_big_mapped(bigger.slots);
    memcpy(bigger.slots, t->slots, keep * ss);
    memcpy(bigger.occ, t->occ, (t->cap + 63) / 64 * 8);
    bigger.nslots = t->nslots;
    bigger.cap = cap;
    bigger.bytes = cap * ss;
    bigger.mapped = mapped;
    cd_fptab_set_granule(&bigger);
    cd_fptab_free(t);
    *t = bigger;
    return 0;
}

/* Where key is (*found = 1) or belongs (*found = 0) in t, scanning from
 * its home slot or `from`, whichever is later; may be t->cap. */
static inline size_t cd_fptab_seek(const cd_fptab* t, size_t from, size_t ss, size_t ds,
                                   const uint64_t* key, int* found) {
    uint64_t h = key[0];
    size_t i = cd_fp_home(h, t->nslots);
    const unsigned char* p;
    if (i < from) i = from;
    p = t->slots + i * ss;
    *found = 0;
    for (; i < t->cap; i++, p += ss) {
        uint64_t sh = cd_fp_word(p, 8);
        int c;
        if (sh < h) {
            if (sh == 0 && cd_fp_slot_empty(p, ss)) break;
            continue;
        }
        if (sh > h) break;
        if (h == 0 && cd_fp_slot_empty(p, ss)) break;
        c = cd_fp_slot_cmp(p, key, ds);
        if (c == 0) {
            *found = 1;
            break;
        }
        if (c > 0) break;
    }
    return i;
}

/* Put key at pos, shifting the rest of its run one slot on; *end = the
 * slot the run now ends at.  0, or 1 when the run reaches the end of the
 * pad (nothing changed; extend and retry). */
static inline int cd_fptab_place(cd_fptab* t, size_t ss, size_t ds, const uint64_t* key,
                                 size_t pos, size_t* end) {
    /* The run's end, from the occupancy bits: at a load near 19/20 it is
     * tens of slots on, too far to look for in the slots themselves. */
    size_t e = cd_fp_next_free(t->occ, pos, t->cap);
    if (e >= t->cap) return 1;
    if (e > pos) memmove(t->slots + (pos + 1) * ss, t->slots + pos * ss, (e - pos) * ss);
    cd_fp_store(t->slots + pos * ss, key, ds);
    cd_fp_occupy(t->occ, e);
    *end = e;
    return 0;
}

/* Copy the digests of src (in canonical order) into the empty table dst:
 * each goes to its home slot or the slot after the previous one. */
static int cd_fptab_append_all(cd_fptab* dst, const cd_fptab* src, size_t ss) {
    size_t i, pos, next = 0;
    const unsigned char* k = src->slots;
    for (i = 0; i < src->cap; i++, k += ss) {
        if (cd_fp_slot_empty(k, ss)) continue;
        pos = cd_fp_home(cd_fp_word(k, 8), dst->nslots);
        if (pos < next) pos = next;
        while (pos >= dst->cap)
            if (cd_fptab_extend(dst, ss, next)) return -1;
        cd_fp_slot_copy(dst->slots + pos * ss, k, ss);
        cd_fp_occupy(dst->occ, pos);
        next = pos + 1;
    }
    return 0;
}

static int cd_fpset_init(cd_fpset* s, size_t ds) {
    memset(s, 0, sizeof(*s));
    s->ds = ds;
    s->nw = (ds + 7) / 8;
    s->ss = ds < 8 ? 8 : ds;
    return cd_fptab_init(&s->cur, CD_FP_MIN_SLOTS, s->ss);
}

static void cd_fpset_free(cd_fpset* s) {
    cd_fptab_free(&s->cur);
    cd_fptab_free(&s->old);
    s->mig = 0;
    s->next = 0;
    s->nz = 0;
    s->has_zero = 0;
}

/* Bytes of memory the tables hold: while migrating, the new table only up
 * to where it has been written (a mapped table's later pages are not
 * touched yet) and the old one without the part given back.  The OS
 * counts whole pages: up to a page (a huge page) more per table. */
static size_t cd_fpset_nbytes(const cd_fpset* s) {
    size_t cur = s->cur.bytes, occ = cd_fptab_occ_bytes(&s->cur) + cd_fptab_occ_bytes(&s->old);
    if (!s->old.slots) return cur + occ;
    if (s->cur.mapped && s->next * s->ss < cur) cur = s->next * s->ss;
    return cur + (s->old.bytes - s->old.released) + occ;
}

/* Move up to steps slots of the old table over: appended to cur, since
 * everything in cur sorts before them.  0, or -1 (out of memory; the
 * state stays consistent: the slot not moved is still in old). */
#if defined(__GNUC__) || defined(__clang__)
#define CD_FP_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define CD_FP_ALWAYS_INLINE inline
#endif

/* The moving loop, inlined with a constant ss for the common sizes (a
 * growth moves every slot, about 9 per add: the copy must be plain). */
static CD_FP_ALWAYS_INLINE int cd_fpset_move(cd_fpset* s, size_t steps, size_t ss) {
    size_t mig = s->mig, end = s->old.cap, next = s->next;
    const unsigned char* k = s->old.slots + mig * ss;
    int r = 0;
    if (steps < end - mig) end = mig + steps;
    for (; mig < end; mig++, k += ss) {
        if (!cd_fp_slot_empty(k, ss)) {
            size_t pos = cd_fp_home(cd_fp_word(k, 8), s->cur.nslots);
            if (pos < next) pos = next;
            if (pos >= s->cur.cap) {
                while (pos >= s->cur.cap && !(r = cd_fptab_extend(&s->cur, ss, next)))
                    ;
                if (r) break;
            }
            memcpy(s->cur.slots + pos * ss, k, ss);
            cd_fp_occupy(s->cur.occ, pos);
            next = pos + 1;
        }
        if ((mig & 4095) == 4095) {
            s->mig = mig + 1;
            cd_fptab_release_before(&s->old, (mig + 1) * ss);
        }
    }
    s->mig = mig;
    s->next = next;
    return r ? -1 : 0;
}

static int cd_fpset_migrate(cd_fpset* s, size_t steps) {
    size_t ss = s->ss;
    int r;
    if (!s->old.slots) return 0;
    switch (ss) {
    case 8: r = cd_fpset_move(s, steps, 8); break;
    case 16: r = cd_fpset_move(s, steps, 16); break;
    case 20: r = cd_fpset_move(s, steps, 20); break;
    case 32: r = cd_fpset_move(s, steps, 32); break;
    default: r = cd_fpset_move(s, steps, ss);
    }
    if (r) return -1;
    if (s->mig >= s->old.cap) {
        cd_fptab_free(&s->old);
        s->mig = 0;
        s->next = 0;
    } else {
        cd_fptab_release_before(&s->old, s->mig * ss);
    }
    return 0;
}

/* While migrating: does key belong in old (it sorts after the last digest
 * moved, cur[next - 1]) rather than in cur? */
static inline int cd_fpset_in_old(const cd_fpset* s, const uint64_t* key) {
    if (!s->old.slots) return 0;
    if (s->next == 0) return 1;
    return cd_fp_slot_cmp(s->cur.slots + (s->next - 1) * s->ss, key, s->ds) < 0;
}

/* Where key is or belongs: in old (*in_old = 1; scanning from the
 * migration point) or in cur. */
static inline size_t cd_fpset_seek(const cd_fpset* s, const uint64_t* key, int* in_old,
                                   int* found) {
    *in_old = cd_fpset_in_old(s, key);
    if (*in_old) return cd_fptab_seek(&s->old, s->mig, s->ss, s->ds, key, found);
    return cd_fptab_seek(&s->cur, 0, s->ss, s->ds, key, found);
}

/* Put key at pos in cur (extending the pad as needed).  0, or -1. */
static int cd_fpset_put_cur(cd_fpset* s, const uint64_t* key, size_t pos) {
    size_t end;
    while (cd_fptab_place(&s->cur, s->ss, s->ds, key, pos, &end))
        if (cd_fptab_extend(&s->cur, s->ss, s->old.slots ? s->next : s->cur.cap)) return -1;
    /* cur's largest digest may have moved one slot on */
    if (s->old.slots && end >= s->next) s->next = end + 1;
    return 0;
}

/* Move the set to a new table of `want` home slots, at once or (incremental)
 * over the next adds, CD_FP_MIGRATE_STEP slots each.  No migration may be
 * under way.  0, or -1 out of memory (the set unchanged). */
static int cd_fpset_resize(cd_fpset* s, uint64_t want, int incremental) {
    cd_fptab fresh;
    if (want > SIZE_MAX / 4) return -1;
    memset(&fresh, 0, sizeof(fresh));
    if (cd_fptab_init(&fresh, (size_t)want, s->ss)) return -1;
    if (!incremental) {
        if (cd_fptab_append_all(&fresh, &s->cur, s->ss)) {
            cd_fptab_free(&fresh);
            return -1;
        }
        cd_fptab_free(&s->cur);
        s->cur = fresh;
        return 0;
    }
    s->old = s->cur;
    s->cur = fresh;
    s->mig = 0;
    s->next = 0;
    return 0;
}

static int cd_fpset_grow(cd_fpset* s, int incremental) {
    if (cd_fpset_migrate(s, SIZE_MAX)) return -1;
    return cd_fpset_resize(s, cd_fp_slots_for(s->nz), incremental);
}

/* Room for n digests in all: the table is made as large as a growth to n
 * digests would leave it (load 16/19), so adding up to n grows it no more.
 * A table already that large is left as it is.  0, or -1 out of memory
 * (the set unchanged). */
static int cd_fpset_reserve(cd_fpset* s, uint64_t n) {
    uint64_t want;
    if (n > SIZE_MAX / 8) return -1;
    if (cd_fpset_migrate(s, SIZE_MAX)) return -1;
    want = cd_fp_slots_for(n);
    if (want <= s->cur.nslots) return 0;
    return cd_fpset_resize(s, want, 0);
}

/* Add a digest in key form.  1 when new, 0 when present, -1 out of
 * memory (not added). */
static int cd_fpset_add_enc(cd_fpset* s, const uint64_t* key, int incremental) {
    size_t pos, end;
    int found, in_old;
    if (cd_fp_key_zero(key, s->nw + 1)) {
        if (s->has_zero) return 0;
        s->has_zero = 1;
        return 1;
    }
    if (s->old.slots && cd_fpset_migrate(s, incremental ? CD_FP_MIGRATE_STEP : SIZE_MAX))
        return -1;
    pos = cd_fpset_seek(s, key, &in_old, &found);
    if (found) return 0;
    if ((s->nz + 1) * 20 > (uint64_t)s->cur.nslots * 19) {
        if (cd_fpset_grow(s, incremental)) return -1;
        /* The key is in neither table: seek its place again. */
        pos = cd_fpset_seek(s, key, &in_old, &found);
    }
    if (in_old) {
        if (!cd_fptab_place(&s->old, s->ss, s->ds, key, pos, &end)) {
            s->nz++;
            return 1;
        }
        /* The run reaches the end of old's pad: finish the migration
         * rather than enlarge the old table. */
        if (cd_fpset_migrate(s, SIZE_MAX)) return -1;
        pos = cd_fptab_seek(&s->cur, 0, s->ss, s->ds, key, &found);
    }
    if (cd_fpset_put_cur(s, key, pos)) return -1;
    s->nz++;
    return 1;
}

static inline int cd_fpset_has_enc(const cd_fpset* s, const uint64_t* key) {
    int found, in_old;
    if (cd_fp_key_zero(key, s->nw + 1)) return s->has_zero;
    cd_fpset_seek(s, key, &in_old, &found);
    return found;
}

static int cd_fpset_add(cd_fpset* s, const unsigned char* key, int incremental) {
    uint64_t enc[CD_FP_MAX_KEY];
    cd_fp_encode(key, s->ds, enc);
    return cd_fpset_add_enc(s, enc, incremental);
}

static int cd_fpset_has(const cd_fpset* s, const unsigned char* key) {
    uint64_t enc[CD_FP_MAX_KEY];
    cd_fp_encode(key, s->ds, enc);
    return cd_fpset_has_enc(s, enc);
}

/* ---- batch add by sorting and merging ----
 * A batch that is large next to the set is added by sorting it (records of
 * the key words plus the key's index, bucketed by the top bits of h, the
 * buckets then sorted by (key, index)) and merging it with the table into
 * a new table in one sequential pass: no random probes, no shifting.  The
 * first occurrence of a repeated digest is the one reported new, as in the
 * one-by-one path. */
#define CD_FP_MERGE_MIN 1024

static void cd_fp_rec_swap(uint64_t* x, uint64_t* y, size_t rs) {
    size_t j;
    for (j = 0; j < rs; j++) {
        uint64_t tmp = x[j];
        x[j] = y[j];
        y[j] = tmp;
    }
}

static void cd_fp_heap_sift(uint64_t* r, size_t root, size_t cnt, size_t rs) {
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= cnt) return;
        if (child + 1 < cnt && cd_fp_cmp(r + child * rs, r + (child + 1) * rs, rs) < 0) child++;
        if (cd_fp_cmp(r + root * rs, r + child * rs, rs) >= 0) return;
        cd_fp_rec_swap(r + root * rs, r + child * rs, rs);
        root = child;
    }
}

/* Key words, then the index: comparing all rs words orders by (key, idx). */
static void cd_fp_sort_bucket(uint64_t* r, size_t cnt, size_t rs) {
    size_t i, j;
    uint64_t tmp[CD_FP_MAX_KEY + 1];
    if (cnt > 48) { /* heapsort: O(cnt log cnt) whatever the input */
        for (i = cnt / 2; i-- > 0;) cd_fp_heap_sift(r, i, cnt, rs);
        for (i = cnt; i-- > 1;) {
            cd_fp_rec_swap(r, r + i * rs, rs);
            cd_fp_heap_sift(r, 0, i, rs);
        }
        return;
    }
    for (i = 1; i < cnt; i++) {
        if (cd_fp_cmp(r + (i - 1) * rs, r + i * rs, rs) <= 0) continue;
        memcpy(tmp, r + i * rs, rs * 8);
        j = i;
        while (j > 0 && cd_fp_cmp(r + (j - 1) * rs, tmp, rs) > 0) {
            memcpy(r + j * rs, r + (j - 1) * rs, rs * 8);
            j--;
        }
        memcpy(r + j * rs, tmp, rs * 8);
    }
}

/* Stable counting sort of cnt records from src into dst by the `bits` bits
 * of h below its top `shift` bits; bounds[k] = end of group k in dst. */
static void cd_fp_radix_pass(const uint64_t* src, uint64_t* dst, size_t cnt, size_t rs,
                             unsigned shift, unsigned bits, size_t* bounds) {
    size_t i, nb = (size_t)1 << bits, sum = 0;
    uint64_t mask = ((uint64_t)1 << bits) - 1;
    unsigned down = 64 - shift - bits;
    memset(bounds, 0, nb * sizeof(size_t));
    for (i = 0; i < cnt; i++) bounds[(src[i * rs] >> down) & mask]++;
    for (i = 0; i < nb; i++) {
        size_t c = bounds[i];
        bounds[i] = sum;
        sum += c;
    }
    for (i = 0; i < cnt; i++) {
        const uint64_t* r = src + i * rs;
        cd_fp_copy(dst + (bounds[(r[0] >> down) & mask]++) * rs, r, rs);
    }
}

#define CD_FP_TOP_BITS 11

/* 0; -1 out of memory, -3 the keys changed during the call (a buffer
 * written by another thread); nothing changed in either case. */
static int cd_fpset_merge_batch(cd_fpset* s, const unsigned char* data, size_t n,
                                unsigned char* out) {
    size_t ds = s->ds, ss = s->ss, nk = s->nw + 1, rs = nk + 1, i, k, fresh = 0, next = 0, pos;
    size_t top_nb = (size_t)1 << CD_FP_TOP_BITS;
    uint64_t *a, *b, *r;
    size_t bytes, bbytes;
    size_t *top, *sub;
    unsigned char* flag;
    const unsigned char *t, *tend;
    const uint64_t* prev = NULL;
    cd_fptab nt;
    int has_zero = s->has_zero;
    int rc = -1;
    if (n > SIZE_MAX / 8 / rs) return -1;
    bytes = n * rs * 8;
    a = (uint64_t*)cd_big_alloc(bytes, 1);
    b = NULL;
    bbytes = 0;
    top = NULL;
    sub = NULL;
    flag = NULL;
    if (!a) return -1;
    /* b holds one group of the top-bits pass: find the largest. */
    top = (size_t*)calloc(top_nb, sizeof(size_t));
    if (!top) goto done;
    for (i = 0; i < n; i++) top[cd_fp_hash(data + i * ds, ds) >> (64 - CD_FP_TOP_BITS)]++;
    for (k = 0; k < top_nb; k++)
        if (top[k] > bbytes) bbytes = top[k];
    bbytes = (bbytes ? bbytes : 1) * rs * 8;
    b = (uint64_t*)cd_big_alloc(bbytes, 1);
    sub = (size_t*)malloc(((size_t)1 << 16) * sizeof(size_t));
    flag = (unsigned char*)malloc(n);
    if (!b || !sub || !flag) goto done;
    /* By the top bits of h straight into a (counting, then encoding each
     * key into its group), then each group by the next bits through b and
     * back, then the small runs left by (key, index). */
    {
        size_t sum = 0, c;
        for (k = 0; k < top_nb; k++) {
            c = top[k];
            top[k] = sum;
            sum += c;
            sub[k] = sum; /* the end of group k, for the check below */
        }
    }
    for (i = 0; i < n; i++) {
        uint64_t enc[CD_FP_MAX_KEY];
        size_t g;
        cd_fp_encode(data + i * ds, ds, enc);
        g = enc[0] >> (64 - CD_FP_TOP_BITS);
        if (top[g] >= sub[g]) { /* the caller's buffer changed under us */
            rc = -3;
            goto done;
        }
        r = a + (top[g]++) * rs;
        cd_fp_copy(r, enc, nk);
        r[nk] = i;
    }
    for (k = 0; k < top_nb; k++) {
        size_t lo = k ? top[k - 1] : 0, cnt = top[k] - lo, j;
        unsigned sb = 1;
        if (cnt <= 1) continue;
        while (sb < 16 && ((size_t)1 << (sb + 1)) < cnt) sb++;
        cd_fp_radix_pass(a + lo * rs, b, cnt, rs, CD_FP_TOP_BITS, sb, sub);
        for (j = 0; j < ((size_t)1 << sb); j++) {
            size_t slo = j ? sub[j - 1] : 0;
            if (sub[j] - slo > 1) cd_fp_sort_bucket(b + slo * rs, sub[j] - slo, rs);
        }
        cd_fp_copy(a + lo * rs, b, cnt * rs);
    }
    free(top);
    top = NULL;
    free(sub);
    sub = NULL;
    cd_big_free(b);
    b = NULL;
    /* Pass 1: which records are new (first of their digest, not in the set). */
    t = s->cur.slots;
    tend = s->cur.slots + s->cur.cap * ss;
    for (i = 0; i < n; i++) {
        int isnew, zero;
        r = a + i * rs;
        zero = cd_fp_key_zero(r, nk);
        if (prev && cd_fp_cmp(prev, r, nk) == 0) {
            isnew = 0; /* a repeat within the batch */
        } else if (zero) {
            isnew = !has_zero;
            has_zero = 1;
        } else {
            while (t < tend && (cd_fp_slot_empty(t, ss) || cd_fp_slot_cmp(t, r, ds) < 0)) t += ss;
            isnew = !(t < tend && cd_fp_slot_cmp(t, r, ds) == 0);
            if (isnew) fresh++;
        }
        out[r[nk]] = (unsigned char)isnew;
        flag[i] = (unsigned char)(isnew && !zero);
        prev = r;
    }
    /* Pass 2: the new table, merging the set's digests and the new ones. */
    memset(&nt, 0, sizeof(nt));
    if (cd_fptab_init(&nt, (size_t)cd_fp_slots_for(s->nz + fresh), ss)) goto done;
    t = s->cur.slots;
    i = 0;
    for (;;) {
        int from_table;
        uint64_t h;
        while (t < tend && cd_fp_slot_empty(t, ss)) t += ss;
        while (i < n && !flag[i]) i++;
        if (t >= tend && i >= n) break;
        from_table = i >= n || (t < tend && cd_fp_slot_cmp(t, a + i * rs, ds) < 0);
        h = from_table ? cd_fp_word(t, 8) : a[i * rs];
        pos = cd_fp_home(h, nt.nslots);
        if (pos < next) pos = next;
        while (pos >= nt.cap) {
            if (cd_fptab_extend(&nt, ss, next)) {
                cd_fptab_free(&nt);
                goto done;
            }
        }
        if (from_table) {
            cd_fp_slot_copy(nt.slots + pos * ss, t, ss);
            t += ss;
        } else {
            cd_fp_store(nt.slots + pos * ss, a + i * rs, ds);
            i++;
        }
        cd_fp_occupy(nt.occ, pos);
        next = pos + 1;
    }
    cd_fptab_free(&s->cur);
    s->cur = nt;
    s->nz += fresh;
    s->has_zero = has_zero;
    rc = 0;
done: /* every exit after a's allocation: what is still held is released */
    cd_big_free(a);
    cd_big_free(b);
    free(top);
    free(sub);
    free(flag);
    return rc;
}

/* Batch add or test of n keys at data (n * ds bytes); out[i] = 1 where the
 * key was new / is present.  Keys are encoded a group ahead and their home
 * slots prefetched, so the cache misses of a large table overlap.  0, -1
 * (out of memory; *done keys handled) or -3 (see cd_fpset_merge_batch). */
#define CD_FP_GROUP 16
static int cd_fpset_batch(cd_fpset* s, const unsigned char* data, size_t n, int adding,
                          unsigned char* out, size_t* done) {
    size_t ds = s->ds, nk = s->nw + 1, i, j, g, gn;
    uint64_t enc[2][CD_FP_GROUP * CD_FP_MAX_KEY];
    int cur = 0;
    *done = 0;
    if (s->old.slots && cd_fpset_migrate(s, SIZE_MAX)) return -1;
    /* A batch large next to the set is merged into a new table, unless the
     * table has room for it already (cd_fpset_reserve): adding it in place
     * then grows nothing, and a merge would rebuild all that room. */
    if (adding && n >= CD_FP_MERGE_MIN && (uint64_t)n * 4 >= s->nz
            && s->cur.nslots <= cd_fp_slots_for(s->nz + n)) {
        int r = cd_fpset_merge_batch(s, data, n, out);
        if (r) return r;
        *done = n;
        return 0;
    }
    gn = n < CD_FP_GROUP ? n : CD_FP_GROUP;
    for (j = 0; j < gn; j++) {
        cd_fp_encode(data + j * ds, ds, enc[0] + j * nk);
        cd_prefetch_once(s->cur.slots + cd_fp_home(enc[0][j * nk], s->cur.nslots) * s->ss);
    }
    for (g = 0; g < n; g += CD_FP_GROUP) {
        size_t cnt = n - g < CD_FP_GROUP ? n - g : CD_FP_GROUP;
        size_t next = g + CD_FP_GROUP;
        size_t ncnt = next < n ? (n - next < CD_FP_GROUP ? n - next : CD_FP_GROUP) : 0;
        for (j = 0; j < ncnt; j++) {
            uint64_t* e = enc[cur ^ 1] + j * nk;
            cd_fp_encode(data + (next + j) * ds, ds, e);
            cd_prefetch_once(s->cur.slots + cd_fp_home(e[0], s->cur.nslots) * s->ss);
        }
        for (j = 0; j < cnt; j++) {
            const uint64_t* e = enc[cur] + j * nk;
            i = g + j;
            if (adding) {
                int r = cd_fpset_add_enc(s, e, 0);
                if (r < 0) return -1;
                out[i] = (unsigned char)r;
            } else {
                out[i] = (unsigned char)cd_fpset_has_enc(s, e);
            }
            *done = i + 1;
        }
        cur ^= 1;
    }
    return 0;
}

/* The set in canonical order into out ((has_zero + nz) * ds bytes).  Call
 * with no migration in progress. */
static void cd_fpset_export(const cd_fpset* s, unsigned char* out) {
    size_t ds = s->ds, ss = s->ss, i;
    const unsigned char* p = s->cur.slots;
    if (s->has_zero) {
        memset(out, 0, ds);
        out += ds;
    }
    for (i = 0; i < s->cur.cap; i++, p += ss) {
        if (!cd_fp_slot_empty(p, ss)) {
            cd_fp_decode(p, ds, out);
            out += ds;
        }
    }
}

/* Replace the contents of s with the n digests at data, which must be in
 * canonical order (strictly increasing (h, w0, w1, ...); the all-zero
 * digest first).  0; -1 out of memory; -2 not canonical, *bad = the index
 * of the first digest out of order.  s is unchanged unless 0 is returned. */
static int cd_fpset_load(cd_fpset* s, const unsigned char* data, size_t n, size_t* bad) {
    size_t ds = s->ds, ss = s->ss, nk = s->nw + 1, i = 0, j, next = 0, pos;
    uint64_t prev[CD_FP_MAX_KEY], enc[CD_FP_MAX_KEY];
    cd_fptab t;
    int has_zero = 0;
    if (n) {
        cd_fp_encode(data, ds, enc);
        if (cd_fp_key_zero(enc, nk)) {
            has_zero = 1;
            i = 1;
        }
    }
    for (j = i; j < n; j++) {
        cd_fp_encode(data + j * ds, ds, enc);
        if (cd_fp_key_zero(enc, nk) || (j > i && cd_fp_cmp(prev, enc, nk) >= 0)) {
            *bad = j;
            return -2;
        }
        cd_fp_copy(prev, enc, nk);
    }
    memset(&t, 0, sizeof(t));
    if (cd_fptab_init(&t, (size_t)cd_fp_slots_for(n - i), ss)) return -1;
    for (; i < n; i++) {
        cd_fp_encode(data + i * ds, ds, enc);
        pos = cd_fp_home(enc[0], t.nslots);
        if (pos < next) pos = next;
        while (pos >= t.cap) {
            if (cd_fptab_extend(&t, ss, next)) {
                cd_fptab_free(&t);
                return -1;
            }
        }
        cd_fp_store(t.slots + pos * ss, enc, ds);
        cd_fp_occupy(t.occ, pos);
        next = pos + 1;
    }
    cd_fpset_free(s);
    s->cur = t;
    s->has_zero = has_zero;
    s->nz = n - (size_t)has_zero;
    return 0;
}

#endif /* CD_FPSET_H */
