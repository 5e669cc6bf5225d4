/* The table behind crawldedup.FingerprintSet: an exact set of fixed-size
 * digests in one flat buffer.
 *
 * Layout ("ordered linear probing"): the table has `nslots` home slots plus
 * a pad of overflow slots at the end (no wrap-around).  A digest d has the
 * 64-bit hash h(d) (cd_fp_hash, written down in docs/fpset.md) and the home
 * slot mulhi(h, nslots).  Digests sit in the table in increasing canonical
 * order ((h, then the digest's little-endian words), see cd_fp_encode), each at or after its home slot, with no empty slot between
 * its home and itself.  So a lookup scans from the home slot and stops at an
 * empty slot or at the first digest that sorts after the one sought, and the
 * layout is a function of the set alone (not of the insertion order): the
 * canonical order of a set, used by iteration and files, is this order.
 *
 * An all-zero slot is empty; the all-zero digest itself is kept as a flag.
 * Growth: when the load would pass 9/10, a table of about 5/3 the size is
 * made and the old slots move over in order, CD_FP_MIGRATE_STEP per single
 * add (lookups look in both meanwhile), so no single add pays for the whole
 * rehash.  Batch adds finish a migration at once.
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
#endif

#define CD_FP_MAX_DIGEST 64
#define CD_FP_MIN_SLOTS 16
#define CD_FP_MIGRATE_STEP 32
/* Tables from this size on are anonymous mappings: zeroed lazily by the OS,
 * so starting a growth costs no memset of the new table. */
#define CD_FP_MAP_BYTES ((size_t)1 << 20)
#define CD_FP_HUGE_BYTES ((size_t)4 << 20)

/* Mixing: MurmurHash3's fmix64 (cd_fmix64, _cd_support.h). */

static inline uint64_t cd_fp_word(const unsigned char* p, size_t n) {
    /* n <= 8 bytes, little-endian. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n == 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        return w;
    }
#endif
    uint64_t w = 0;
    size_t i;
    for (i = 0; i < n; i++) w |= (uint64_t)p[i] << (8 * i);
    return w;
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
 * multipliers are replaced by their inverses modulo 2**64). */
static inline uint64_t cd_fp_unfmix(uint64_t k) {
    k ^= k >> 33;
    k *= 0x9cb4b2f8129337dbULL;
    k ^= k >> 33;
    k *= 0x4f74430c22a54005ULL;
    k ^= k >> 33;
    return k;
}

/* A digest is stored as nw = ceil(ds / 8) words: h(d) first, then the
 * digest's little-endian words w0 .. w(nw-2).  The last word is implied
 * (w(nw-1) = unfmix(h) ^ fold of the others), so a 16-byte digest takes
 * 16 bytes, h needs no recomputing during a scan, and comparing stored
 * words in order compares (h, w0, w1, ...): the canonical order.  The
 * all-zero digest is stored as all-zero words, which mark an empty slot. */
static inline void cd_fp_encode(const unsigned char* d, size_t ds, uint64_t* out) {
    size_t nw = (ds + 7) / 8, j;
    uint64_t acc = 0, w;
    for (j = 0; j < nw; j++) {
        size_t len = ds - 8 * j < 8 ? ds - 8 * j : 8;
        w = cd_fp_word(d + 8 * j, len);
        acc = cd_fmix64(acc ^ w);
        if (j + 1 < nw) out[j + 1] = w;
    }
    out[0] = acc;
}

static inline void cd_fp_put(unsigned char* p, uint64_t w, size_t len) {
    size_t i;
    for (i = 0; i < len; i++) p[i] = (unsigned char)(w >> (8 * i));
}

static inline void cd_fp_decode(const uint64_t* slot, size_t ds, unsigned char* out) {
    size_t nw = (ds + 7) / 8, j;
    uint64_t acc = 0;
    for (j = 0; j + 1 < nw; j++) {
        cd_fp_put(out + 8 * j, slot[j + 1], 8);
        acc = cd_fmix64(acc ^ slot[j + 1]);
    }
    cd_fp_put(out + 8 * (nw - 1), cd_fp_unfmix(slot[0]) ^ acc, ds - 8 * (nw - 1));
}

static inline int cd_fp_empty(const uint64_t* s, size_t nw) {
    size_t j;
    for (j = 0; j < nw; j++)
        if (s[j]) return 0;
    return 1;
}

static inline void cd_fp_copy(uint64_t* dst, const uint64_t* src, size_t nw) {
    /* Short fixed copies inline: a library call per slot or record costs
     * more than the copy (compilers turn a variable-length loop into one). */
    switch (nw) {
    case 1: dst[0] = src[0]; return;
    case 2: dst[0] = src[0]; dst[1] = src[1]; return;
    case 3: dst[0] = src[0]; dst[1] = src[1]; dst[2] = src[2]; return;
    default: memcpy(dst, src, nw * 8);
    }
}

/* -1, 0, 1 as a sorts before, with, after b (words compared in order). */
static inline int cd_fp_cmp(const uint64_t* a, const uint64_t* b, size_t nw) {
    size_t j;
    for (j = 0; j < nw; j++)
        if (a[j] != b[j]) return a[j] < b[j] ? -1 : 1;
    return 0;
}

static inline size_t cd_fp_home(uint64_t h, size_t nslots) {
#if defined(__SIZEOF_INT128__)
    return (size_t)(((unsigned __int128)h * (uint64_t)nslots) >> 64);
#else
    uint64_t a_lo = h & 0xffffffffULL, a_hi = h >> 32;
    uint64_t b_lo = (uint64_t)nslots & 0xffffffffULL, b_hi = (uint64_t)nslots >> 32;
    uint64_t lo = a_lo * b_lo, m1 = a_hi * b_lo, m2 = a_lo * b_hi, hi = a_hi * b_hi;
    uint64_t mid = (lo >> 32) + (m1 & 0xffffffffULL) + (m2 & 0xffffffffULL);
    return (size_t)(hi + (m1 >> 32) + (m2 >> 32) + (mid >> 32));
#endif
}

static inline void cd_fp_prefetch(const void* p) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 1);
#else
    (void)p;
