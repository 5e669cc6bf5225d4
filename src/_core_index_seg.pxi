# ---------------------------------------------------------------- Hamming index: segments
#
# Exact Hamming-distance index over 64-bit fingerprints (HammingIndex below,
# wrapped by crawldedup.SimhashIndex).
#
# Pigeonhole principle: cut the 64 bits into k+1 blocks; two fingerprints
# within Hamming distance k agree exactly on at least one block.  Table t is
# keyed by (a prefix of) block t, so a query probes k+1 buckets and checks
# each candidate with xor + popcount.  A candidate is reported only by the
# table of the FIRST block on which it agrees with the query, so no result is
# seen twice and no set of seen ids is needed.
#
# The index is a few immutable sorted segments plus a small unsorted pending
# buffer (log-structured: segments of similar size are merged, so every entry
# is rebuilt O(log n) times).  A segment holds
#   tab[t]      table t: the distinct fingerprints bucketed by (the top kb
#               bits of) block t, each stored as its 64 - kb residual bits
#               (the key bits are implied by the bucket) in
#               es = ceil((64 - kb) / 8) little-endian bytes.  Table 0's key
#               is the top of the value, so table 0 lists the distinct
#               fingerprints in ascending order: its position u is "the
#               distinct index" that run[] and the results use.
#   off[t]      bucket offsets, 2^kb + 1 uint32 per table
#   run[u+1]    start of each distinct fingerprint's run in ids[] (NULL when
#               every fingerprint is distinct: run[u] = u)
#   ids[n]      ids in (fingerprint, id) order, 32-bit when they all fit
#   dead[n]     tombstones (allocated by the first remove)
#   idord[n]    positions sorted by id (built by the first id lookup)
# For k = 3, 16-bit blocks and 32-bit ids that is 4 * 6 + 4 = 28 bytes per
# distinct fingerprint plus 1 MiB of offsets.
#
# Equal fingerprints are stored once per table (runs), so a heap of copies
# costs one candidate check, not one per copy.
#
# The units, one file each: segments (this file: layout, building, id
# lookup), sorting and bit permutations (_core_index_sort.pxi), queries
# (_core_index_query.pxi), the self-join (_core_index_join.pxi), the index's
# operations (_core_index_ops.pxi) and the Python face (_core_index.pxi).  Everything below the Python face works
# on flat arrays without the GIL; the functions that run on several threads
# at once (query, pairs) only read.  Errors: -1 = out of memory.

from libc.stdint cimport int64_t
from libc.stdlib cimport calloc, qsort, realloc

cdef extern from "_cd_support.h" nogil:
    uint64_t cd_load64le(const unsigned char* p)
    void* cd_big_alloc(size_t n, int zero)
    void cd_big_free(void* p)
    # Function attributes Cython cannot write, given as the return type: a
    # function compiled for processors with the popcnt instruction (called
    # when cd_have_popcnt() says the processor has it), and a function body
    # always inlined, so that inside such a function it uses the instruction;
    # a function never inlined (kept out of a hot loop).
    ctypedef void cd_popcnt_void "CD_POPCNT_VOID"
    ctypedef void cd_inline_void "CD_ALWAYS_INLINE_VOID"
    ctypedef void cd_noinline_void "CD_NOINLINE_VOID"
    bint cd_have_popcnt()

DEF IX_MAXK = 8
DEF IX_MAXT = IX_MAXK + 1
# Pending entries, scanned linearly by queries.
DEF IX_PENDING = 512
# Entries a segment (and so the index) holds at most: positions are 32-bit.
DEF IX_MAX_SEGMENT = 0xFFFFFFF0
# A bucket much bigger than the rest (skewed data) gets a nested segment over
# its fingerprints (_IxSub) when it holds more than IX_SUB_MIN of them, to
# this nesting depth.
DEF IX_SUB_MIN = 2048
DEF IX_SUB_DEPTH = 2

ctypedef struct _IxLayout:
    int k, T
    int width[IX_MAXT]
    int shift[IX_MAXT]        # block t is bits [shift, shift + width)
    uint64_t bmask[IX_MAXT]

