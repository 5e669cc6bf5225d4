# ---------------------------------------------------------------- Hamming index: operations
#
# The index of _core_index_seg.pxi as a whole: adding (to the pending buffer,
# then into new segments, merged log-structured), removing (tombstones,
# segments rebuilt once more than half dead), id lookup and compaction.
# These change the index and run with the GIL held (no search runs meanwhile).


cdef void _ix_init(_Ix* ix, int k) noexcept nogil:
    memset(ix, 0, sizeof(_Ix))
    _ix_layout_init(&ix.L, k)


cdef void _ix_clear(_Ix* ix) noexcept nogil:
    cdef size_t i
    for i in range(ix.nsegs):
        _ix_seg_free(ix.segs[i])
    free(ix.segs)
    free(ix.pfp)
    free(ix.pid)
    ix.segs = NULL
    ix.pfp = NULL
    ix.pid = NULL
    ix.nsegs = ix.capsegs = ix.pn = ix.pcap = ix.live = 0


cdef size_t _ix_nbytes(const _Ix* ix) noexcept nogil:
    cdef size_t b = sizeof(_Ix) + ix.pcap * 16 + ix.capsegs * sizeof(void*), i
    for i in range(ix.nsegs):
        b += _ix_seg_nbytes(ix.segs[i], &ix.L)
    return b


cdef size_t _ix_seg_gather(const _IxSeg* s, _IxPair* p) noexcept nogil:
    """Append the live entries of a segment to p (p has room); how many."""
    cdef size_t c = 0, nb0 = (<size_t>1) << s.kb[0], c0, u = 0
    cdef uint32_t j
    cdef uint64_t fp
    for c0 in range(nb0):
        while u < s.off[0][c0 + 1]:
            fp = _ix_seg_fp0(s, u, c0)
            for j in range(_ix_run(s, u), _ix_run(s, u + 1)):
                if s.dead == NULL or not s.dead[j]:
                    p[c].fp = fp
                    p[c].id = _ix_id(s, j)
                    c += 1
            u += 1
    return c


cdef inline size_t _ix_seg_live(const _IxSeg* s) noexcept nogil:
    return s.n - s.ndead


cdef int _ix_rebuild(_Ix* ix, size_t start, bint with_pending, const uint64_t* xfp,
                     const uint64_t* xid, size_t m) noexcept nogil:
    """Replace segments [start, nsegs) and, with_pending, the pending buffer
    by one segment built from their live entries plus xfp/xid[0..m).  0, or
    -1 (nothing changed)."""
    cdef size_t total = m, c = 0, i
    cdef _IxPair* p
    cdef _IxSeg* s = NULL
    cdef _IxSeg** ns
    for i in range(start, ix.nsegs):
        total += _ix_seg_live(ix.segs[i])
    if with_pending:
        total += ix.pn
    if total > 0xFFFFFFF0U:   # IX_MAX_SEGMENT
        return -1
    p = <_IxPair*>cd_big_alloc((total if total else 1) * sizeof(_IxPair), 0)
    if p == NULL:
        return -1
    for i in range(start, ix.nsegs):
        c += _ix_seg_gather(ix.segs[i], p + c)
    if with_pending:
        for i in range(ix.pn):
            p[c].fp = ix.pfp[i]
            p[c].id = ix.pid[i]
            c += 1
    for i in range(m):
        p[c].fp = xfp[i]
        p[c].id = xid[i]
        c += 1
    if ix.capsegs < start + 1:
        ns = <_IxSeg**>realloc(ix.segs, (start + 8) * sizeof(_IxSeg*))
        if ns == NULL:
            cd_big_free(p)
            return -1
        ix.segs = ns
        ix.capsegs = start + 8
    if total:
        s = _ix_seg_build(&ix.L, p, total, 0)
    cd_big_free(p)
    if total and s == NULL:
        return -1
    for i in range(start, ix.nsegs):
        _ix_seg_free(ix.segs[i])
    ix.nsegs = start
    if s != NULL:
        ix.segs[ix.nsegs] = s
        ix.nsegs += 1
    if with_pending:
        ix.pn = 0
    ix.live += m
    return 0


cdef int _ix_settle(_Ix* ix) noexcept nogil:
    """Merge trailing segments while the last is at least half the one
    before."""
    cdef size_t a, b
    while ix.nsegs >= 2:
        a = _ix_seg_live(ix.segs[ix.nsegs - 2])
        b = _ix_seg_live(ix.segs[ix.nsegs - 1])
        if 2 * b < a:
            break
        if _ix_rebuild(ix, ix.nsegs - 2, False, NULL, NULL, 0) != 0:
            return -1
    return 0


cdef int _ix_compact(_Ix* ix) noexcept nogil:
    """Fold everything into one segment without tombstones."""
    if ix.pn == 0 and ix.nsegs <= 1 and (ix.nsegs == 0 or ix.segs[0].ndead == 0):
        return 0
    return _ix_rebuild(ix, 0, True, NULL, NULL, 0)


cdef int _ix_contains(_Ix* ix, uint64_t id) noexcept nogil:
    """Is id present?  1 yes, 0 no, -1 out of memory."""
    cdef size_t i
    for i in range(ix.pn):
        if ix.pid[i] == id:
            return 1
    for i in range(ix.nsegs):
        if _ix_seg_ensure_idord(ix.segs[i]) != 0:
            return -1
        if _ix_seg_find_id(ix.segs[i], id) >= 0:
            return 1
    return 0


cdef inline void _ix_note_bad(bint* found, uint64_t* worst, uint64_t v) noexcept nogil:
    if not found[0] or v < worst[0]:
        worst[0] = v
    found[0] = True