#endif
}

typedef struct {
    uint64_t* slots; /* cap * nw words, NULL when absent */
    size_t nslots;   /* home slots */
    size_t cap;      /* home slots + overflow pad */
    size_t bytes;
    int mapped;
} cd_fptab;

typedef struct {
    cd_fptab cur;
    cd_fptab old; /* the table being migrated from, or slots == NULL */
    size_t mig;   /* next slot of old to move */
    size_t ds;    /* digest size */
    size_t nw;    /* words per slot */
    int has_zero;
    uint64_t nz; /* digests other than all-zero in the set */
} cd_fpset;

static uint64_t* cd_fp_alloc(size_t bytes, int* mapped) {
#if !defined(_WIN32)
    if (bytes >= CD_FP_MAP_BYTES) {
        void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
#if defined(MADV_HUGEPAGE)
            /* A large table is probed at random: huge pages spare a TLB
             * miss per probe (a hint; ignored where unsupported). */
            if (bytes >= CD_FP_HUGE_BYTES) madvise(p, bytes, MADV_HUGEPAGE);
#endif
            *mapped = 1;
            return (uint64_t*)p;
        }
    }
#endif
    *mapped = 0;
    return (uint64_t*)calloc(bytes ? bytes : 1, 1);
}

static void cd_fp_release(void* p, size_t bytes, int mapped) {
    if (!p) return;
#if !defined(_WIN32)
    if (mapped) {
        munmap(p, bytes);
        return;
    }
#endif
    (void)bytes;
    (void)mapped;
    free(p);
}

static void cd_fptab_free(cd_fptab* t) {
    if (t->slots) {
#if !defined(_WIN32)
        if (t->mapped)
            munmap(t->slots, t->bytes);
        else
#endif
            free(t->slots);
    }
    memset(t, 0, sizeof(*t));
}

/* 0, or -1 when out of memory (t untouched). */
static int cd_fptab_init(cd_fptab* t, size_t nslots, size_t nw) {
    size_t pad, cap;
    int mapped;
    uint64_t* p;
    if (nslots < CD_FP_MIN_SLOTS) nslots = CD_FP_MIN_SLOTS;
    pad = 16 + nslots / 128;
    if (nslots > (SIZE_MAX / 4) / (8 * nw)) return -1;
    cap = nslots + pad;
    p = cd_fp_alloc(cap * nw * 8, &mapped);
    if (!p) return -1;
    t->slots = p;
    t->nslots = nslots;
    t->cap = cap;
    t->bytes = cap * nw * 8;
    t->mapped = mapped;
    return 0;
}