cdef struct _IxSub

ctypedef struct _IxSeg:
    size_t n, u, ndead
    uint32_t* run             # NULL when every fingerprint is distinct
    uint64_t* ids             # ids, or ids32 when every id < 2^32
    uint32_t* ids32
    uint8_t* dead
    uint32_t* idord
    int kb[IX_MAXT]           # key bits of table t
    int ks[IX_MAXT]           # key shift of table t
    int es[IX_MAXT]           # residual bytes of table t
    uint32_t* off[IX_MAXT]
    uint8_t* tab[IX_MAXT]
    _IxSub* subs[IX_MAXT]     # nested segments of big buckets, by key
    size_t nsubs[IX_MAXT]

# A nested segment over the fingerprints of one big bucket, bit-permuted so
# that the bits they differ in lead every block (tabs: 8 x 256 words, see
# _ix_perm_tables); queries that land in the bucket search it instead of
# scanning the bucket.
cdef struct _IxSub:
    uint64_t key
    _IxSeg* seg
    uint64_t* tabs

# The index: sorted segments (oldest and biggest first) and the pending
# buffer pfp/pid[pn] of entries not in a segment yet.
ctypedef struct _Ix:
    _IxLayout L
    _IxSeg** segs
    size_t nsegs, capsegs
    uint64_t* pfp
    uint64_t* pid
    size_t pn, pcap
    size_t live

ctypedef struct _IxPair:
    uint64_t fp, id

# Growing result buffer: (a, b, d) triples; a unused for queries.
ctypedef struct _IxOut:
    uint64_t* a
    uint64_t* b
    uint8_t* d
    size_t n, cap
    int oom
    int want_a


cdef inline uint64_t _ix_low(int bits) noexcept nogil:
    return ~(<uint64_t>0) if bits >= 64 else ((<uint64_t>1) << bits) - 1


cdef void _ix_layout_init(_IxLayout* L, int k) noexcept nogil:
    cdef int T = k + 1, t, top = 64, w
    L.k = k
    L.T = T
    for t in range(T):
        w = 64 // T + (1 if t < 64 % T else 0)
        top -= w
        L.width[t] = w
        L.shift[t] = top
        L.bmask[t] = _ix_low(w) << top


cdef inline uint32_t _ix_run(const _IxSeg* s, size_t u) noexcept nogil:
    return s.run[u] if s.run != NULL else <uint32_t>u


cdef inline uint64_t _ix_id(const _IxSeg* s, size_t j) noexcept nogil:
    return <uint64_t>s.ids32[j] if s.ids32 != NULL else s.ids[j]


# ---- output

cdef inline void _ix_push(_IxOut* o, uint64_t a, uint64_t b, int d) noexcept nogil:
    cdef size_t cap
    cdef uint64_t* nb
    cdef uint64_t* na
    cdef uint8_t* nd
    if o.n == o.cap:
        cap = o.cap * 2 if o.cap else 256
        nb = <uint64_t*>realloc(o.b, cap * sizeof(uint64_t))
        if nb == NULL:
            o.oom = 1
            return
        o.b = nb
        nd = <uint8_t*>realloc(o.d, cap)
        if nd == NULL:
            o.oom = 1
            return
        o.d = nd
        if o.want_a:
            na = <uint64_t*>realloc(o.a, cap * sizeof(uint64_t))
            if na == NULL:
                o.oom = 1
                return
            o.a = na
        o.cap = cap
    if o.want_a:
        o.a[o.n] = a
    o.b[o.n] = b
    o.d[o.n] = <uint8_t>d
    o.n += 1


cdef void _ix_out_free(_IxOut* o) noexcept nogil:
    free(o.a)
    free(o.b)
    free(o.d)
    o.a = NULL
    o.b = NULL
    o.d = NULL
    o.n = 0
    o.cap = 0


# ---- residuals: a fingerprint without its key bits, and back

cdef inline uint64_t _ix_key(uint64_t fp, int ks, int kb) noexcept nogil:
    return (fp >> ks) & _ix_low(kb)


