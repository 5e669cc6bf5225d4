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
 * The digests' key and slot forms are in _cd_fpset_slot.h, the batches,
 * export and load in _cd_fpset_batch.h (included at the end).
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
#include "_cd_fpset_slot.h"

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

#include "_cd_fpset_batch.h"

#endif /* CD_FPSET_H */