/* Batches of crawldedup.FingerprintSet: a large batch added by sorting and
 * merging, a batch added or looked up a group at a time, and a table
 * exported to or loaded from the canonical order.  Included at the end of
 * _cd_fpset.h, whose set (cd_fpset) it works on.  No Python here.
 */
#ifndef CD_FPSET_BATCH_H
#define CD_FPSET_BATCH_H

#include "_cd_fpset.h"


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
#endif /* CD_FPSET_BATCH_H */
