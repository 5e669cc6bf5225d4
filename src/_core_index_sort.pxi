# ---------------------------------------------------------------- Hamming index: sorting
#
# The sorts of building a segment (entries by fingerprint then id, positions
# by id) and the bit permutations of nested segments (_core_index_seg.pxi).

# ---- sorting

cdef inline void _ix_sift_ids(_IxPair* h, size_t root, size_t n) noexcept nogil:
    """Heap sort's sift-down of h[root] among h[0..n) by id (a max-heap)."""
    cdef size_t child
    cdef uint64_t t
    while 2 * root + 1 < n:
        child = 2 * root + 1
        if child + 1 < n and h[child].id < h[child + 1].id:
            child += 1
        if h[root].id >= h[child].id:
            break
        t = h[root].id
        h[root].id = h[child].id
        h[child].id = t
        root = child


cdef int _ix_sort_entries(_IxPair* p, size_t m) noexcept nogil:
    """Sort pairs by (fp, id): an LSD radix sort by fp (bytes on which all
    keys agree are skipped), then each run of equal fp by id (insertion sort
    for short runs, heap sort else).  0, or -1 when out of memory."""
    cdef size_t* cnt
    cdef _IxPair* tmp
    cdef _IxPair* src = p
    cdef _IxPair* dst
    cdef _IxPair* swap
    cdef size_t i, r, x, y, c, pos, sum_, cx, length, end
    cdef uint64_t v
    cdef int b
    cdef bint skip
    if m < 2:
        return 0
    cnt = <size_t*>calloc(8 * 256, sizeof(size_t))
    tmp = <_IxPair*>cd_big_alloc(m * sizeof(_IxPair), 0)
    if cnt == NULL or tmp == NULL:
        free(cnt)
        cd_big_free(tmp)
        return -1
    for i in range(m):
        v = p[i].fp
        for b in range(8):
            cnt[b * 256 + ((v >> (8 * b)) & 255)] += 1
    dst = tmp
    for b in range(8):
        sum_ = 0
        skip = False
        for c in range(256):
            cx = cnt[b * 256 + c]
            if cx == m:
                skip = True
                break
            cnt[b * 256 + c] = sum_
            sum_ += cx
        if skip:
            continue
        for i in range(m):
            c = b * 256 + ((src[i].fp >> (8 * b)) & 255)
            pos = cnt[c]
            cnt[c] = pos + 1
            dst[pos] = src[i]
        swap = src
        src = dst
        dst = swap
    if src != p:
        memcpy(p, src, m * sizeof(_IxPair))
    cd_big_free(tmp)
    free(cnt)
    i = 0
    while i < m:
        r = i + 1
        while r < m and p[r].fp == p[i].fp:
            r += 1
        length = r - i
        if length < 2:
            pass
        elif length <= 32:
            for x in range(i + 1, r):
                v = p[x].id
                y = x
                while y > i and p[y - 1].id > v:
                    p[y].id = p[y - 1].id
                    y -= 1
                p[y].id = v
        else:
            x = length // 2
            while x > 0:
                x -= 1
                _ix_sift_ids(p + i, x, length)
            end = length
            while end > 1:
                end -= 1
                v = p[i].id
                p[i].id = p[i + end].id
                p[i + end].id = v
                _ix_sift_ids(p + i, 0, end)
        i = r
    return 0


cdef inline uint64_t _ix_id_at(const uint64_t* ids, const uint32_t* ids32, size_t pos) noexcept nogil:
    return ids[pos] if ids != NULL else <uint64_t>ids32[pos]