cdef int _ix_find_present(_Ix* ix, const uint64_t* ids, size_t m, bint* found,
                          uint64_t* worst) noexcept nogil:
    """Note (the smallest of) the ids of a batch of m > 1 that repeat within
    it or are in the index already: a sorted copy of the ids, then a merge
    walk over each segment's ids (big batches) or binary searches (small
    ones).  0, or -1 when out of memory."""
    cdef uint32_t* ord = _ix_sort_by_id(ids, NULL, m)
    cdef size_t i, lo, hi, mid, sidx, a, b
    cdef uint64_t v, x, y
    cdef uint32_t pos
    cdef _IxSeg* s
    if ord == NULL:
        return -1
    for i in range(1, m):
        if ids[ord[i]] == ids[ord[i - 1]]:
            _ix_note_bad(found, worst, ids[ord[i]])
            break
    for i in range(ix.pn):
        lo = 0
        hi = m
        v = ix.pid[i]
        while lo < hi:
            mid = lo + (hi - lo) // 2
            if ids[ord[mid]] < v:
                lo = mid + 1
            else:
                hi = mid
        if lo < m and ids[ord[lo]] == v:
            _ix_note_bad(found, worst, v)
    for sidx in range(ix.nsegs):
        s = ix.segs[sidx]
        if _ix_seg_ensure_idord(s) != 0:
            cd_big_free(ord)
            return -1
        if <double>m * 24.0 < <double>s.n:
            for i in range(m):
                if _ix_seg_find_id(s, ids[i]) >= 0:
                    _ix_note_bad(found, worst, ids[i])
        else:
            a = 0
            b = 0
            while a < m and b < s.n:
                x = ids[ord[a]]
                pos = s.idord[b]
                y = _ix_id(s, pos)
                if x < y:
                    a += 1
                elif y < x:
                    b += 1
                elif s.dead != NULL and s.dead[pos]:
                    b += 1
                else:
                    _ix_note_bad(found, worst, x)
                    break
    cd_big_free(ord)
    return 0


cdef int _ix_add_many(_Ix* ix, const uint64_t* fps, const uint64_t* ids, size_t m,
                      uint64_t* bad) noexcept nogil:
    """Add m entries, all or nothing.  0 ok, -1 out of memory, -2 an id is
    already present or repeated (*bad = the smallest such id)."""
    cdef bint found = False
    cdef uint64_t worst = 0
    cdef int r
    cdef size_t cap
    cdef uint64_t* a
    cdef uint64_t* b
    if m == 0:
        return 0
    if m == 1:
        r = _ix_contains(ix, ids[0])
        if r < 0:
            return -1
        if r:
            _ix_note_bad(&found, &worst, ids[0])
    elif _ix_find_present(ix, ids, m, &found, &worst) != 0:
        return -1
    if found:
        bad[0] = worst
        return -2
    if ix.pn + m <= IX_PENDING:
        if ix.pn + m > ix.pcap:
            cap = ix.pcap if ix.pcap else 16
            while cap < ix.pn + m:
                cap *= 2
            a = <uint64_t*>realloc(ix.pfp, cap * 8)
            if a == NULL:
                return -1
            ix.pfp = a
            b = <uint64_t*>realloc(ix.pid, cap * 8)
            if b == NULL:
                return -1
            ix.pid = b
            ix.pcap = cap
        memcpy(ix.pfp + ix.pn, fps, m * 8)
        memcpy(ix.pid + ix.pn, ids, m * 8)
        ix.pn += m
        ix.live += m
        return 0
    if _ix_rebuild(ix, ix.nsegs, True, fps, ids, m) != 0:
        return -1
    # the pending buffer's memory goes once it is folded in
    free(ix.pfp)
    free(ix.pid)
    ix.pfp = NULL
    ix.pid = NULL
    ix.pcap = 0
    _ix_settle(ix)   # a failed merge leaves a valid index
    return 0


cdef int _ix_remove(_Ix* ix, uint64_t id) noexcept nogil:
    """Remove an id: 1 removed, 0 absent, -1 out of memory."""
    cdef size_t i, j, live
    cdef _IxSeg* s
    cdef _IxSeg* ns
    cdef long long pos
    cdef _IxPair* p
    for i in range(ix.pn):
        if ix.pid[i] == id:
            ix.pn -= 1
            ix.pfp[i] = ix.pfp[ix.pn]
            ix.pid[i] = ix.pid[ix.pn]
            ix.live -= 1
            return 1
    for i in range(ix.nsegs):
        s = ix.segs[i]
        if _ix_seg_ensure_idord(s) != 0:
            return -1
        pos = _ix_seg_find_id(s, id)
        if pos < 0:
            continue
        if s.dead == NULL:
            s.dead = <uint8_t*>cd_big_alloc(s.n, 1)
            if s.dead == NULL:
                return -1
        s.dead[pos] = 1
        s.ndead += 1
        ix.live -= 1
        # compaction: a segment more than half tombstones is rebuilt (or
        # dropped); a failed rebuild only postpones it
        if 2 * s.ndead > s.n:
            if s.ndead == s.n:
                _ix_seg_free(s)
                for j in range(i + 1, ix.nsegs):
                    ix.segs[j - 1] = ix.segs[j]
                ix.nsegs -= 1
            else:
                live = _ix_seg_live(s)
                p = <_IxPair*>cd_big_alloc(live * sizeof(_IxPair), 0)
                if p != NULL:
                    _ix_seg_gather(s, p)
                    ns = _ix_seg_build(&ix.L, p, live, 0)
                    cd_big_free(p)
                    if ns != NULL:
                        _ix_seg_free(s)
                        ix.segs[i] = ns
        return 1
    return 0
