# ---------------------------------------------------------------- Hamming index: queries
#
# Searching the segments of _core_index_seg.pxi: one query (_ix_seg_search,
# also the search of nested segments) and batches (_ix_query_many), whose
# scan of a segment's buckets is compiled twice, for processors with and
# without the popcnt instruction (_ix_query_many picks one at run time).

# (distinct index, distance) results of a nested search.
ctypedef struct _IxUD:
    uint64_t* u
    uint8_t* d
    size_t n, cap
    int oom

# A candidate within k: x = distinct index (resolved) or fingerprint (to be
# looked up in table 0) or, for the pending buffer, the id.
ctypedef struct _IxHit:
    uint64_t x
    uint32_t q
    uint16_t seg
    uint8_t d
    uint8_t resolved

DEF IX_PENDING_SEG = 0xFFFF

ctypedef struct _IxHits:
    _IxHit* h
    size_t n, cap
    int oom

# Batch queries go in blocks of IX_BLOCK queries; the buckets of the query
# IX_AHEAD on are fetched while this one is scanned (its bucket offsets
# 2 * IX_AHEAD on).
DEF IX_AHEAD = 8
DEF IX_BLOCK = 64


cdef void _ix_ud_push(_IxUD* b, uint64_t u, int d) noexcept nogil:
    cdef size_t cap
    cdef uint64_t* nu
    cdef uint8_t* nd
    if b.n == b.cap:
        cap = 2 * b.cap if b.cap else 64
        nu = <uint64_t*>realloc(b.u, cap * sizeof(uint64_t))
        if nu == NULL:
            b.oom = 1
            return
        b.u = nu
        nd = <uint8_t*>realloc(b.d, cap)
        if nd == NULL:
            b.oom = 1
            return
        b.d = nd
        b.cap = cap
    b.u[b.n] = u
    b.d[b.n] = <uint8_t>d
    b.n += 1


cdef const _IxSub* _ix_seg_find_sub(const _IxSeg* s, int t, uint64_t key) noexcept nogil:
    cdef size_t lo = 0, hi = s.nsubs[t], mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if s.subs[t][mid].key < key:
            lo = mid + 1
        else:
            hi = mid
    return &s.subs[t][lo] if lo < s.nsubs[t] and s.subs[t][lo].key == key else NULL


cdef void _ix_seg_search(const _IxLayout* L, const _IxSeg* s, uint64_t q, _IxUD* out) noexcept nogil:
    """Every distinct fingerprint of s within k of q, as (distinct index, d)."""
    cdef int t, k = L.k, ks, kb, es, d
    cdef uint64_t key, mask, rq, r, F
    cdef size_t lo, hi, i
    cdef const _IxSub* sb
    for t in range(L.T):
        ks = s.ks[t]
        kb = s.kb[t]
        es = s.es[t]
        key = _ix_key(q, ks, kb)
        mask = _ix_low(64 - kb)
        rq = _ix_resid(q, ks, kb)
        lo = s.off[t][key]
        hi = s.off[t][key + 1]
        sb = _ix_seg_find_sub(s, t, key) if s.nsubs[t] else NULL
        if sb != NULL:
            _ix_seg_sub_search(L, s, sb, t, lo, key, q, out)
            continue
        for i in range(lo, hi):
            r = _ix_load_res(s.tab[t] + i * <size_t>es, mask)
            d = cd_popcount64(r ^ rq)
            if cd_rarely(d <= k):
                F = _ix_unresid(r, key, ks, kb)
                if _ix_first_block(L, F ^ q, t):
                    _ix_ud_push(out, i if t == 0 else _ix_seg_find_fp(s, F), d)


