# ---------------------------------------------------------------- Hamming index: self-join
#
# Every pair of entries within k of a compacted index (one segment, no
# tombstones, no pending buffer), as (smaller id, larger id, d).
#
# It goes bucket by bucket, table by table: every pair within k agrees on
# some block, so it shares a bucket of that block's table, and it is
# reported only from the table of its first agreeing block.  Buckets are read
# in memory order (no random access except to turn a found pair's
# fingerprints into runs of ids).
#
# A bucket of b distinct fingerprints costs b * (b - 1) / 2 checks when b is
# small.  A bigger one (skewed data: many fingerprints sharing a block but
# not within k of each other) is joined recursively: its fingerprints, with
# their bits permuted so that the bits on which they differ are spread over
# all blocks and lead each block (a permutation of the bits keeps every
# Hamming distance), become a temporary segment with its own k + 1 tables,
# whose join yields the bucket's pairs; the pairs are then kept only if t is
# their first agreeing block in the outer layout.  Each level splits a big
# bucket by bits that its members do not all share; after IX_JOIN_DEPTH
# levels the plain quadratic scan is the fallback.

DEF IX_JOIN_SMALL = 1024
DEF IX_JOIN_DEPTH = 4

cdef struct _IxJoin

ctypedef void (*_ix_pair_cb)(_IxJoin* c, size_t ux, size_t uy, int d) noexcept nogil

cdef struct _IxJoin:
    _ix_pair_cb cb
    const _IxLayout* L
    const _IxSeg* s           # the segment this context's pairs index
    _IxJoin* parent           # nested join: the outer bucket's context
    const uint64_t* F         # nested join: the outer bucket's fingerprints
    size_t lo                 # nested join: the outer bucket's start
    int t                     # nested join: the outer bucket's table
    _IxOut* o


cdef void _ix_pair_ids(const _IxSeg* s, size_t u, size_t v, int d, _IxOut* o) noexcept nogil:
    """The pairs of ids of distinct fingerprints u and v, smaller id first."""
    cdef uint32_t a, b
    cdef uint64_t x, y
    for a in range(_ix_run(s, u), _ix_run(s, u + 1)):
        for b in range(_ix_run(s, v), _ix_run(s, v + 1)):
            x = _ix_id(s, a)
            y = _ix_id(s, b)
            if x < y:
                _ix_push(o, x, y, d)
            else:
                _ix_push(o, y, x, d)


cdef void _ix_top_emit(_IxJoin* c, size_t ux, size_t uy, int d) noexcept nogil:
    _ix_pair_ids(c.s, ux, uy, d, c.o)


cdef void _ix_sub_emit(_IxJoin* c, size_t ux, size_t uy, int d) noexcept nogil:
    """A pair of a nested join, as positions in the outer bucket: passed on
    to the outer context if t is its first agreeing block there."""
    cdef _IxJoin* P = c.parent
    cdef size_t x = <size_t>_ix_id(c.s, _ix_run(c.s, ux))
    cdef size_t y = <size_t>_ix_id(c.s, _ix_run(c.s, uy))
    cdef uint64_t fx = c.F[x], fy = c.F[y]
    if not _ix_first_block(c.L, fx ^ fy, c.t):
        return
    P.cb(P, c.lo + x if c.t == 0 else _ix_seg_find_fp(P.s, fx),
         c.lo + y if c.t == 0 else _ix_seg_find_fp(P.s, fy), d)


cdef int _ix_join_nested(const _IxLayout* L, const uint64_t* F, size_t lo, size_t w, int t,
                         int depth, _IxJoin* c, bint popcnt) noexcept nogil:
    """The pairs of the big bucket F[0..w) (starting at lo in table t)
    through a nested segment over its permuted fingerprints: 1 done, 0 the
    members agree on too much (a tight cluster: the nested tables would not
    be smaller; scan the bucket), -1 out of memory."""
    cdef _IxPair* p = <_IxPair*>cd_big_alloc(w * sizeof(_IxPair), 0)
    cdef uint64_t* tabs = <uint64_t*>malloc(8 * 256 * sizeof(uint64_t))
    cdef uint64_t V = 0
    cdef size_t x
    cdef _IxSeg* sub
    cdef _IxJoin c2
    if p == NULL or tabs == NULL:
        cd_big_free(p)
        free(tabs)
        return -1
    for x in range(1, w):
        V |= F[x] ^ F[0]
    _ix_perm_tables(L, V, tabs)
    for x in range(w):
        p[x].fp = _ix_permute(F[x], tabs)
        p[x].id = x
    free(tabs)
    sub = _ix_seg_build(L, p, w, IX_SUB_DEPTH)
    cd_big_free(p)
    if sub == NULL:
        return -1
    if not _ix_seg_splits(L, sub, w):
        _ix_seg_free(sub)
        return 0
    c2.cb = _ix_sub_emit
    c2.L = L
    c2.s = sub
    c2.parent = c
    c2.F = F
    c2.lo = lo
    c2.t = t
    c2.o = c.o
    _ix_join(sub, depth + 1, &c2, popcnt)
    _ix_seg_free(sub)
    return 1


cdef cd_noinline_void _ix_join_found(_IxJoin* c, const _IxSeg* s, const uint64_t* F, size_t x,
                                     size_t y, size_t lo, int t, int d) noexcept nogil:
    """A pair of bucket F within k found by the scan: reported if t is its
    first agreeing block.  Never inlined, so that few values are live across
    it in the scan's loop (else the bucket's address and k are reloaded from
    the stack at every check: 10% more instructions)."""
    cdef uint64_t diff = F[x] ^ F[y]
    if (diff & c.L.bmask[t]) or not _ix_first_block(c.L, diff, t):
        return
    c.cb(c, lo + x if t == 0 else _ix_seg_find_fp(s, F[x]),
         lo + y if t == 0 else _ix_seg_find_fp(s, F[y]), d)


