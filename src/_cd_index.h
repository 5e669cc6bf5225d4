/* Exact Hamming-distance index over 64-bit fingerprints (crawldedup.SimhashIndex).
 *
 * Pigeonhole principle: cut the 64 bits into k+1 blocks; two fingerprints
 * within Hamming distance k agree exactly on at least one block.  Table t is
 * keyed by (a prefix of) block t, so a query probes k+1 buckets and checks
 * each candidate with xor + popcount.  A candidate is reported only by the
 * table of the FIRST block on which it agrees with the query, so no result is
 * seen twice and no set of seen ids is needed.
 *
 * The index is a few immutable sorted segments plus a small unsorted pending
 * buffer (log-structured: segments of similar size are merged, so every entry
 * is rebuilt O(log n) times).  A segment holds
 *   tab[t]      table t: the distinct fingerprints bucketed by (the top kb
 *               bits of) block t, each stored as its 64 - kb residual bits
 *               (the key bits are implied by the bucket) in
 *               es = ceil((64 - kb) / 8) little-endian bytes.  Table 0's key
 *               is the top of the value, so table 0 lists the distinct
 *               fingerprints in ascending order: its position u is "the
 *               distinct index" that run[] and the results use.
 *   off[t]      bucket offsets, 2^kb + 1 uint32 per table
 *   run[u+1]    start of each distinct fingerprint's run in ids[] (NULL when
 *               every fingerprint is distinct: run[u] = u)
 *   ids[n]      ids in (fingerprint, id) order, 32-bit when they all fit
 *   dead[n]     tombstones (allocated by the first remove)
 *   idord[n]    positions sorted by id (built by the first id lookup)
 * For k = 3, 16-bit blocks and 32-bit ids that is 4 * 6 + 4 = 28 bytes per
 * distinct fingerprint plus 1 MiB of offsets.
 *
 * Equal fingerprints are stored once per table (runs), so a heap of copies
 * costs one candidate check, not one per copy.
 *
 * Everything here is plain C on flat arrays; the functions that run
 * without the GIL (query, pairs) only read.  Errors: -1 = out of memory.
 */
#ifndef CD_INDEX_H
#define CD_INDEX_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_cd_support.h"

#define CD_IX_MAXK 8
#define CD_IX_MAXT (CD_IX_MAXK + 1)
#define CD_IX_PENDING 512          /* pending entries scanned linearly */
#define CD_IX_MAX_SEGMENT 0xFFFFFFF0u

#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
#define CD_IX_HAVE_POPCNT_CLONE 1
#endif
/* Hot helpers are inlined into the popcnt clones, so they use the instruction. */
#if defined(__GNUC__) || defined(__clang__)
#define CD_IX_INLINE static inline __attribute__((always_inline))
#else
#define CD_IX_INLINE static inline
#endif

typedef struct {
    int k, T;
    int width[CD_IX_MAXT];
    int shift[CD_IX_MAXT];      /* block t is bits [shift, shift + width) */
    uint64_t bmask[CD_IX_MAXT];
} cd_ix_layout;

struct cd_sub_s;
typedef struct cd_seg_s {
    size_t n, u, ndead;
    uint32_t *run;              /* NULL when every fingerprint is distinct */
    uint64_t *ids;              /* ids, or ids32 when every id < 2^32 */
    uint32_t *ids32;
    uint8_t *dead;
    uint32_t *idord;
    int kb[CD_IX_MAXT];         /* key bits of table t */
    int ks[CD_IX_MAXT];         /* key shift of table t */
    int es[CD_IX_MAXT];         /* residual bytes of table t (t >= 1) */
    uint32_t *off[CD_IX_MAXT];
    uint8_t *tab[CD_IX_MAXT];
    struct cd_sub_s *subs[CD_IX_MAXT];  /* nested indexes of big buckets, by key */
    size_t nsubs[CD_IX_MAXT];
} cd_seg;

/* A bucket much bigger than the rest (skewed data) gets a nested segment over
 * its fingerprints, bit-permuted so that the bits they differ in lead every
 * block; queries that land in it search the nested segment instead of
 * scanning the bucket. */
typedef struct cd_sub_s {
    uint64_t key;
    cd_seg *seg;
    uint64_t (*tabs)[256];
} cd_sub;
#define CD_IX_SUB_MIN 2048
#define CD_IX_SUB_DEPTH 2

#define CD_RUN(s_, u_) ((s_)->run ? (s_)->run[u_] : (uint32_t)(u_))
#define CD_ID(s_, j_) ((s_)->ids32 ? (uint64_t)(s_)->ids32[j_] : (s_)->ids[j_])

typedef struct {
    cd_ix_layout L;
    cd_seg **segs;
    size_t nsegs, capsegs;
    uint64_t *pfp, *pid;
    size_t pn, pcap;
    size_t live;
} cd_ix;

/* Growing result buffer: (a, b, d) triples; a unused for queries. */
typedef struct {
    uint64_t *a, *b;
    uint8_t *d;
    size_t n, cap;
    int oom;
    int want_a;
} cd_ix_out;

static inline uint64_t cd_ix_low(int bits) {
    return bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
}

static void cd_ix_layout_init(cd_ix_layout *L, int k) {
    int T = k + 1, t, top = 64;
    L->k = k;
    L->T = T;
    for (t = 0; t < T; t++) {
        int w = 64 / T + (t < 64 % T ? 1 : 0);
        top -= w;
        L->width[t] = w;
        L->shift[t] = top;
        L->bmask[t] = cd_ix_low(w) << top;
    }
}


/* ------------------------------------------------------------ big arrays */

/* Arrays of a segment and the temporaries of building one come from
 * cd_big_alloc (_cd_support.h): from 1 MiB on, private anonymous mappings,
 * returned to the system when freed. */

/* ------------------------------------------------------------ output */

static inline void cd_ix_push(cd_ix_out *o, uint64_t a, uint64_t b, int d) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        uint64_t *nb = (uint64_t *)realloc(o->b, cap * sizeof(uint64_t));
        uint8_t *nd;
        if (!nb) { o->oom = 1; return; }
        o->b = nb;
        nd = (uint8_t *)realloc(o->d, cap);
        if (!nd) { o->oom = 1; return; }
        o->d = nd;
        if (o->want_a) {
            uint64_t *na = (uint64_t *)realloc(o->a, cap * sizeof(uint64_t));
            if (!na) { o->oom = 1; return; }
            o->a = na;
        }
        o->cap = cap;
    }
    if (o->want_a) o->a[o->n] = a;
    o->b[o->n] = b;
    o->d[o->n] = (uint8_t)d;
    o->n++;
}

static void cd_ix_out_free(cd_ix_out *o) {
    free(o->a); free(o->b); free(o->d);
    o->a = o->b = NULL; o->d = NULL; o->n = o->cap = 0;
}

/* ------------------------------------------------------------ residuals */

static inline uint64_t cd_ix_key(uint64_t fp, int ks, int kb) {
    return (fp >> ks) & cd_ix_low(kb);
}

static inline uint64_t cd_ix_resid(uint64_t fp, int ks, int kb) {
    uint64_t hi = (ks + kb >= 64) ? 0 : (fp >> (ks + kb)) << ks;
    return hi | (fp & cd_ix_low(ks));
}

static inline uint64_t cd_ix_unresid(uint64_t r, uint64_t key, int ks, int kb) {
    uint64_t hi = (ks + kb >= 64) ? 0 : (r >> ks) << (ks + kb);
    return hi | (key << ks) | (r & cd_ix_low(ks));
}

static inline uint64_t cd_ix_load_res(const uint8_t *p, uint64_t mask) {
    return cd_load64le(p) & mask;
}

static inline void cd_ix_store_res(uint8_t *p, uint64_t r, int es) {
    int j;
    for (j = 0; j < es; j++) p[j] = (uint8_t)(r >> (8 * j));
}