cdef void _ix_seg_sub_search(const _IxLayout* L, const _IxSeg* s, const _IxSub* sb, int t,
                             size_t lo, uint64_t key, uint64_t q, _IxUD* out) noexcept nogil:
    """The results of bucket key of table t (starting at lo) through its
    nested segment: the nested search runs on the permuted query, its
    results are positions in the bucket, kept if t is their first agreeing
    block."""
    cdef _IxUD inner
    cdef size_t i, x
    cdef int ks = s.ks[t], kb = s.kb[t], es = s.es[t]
    cdef uint64_t mask = _ix_low(64 - kb), F
    memset(&inner, 0, sizeof(inner))
    _ix_seg_search(L, sb.seg, _ix_permute(q, sb.tabs), &inner)
    for i in range(inner.n):
        x = <size_t>_ix_id(sb.seg, _ix_run(sb.seg, inner.u[i]))
        F = _ix_unresid(_ix_load_res(s.tab[t] + (lo + x) * <size_t>es, mask), key, ks, kb)
        if _ix_first_block(L, F ^ q, t):
            _ix_ud_push(out, lo + x if t == 0 else _ix_seg_find_fp(s, F), inner.d[i])
    if inner.oom:
        out.oom = 1
    free(inner.u)
    free(inner.d)


cdef inline void _ix_hits_push(_IxHits* H, uint64_t x, uint32_t q, size_t seg, int d,
                               int resolved) noexcept nogil:
    cdef size_t cap
    cdef _IxHit* nh
    if H.n == H.cap:
        cap = H.cap * 2 if H.cap else 256
        nh = <_IxHit*>realloc(H.h, cap * sizeof(_IxHit))
        if nh == NULL:
            H.oom = 1
            return
        H.h = nh
        H.cap = cap
    H.h[H.n].x = x
    H.h[H.n].q = q
    H.h[H.n].seg = <uint16_t>seg
    H.h[H.n].d = <uint8_t>d
    H.h[H.n].resolved = <uint8_t>resolved
    H.n += 1


cdef inline void _ix_hit(_IxHits* H, const _IxSeg* s, size_t si, uint32_t qi, uint64_t x,
                         int resolved, int d) noexcept nogil:
    """Note a candidate and fetch what pass 2 or 3 reads for it."""
    _ix_hits_push(H, x, qi, si, d, resolved)
    if resolved:
        if s.run != NULL:
            cd_prefetch(s.run + x)
    else:
        cd_prefetch(s.off[0] + _ix_key(x, s.ks[0], s.kb[0]))


cdef inline cd_inline_void _ix_seg_query(const _IxLayout* L, const _IxSeg* s, size_t si,
                                         uint64_t q, uint32_t qi, _IxHits* H,
                                         _IxUD* UD) noexcept nogil:
    """Pass 1 of a batch query on one segment: the candidates of query q
    (number qi of its block) within k, noted in H (through UD for buckets
    with a nested segment).  Always inlined, so that inside the popcnt
    version of the batch it uses the instruction."""
    cdef int t, ks, kb, es, d, k = L.k
    cdef uint64_t key, rmask, rq, r, F
    cdef size_t lo, hi, i
    cdef const _IxSub* sb
    cdef const uint8_t* b
    for t in range(L.T):
        ks = s.ks[t]
        kb = s.kb[t]
        key = _ix_key(q, ks, kb)
        lo = s.off[t][key]
        hi = s.off[t][key + 1]
        es = s.es[t]
        if s.nsubs[t]:
            sb = _ix_seg_find_sub(s, t, key)
            if sb != NULL:
                UD.n = 0
                _ix_seg_sub_search(L, s, sb, t, lo, key, q, UD)
                if UD.oom:
                    H.oom = 1
                for i in range(UD.n):
                    _ix_hit(H, s, si, qi, UD.u[i], 1, UD.d[i])
                continue
        rmask = _ix_low(64 - kb)
        rq = _ix_resid(q, ks, kb)
        b = s.tab[t] + lo * <size_t>es
        for i in range(lo, hi):
            r = _ix_load_res(b, rmask)
            b += es
            d = cd_popcount64(r ^ rq)
            if cd_rarely(d <= k):
                F = _ix_unresid(r, key, ks, kb)
                if _ix_first_block(L, F ^ q, t):
                    if t == 0:
                        _ix_hit(H, s, si, qi, i, 1, d)
                    else:
                        _ix_hit(H, s, si, qi, F, 0, d)