cdef inline cd_inline_void _ix_join_table(const _IxSeg* s, int t, int depth, _IxJoin* c,
                                          uint64_t* F, bint popcnt) noexcept nogil:
    """The pairs of table t of s whose first agreeing block is t, bucket by
    bucket (F: room for the biggest bucket).  Always inlined, so that inside
    _ix_join_table_popcnt it uses the instruction."""
    cdef int k = c.L.k, ks = s.ks[t], kb = s.kb[t], es = s.es[t], d, nested
    cdef size_t nb = (<size_t>1) << kb, cc, w, lo, x, y
    cdef uint64_t rmask = _ix_low(64 - kb), fx
    cdef const uint8_t* bp
    for cc in range(nb):
        if c.o.oom:
            break
        lo = s.off[t][cc]
        w = s.off[t][cc + 1] - lo
        if w < 2:
            continue
        bp = s.tab[t] + lo * <size_t>es
        for x in range(w):
            F[x] = _ix_unresid(_ix_load_res(bp, rmask), cc, ks, kb)
            bp += es
        if w > IX_JOIN_SMALL and depth < IX_JOIN_DEPTH:
            nested = _ix_join_nested(c.L, F, lo, w, t, depth, c, popcnt)
            if nested < 0:
                c.o.oom = 1
                break
            if nested:
                continue
        for x in range(w - 1):
            fx = F[x]
            for y in range(x + 1, w):
                d = cd_popcount64(fx ^ F[y])
                if cd_rarely(d <= k):
                    _ix_join_found(c, s, F, x, y, lo, t, d)


cdef cd_popcnt_void _ix_join_table_popcnt(const _IxSeg* s, int t, int depth, _IxJoin* c,
                                          uint64_t* F) noexcept nogil:
    _ix_join_table(s, t, depth, c, F, True)


cdef void _ix_join_table_plain(const _IxSeg* s, int t, int depth, _IxJoin* c,
                               uint64_t* F) noexcept nogil:
    _ix_join_table(s, t, depth, c, F, False)


cdef void _ix_join(const _IxSeg* s, int depth, _IxJoin* c, bint popcnt) noexcept nogil:
    """The self-join of segment s into context c (see above); popcnt: scan
    buckets with the popcnt instruction (cd_have_popcnt)."""
    cdef const _IxLayout* L = c.L
    cdef int t
    cdef size_t maxb = 0, nb, cc, w
    cdef uint64_t* F
    for t in range(L.T):
        nb = (<size_t>1) << s.kb[t]
        for cc in range(nb):
            w = s.off[t][cc + 1] - s.off[t][cc]
            if w > maxb:
                maxb = w
    F = <uint64_t*>malloc((maxb if maxb else 1) * sizeof(uint64_t))
    if F == NULL:
        c.o.oom = 1
        return
    for t in range(L.T):
        if c.o.oom:
            break
        if popcnt:
            _ix_join_table_popcnt(s, t, depth, c, F)
        else:
            _ix_join_table_plain(s, t, depth, c, F)
    free(F)


cdef void _ix_pairs(const _Ix* ix, _IxOut* o) noexcept nogil:
    """Every pair of entries within k of a compacted index into o (a, b, d)."""
    cdef const _IxSeg* s
    cdef _IxJoin c
    cdef size_t u
    cdef uint32_t a, b
    if ix.nsegs != 1:
        return
    s = ix.segs[0]
    # equal fingerprints: the pairs inside each run
    if s.run != NULL:
        for u in range(s.u):
            if o.oom:
                break
            for a in range(_ix_run(s, u), _ix_run(s, u + 1)):
                for b in range(a + 1, _ix_run(s, u + 1)):
                    _ix_push(o, _ix_id(s, a), _ix_id(s, b), 0)
    if ix.L.k == 0:
        return   # distinct fingerprints are never within 0
    memset(&c, 0, sizeof(c))
    c.cb = _ix_top_emit
    c.L = &ix.L
    c.s = s
    c.o = o
    _ix_join(s, 0, &c, cd_have_popcnt())


cdef void _ix_export(const _Ix* ix, uint64_t* fps, uint64_t* ids) noexcept nogil:
    """Live entries of a compacted index in (fp, id) order: fps[n], ids[n]."""
    cdef size_t c = 0, nb0, c0, u = 0
    cdef uint32_t j, j1
    cdef uint64_t fp
    cdef const _IxSeg* s
    # The segment's arrays in locals: the stores below could otherwise alias
    # them (extensions build with -fno-strict-aliasing), reloaded every entry.
    cdef const uint32_t* run
    cdef const uint32_t* ids32
    cdef const uint64_t* ids64
    if ix.nsegs != 1:
        return
    s = ix.segs[0]
    run = s.run
    ids32 = s.ids32
    ids64 = s.ids
    nb0 = (<size_t>1) << s.kb[0]
    for c0 in range(nb0):
        while u < s.off[0][c0 + 1]:
            fp = _ix_seg_fp0(s, u, c0)
            j = run[u] if run != NULL else <uint32_t>u
            j1 = run[u + 1] if run != NULL else <uint32_t>(u + 1)
            while j < j1:
                fps[c] = fp
                ids[c] = <uint64_t>ids32[j] if ids32 != NULL else ids64[j]
                c += 1
                j += 1
            u += 1