/* ------------------------------------------------------------ sorting */

typedef struct { uint64_t fp, id; } cd_ix_pair;

/* LSD radix sort of pairs by fp (bytes where all keys agree are skipped),
 * then each run of equal fp sorted by id. */
static int cd_ix_sort_pairs(cd_ix_pair *p, size_t m) {
    size_t (*cnt)[256];
    cd_ix_pair *tmp, *src = p, *dst;
    size_t i, r;
    int b;
    if (m < 2) return 0;
    cnt = (size_t (*)[256])calloc(8, sizeof(*cnt));
    tmp = (cd_ix_pair *)cd_big_alloc(m * sizeof(cd_ix_pair), 0);
    if (!cnt || !tmp) { free(cnt); cd_big_free(tmp); return -1; }
    for (i = 0; i < m; i++) {
        uint64_t v = p[i].fp;
        for (b = 0; b < 8; b++) cnt[b][(v >> (8 * b)) & 255]++;
    }
    dst = tmp;
    for (b = 0; b < 8; b++) {
        size_t sum = 0, c;
        int skip = 0;
        for (c = 0; c < 256; c++) {
            size_t x = cnt[b][c];
            if (x == m) { skip = 1; break; }
            cnt[b][c] = sum;
            sum += x;
        }
        if (skip) continue;
        for (i = 0; i < m; i++) {
            size_t pos = cnt[b][(src[i].fp >> (8 * b)) & 255]++;
            dst[pos] = src[i];
        }
        { cd_ix_pair *t = src; src = dst; dst = t; }
    }
    if (src != p) memcpy(p, src, m * sizeof(cd_ix_pair));
    cd_big_free(tmp);
    free(cnt);
    /* runs of equal fp by id: insertion sort for short runs, heap sort else */
    for (i = 0; i < m; i = r) {
        size_t len;
        r = i + 1;
        while (r < m && p[r].fp == p[i].fp) r++;
        len = r - i;
        if (len < 2) continue;
        if (len <= 32) {
            size_t x, y;
            for (x = i + 1; x < r; x++) {
                uint64_t v = p[x].id;
                for (y = x; y > i && p[y - 1].id > v; y--) p[y].id = p[y - 1].id;
                p[y].id = v;
            }
        } else {
            /* heap sort of the ids of p[i..r) */
            size_t n = len, start, end, root, child;
            cd_ix_pair *h = p + i;
            for (start = n / 2; start-- > 0;) {
                root = start;
                while ((child = 2 * root + 1) < n) {
                    if (child + 1 < n && h[child].id < h[child + 1].id) child++;
                    if (h[root].id >= h[child].id) break;
                    { uint64_t t = h[root].id; h[root].id = h[child].id; h[child].id = t; }
                    root = child;
                }
            }
            for (end = n; end-- > 1;) {
                { uint64_t t = h[0].id; h[0].id = h[end].id; h[end].id = t; }
                root = 0;
                while ((child = 2 * root + 1) < end) {
                    if (child + 1 < end && h[child].id < h[child + 1].id) child++;
                    if (h[root].id >= h[child].id) break;
                    { uint64_t t = h[root].id; h[root].id = h[child].id; h[child].id = t; }
                    root = child;
                }
            }
        }
    }
    return 0;
}

/* Sort positions 0..n-1 by ids[pos] (LSD radix on the 8 id bytes). */
static uint32_t *cd_ix_sort_by_id(const uint64_t *ids, const uint32_t *ids32, size_t n) {
#define CD_IX_KEY_AT(pos_) (ids ? ids[pos_] : (uint64_t)ids32[pos_])
    uint32_t *a = (uint32_t *)cd_big_alloc((n ? n : 1) * sizeof(uint32_t), 0);
    uint32_t *t = (uint32_t *)cd_big_alloc((n ? n : 1) * sizeof(uint32_t), 0);
    size_t (*cnt)[256] = (size_t (*)[256])calloc(8, sizeof(*cnt));
    uint32_t *src, *dst;
    size_t i;
    int b;
    if (!a || !t || !cnt) { cd_big_free(a); cd_big_free(t); free(cnt); return NULL; }
    for (i = 0; i < n; i++) {
        uint64_t v = CD_IX_KEY_AT(i);
        a[i] = (uint32_t)i;
        for (b = 0; b < 8; b++) cnt[b][(v >> (8 * b)) & 255]++;
    }
    src = a; dst = t;
    for (b = 0; b < 8; b++) {
        size_t sum = 0, c;
        int skip = 0;
        for (c = 0; c < 256; c++) {
            size_t x = cnt[b][c];
            if (x == n) { skip = 1; break; }
            cnt[b][c] = sum;
            sum += x;
        }
        if (skip) continue;
        for (i = 0; i < n; i++) {
            uint32_t pos = src[i];
            dst[cnt[b][(CD_IX_KEY_AT(pos) >> (8 * b)) & 255]++] = pos;
        }
        { uint32_t *x = src; src = dst; dst = x; }
    }
    free(cnt);
    cd_big_free(dst);
    return src;
#undef CD_IX_KEY_AT
}

/* A bit permutation for a nested join of a big bucket whose members vary
 * only in the bits of V: the varying bits are dealt round-robin to the k + 1
 * blocks, each block filled from its top bit down (its key bits vary), the
 * constant bits fill the rest.  Applied with one table per input byte. */
static void cd_ix_perm_tables(const cd_ix_layout *L, uint64_t V, uint64_t (*tabs)[256]) {
    int pos[64], next[CD_IX_MAXT], t = 0, i, j, b;
    for (j = 0; j < L->T; j++) next[j] = L->shift[j] + L->width[j] - 1;
    for (i = 63; i >= 0; i--) {
        if (!((V >> i) & 1)) continue;
        while (next[t] < L->shift[t]) t = (t + 1) % L->T;
        pos[i] = next[t]--;
        t = (t + 1) % L->T;
    }
    t = 0;
    for (i = 63; i >= 0; i--) {
        if ((V >> i) & 1) continue;
        while (next[t] < L->shift[t]) t++;
        pos[i] = next[t]--;
    }
    for (j = 0; j < 8; j++)
        for (b = 0; b < 256; b++) {
            uint64_t v = 0;
            int bit;
            for (bit = 0; bit < 8; bit++)
                if ((b >> bit) & 1) v |= (uint64_t)1 << pos[8 * j + bit];
            tabs[j][b] = v;
        }
}

static inline uint64_t cd_ix_permute(uint64_t x, const uint64_t (*tabs)[256]) {
    return tabs[0][x & 255] | tabs[1][(x >> 8) & 255] | tabs[2][(x >> 16) & 255]
         | tabs[3][(x >> 24) & 255] | tabs[4][(x >> 32) & 255] | tabs[5][(x >> 40) & 255]
         | tabs[6][(x >> 48) & 255] | tabs[7][(x >> 56) & 255];
}

/* Is a nested segment over a bucket of w worth joining?  Its buckets' pair
 * counts must add up to well under the w * (w - 1) / 2 of scanning. */
static int cd_seg_splits(const cd_ix_layout *L, const cd_seg *s, size_t w) {
    double cost = 0, direct = (double)w * (double)(w - 1) / 2;
    int t;
    for (t = 0; t < L->T; t++) {
        size_t nb = (size_t)1 << s->kb[t], c;
        for (c = 0; c < nb; c++) {
            double b = (double)(s->off[t][c + 1] - s->off[t][c]);
            cost += b * (b - 1) / 2;
        }
    }
    return cost * 4 < direct;
}

/* ------------------------------------------------------------ segments */