/* Double the overflow pad (positions do not move).  0, or -1 (t untouched). */
static int cd_fptab_extend(cd_fptab* t, size_t nw) {
    cd_fptab bigger;
    size_t cap = t->cap + (t->cap - t->nslots) + 16;
    int mapped;
    if (cap > (SIZE_MAX / 4) / (8 * nw)) return -1;
    bigger.slots = cd_fp_alloc(cap * nw * 8, &mapped);
    if (!bigger.slots) return -1;
    memcpy(bigger.slots, t->slots, t->cap * nw * 8);
    bigger.nslots = t->nslots;
    bigger.cap = cap;
    bigger.bytes = cap * nw * 8;
    bigger.mapped = mapped;
    cd_fptab_free(t);
    *t = bigger;
    return 0;
}

/* Where key (stored form) is (*found = 1) or belongs (*found = 0) in t;
 * may be t->cap. */
static inline size_t cd_fptab_seek(const cd_fptab* t, size_t nw, const uint64_t* key,
                                   int* found) {
    uint64_t h = key[0];
    size_t i = cd_fp_home(h, t->nslots);
    const uint64_t* s = t->slots + i * nw;
    *found = 0;
    for (; i < t->cap; i++, s += nw) {
        int c;
        if (s[0] < h) {
            if (s[0] == 0 && cd_fp_empty(s, nw)) break;
            continue;
        }
        if (s[0] > h) break;
        if (cd_fp_empty(s, nw)) break; /* h == 0 */
        c = cd_fp_cmp(s, key, nw);
        if (c == 0) {
            *found = 1;
            break;
        }
        if (c > 0) break;
    }
    return i;
}

/* Put key at pos, shifting the rest of its run one slot on.  0, or 1 when
 * the run reaches the end of the pad (nothing changed; extend and retry). */
static inline int cd_fptab_place(cd_fptab* t, size_t nw, const uint64_t* key, size_t pos) {
    size_t e = pos;
    const uint64_t* s = t->slots + e * nw;
    while (e < t->cap && !cd_fp_empty(s, nw)) {
        e++;
        s += nw;
    }
    if (e >= t->cap) return 1;
    if (e > pos) memmove(t->slots + (pos + 1) * nw, t->slots + pos * nw, (e - pos) * nw * 8);
    cd_fp_copy(t->slots + pos * nw, key, nw);
    return 0;
}

static int cd_fptab_insert(cd_fptab* t, size_t nw, const uint64_t* key, size_t pos) {
    while (cd_fptab_place(t, nw, key, pos))
        if (cd_fptab_extend(t, nw)) return -1;
    return 0;
}

/* Copy the digests of src (in canonical order) into the empty table dst:
 * each goes to its home slot or the slot after the previous one. */
static int cd_fptab_append_all(cd_fptab* dst, const cd_fptab* src, size_t nw) {
    size_t i, pos, next = 0;
    const uint64_t* k = src->slots;
    for (i = 0; i < src->cap; i++, k += nw) {
        if (cd_fp_empty(k, nw)) continue;
        pos = cd_fp_home(k[0], dst->nslots);
        if (pos < next) pos = next;
        while (pos >= dst->cap)
            if (cd_fptab_extend(dst, nw)) return -1;
        cd_fp_copy(dst->slots + pos * nw, k, nw);
        next = pos + 1;
    }
    return 0;
}

static int cd_fpset_init(cd_fpset* s, size_t ds) {
    memset(s, 0, sizeof(*s));
    s->ds = ds;
    s->nw = (ds + 7) / 8;
    return cd_fptab_init(&s->cur, CD_FP_MIN_SLOTS, s->nw);
}

static void cd_fpset_free(cd_fpset* s) {
    cd_fptab_free(&s->cur);
    cd_fptab_free(&s->old);
    s->mig = 0;
    s->nz = 0;
    s->has_zero = 0;
}

/* Move up to steps slots of the old table over.  0, or -1 (out of memory;
 * the state stays consistent: the slot not moved is still in old). */