cdef inline uint64_t _ix_resid(uint64_t fp, int ks, int kb) noexcept nogil:
    cdef uint64_t hi = 0 if ks + kb >= 64 else (fp >> (ks + kb)) << ks
    return hi | (fp & _ix_low(ks))


cdef inline uint64_t _ix_unresid(uint64_t r, uint64_t key, int ks, int kb) noexcept nogil:
    cdef uint64_t hi = 0 if ks + kb >= 64 else (r >> ks) << (ks + kb)
    return hi | (key << ks) | (r & _ix_low(ks))


cdef inline uint64_t _ix_load_res(const uint8_t* p, uint64_t mask) noexcept nogil:
    # 8 bytes whatever es is: every table has 8 bytes to spare at its end.
    return cd_load64le(p) & mask


cdef inline void _ix_store_res(uint8_t* p, uint64_t r, int es) noexcept nogil:
    # es is 5 to 8 (kb is 1 to 24): the first five bytes unconditionally (the
    # compiler merges them into two stores), then the rest.
    cdef int j
    p[0] = <uint8_t>r
    p[1] = <uint8_t>(r >> 8)
    p[2] = <uint8_t>(r >> 16)
    p[3] = <uint8_t>(r >> 24)
    p[4] = <uint8_t>(r >> 32)
    for j in range(5, es):
        p[j] = <uint8_t>(r >> (8 * j))


# ---- segments

cdef void _ix_seg_free(_IxSeg* s) noexcept nogil:
    cdef int t
    cdef size_t i
    if s == NULL:
        return
    cd_big_free(s.run)
    cd_big_free(s.ids)
    cd_big_free(s.ids32)
    cd_big_free(s.dead)
    cd_big_free(s.idord)
    for t in range(IX_MAXT):
        cd_big_free(s.off[t])
        cd_big_free(s.tab[t])
        for i in range(s.nsubs[t]):
            _ix_seg_free(s.subs[t][i].seg)
            free(s.subs[t][i].tabs)
        free(s.subs[t])
    free(s)


cdef size_t _ix_seg_nbytes(const _IxSeg* s, const _IxLayout* L) noexcept nogil:
    cdef size_t b = sizeof(_IxSeg) + ((s.u + 1) * 4 if s.run != NULL else 0)
    cdef size_t i
    cdef int t
    b += s.n * (4 if s.ids32 != NULL else 8)
    if s.dead != NULL:
        b += s.n
    if s.idord != NULL:
        b += s.n * 4
    for t in range(L.T):
        b += (((<size_t>1) << s.kb[t]) + 1) * 4
        b += s.u * <size_t>s.es[t] + 8
        for i in range(s.nsubs[t]):
            b += sizeof(_IxSub) + 8 * 256 * 8 + _ix_seg_nbytes(s.subs[t][i].seg, L)
    return b


cdef inline int _ix_floor_log2(size_t x) noexcept nogil:
    cdef int r = 0
    while x > 1:
        x >>= 1
        r += 1
    return r