static void cd_seg_free(cd_seg *s) {
    int t;
    if (!s) return;
    cd_big_free(s->run); cd_big_free(s->ids); cd_big_free(s->ids32);
    cd_big_free(s->dead); cd_big_free(s->idord);
    for (t = 0; t < CD_IX_MAXT; t++) {
        size_t i;
        cd_big_free(s->off[t]);
        cd_big_free(s->tab[t]);
        for (i = 0; i < s->nsubs[t]; i++) { cd_seg_free(s->subs[t][i].seg); free(s->subs[t][i].tabs); }
        free(s->subs[t]);
    }
    free(s);
}

static size_t cd_seg_nbytes(const cd_seg *s, const cd_ix_layout *L) {
    size_t b = sizeof(cd_seg) + (s->run ? (s->u + 1) * 4 : 0)
               + s->n * (s->ids32 ? 4 : 8);
    int t;
    if (s->dead) b += s->n;
    if (s->idord) b += s->n * 4;
    for (t = 0; t < L->T; t++) {
        b += (((size_t)1 << s->kb[t]) + 1) * 4;
        b += s->u * (size_t)s->es[t] + 8;
        {
            size_t i;
            for (i = 0; i < s->nsubs[t]; i++)
                b += sizeof(cd_sub) + 8 * 256 * 8 + cd_seg_nbytes(s->subs[t][i].seg, L);
        }
    }
    return b;
}

static int cd_ix_floor_log2(size_t x) {
    int r = 0;
    while (x > 1) { x >>= 1; r++; }
    return r;
}

/* Build a segment from m sorted-or-not pairs (p is sorted in place). */
static void cd_seg_free(cd_seg *s);
static int cd_seg_add_subs(const cd_ix_layout *L, cd_seg *s, int depth);

static cd_seg *cd_seg_build_d(const cd_ix_layout *L, cd_ix_pair *p, size_t m, int depth) {
    cd_seg *s;
    uint64_t *fpd = NULL;
    size_t i, u, j;
    int t, kbits;
    if (m > CD_IX_MAX_SEGMENT) return NULL;
    if (cd_ix_sort_pairs(p, m) != 0) return NULL;
    s = (cd_seg *)calloc(1, sizeof(cd_seg));
    if (!s) return NULL;
    s->n = m;
    u = 0;
    for (i = 0; i < m; i++) if (i == 0 || p[i].fp != p[i - 1].fp) u++;
    s->u = u;
    fpd = (uint64_t *)cd_big_alloc((u ? u : 1) * 8, 0);
    if (!fpd) goto fail;
    {
        uint64_t maxid = 0;
        for (i = 0; i < m; i++) if (p[i].id > maxid) maxid = p[i].id;
        if (maxid <= 0xFFFFFFFFu) {
            s->ids32 = (uint32_t *)cd_big_alloc((m ? m : 1) * 4, 0);
            if (!s->ids32) goto fail;
            for (i = 0; i < m; i++) s->ids32[i] = (uint32_t)p[i].id;
        } else {
            s->ids = (uint64_t *)cd_big_alloc((m ? m : 1) * 8, 0);
            if (!s->ids) goto fail;
            for (i = 0; i < m; i++) s->ids[i] = p[i].id;
        }
    }
    if (u < m) {
        s->run = (uint32_t *)cd_big_alloc((u + 1) * 4, 0);
        if (!s->run) goto fail;
    }
    for (i = 0, j = 0; i < m; i++) {
        if (i == 0 || p[i].fp != p[i - 1].fp) {
            fpd[j] = p[i].fp;
            if (s->run) s->run[j] = (uint32_t)i;
            j++;
        }
    }
    if (s->run) s->run[u] = (uint32_t)m;
    /* key bits: 8 to 16 distinct fingerprints per bucket, at most the block */
    kbits = cd_ix_floor_log2(u) - 3;
    if (kbits < 1) kbits = 1;
    if (kbits > 24) kbits = 24;
    for (t = 0; t < L->T; t++) {
        int kb = kbits < L->width[t] ? kbits : L->width[t];
        int ks = L->shift[t] + L->width[t] - kb;
        size_t nb = (size_t)1 << kb, c;
        uint32_t *off;
        s->kb[t] = kb;
        s->ks[t] = ks;
        s->es[t] = (64 - kb + 7) / 8;
        off = s->off[t] = (uint32_t *)cd_big_alloc((nb + 1) * 4, 1);
        if (!off) goto fail;
        for (i = 0; i < u; i++) off[cd_ix_key(fpd[i], ks, kb) + 1]++;
        for (c = 0; c < nb; c++) off[c + 1] += off[c];
        {
            int es = s->es[t];
            uint32_t *fill = (uint32_t *)malloc(nb * 4);
            uint8_t *tab = s->tab[t] = (uint8_t *)cd_big_alloc(u * (size_t)es + 8, 1);
            if (!fill || !tab) { free(fill); goto fail; }
            memcpy(fill, off, nb * 4);
            for (i = 0; i < u; i++) {
                uint64_t fp = fpd[i];
                uint32_t pos = fill[cd_ix_key(fp, ks, kb)]++;
                cd_ix_store_res(tab + (size_t)pos * es, cd_ix_resid(fp, ks, kb), es);
            }
            free(fill);
        }
    }
    cd_big_free(fpd);
    fpd = NULL;
    if (depth < CD_IX_SUB_DEPTH && cd_seg_add_subs(L, s, depth) != 0) goto fail;
    return s;
fail:
    cd_big_free(fpd);
    cd_seg_free(s);
    return NULL;
}

static cd_seg *cd_seg_build(const cd_ix_layout *L, cd_ix_pair *p, size_t m) {
    return cd_seg_build_d(L, p, m, 0);
}

/* Nested segments for the buckets of s that hold more than CD_IX_SUB_MIN
 * fingerprints and 32 times the average (see cd_sub). */
static int cd_seg_add_subs(const cd_ix_layout *L, cd_seg *s, int depth) {
    int t;
    for (t = 0; t < L->T; t++) {
        int kb = s->kb[t], ks = s->ks[t], es = s->es[t];
        size_t nb = (size_t)1 << kb, c, count = 0, x;
        size_t thresh = CD_IX_SUB_MIN, avg = s->u >> kb;
        uint64_t mask = cd_ix_low(64 - kb);
        if (32 * (avg + 1) > thresh) thresh = 32 * (avg + 1);
        for (c = 0; c < nb; c++) if (s->off[t][c + 1] - s->off[t][c] > thresh) count++;
        if (!count) continue;
        s->subs[t] = (cd_sub *)calloc(count, sizeof(cd_sub));
        if (!s->subs[t]) return -1;
        for (c = 0; c < nb; c++) {
            size_t lo = s->off[t][c], w = s->off[t][c + 1] - lo;
            uint64_t V = 0, *F;
            cd_ix_pair *p;
            uint64_t (*tabs)[256];
            cd_seg *sub;
            if (w <= thresh) continue;
            F = (uint64_t *)cd_big_alloc(w * sizeof(uint64_t), 0);
            p = (cd_ix_pair *)cd_big_alloc(w * sizeof(cd_ix_pair), 0);
            tabs = (uint64_t (*)[256])malloc(8 * sizeof(*tabs));
            if (!F || !p || !tabs) { cd_big_free(F); cd_big_free(p); free(tabs); return -1; }
            for (x = 0; x < w; x++) {
                F[x] = cd_ix_unresid(cd_ix_load_res(s->tab[t] + (lo + x) * (size_t)es, mask), c, ks, kb);
                V |= F[x] ^ F[0];
            }
            cd_ix_perm_tables(L, V, tabs);
            for (x = 0; x < w; x++) {
                p[x].fp = cd_ix_permute(F[x], (const uint64_t (*)[256])tabs);
                p[x].id = x;
            }
            cd_big_free(F);
            sub = cd_seg_build_d(L, p, w, depth + 1);
            cd_big_free(p);
            if (!sub) { free(tabs); return -1; }
            if (!cd_seg_splits(L, sub, w)) { cd_seg_free(sub); free(tabs); continue; }
            s->subs[t][s->nsubs[t]].key = c;
            s->subs[t][s->nsubs[t]].seg = sub;
            s->subs[t][s->nsubs[t]].tabs = tabs;
            s->nsubs[t]++;
        }
    }
    return 0;
}