static int cd_fpset_migrate(cd_fpset* s, size_t steps) {
    size_t nw = s->nw;
    if (!s->old.slots) return 0;
    while (steps && s->mig < s->old.cap) {
        const uint64_t* k = s->old.slots + s->mig * nw;
        if (!cd_fp_empty(k, nw)) {
            int found;
            size_t pos = cd_fptab_seek(&s->cur, nw, k, &found);
            if (!found && cd_fptab_insert(&s->cur, nw, k, pos)) return -1;
        }
        s->mig++;
        steps--;
    }
    if (s->mig >= s->old.cap) {
        cd_fptab_free(&s->old);
        s->mig = 0;
    }
    return 0;
}

static int cd_fpset_grow(cd_fpset* s, int incremental) {
    cd_fptab fresh;
    uint64_t want;
    if (cd_fpset_migrate(s, SIZE_MAX)) return -1;
    want = s->nz / 3 * 5 + (s->nz % 3) * 5 / 3 + CD_FP_MIN_SLOTS; /* load 3/5 after growing */
    if (want > SIZE_MAX / 4) return -1;
    memset(&fresh, 0, sizeof(fresh));
    if (cd_fptab_init(&fresh, (size_t)want, s->nw)) return -1;
    if (!incremental) {
        if (cd_fptab_append_all(&fresh, &s->cur, s->nw)) {
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
    return 0;
}

/* Add a digest in stored form.  1 when new, 0 when present, -1 out of
 * memory (not added). */
static int cd_fpset_add_enc(cd_fpset* s, const uint64_t* key, int incremental) {
    size_t nw = s->nw, pos;
    int found;
    if (cd_fp_empty(key, nw)) {
        if (s->has_zero) return 0;
        s->has_zero = 1;
        return 1;
    }
    if (s->old.slots && cd_fpset_migrate(s, incremental ? CD_FP_MIGRATE_STEP : SIZE_MAX))
        return -1;
    if (s->old.slots) {
        cd_fptab_seek(&s->old, nw, key, &found);
        if (found) return 0;
    }
    pos = cd_fptab_seek(&s->cur, nw, key, &found);
    if (found) return 0;
    if ((s->nz + 1) * 10 > (uint64_t)s->cur.nslots * 9) {
        if (cd_fpset_grow(s, incremental)) return -1;
        /* The key is in neither table: the new old table is the cur just
         * searched, and any earlier old table was merged into it. */
        pos = cd_fptab_seek(&s->cur, nw, key, &found);
    }
    if (cd_fptab_insert(&s->cur, nw, key, pos)) return -1;
    s->nz++;
    return 1;
}

static inline int cd_fpset_has_enc(const cd_fpset* s, const uint64_t* key) {
    size_t nw = s->nw;
    int found;
    if (cd_fp_empty(key, nw)) return s->has_zero;
    cd_fptab_seek(&s->cur, nw, key, &found);
    if (found) return 1;
    if (s->old.slots) {
        cd_fptab_seek(&s->old, nw, key, &found);
        if (found) return 1;
    }
    return 0;
}

static int cd_fpset_add(cd_fpset* s, const unsigned char* key, int incremental) {
    uint64_t enc[CD_FP_MAX_DIGEST / 8];
    cd_fp_encode(key, s->ds, enc);
    return cd_fpset_add_enc(s, enc, incremental);
}

static int cd_fpset_has(const cd_fpset* s, const unsigned char* key) {
    uint64_t enc[CD_FP_MAX_DIGEST / 8];
    cd_fp_encode(key, s->ds, enc);
    return cd_fpset_has_enc(s, enc);
}

/* ---- batch add by sorting and merging ----
 * A batch that is large next to the set is added by sorting it (records of
 * the stored words plus the key's index, bucketed by the top bits of h, the
 * buckets then sorted by (words, index)) and merging it with the table into
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

/* Stored words, then the index: comparing all rs words orders by (words, idx). */
static void cd_fp_sort_bucket(uint64_t* r, size_t cnt, size_t rs) {
    size_t i, j;
    uint64_t tmp[CD_FP_MAX_DIGEST / 8 + 1];
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
    size_t ds = s->ds, nw = s->nw, rs = nw + 1, i, k, fresh = 0, next = 0, pos;
    size_t top_nb = (size_t)1 << CD_FP_TOP_BITS;
    uint64_t *a, *b, *r;
    size_t bytes, bbytes;
    int amap = 0, bmap = 0;
    size_t *top, *sub;
    unsigned char* flag;
    const uint64_t *t, *tend, *prev = NULL;
    cd_fptab nt;
    int has_zero = s->has_zero;
    if (n > SIZE_MAX / 8 / rs) return -1;
    bytes = n * rs * 8;
    a = cd_fp_alloc(bytes, &amap);
    b = NULL;
    bbytes = 0;
    top = NULL;
    sub = NULL;
    flag = NULL;
    if (!a) return -1;
    /* b holds one group of the top-bits pass: find the largest. */
    top = (size_t*)calloc(top_nb, sizeof(size_t));
    if (!top) {
        cd_fp_release(a, bytes, amap);
        return -1;
    }
    for (i = 0; i < n; i++) top[cd_fp_hash(data + i * ds, ds) >> (64 - CD_FP_TOP_BITS)]++;
    for (k = 0; k < top_nb; k++)
        if (top[k] > bbytes) bbytes = top[k];
    bbytes = (bbytes ? bbytes : 1) * rs * 8;
    b = cd_fp_alloc(bbytes, &bmap);
    sub = (size_t*)malloc(((size_t)1 << 16) * sizeof(size_t));
    flag = (unsigned char*)malloc(n);
    if (!a || !b || !top || !sub || !flag) {
        cd_fp_release(a, bytes, amap);
        cd_fp_release(b, bbytes, bmap);
        free(top);
        free(sub);
        free(flag);
        return -1;
    }
    /* By the top bits of h straight into a (counting, then encoding each
     * key into its group), then each group by the next bits through b and
     * back, then the small runs left by (words, index). */
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
        uint64_t enc[CD_FP_MAX_DIGEST / 8];
        size_t g;
        cd_fp_encode(data + i * ds, ds, enc);
        g = enc[0] >> (64 - CD_FP_TOP_BITS);
        if (top[g] >= sub[g]) { /* the caller's buffer changed under us */
            cd_fp_release(a, bytes, amap);
            cd_fp_release(b, bbytes, bmap);
            free(top);
            free(sub);
            free(flag);
            return -3;
        }
        r = a + (top[g]++) * rs;
        cd_fp_copy(r, enc, nw);
        r[nw] = i;
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
    free(sub);
    cd_fp_release(b, bbytes, bmap);
    /* Pass 1: which records are new (first of their digest, not in the set). */
    t = s->cur.slots;
    tend = s->cur.slots + s->cur.cap * nw;
    for (i = 0; i < n; i++) {
        int isnew;
        r = a + i * rs;
        if (prev && cd_fp_cmp(prev, r, nw) == 0) {
            isnew = 0; /* a repeat within the batch */
        } else if (cd_fp_empty(r, nw)) {
            isnew = !has_zero;
            has_zero = 1;
        } else {
            while (t < tend && (cd_fp_empty(t, nw) || cd_fp_cmp(t, r, nw) < 0)) t += nw;
            isnew = !(t < tend && cd_fp_cmp(t, r, nw) == 0);
            if (isnew) fresh++;
        }
        out[r[nw]] = (unsigned char)isnew;
        flag[i] = (unsigned char)(isnew && !cd_fp_empty(r, nw));
        prev = r;
    }
    /* Pass 2: the new table, merging the set's digests and the new ones. */
    memset(&nt, 0, sizeof(nt));
    {
        uint64_t total = s->nz + fresh;
        if (cd_fptab_init(&nt, (size_t)(total / 3 * 4 + total % 3 * 4 / 3), nw)) {
            cd_fp_release(a, bytes, amap);
            free(flag);
            return -1;
        }
    }
    t = s->cur.slots;
    i = 0;
    for (;;) {
        const uint64_t* src;
        while (t < tend && cd_fp_empty(t, nw)) t += nw;
        while (i < n && !flag[i]) i++;
        if (t >= tend && i >= n) break;
        if (i >= n || (t < tend && cd_fp_cmp(t, a + i * rs, nw) < 0)) {
            src = t;
            t += nw;
        } else {
            src = a + i * rs;
            i++;
        }
        pos = cd_fp_home(src[0], nt.nslots);
        if (pos < next) pos = next;
        while (pos >= nt.cap) {
            if (cd_fptab_extend(&nt, nw)) {
                cd_fptab_free(&nt);
                cd_fp_release(a, bytes, amap);
                free(flag);
                return -1;
            }
        }
        cd_fp_copy(nt.slots + pos * nw, src, nw);
        next = pos + 1;
    }
    cd_fp_release(a, bytes, amap);
    free(flag);
    cd_fptab_free(&s->cur);
    s->cur = nt;
    s->nz += fresh;
    s->has_zero = has_zero;
    return 0;
}

/* Batch add or test of n keys at data (n * ds bytes); out[i] = 1 where the
 * key was new / is present.  Keys are encoded a group ahead and their home
 * slots prefetched, so the cache misses of a large table overlap.  0, -1
 * (out of memory; *done keys handled) or -3 (see cd_fpset_merge_batch). */
#define CD_FP_GROUP 16
static int cd_fpset_batch(cd_fpset* s, const unsigned char* data, size_t n, int adding,
                          unsigned char* out, size_t* done) {
    size_t ds = s->ds, nw = s->nw, i, j, g, gn;
    uint64_t enc[2][CD_FP_GROUP * (CD_FP_MAX_DIGEST / 8)];
    int cur = 0;
    *done = 0;
    if (s->old.slots && cd_fpset_migrate(s, SIZE_MAX)) return -1;
    if (adding && n >= CD_FP_MERGE_MIN && (uint64_t)n * 4 >= s->nz) {
        int r = cd_fpset_merge_batch(s, data, n, out);
        if (r) return r;
        *done = n;
        return 0;
    }
    gn = n < CD_FP_GROUP ? n : CD_FP_GROUP;
    for (j = 0; j < gn; j++) {
        cd_fp_encode(data + j * ds, ds, enc[0] + j * nw);
        cd_fp_prefetch(s->cur.slots + cd_fp_home(enc[0][j * nw], s->cur.nslots) * nw);
    }
    for (g = 0; g < n; g += CD_FP_GROUP) {
        size_t cnt = n - g < CD_FP_GROUP ? n - g : CD_FP_GROUP;
        size_t next = g + CD_FP_GROUP;
        size_t ncnt = next < n ? (n - next < CD_FP_GROUP ? n - next : CD_FP_GROUP) : 0;
        for (j = 0; j < ncnt; j++) {
            uint64_t* e = enc[cur ^ 1] + j * nw;
            cd_fp_encode(data + (next + j) * ds, ds, e);
            cd_fp_prefetch(s->cur.slots + cd_fp_home(e[0], s->cur.nslots) * nw);
        }
        for (j = 0; j < cnt; j++) {
            const uint64_t* e = enc[cur] + j * nw;
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
    size_t ds = s->ds, nw = s->nw, i;
    const uint64_t* p = s->cur.slots;
    if (s->has_zero) {
        memset(out, 0, ds);
        out += ds;
    }
    for (i = 0; i < s->cur.cap; i++, p += nw) {
        if (!cd_fp_empty(p, nw)) {
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
    size_t ds = s->ds, nw = s->nw, i = 0, j, next = 0, pos;
    uint64_t prev[CD_FP_MAX_DIGEST / 8], enc[CD_FP_MAX_DIGEST / 8];
    cd_fptab t;
    int has_zero = 0;
    if (n) {
        cd_fp_encode(data, ds, enc);
        if (cd_fp_empty(enc, nw)) {
            has_zero = 1;
            i = 1;
        }
    }
    for (j = i; j < n; j++) {
        cd_fp_encode(data + j * ds, ds, enc);
        if (cd_fp_empty(enc, nw) || (j > i && cd_fp_cmp(prev, enc, nw) >= 0)) {
            *bad = j;
            return -2;
        }
        cd_fp_copy(prev, enc, nw);
    }
    memset(&t, 0, sizeof(t));
    if (cd_fptab_init(&t, (n - i) / 3 * 4 + (n - i) % 3 * 4 / 3 + CD_FP_MIN_SLOTS, nw))
        return -1; /* load 3/4 */
    for (; i < n; i++) {
        cd_fp_encode(data + i * ds, ds, enc);
        pos = cd_fp_home(enc[0], t.nslots);
        if (pos < next) pos = next;
        while (pos >= t.cap) {
            if (cd_fptab_extend(&t, nw)) {
                cd_fptab_free(&t);
                return -1;
            }
        }
        cd_fp_copy(t.slots + pos * nw, enc, nw);
        next = pos + 1;
    }
    cd_fpset_free(s);
    s->cur = t;
    s->has_zero = has_zero;
    s->nz = n - (size_t)has_zero;
    return 0;
}

#endif /* CD_FPSET_H */