cdef uint32_t* _ix_sort_by_id(const uint64_t* ids, const uint32_t* ids32, size_t n) noexcept nogil:
    """Positions 0..n-1 sorted by their id (ids, or ids32 when ids is NULL):
    an LSD radix sort on the 8 id bytes.  NULL when out of memory."""
    cdef uint32_t* a = <uint32_t*>cd_big_alloc((n if n else 1) * sizeof(uint32_t), 0)
    cdef uint32_t* t = <uint32_t*>cd_big_alloc((n if n else 1) * sizeof(uint32_t), 0)
    cdef size_t* cnt = <size_t*>calloc(8 * 256, sizeof(size_t))
    cdef uint32_t* src
    cdef uint32_t* dst
    cdef uint32_t* swap
    cdef uint32_t pos
    cdef size_t i, sum_, c, cx, slot
    cdef uint64_t v
    cdef int b
    cdef bint skip
    if a == NULL or t == NULL or cnt == NULL:
        cd_big_free(a)
        cd_big_free(t)
        free(cnt)
        return NULL
    for i in range(n):
        v = _ix_id_at(ids, ids32, i)
        a[i] = <uint32_t>i
        for b in range(8):
            cnt[b * 256 + ((v >> (8 * b)) & 255)] += 1
    src = a
    dst = t
    for b in range(8):
        sum_ = 0
        skip = False
        for c in range(256):
            cx = cnt[b * 256 + c]
            if cx == n:
                skip = True
                break
            cnt[b * 256 + c] = sum_
            sum_ += cx
        if skip:
            continue
        for i in range(n):
            pos = src[i]
            slot = b * 256 + ((_ix_id_at(ids, ids32, pos) >> (8 * b)) & 255)
            dst[cnt[slot]] = pos
            cnt[slot] += 1
        swap = src
        src = dst
        dst = swap
    free(cnt)
    cd_big_free(dst)
    return src


# ---- bit permutations of nested segments

cdef void _ix_perm_tables(const _IxLayout* L, uint64_t V, uint64_t* tabs) noexcept nogil:
    """tabs (8 x 256 words): a bit permutation for a bucket whose members
    vary only in the bits of V.  The varying bits are dealt round-robin to the
    k + 1 blocks, each block filled from its top bit down (so its key bits
    vary), the constant bits fill the rest.  Applied one input byte at a time
    (_ix_permute)."""
    cdef int pos[64]
    cdef int nxt[IX_MAXT]
    cdef int t = 0, i, j, b, bit
    cdef uint64_t v
    for j in range(L.T):
        nxt[j] = L.shift[j] + L.width[j] - 1
    for i in range(63, -1, -1):
        if not ((V >> i) & 1):
            continue
        while nxt[t] < L.shift[t]:
            t = (t + 1) % L.T
        pos[i] = nxt[t]
        nxt[t] -= 1
        t = (t + 1) % L.T
    t = 0
    for i in range(63, -1, -1):
        if (V >> i) & 1:
            continue
        while nxt[t] < L.shift[t]:
            t += 1
        pos[i] = nxt[t]
        nxt[t] -= 1
    for j in range(8):
        for b in range(256):
            v = 0
            for bit in range(8):
                if (b >> bit) & 1:
                    v |= (<uint64_t>1) << pos[8 * j + bit]
            tabs[j * 256 + b] = v


cdef inline uint64_t _ix_permute(uint64_t x, const uint64_t* tabs) noexcept nogil:
    return (tabs[x & 255] | tabs[256 + ((x >> 8) & 255)] | tabs[512 + ((x >> 16) & 255)]
            | tabs[768 + ((x >> 24) & 255)] | tabs[1024 + ((x >> 32) & 255)]
            | tabs[1280 + ((x >> 40) & 255)] | tabs[1536 + ((x >> 48) & 255)]
            | tabs[1792 + ((x >> 56) & 255)])


cdef bint _ix_seg_splits(const _IxLayout* L, const _IxSeg* s, size_t w) noexcept nogil:
    """Is a nested segment s over a bucket of w worth searching?  Its
    buckets' pair counts must add up to well under the w * (w - 1) / 2 of
    scanning the bucket."""
    cdef double cost = 0, direct = <double>w * <double>(w - 1) / 2, b
    cdef size_t nb, c
    cdef int t
    for t in range(L.T):
        nb = (<size_t>1) << s.kb[t]
        for c in range(nb):
            b = <double>(s.off[t][c + 1] - s.off[t][c])
            cost += b * (b - 1) / 2
    return cost * 4 < direct