static int cd_seg_ensure_idord(cd_seg *s) {
    if (s->idord || s->n == 0) return 0;
    s->idord = cd_ix_sort_by_id(s->ids, s->ids32, s->n);
    return s->idord ? 0 : -1;
}

/* Position of a live entry with this id, or -1.  idord must exist. */
static long long cd_seg_find_id(const cd_seg *s, uint64_t id) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (CD_ID(s, s->idord[mid]) < id) lo = mid + 1; else hi = mid;
    }
    for (; lo < s->n && CD_ID(s, s->idord[lo]) == id; lo++) {
        uint32_t pos = s->idord[lo];
        if (!s->dead || !s->dead[pos]) return (long long)pos;
    }
    return -1;
}

/* Distinct fingerprint i of table 0, whose bucket is key. */
static inline uint64_t cd_seg_fp0(const cd_seg *s, size_t i, uint64_t key) {
    return cd_ix_unresid(cd_ix_load_res(s->tab[0] + i * (size_t)s->es[0], cd_ix_low(64 - s->kb[0])),
                         key, s->ks[0], s->kb[0]);
}

/* Every distinct fingerprint in ascending order: u its index, fp its value. */
#define CD_SEG_FOR_EACH(s_, u_, fp_, BODY) do {                                       \
        size_t nb0_ = (size_t)1 << (s_)->kb[0], c0_;                                  \
        size_t u_ = 0;                                                                \
        for (c0_ = 0; c0_ < nb0_; c0_++)                                              \
            for (; u_ < (s_)->off[0][c0_ + 1]; u_++) {                                \
                uint64_t fp_ = cd_seg_fp0((s_), u_, c0_);                             \
                BODY                                                                  \
            }                                                                         \
    } while (0)

/* Index of fp in table 0 (it must be there): a binary search of its bucket,
 * whose residuals are in ascending order (table 0's key is the top bits). */
CD_IX_INLINE size_t cd_seg_find_fp(const cd_seg *s, uint64_t fp) {
    int ks = s->ks[0], kb = s->kb[0], es = s->es[0];
    uint64_t key = cd_ix_key(fp, ks, kb), r = cd_ix_resid(fp, ks, kb), mask = cd_ix_low(64 - kb);
    size_t lo = s->off[0][key], hi = s->off[0][key + 1];
    const uint8_t *tab = s->tab[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cd_ix_load_res(tab + mid * (size_t)es, mask) < r) lo = mid + 1; else hi = mid;
    }
    return lo;
}

CD_IX_INLINE void cd_seg_emit(const cd_seg *s, size_t u, int d, cd_ix_out *o) {
    uint32_t j, end = CD_RUN(s, u + 1);
    for (j = CD_RUN(s, u); j < end; j++)
        if (!s->dead || !s->dead[j]) cd_ix_push(o, 0, CD_ID(s, j), d);
}

/* Is t the first block on which x and y agree? */
CD_IX_INLINE int cd_ix_first_block(const cd_ix_layout *L, uint64_t diff, int t) {
    int s;
    if (diff & L->bmask[t]) return 0;
    for (s = 0; s < t; s++) if (!(diff & L->bmask[s])) return 0;
    return 1;
}

/* (distinct index, distance) results of a nested search. */
typedef struct { uint64_t *u; uint8_t *d; size_t n, cap; int oom; } cd_ix_ud;

static void cd_ix_ud_push(cd_ix_ud *b, uint64_t u, int d) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        uint64_t *nu = (uint64_t *)realloc(b->u, cap * sizeof(uint64_t));
        uint8_t *nd;
        if (!nu) { b->oom = 1; return; }
        b->u = nu;
        nd = (uint8_t *)realloc(b->d, cap);
        if (!nd) { b->oom = 1; return; }
        b->d = nd;
        b->cap = cap;
    }
    b->u[b->n] = u;
    b->d[b->n] = (uint8_t)d;
    b->n++;
}

static const cd_sub *cd_seg_find_sub(const cd_seg *s, int t, uint64_t key) {
    size_t lo = 0, hi = s->nsubs[t];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->subs[t][mid].key < key) lo = mid + 1; else hi = mid;
    }
    return lo < s->nsubs[t] && s->subs[t][lo].key == key ? &s->subs[t][lo] : NULL;
}

static void cd_seg_sub_search(const cd_ix_layout *L, const cd_seg *s, const cd_sub *sb, int t,
                              size_t lo, uint64_t key, uint64_t q, cd_ix_ud *out);

/* Every distinct fingerprint of s within k of q, as (distinct index, d). */
static void cd_seg_search(const cd_ix_layout *L, const cd_seg *s, uint64_t q, cd_ix_ud *out) {
    int t, k = L->k;
    for (t = 0; t < L->T; t++) {
        int ks = s->ks[t], kb = s->kb[t], es = s->es[t];
        uint64_t key = cd_ix_key(q, ks, kb), mask = cd_ix_low(64 - kb), rq = cd_ix_resid(q, ks, kb);
        size_t lo = s->off[t][key], hi = s->off[t][key + 1], i;
        const cd_sub *sb = s->nsubs[t] ? cd_seg_find_sub(s, t, key) : NULL;
        if (sb) { cd_seg_sub_search(L, s, sb, t, lo, key, q, out); continue; }
        for (i = lo; i < hi; i++) {
            uint64_t r = cd_ix_load_res(s->tab[t] + i * (size_t)es, mask);
            int d = cd_popcount64(r ^ rq);
            if (d <= k) {
                uint64_t F = cd_ix_unresid(r, key, ks, kb);
                if (cd_ix_first_block(L, F ^ q, t))
                    cd_ix_ud_push(out, t == 0 ? i : cd_seg_find_fp(s, F), d);
            }
        }
    }
}

/* The results of bucket key of table t (starting at lo) through its nested
 * segment: the nested search runs on the permuted query, its results are
 * positions in the bucket, kept if t is their first agreeing block. */
static void cd_seg_sub_search(const cd_ix_layout *L, const cd_seg *s, const cd_sub *sb, int t,
                              size_t lo, uint64_t key, uint64_t q, cd_ix_ud *out) {
    cd_ix_ud inner;
    size_t i;
    int ks = s->ks[t], kb = s->kb[t], es = s->es[t];
    uint64_t mask = cd_ix_low(64 - kb);
    memset(&inner, 0, sizeof(inner));
    cd_seg_search(L, sb->seg, cd_ix_permute(q, (const uint64_t (*)[256])sb->tabs), &inner);
    for (i = 0; i < inner.n; i++) {
        size_t x = (size_t)CD_ID(sb->seg, CD_RUN(sb->seg, inner.u[i]));
        uint64_t F = cd_ix_unresid(cd_ix_load_res(s->tab[t] + (lo + x) * (size_t)es, mask),
                                   key, ks, kb);
        if (cd_ix_first_block(L, F ^ q, t))
            cd_ix_ud_push(out, t == 0 ? lo + x : cd_seg_find_fp(s, F), inner.d[i]);
    }
    if (inner.oom) out->oom = 1;
    free(inner.u);
    free(inner.d);
}