cdef inline void _ix_seg_emit(const _IxSeg* s, size_t u, int d, _IxOut* o) noexcept nogil:
    cdef uint32_t j, end = _ix_run(s, u + 1)
    for j in range(_ix_run(s, u), end):
        if s.dead == NULL or not s.dead[j]:
            _ix_push(o, 0, _ix_id(s, j), d)


cdef void _ix_sort_slice(_IxOut* o, size_t start) noexcept nogil:
    """Sort o's entries [start, o.n) by (d, id): insertion sort."""
    cdef size_t x, y
    cdef uint64_t b
    cdef uint8_t d
    for x in range(start + 1, o.n):
        b = o.b[x]
        d = o.d[x]
        y = x
        while y > start and (o.d[y - 1] > d or (o.d[y - 1] == d and o.b[y - 1] > b)):
            o.b[y] = o.b[y - 1]
            o.d[y] = o.d[y - 1]
            y -= 1
        o.b[y] = b
        o.d[y] = d


ctypedef struct _IxDI:
    uint8_t d
    uint64_t id


cdef int _ix_cmp_di(const void* a, const void* b) noexcept nogil:
    cdef const _IxDI* x = <const _IxDI*>a
    cdef const _IxDI* y = <const _IxDI*>b
    if x.d != y.d:
        return -1 if x.d < y.d else 1
    return -1 if x.id < y.id else (1 if x.id > y.id else 0)


cdef void _ix_sort_big(_IxOut* o, size_t start) noexcept nogil:
    """The same for big result lists: qsort on a packed copy."""
    cdef size_t n = o.n - start, i
    cdef _IxDI* t = <_IxDI*>malloc(n * sizeof(_IxDI))
    if t == NULL:
        _ix_sort_slice(o, start)
        return
    for i in range(n):
        t[i].d = o.d[start + i]
        t[i].id = o.b[start + i]
    qsort(t, n, sizeof(_IxDI), _ix_cmp_di)
    for i in range(n):
        o.d[start + i] = t[i].d
        o.b[start + i] = t[i].id
    free(t)


cdef inline void _ix_prefetch_ahead(const _Ix* ix, const _IxSeg* s0, const uint64_t* qs,
                                    size_t i, size_t m) noexcept nogil:
    """Fetch the first segment's bucket offsets of query i + 2 * IX_AHEAD and
    the bucket lines (at most four) of query i + IX_AHEAD; for the first
    queries, which no earlier one fetched for, their own."""
    cdef int t
    cdef uint64_t q
    cdef const uint32_t* op
    cdef const uint8_t* a
    cdef const uint8_t* z
    cdef const _IxLayout* L = &ix.L
    if i < IX_AHEAD:
        q = qs[i]
        for t in range(L.T):
            cd_prefetch(s0.off[t] + _ix_key(q, s0.ks[t], s0.kb[t]))
        for t in range(L.T):
            cd_prefetch(s0.tab[t] + <size_t>s0.off[t][_ix_key(q, s0.ks[t], s0.kb[t])] * s0.es[t])
    if i + 2 * IX_AHEAD < m:
        q = qs[i + 2 * IX_AHEAD]
        for t in range(L.T):
            cd_prefetch(s0.off[t] + _ix_key(q, s0.ks[t], s0.kb[t]))
    if i + IX_AHEAD < m:
        q = qs[i + IX_AHEAD]
        for t in range(L.T):
            op = s0.off[t] + _ix_key(q, s0.ks[t], s0.kb[t])
            a = s0.tab[t] + <size_t>op[0] * s0.es[t]
            z = s0.tab[t] + <size_t>op[1] * s0.es[t]
            cd_prefetch(a)
            if z - a > 64:
                cd_prefetch(a + 64)
            if z - a > 128:
                cd_prefetch(a + 128)
            if z - a > 192:
                cd_prefetch(a + 192)