cdef _IxSeg* _ix_seg_build(const _IxLayout* L, _IxPair* p, size_t m, int depth) noexcept nogil:
    """A segment of the m pairs p (sorted here in place), with nested
    segments for its big buckets below IX_SUB_DEPTH; NULL when out of
    memory."""
    cdef _IxSeg* s
    cdef uint64_t* fpd
    cdef size_t i, u, j, nb, c
    cdef int t, kbits, kb, ks, es
    cdef uint32_t* off
    cdef uint32_t* fill
    cdef uint8_t* tab
    cdef uint64_t maxid = 0, fp
    cdef uint32_t pos
    if m > 0xFFFFFFF0U or _ix_sort_entries(p, m) != 0:   # IX_MAX_SEGMENT
        return NULL
    s = <_IxSeg*>calloc(1, sizeof(_IxSeg))
    if s == NULL:
        return NULL
    s.n = m
    u = 0
    for i in range(m):
        if i == 0 or p[i].fp != p[i - 1].fp:
            u += 1
    s.u = u
    fpd = <uint64_t*>cd_big_alloc((u if u else 1) * 8, 0)
    if fpd == NULL:
        _ix_seg_free(s)
        return NULL
    for i in range(m):
        if p[i].id > maxid:
            maxid = p[i].id
    if maxid <= 0xFFFFFFFFU:
        s.ids32 = <uint32_t*>cd_big_alloc((m if m else 1) * 4, 0)
        if s.ids32 == NULL:
            return _ix_build_failed(s, fpd)
        for i in range(m):
            s.ids32[i] = <uint32_t>p[i].id
    else:
        s.ids = <uint64_t*>cd_big_alloc((m if m else 1) * 8, 0)
        if s.ids == NULL:
            return _ix_build_failed(s, fpd)
        for i in range(m):
            s.ids[i] = p[i].id
    if u < m:
        s.run = <uint32_t*>cd_big_alloc((u + 1) * 4, 0)
        if s.run == NULL:
            return _ix_build_failed(s, fpd)
    j = 0
    for i in range(m):
        if i == 0 or p[i].fp != p[i - 1].fp:
            fpd[j] = p[i].fp
            if s.run != NULL:
                s.run[j] = <uint32_t>i
            j += 1
    if s.run != NULL:
        s.run[u] = <uint32_t>m
    # key bits: 8 to 16 distinct fingerprints per bucket, at most the block
    kbits = _ix_floor_log2(u) - 3
    if kbits < 1:
        kbits = 1
    if kbits > 24:
        kbits = 24
    for t in range(L.T):
        kb = kbits if kbits < L.width[t] else L.width[t]
        ks = L.shift[t] + L.width[t] - kb
        nb = (<size_t>1) << kb
        es = (64 - kb + 7) // 8
        s.kb[t] = kb
        s.ks[t] = ks
        s.es[t] = es
        off = s.off[t] = <uint32_t*>cd_big_alloc((nb + 1) * 4, 1)
        if off == NULL:
            return _ix_build_failed(s, fpd)
        for i in range(u):
            off[_ix_key(fpd[i], ks, kb) + 1] += 1
        for c in range(nb):
            off[c + 1] += off[c]
        fill = <uint32_t*>malloc(nb * 4)
        tab = s.tab[t] = <uint8_t*>cd_big_alloc(u * <size_t>es + 8, 1)
        if fill == NULL or tab == NULL:
            free(fill)
            return _ix_build_failed(s, fpd)
        memcpy(fill, off, nb * 4)
        for i in range(u):
            fp = fpd[i]
            c = _ix_key(fp, ks, kb)
            pos = fill[c]
            fill[c] = pos + 1
            _ix_store_res(tab + <size_t>pos * es, _ix_resid(fp, ks, kb), es)
        free(fill)
    cd_big_free(fpd)
    if depth < IX_SUB_DEPTH and _ix_seg_add_subs(L, s, depth) != 0:
        _ix_seg_free(s)
        return NULL
    return s


cdef _IxSeg* _ix_build_failed(_IxSeg* s, uint64_t* fpd) noexcept nogil:
    cd_big_free(fpd)
    _ix_seg_free(s)
    return NULL