#define CD_IX_SEG_QUERY_BODY                                                          \
    const cd_ix_layout *L_ = L;                                                       \
    int t_, T_ = L_->T;                                                               \
    for (t_ = 0; t_ < T_; t_++) {                                                     \
        int ks_ = s->ks[t_], kb_ = s->kb[t_];                                         \
        uint64_t key_ = cd_ix_key(q, ks_, kb_);                                       \
        size_t lo_ = s->off[t_][key_], hi_ = s->off[t_][key_ + 1], i_;                \
        int es_ = s->es[t_];                                                          \
        if (s->nsubs[t_]) {                                                           \
            const cd_sub *sb_ = cd_seg_find_sub(s, t_, key_);                         \
            if (sb_) {                                                                \
                UD.n = 0;                                                             \
                cd_seg_sub_search(L_, s, sb_, t_, lo_, key_, q, &UD);                 \
                if (UD.oom) H.oom = 1;                                                \
                for (i_ = 0; i_ < UD.n; i_++) CD_IX_HIT(UD.u[i_], 1, UD.d[i_]);       \
                continue;                                                             \
            }                                                                         \
        }                                                                             \
        uint64_t rmask_ = cd_ix_low(64 - kb_);                                        \
        uint64_t rq_ = cd_ix_resid(q, ks_, kb_);                                      \
        const uint8_t *b_ = s->tab[t_] + lo_ * (size_t)es_;                           \
        for (i_ = lo_; i_ < hi_; i_++, b_ += es_) {                                   \
            uint64_t r_ = cd_ix_load_res(b_, rmask_);                                 \
            int d_ = cd_popcount64(r_ ^ rq_);                                         \
            if (d_ <= k) {                                                            \
                uint64_t F_ = cd_ix_unresid(r_, key_, ks_, kb_);                      \
                if (cd_ix_first_block(L_, F_ ^ q, t_)) {                              \
                    if (t_ == 0) CD_IX_HIT(i_, 1, d_);                                \
                    else CD_IX_HIT(F_, 0, d_);                                        \
                }                                                                     \
            }                                                                         \
        }                                                                             \
    }

/* ------------------------------------------------------------ the index */

static void cd_ix_init(cd_ix *ix, int k) {
    memset(ix, 0, sizeof(*ix));
    cd_ix_layout_init(&ix->L, k);
}

static void cd_ix_clear(cd_ix *ix) {
    size_t i;
    for (i = 0; i < ix->nsegs; i++) cd_seg_free(ix->segs[i]);
    free(ix->segs);
    free(ix->pfp);
    free(ix->pid);
    ix->segs = NULL;
    ix->pfp = ix->pid = NULL;
    ix->nsegs = ix->capsegs = ix->pn = ix->pcap = ix->live = 0;
}

static size_t cd_ix_nbytes(const cd_ix *ix) {
    size_t b = sizeof(cd_ix) + ix->pcap * 16 + ix->capsegs * sizeof(void *), i;
    for (i = 0; i < ix->nsegs; i++) b += cd_seg_nbytes(ix->segs[i], &ix->L);
    return b;
}

/* Append the live entries of a segment to p (p has room). */
static size_t cd_seg_gather(const cd_seg *s, cd_ix_pair *p) {
    size_t c = 0;
    CD_SEG_FOR_EACH(s, u, fp, {
        uint32_t j;
        for (j = CD_RUN(s, u); j < CD_RUN(s, u + 1); j++)
            if (!s->dead || !s->dead[j]) { p[c].fp = fp; p[c].id = CD_ID(s, j); c++; }
    });
    return c;
}

static size_t cd_seg_live(const cd_seg *s) { return s->n - s->ndead; }

/* Replace segments [from, nsegs) and, if with_pending, the pending buffer by
 * one segment built from their live entries plus extra[0..m).  On failure
 * nothing changes. */
static int cd_ix_rebuild(cd_ix *ix, size_t from, int with_pending,
                         const uint64_t *xfp, const uint64_t *xid, size_t m) {
    size_t total = m, c = 0, i;
    cd_ix_pair *p;
    cd_seg *s;
    for (i = from; i < ix->nsegs; i++) total += cd_seg_live(ix->segs[i]);
    if (with_pending) total += ix->pn;
    if (total > CD_IX_MAX_SEGMENT) return -1;
    p = (cd_ix_pair *)cd_big_alloc((total ? total : 1) * sizeof(cd_ix_pair), 0);
    if (!p) return -1;
    for (i = from; i < ix->nsegs; i++) c += cd_seg_gather(ix->segs[i], p + c);
    if (with_pending)
        for (i = 0; i < ix->pn; i++) { p[c].fp = ix->pfp[i]; p[c].id = ix->pid[i]; c++; }
    for (i = 0; i < m; i++) { p[c].fp = xfp[i]; p[c].id = xid[i]; c++; }
    if (ix->capsegs < from + 1) {
        cd_seg **ns = (cd_seg **)realloc(ix->segs, (from + 8) * sizeof(cd_seg *));
        if (!ns) { cd_big_free(p); return -1; }
        ix->segs = ns;
        ix->capsegs = from + 8;
    }
    s = total ? cd_seg_build(&ix->L, p, total) : NULL;
    cd_big_free(p);
    if (total && !s) return -1;
    for (i = from; i < ix->nsegs; i++) cd_seg_free(ix->segs[i]);
    ix->nsegs = from;
    if (s) ix->segs[ix->nsegs++] = s;
    if (with_pending) ix->pn = 0;
    ix->live += m;
    return 0;
}

/* Merge trailing segments while the last is at least half the one before. */
static int cd_ix_settle(cd_ix *ix) {
    while (ix->nsegs >= 2) {
        size_t a = cd_seg_live(ix->segs[ix->nsegs - 2]);
        size_t b = cd_seg_live(ix->segs[ix->nsegs - 1]);
        if (2 * b < a) break;
        if (cd_ix_rebuild(ix, ix->nsegs - 2, 0, NULL, NULL, 0) != 0) return -1;
    }
    return 0;
}

/* Fold everything into one segment without tombstones. */
static int cd_ix_compact(cd_ix *ix) {
    if (ix->pn == 0 && ix->nsegs <= 1 && (ix->nsegs == 0 || ix->segs[0]->ndead == 0))
        return 0;
    return cd_ix_rebuild(ix, 0, 1, NULL, NULL, 0);
}

/* Is id present?  1 yes, 0 no, -1 out of memory. */
static int cd_ix_contains(cd_ix *ix, uint64_t id) {
    size_t i;
    for (i = 0; i < ix->pn; i++) if (ix->pid[i] == id) return 1;
    for (i = 0; i < ix->nsegs; i++) {
        if (cd_seg_ensure_idord(ix->segs[i]) != 0) return -1;
        if (cd_seg_find_id(ix->segs[i], id) >= 0) return 1;
    }
    return 0;
}

/* Add m entries.  0 ok, -1 out of memory, -2 an id is already present or
 * repeated (*bad = the smallest such id).  All or nothing. */