cdef inline cd_inline_void _ix_query_many_body(const _Ix* ix, const uint64_t* qs, size_t m,
                                               int64_t* offsets, _IxOut* o) noexcept nogil:
    """Batch query: the results of qs[i] are o's entries offsets[i] to
    offsets[i + 1].  Queries go in blocks: first every bucket of the block's
    queries is scanned (offsets and lines fetched a few queries ahead) and
    the candidates within k are noted; then the candidates' distinct entries,
    runs and ids are looked up in passes over the block, each pass fetching
    what the next one reads, so the cache misses of a block's results overlap
    instead of forming one chain per result."""
    cdef size_t i, b0, b1, h, si, start
    cdef const _IxLayout* L = &ix.L
    cdef int k = L.k, d
    cdef const _IxSeg* s0 = ix.segs[0] if ix.nsegs else NULL
    cdef const _IxSeg* s
    cdef _IxHits H
    cdef _IxUD UD
    cdef _IxHit* x
    cdef uint64_t q, key
    cdef uint32_t r0
    memset(&H, 0, sizeof(H))
    memset(&UD, 0, sizeof(UD))
    b0 = 0
    while b0 < m:
        b1 = b0 + IX_BLOCK if b0 + IX_BLOCK < m else m
        H.n = 0
        # pass 1: scan buckets, note candidates
        for i in range(b0, b1):
            q = qs[i]
            if s0 != NULL:
                _ix_prefetch_ahead(ix, s0, qs, i, m)
            for si in range(ix.nsegs):
                _ix_seg_query(L, ix.segs[si], si, q, <uint32_t>(i - b0), &H, &UD)
            for si in range(ix.pn):
                d = cd_popcount64(ix.pfp[si] ^ q)
                if d <= k:
                    _ix_hits_push(&H, ix.pid[si], <uint32_t>(i - b0), IX_PENDING_SEG, d, 1)
        if H.oom:
            o.oom = 1
            break
        # pass 2: fingerprints found by tables >= 1 -> distinct index
        for h in range(H.n):
            x = H.h + h
            if not x.resolved:
                s = ix.segs[x.seg]
                key = _ix_key(x.x, s.ks[0], s.kb[0])
                cd_prefetch(s.tab[0] + <size_t>s.off[0][key] * s.es[0])
        for h in range(H.n):
            x = H.h + h
            if not x.resolved:
                s = ix.segs[x.seg]
                x.x = _ix_seg_find_fp(s, x.x)
                x.resolved = 1
                if s.run != NULL:
                    cd_prefetch(s.run + x.x)
        # pass 3: runs -> fetch the ids
        for h in range(H.n):
            x = H.h + h
            if x.seg != IX_PENDING_SEG:
                s = ix.segs[x.seg]
                r0 = _ix_run(s, x.x)
                if s.ids32 != NULL:
                    cd_prefetch(s.ids32 + r0)
                else:
                    cd_prefetch(s.ids + r0)
        # pass 4: results in query order, each query's sorted
        h = 0
        for i in range(b0, b1):
            start = o.n
            offsets[i] = <int64_t>start
            while h < H.n and H.h[h].q == i - b0:
                x = H.h + h
                if x.seg == IX_PENDING_SEG:
                    _ix_push(o, 0, x.x, x.d)
                else:
                    _ix_seg_emit(ix.segs[x.seg], <size_t>x.x, x.d, o)
                h += 1
            if o.n - start > 64:
                _ix_sort_big(o, start)
            elif o.n - start > 1:
                _ix_sort_slice(o, start)
        if o.oom:
            break
        b0 += IX_BLOCK
    free(H.h)
    free(UD.u)
    free(UD.d)
    offsets[m] = <int64_t>o.n


cdef cd_popcnt_void _ix_query_many_popcnt(const _Ix* ix, const uint64_t* qs, size_t m,
                                          int64_t* offsets, _IxOut* o) noexcept nogil:
    _ix_query_many_body(ix, qs, m, offsets, o)


cdef void _ix_query_many_plain(const _Ix* ix, const uint64_t* qs, size_t m,
                               int64_t* offsets, _IxOut* o) noexcept nogil:
    _ix_query_many_body(ix, qs, m, offsets, o)


cdef void _ix_query_many(const _Ix* ix, const uint64_t* qs, size_t m, int64_t* offsets,
                         _IxOut* o) noexcept nogil:
    if cd_have_popcnt():
        _ix_query_many_popcnt(ix, qs, m, offsets, o)
    else:
        _ix_query_many_plain(ix, qs, m, offsets, o)