cdef int _ix_seg_add_subs(const _IxLayout* L, _IxSeg* s, int depth) noexcept nogil:
    """Nested segments for the buckets of s that hold more than IX_SUB_MIN
    fingerprints and 32 times the average (see _IxSub).  0, or -1."""
    cdef int t, kb, ks, es
    cdef size_t nb, c, count, x, thresh, avg, lo, w
    cdef uint64_t mask, V
    cdef uint64_t* F
    cdef _IxPair* p
    cdef uint64_t* tabs
    cdef _IxSeg* sub
    for t in range(L.T):
        kb = s.kb[t]
        ks = s.ks[t]
        es = s.es[t]
        nb = (<size_t>1) << kb
        count = 0
        thresh = IX_SUB_MIN
        avg = s.u >> kb
        mask = _ix_low(64 - kb)
        if 32 * (avg + 1) > thresh:
            thresh = 32 * (avg + 1)
        for c in range(nb):
            if s.off[t][c + 1] - s.off[t][c] > thresh:
                count += 1
        if not count:
            continue
        s.subs[t] = <_IxSub*>calloc(count, sizeof(_IxSub))
        if s.subs[t] == NULL:
            return -1
        for c in range(nb):
            lo = s.off[t][c]
            w = s.off[t][c + 1] - lo
            if w <= thresh:
                continue
            V = 0
            F = <uint64_t*>cd_big_alloc(w * sizeof(uint64_t), 0)
            p = <_IxPair*>cd_big_alloc(w * sizeof(_IxPair), 0)
            tabs = <uint64_t*>malloc(8 * 256 * sizeof(uint64_t))
            if F == NULL or p == NULL or tabs == NULL:
                cd_big_free(F)
                cd_big_free(p)
                free(tabs)
                return -1
            for x in range(w):
                F[x] = _ix_unresid(_ix_load_res(s.tab[t] + (lo + x) * <size_t>es, mask), c, ks, kb)
                V |= F[x] ^ F[0]
            _ix_perm_tables(L, V, tabs)
            for x in range(w):
                p[x].fp = _ix_permute(F[x], tabs)
                p[x].id = x
            cd_big_free(F)
            sub = _ix_seg_build(L, p, w, depth + 1)
            cd_big_free(p)
            if sub == NULL:
                free(tabs)
                return -1
            if not _ix_seg_splits(L, sub, w):
                _ix_seg_free(sub)
                free(tabs)
                continue
            s.subs[t][s.nsubs[t]].key = c
            s.subs[t][s.nsubs[t]].seg = sub
            s.subs[t][s.nsubs[t]].tabs = tabs
            s.nsubs[t] += 1
    return 0


# ---- id lookup

cdef int _ix_seg_ensure_idord(_IxSeg* s) noexcept nogil:
    if s.idord != NULL or s.n == 0:
        return 0
    s.idord = _ix_sort_by_id(s.ids, s.ids32, s.n)
    return 0 if s.idord != NULL else -1


cdef long long _ix_seg_find_id(const _IxSeg* s, uint64_t id) noexcept nogil:
    """Position of a live entry with this id, or -1 (idord must exist)."""
    cdef size_t lo = 0, hi = s.n, mid
    cdef uint32_t pos
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if _ix_id(s, s.idord[mid]) < id:
            lo = mid + 1
        else:
            hi = mid
    while lo < s.n and _ix_id(s, s.idord[lo]) == id:
        pos = s.idord[lo]
        if s.dead == NULL or not s.dead[pos]:
            return <long long>pos
        lo += 1
    return -1


# ---- distinct fingerprints

cdef inline uint64_t _ix_seg_fp0(const _IxSeg* s, size_t i, uint64_t key) noexcept nogil:
    """Distinct fingerprint i of table 0, whose bucket is key."""
    return _ix_unresid(_ix_load_res(s.tab[0] + i * <size_t>s.es[0], _ix_low(64 - s.kb[0])),
                       key, s.ks[0], s.kb[0])


cdef inline size_t _ix_seg_find_fp(const _IxSeg* s, uint64_t fp) noexcept nogil:
    """Index of fp in table 0 (it must be there): a binary search of its
    bucket, whose residuals are in ascending order (table 0's key is the top
    bits)."""
    cdef int ks = s.ks[0], kb = s.kb[0], es = s.es[0]
    cdef uint64_t key = _ix_key(fp, ks, kb), r = _ix_resid(fp, ks, kb), mask = _ix_low(64 - kb)
    cdef size_t lo = s.off[0][key], hi = s.off[0][key + 1], mid
    cdef const uint8_t* tab = s.tab[0]
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if _ix_load_res(tab + mid * <size_t>es, mask) < r:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline bint _ix_first_block(const _IxLayout* L, uint64_t diff, int t) noexcept nogil:
    """Is t the first block on which two fingerprints differing in diff agree?"""
    cdef int s
    if diff & L.bmask[t]:
        return False
    for s in range(t):
        if not (diff & L.bmask[s]):
            return False
    return True