static int cd_ix_add_many(cd_ix *ix, const uint64_t *fps, const uint64_t *ids, size_t m,
                          uint64_t *bad) {
    size_t i;
    int found = 0;
    uint64_t worst = 0;
#define CD_IX_BAD(v_) do { uint64_t w_ = (v_); if (!found || w_ < worst) worst = w_; found = 1; } while (0)
    if (m == 0) return 0;
    if (m == 1) {
        int r = cd_ix_contains(ix, ids[0]);
        if (r < 0) return -1;
        if (r) CD_IX_BAD(ids[0]);
    } else {
        /* sorted copy of the new ids: repeats within the batch, then a
         * merge walk (big batches) or binary searches (small ones) */
        uint32_t *ord = cd_ix_sort_by_id(ids, NULL, m);
        size_t sidx;
        if (!ord) return -1;
        for (i = 1; i < m; i++)
            if (ids[ord[i]] == ids[ord[i - 1]]) { CD_IX_BAD(ids[ord[i]]); break; }
        for (i = 0; i < ix->pn; i++) {
            size_t lo = 0, hi = m;
            uint64_t v = ix->pid[i];
            while (lo < hi) { size_t mid = lo + (hi - lo) / 2; if (ids[ord[mid]] < v) lo = mid + 1; else hi = mid; }
            if (lo < m && ids[ord[lo]] == v) CD_IX_BAD(v);
        }
        for (sidx = 0; sidx < ix->nsegs; sidx++) {
            cd_seg *s = ix->segs[sidx];
            if (cd_seg_ensure_idord(s) != 0) { cd_big_free(ord); return -1; }
            if ((double)m * 24.0 < (double)s->n) {
                for (i = 0; i < m; i++)
                    if (cd_seg_find_id(s, ids[i]) >= 0) CD_IX_BAD(ids[i]);
            } else {
                size_t a = 0, b = 0;
                while (a < m && b < s->n) {
                    uint64_t x = ids[ord[a]];
                    uint32_t pos = s->idord[b];
                    uint64_t y = CD_ID(s, pos);
                    if (x < y) a++;
                    else if (y < x) b++;
                    else if (s->dead && s->dead[pos]) b++;
                    else { CD_IX_BAD(x); break; }
                }
            }
        }
        cd_big_free(ord);
    }
#undef CD_IX_BAD
    if (found) { *bad = worst; return -2; }
    if (ix->pn + m <= CD_IX_PENDING) {
        if (ix->pn + m > ix->pcap) {
            size_t cap = ix->pcap ? ix->pcap : 16;
            uint64_t *a, *b;
            while (cap < ix->pn + m) cap *= 2;
            a = (uint64_t *)realloc(ix->pfp, cap * 8);
            if (!a) return -1;
            ix->pfp = a;
            b = (uint64_t *)realloc(ix->pid, cap * 8);
            if (!b) return -1;
            ix->pid = b;
            ix->pcap = cap;
        }
        memcpy(ix->pfp + ix->pn, fps, m * 8);
        memcpy(ix->pid + ix->pn, ids, m * 8);
        ix->pn += m;
        ix->live += m;
        return 0;
    }
    if (cd_ix_rebuild(ix, ix->nsegs, 1, fps, ids, m) != 0) return -1;
    /* the pending buffer's memory goes once it is folded in */
    free(ix->pfp); free(ix->pid);
    ix->pfp = ix->pid = NULL;
    ix->pcap = 0;
    cd_ix_settle(ix);  /* a failed merge leaves a valid index */
    return 0;
}

/* Remove an id: 1 removed, 0 absent, -1 out of memory. */
static int cd_ix_remove(cd_ix *ix, uint64_t id) {
    size_t i;
    for (i = 0; i < ix->pn; i++) {
        if (ix->pid[i] == id) {
            ix->pn--;
            ix->pfp[i] = ix->pfp[ix->pn];
            ix->pid[i] = ix->pid[ix->pn];
            ix->live--;
            return 1;
        }
    }
    for (i = 0; i < ix->nsegs; i++) {
        cd_seg *s = ix->segs[i];
        long long pos;
        if (cd_seg_ensure_idord(s) != 0) return -1;
        pos = cd_seg_find_id(s, id);
        if (pos < 0) continue;
        if (!s->dead) {
            s->dead = (uint8_t *)cd_big_alloc(s->n, 1);
            if (!s->dead) return -1;
        }
        s->dead[pos] = 1;
        s->ndead++;
        ix->live--;
        /* compaction: a segment more than half tombstones is rebuilt (or
         * dropped); a failed rebuild only postpones it */
        if (2 * s->ndead > s->n) {
            if (s->ndead == s->n) {
                size_t j;
                cd_seg_free(s);
                for (j = i + 1; j < ix->nsegs; j++) ix->segs[j - 1] = ix->segs[j];
                ix->nsegs--;
            } else {
                size_t live = cd_seg_live(s);
                cd_ix_pair *p = (cd_ix_pair *)cd_big_alloc(live * sizeof(cd_ix_pair), 0);
                if (p) {
                    cd_seg *ns;
                    cd_seg_gather(s, p);
                    ns = cd_seg_build(&ix->L, p, live);
                    cd_big_free(p);
                    if (ns) { cd_seg_free(s); ix->segs[i] = ns; }
                }
            }
        }
        return 1;
    }
    return 0;
}

/* Sort o's entries [from, o->n) by (d, id). */
static void cd_ix_sort_slice(cd_ix_out *o, size_t from) {
    size_t x, y;
    for (x = from + 1; x < o->n; x++) {
        uint64_t b = o->b[x];
        uint8_t d = o->d[x];
        for (y = x; y > from && (o->d[y - 1] > d || (o->d[y - 1] == d && o->b[y - 1] > b)); y--) {
            o->b[y] = o->b[y - 1];
            o->d[y] = o->d[y - 1];
        }
        o->b[y] = b;
        o->d[y] = d;
    }
}

static void cd_ix_sort_big(cd_ix_out *o, size_t from);

/* Big result lists: sort (d, id) keys with qsort on a packed copy. */
typedef struct { uint8_t d; uint64_t id; } cd_ix_di;
static int cd_ix_cmp_di(const void *a, const void *b) {
    const cd_ix_di *x = (const cd_ix_di *)a, *y = (const cd_ix_di *)b;
    if (x->d != y->d) return x->d < y->d ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}
static void cd_ix_sort_big(cd_ix_out *o, size_t from) {
    size_t n = o->n - from, i;
    cd_ix_di *t = (cd_ix_di *)malloc(n * sizeof(cd_ix_di));
    if (!t) { cd_ix_sort_slice(o, from); return; }
    for (i = 0; i < n; i++) { t[i].d = o->d[from + i]; t[i].id = o->b[from + i]; }
    qsort(t, n, sizeof(cd_ix_di), cd_ix_cmp_di);
    for (i = 0; i < n; i++) { o->d[from + i] = t[i].d; o->b[from + i] = t[i].id; }
    free(t);
}


/* A candidate within k: x = distinct index (resolved) or fingerprint (to be
 * looked up in table 0) or, for the pending buffer, the id. */
typedef struct { uint64_t x; uint32_t q; uint16_t seg; uint8_t d; uint8_t resolved; } cd_ix_hit;
#define CD_IX_PENDING_SEG 0xFFFF

typedef struct { cd_ix_hit *h; size_t n, cap; int oom; } cd_ix_hits;

static inline void cd_ix_hits_push(cd_ix_hits *H, uint64_t x, uint32_t q, size_t seg, int d,
                                   int resolved) {
    if (H->n == H->cap) {
        size_t cap = H->cap ? H->cap * 2 : 256;
        cd_ix_hit *nh = (cd_ix_hit *)realloc(H->h, cap * sizeof(cd_ix_hit));
        if (!nh) { H->oom = 1; return; }
        H->h = nh;
        H->cap = cap;
    }
    H->h[H->n].x = x;
    H->h[H->n].q = q;
    H->h[H->n].seg = (uint16_t)seg;
    H->h[H->n].d = (uint8_t)d;
    H->h[H->n].resolved = (uint8_t)resolved;
    H->n++;
}

/* Batch query: offsets[m+1].  Queries go in blocks: first every bucket of
 * the block's queries is scanned (bucket offsets and lines prefetched a few
 * queries ahead) and the candidates within k are noted; then the candidates'
 * distinct entries, runs and ids are looked up in passes over the block, each
 * pass prefetching what the next one reads, so the cache misses of a block's
 * results overlap instead of forming one chain per result. */
#define CD_IX_AHEAD 8
#define CD_IX_BLOCK 64
CD_IX_INLINE void cd_ix_query_many_impl(const cd_ix *ix, const uint64_t *qs, size_t m,
                                        int64_t *offsets, cd_ix_out *o) {
    size_t i, b0, h;
    int t;
    const cd_ix_layout *L = &ix->L;
    int k = L->k;
    const cd_seg *s0 = ix->nsegs ? ix->segs[0] : NULL;
    cd_ix_hits H;
    cd_ix_ud UD;
    memset(&H, 0, sizeof(H));
    memset(&UD, 0, sizeof(UD));
    for (b0 = 0; b0 < m; b0 += CD_IX_BLOCK) {
        size_t b1 = b0 + CD_IX_BLOCK < m ? b0 + CD_IX_BLOCK : m;
        H.n = 0;
        /* pass 1: scan buckets, note candidates */
        for (i = b0; i < b1; i++) {
            uint64_t q = qs[i];
            size_t si;
            if (s0) {
                if (i < CD_IX_AHEAD) {
                    /* not prefetched by an earlier query: this query's
                     * offsets, then its buckets, all tables at once */
                    for (t = 0; t < L->T; t++)
                        cd_prefetch(s0->off[t] + cd_ix_key(q, s0->ks[t], s0->kb[t]));
                    for (t = 0; t < L->T; t++)
                        cd_prefetch(s0->tab[t] + (size_t)s0->off[t][cd_ix_key(q, s0->ks[t], s0->kb[t])]
                                                 * s0->es[t]);
                }
                if (i + 2 * CD_IX_AHEAD < m) {
                    uint64_t q2 = qs[i + 2 * CD_IX_AHEAD];
                    for (t = 0; t < L->T; t++)
                        cd_prefetch(s0->off[t] + cd_ix_key(q2, s0->ks[t], s0->kb[t]));
                }
                if (i + CD_IX_AHEAD < m) {
                    uint64_t q1 = qs[i + CD_IX_AHEAD];
                    for (t = 0; t < L->T; t++) {
                        const uint32_t *op = s0->off[t] + cd_ix_key(q1, s0->ks[t], s0->kb[t]);
                        const uint8_t *a, *z;
                        a = s0->tab[t] + (size_t)op[0] * s0->es[t];
                        z = s0->tab[t] + (size_t)op[1] * s0->es[t];
                        /* the bucket's lines, at most four */
                        cd_prefetch(a);
                        if (z - a > 64) cd_prefetch(a + 64);
                        if (z - a > 128) cd_prefetch(a + 128);
                        if (z - a > 192) cd_prefetch(a + 192);
                    }
                }
            }
            for (si = 0; si < ix->nsegs; si++) {
                const cd_seg *s = ix->segs[si];
#define CD_IX_HIT(x_, res_, d_hit_) do {                                               \
                    cd_ix_hits_push(&H, (x_), (uint32_t)(i - b0), si, (d_hit_), (res_));\
                    if (res_) { if (s->run) cd_prefetch(s->run + (x_)); }             \
                    else cd_prefetch(s->off[0] + cd_ix_key((x_), s->ks[0], s->kb[0]));\
                } while (0)
                CD_IX_SEG_QUERY_BODY
#undef CD_IX_HIT
            }
            for (si = 0; si < ix->pn; si++) {
                int d = cd_popcount64(ix->pfp[si] ^ q);
                if (d <= k) cd_ix_hits_push(&H, ix->pid[si], (uint32_t)(i - b0), CD_IX_PENDING_SEG, d, 1);
            }
        }
        if (H.oom) { o->oom = 1; break; }
        /* pass 2: fingerprints found by tables >= 1 -> distinct index */
        for (h = 0; h < H.n; h++) {
            cd_ix_hit *x = H.h + h;
            if (!x->resolved) {
                const cd_seg *s = ix->segs[x->seg];
                uint64_t key = cd_ix_key(x->x, s->ks[0], s->kb[0]);
                cd_prefetch(s->tab[0] + (size_t)s->off[0][key] * s->es[0]);
            }
        }
        for (h = 0; h < H.n; h++) {
            cd_ix_hit *x = H.h + h;
            if (!x->resolved) {
                const cd_seg *s = ix->segs[x->seg];
                x->x = cd_seg_find_fp(s, x->x);
                x->resolved = 1;
                if (s->run) cd_prefetch(s->run + x->x);
            }
        }
        /* pass 3: runs -> prefetch the ids */
        for (h = 0; h < H.n; h++) {
            cd_ix_hit *x = H.h + h;
            if (x->seg != CD_IX_PENDING_SEG) {
                const cd_seg *s = ix->segs[x->seg];
                uint32_t r0 = CD_RUN(s, x->x);
                if (s->ids32) cd_prefetch(s->ids32 + r0); else cd_prefetch(s->ids + r0);
            }
        }
        /* pass 4: results in query order, each query's sorted */
        h = 0;
        for (i = b0; i < b1; i++) {
            size_t from = o->n;
            offsets[i] = (int64_t)from;
            for (; h < H.n && H.h[h].q == i - b0; h++) {
                cd_ix_hit *x = H.h + h;
                if (x->seg == CD_IX_PENDING_SEG) cd_ix_push(o, 0, x->x, x->d);
                else cd_seg_emit(ix->segs[x->seg], (size_t)x->x, x->d, o);
            }
            if (o->n - from > 64) cd_ix_sort_big(o, from);
            else if (o->n - from > 1) cd_ix_sort_slice(o, from);
        }
        if (o->oom) break;
    }
    free(H.h);
    free(UD.u);
    free(UD.d);
    offsets[m] = (int64_t)o->n;
}

#ifdef CD_IX_HAVE_POPCNT_CLONE
__attribute__((target("popcnt")))
static void cd_ix_query_many_popcnt(const cd_ix *ix, const uint64_t *qs, size_t m,
                                    int64_t *offsets, cd_ix_out *o) {
    cd_ix_query_many_impl(ix, qs, m, offsets, o);
}
#endif

static void cd_ix_query_many(const cd_ix *ix, const uint64_t *qs, size_t m,
                             int64_t *offsets, cd_ix_out *o) {
#ifdef CD_IX_HAVE_POPCNT_CLONE
    if (__builtin_cpu_supports("popcnt")) { cd_ix_query_many_popcnt(ix, qs, m, offsets, o); return; }
#endif
    cd_ix_query_many_impl(ix, qs, m, offsets, o);
}

/* Self-join of a compacted index (one segment, no tombstones, no pending):
 * every pair of entries within k, as (smaller id, larger id, d). */
CD_IX_INLINE void cd_ix_pair_ids(const cd_seg *s, size_t u, size_t v, int d, cd_ix_out *o) {
    uint32_t a, b;
    for (a = CD_RUN(s, u); a < CD_RUN(s, u + 1); a++)
        for (b = CD_RUN(s, v); b < CD_RUN(s, v + 1); b++) {
            uint64_t x = CD_ID(s, a), y = CD_ID(s, b);
            if (x < y) cd_ix_push(o, x, y, d); else cd_ix_push(o, y, x, d);
        }
}

/* Self-join.  It goes bucket by bucket, table by table: every pair within k
 * agrees on some block, so it shares a bucket of that block's table, and it
 * is reported only from the table of its first agreeing block.  Buckets are
 * read in memory order (no random access except to turn a found pair's
 * fingerprints into runs of ids).
 *
 * A bucket of b distinct fingerprints costs b * (b - 1) / 2 checks when b is
 * small.  A bigger one (skewed data: many fingerprints sharing a block but
 * not within k of each other) is joined recursively: its fingerprints, with
 * their bits permuted so that the bits on which they differ are spread over
 * all blocks and lead each block (a permutation of the bits keeps every
 * Hamming distance), become a temporary segment with its own k + 1 tables,
 * whose join yields the bucket's pairs; the pairs are then kept only if t is
 * their first agreeing block in the outer layout.  Each level splits a big
 * bucket by bits that its members do not all share; after CD_IX_JOIN_DEPTH
 * levels the plain quadratic scan is the fallback. */
#define CD_IX_JOIN_SMALL 1024
#define CD_IX_JOIN_DEPTH 4

typedef struct cd_ix_join_ctx cd_ix_join_ctx;
typedef void (*cd_ix_pair_cb)(cd_ix_join_ctx *c, size_t ux, size_t uy, int d);
struct cd_ix_join_ctx {
    cd_ix_pair_cb cb;
    const cd_ix_layout *L;
    const cd_seg *s;            /* the segment this context's pairs index */
    cd_ix_join_ctx *parent;     /* nested join: the outer bucket's context */
    const uint64_t *F;          /* nested join: the outer bucket's fingerprints */
    size_t lo;                  /* nested join: the outer bucket's start */
    int t;                      /* nested join: the outer bucket's table */
    cd_ix_out *o;
};

static void cd_ix_top_emit(cd_ix_join_ctx *c, size_t ux, size_t uy, int d) {
    cd_ix_pair_ids(c->s, ux, uy, d, c->o);
}

static void cd_ix_sub_emit(cd_ix_join_ctx *c, size_t ux, size_t uy, int d) {
    cd_ix_join_ctx *P = c->parent;
    size_t x = (size_t)CD_ID(c->s, CD_RUN(c->s, ux)), y = (size_t)CD_ID(c->s, CD_RUN(c->s, uy));
    uint64_t fx = c->F[x], fy = c->F[y];
    if (!cd_ix_first_block(c->L, fx ^ fy, c->t)) return;
    P->cb(P, c->t == 0 ? c->lo + x : cd_seg_find_fp(P->s, fx),
          c->t == 0 ? c->lo + y : cd_seg_find_fp(P->s, fy), d);
}

#define CD_IX_JOIN_DEF(NAME, ATTR)                                                     \
ATTR static void NAME(const cd_seg *s, int depth, cd_ix_join_ctx *c) {                 \
    const cd_ix_layout *L = c->L;                                                      \
    int k = L->k, t;                                                                   \
    size_t maxb = 0;                                                                   \
    uint64_t *F;                                                                       \
    for (t = 0; t < L->T; t++) {                                                       \
        size_t nb = (size_t)1 << s->kb[t], cc;                                         \
        for (cc = 0; cc < nb; cc++) {                                                  \
            size_t w = s->off[t][cc + 1] - s->off[t][cc];                              \
            if (w > maxb) maxb = w;                                                    \
        }                                                                              \
    }                                                                                  \
    F = (uint64_t *)malloc((maxb ? maxb : 1) * sizeof(uint64_t));                      \
    if (!F) { c->o->oom = 1; return; }                                                 \
    for (t = 0; t < L->T && !c->o->oom; t++) {                                         \
        int ks = s->ks[t], kb = s->kb[t], es = s->es[t];                               \
        size_t nb = (size_t)1 << kb, cc;                                               \
        uint64_t rmask = cd_ix_low(64 - kb), bm = L->bmask[t];                         \
        for (cc = 0; cc < nb && !c->o->oom; cc++) {                                    \
            size_t lo = s->off[t][cc], w = s->off[t][cc + 1] - lo, x, y;               \
            if (w < 2) continue;                                                       \
            {                                                                          \
                const uint8_t *bp = s->tab[t] + lo * (size_t)es;                       \
                for (x = 0; x < w; x++, bp += es)                                      \
                    F[x] = cd_ix_unresid(cd_ix_load_res(bp, rmask), cc, ks, kb);       \
            }                                                                          \
            if (w > CD_IX_JOIN_SMALL && depth < CD_IX_JOIN_DEPTH) {                    \
                cd_ix_pair *p = (cd_ix_pair *)cd_big_alloc(w * sizeof(cd_ix_pair), 0);  \
                uint64_t (*tabs)[256] = (uint64_t (*)[256])malloc(8 * sizeof(*tabs));  \
                uint64_t V = 0;                                                        \
                cd_seg *sub;                                                           \
                cd_ix_join_ctx c2;                                                     \
                if (!p || !tabs) { cd_big_free(p); free(tabs); c->o->oom = 1; break; } \
                for (x = 1; x < w; x++) V |= F[x] ^ F[0];                              \
                cd_ix_perm_tables(L, V, tabs);                                         \
                for (x = 0; x < w; x++) {                                              \
                    p[x].fp = cd_ix_permute(F[x], (const uint64_t (*)[256])tabs);      \
                    p[x].id = x;                                                       \
                }                                                                      \
                free(tabs);                                                            \
                sub = cd_seg_build_d(L, p, w, CD_IX_SUB_DEPTH);                        \
                cd_big_free(p);                                                      \
                if (!sub) { c->o->oom = 1; break; }                                    \
                if (!cd_seg_splits(L, sub, w)) {                                       \
                    /* the members agree on too much (a tight cluster): the  */        \
                    /* nested tables would not be smaller, scan the bucket   */        \
                    cd_seg_free(sub);                                                  \
                    goto scan_##NAME;                                                  \
                }                                                                      \
                c2.cb = cd_ix_sub_emit; c2.L = L; c2.s = sub; c2.parent = c;           \
                c2.F = F; c2.lo = lo; c2.t = t; c2.o = c->o;                           \
                NAME(sub, depth + 1, &c2);                                             \
                cd_seg_free(sub);                                                      \
                continue;                                                              \
            }                                                                          \
        scan_##NAME:                                                                   \
            for (x = 0; x + 1 < w; x++) {                                              \
                uint64_t fx = F[x];                                                    \
                for (y = x + 1; y < w; y++) {                                          \
                    uint64_t diff = fx ^ F[y];                                         \
                    int d = cd_popcount64(diff);                                       \
                    if (d <= k && !(diff & bm) && cd_ix_first_block(L, diff, t))       \
                        c->cb(c, t == 0 ? lo + x : cd_seg_find_fp(s, fx),              \
                              t == 0 ? lo + y : cd_seg_find_fp(s, F[y]), d);           \
                }                                                                      \
            }                                                                          \
        }                                                                              \
    }                                                                                  \
    free(F);                                                                           \
}

CD_IX_JOIN_DEF(cd_ix_join_plain, )
#ifdef CD_IX_HAVE_POPCNT_CLONE
CD_IX_JOIN_DEF(cd_ix_join_popcnt, __attribute__((target("popcnt"))))
#endif

static void cd_ix_pairs(const cd_ix *ix, cd_ix_out *o) {
    const cd_seg *s;
    cd_ix_join_ctx c;
    size_t u;
    if (ix->nsegs != 1) return;
    s = ix->segs[0];
    /* equal fingerprints: the pairs inside each run */
    if (s->run)
        for (u = 0; u < s->u && !o->oom; u++) {
            uint32_t a, b;
            for (a = CD_RUN(s, u); a < CD_RUN(s, u + 1); a++)
                for (b = a + 1; b < CD_RUN(s, u + 1); b++)
                    cd_ix_push(o, CD_ID(s, a), CD_ID(s, b), 0);
        }
    if (ix->L.k == 0) return;   /* distinct fingerprints are never within 0 */
    memset(&c, 0, sizeof(c));
    c.cb = cd_ix_top_emit;
    c.L = &ix->L;
    c.s = s;
    c.o = o;
#ifdef CD_IX_HAVE_POPCNT_CLONE
    if (__builtin_cpu_supports("popcnt")) { cd_ix_join_popcnt(s, 0, &c); return; }
#endif
    cd_ix_join_plain(s, 0, &c);
}

/* Live entries in (fp, id) order, for a compacted index: fps[n], ids[n]. */
static void cd_ix_export(const cd_ix *ix, uint64_t *fps, uint64_t *ids) {
    size_t c = 0;
    const cd_seg *s;
    if (ix->nsegs != 1) return;
    s = ix->segs[0];
    CD_SEG_FOR_EACH(s, u, fp, {
        uint32_t j;
        for (j = CD_RUN(s, u); j < CD_RUN(s, u + 1); j++) { fps[c] = fp; ids[c] = CD_ID(s, j); c++; }
    });
}

#endif
