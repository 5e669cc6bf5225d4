# ---- runs: the sorted files of DiskStore ------------------------------------
#
# A run (crawldedup.exact.disk) is `count` rows of `row` bytes, sorted by
# their first 8 bytes read as a little-endian integer (the digest's first 8
# bytes as a big-endian one: the key); a row's other bytes are the digest's
# other bytes.  `fence` holds the key of every `step`-th row.  run_find looks
# a batch of ascending keys up in one pass: a fence entry found by galloping
# from the last one, a binary search of at most step + 1 rows, and the rows
# of an equal key compared byte for byte; without the GIL.  run_merge
# merges k runs into rows of one, a buffer at a time, and run_sort makes
# the rows of a run from a memtable's digests; both without the GIL.
# Twin: crawldedup._reference.runs.

cdef Py_ssize_t _cdr_first_at_least(const unsigned char* rows, Py_ssize_t row,
                                    Py_ssize_t lo, Py_ssize_t hi,
                                    uint64_t key) noexcept nogil:
    # The first row of [lo, hi) whose key is >= key (hi when none).
    cdef Py_ssize_t mid
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        if cd_load64le(rows + mid * row) < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef Py_ssize_t _cdr_block(const uint64_t* fence, Py_ssize_t blocks, Py_ssize_t b,
                           uint64_t key) noexcept nogil:
    # The last block from b on whose fence key is < key (b - 1 ... -1 when
    # fence[b] >= key already), galloping forward from b.
    cdef Py_ssize_t jump = 1, lo, hi, mid
    if b < 0:
        b = 0
    if b >= blocks or fence[b] >= key:
        # back to the start: keys ascend, so this happens only for the first
        while b > 0 and (b >= blocks or fence[b] >= key):
            b -= 1
        return b if fence[b] < key else -1
    lo = b
    while lo + jump < blocks and fence[lo + jump] < key:
        lo += jump
        jump <<= 1
    hi = lo + jump if lo + jump < blocks else blocks
    # fence[lo] < key; the answer is in [lo, hi)
    while hi - lo > 1:
        mid = lo + ((hi - lo) >> 1)
        if fence[mid] < key:
            lo = mid
        else:
            hi = mid
    return lo


def run_find(const unsigned char[::1] rows, Py_ssize_t count, Py_ssize_t row,
             const uint64_t[::1] fence, Py_ssize_t step, const uint64_t[::1] keys,
             const unsigned char[::1] rest, unsigned char[::1] out):
    """out[i] = 1 where the run holds the digest (keys[i], rest[i * (row - 8):
    (i + 1) * (row - 8)]), 0 elsewhere.  keys ascending."""
    cdef Py_ssize_t n = keys.shape[0], r = row - 8, blocks, i, b = 0, lo, hi, j
    cdef uint64_t key
    cdef const unsigned char* base
    cdef const unsigned char* mine
    if row < 8 or step < 1 or count < 0:
        raise ValueError("a run's rows are 8 bytes or more, its step 1 or more")
    if rows.shape[0] < count * row:
        raise ValueError(f"the rows take {count * row} bytes, the buffer has {rows.shape[0]}")
    if out.shape[0] != n or rest.shape[0] != n * r:
        raise ValueError("out takes one byte a key, rest row - 8 bytes a key")
    blocks = (count + step - 1) // step
    if fence.shape[0] < blocks:
        raise ValueError(f"the fence needs {blocks} keys, it has {fence.shape[0]}")
    if n == 0:
        return
    if count == 0:
        memset(&out[0], 0, n)
        return
    base = &rows[0]
    with nogil:
        for i in range(n):
            key = keys[i]
            b = _cdr_block(&fence[0], blocks, b, key)
            lo = b * step if b >= 0 else 0
            hi = lo + step + 1 if lo + step + 1 < count else count
            j = _cdr_first_at_least(base, row, lo, hi, key)
            out[i] = 0
            mine = &rest[0] + i * r if r else NULL
            while j < count and cd_load64le(base + j * row) == key:
                if r == 0 or memcmp(base + j * row + 8, mine, r) == 0:
                    out[i] = 1
                    break
                j += 1
            if b < 0:
                b = 0


def run_merge(tuple sources, Py_ssize_t row, Py_ssize_t[::1] pos, unsigned char[::1] out):
    """Merge k sorted runs: copy into out, in ascending key order, the rows
    of sources[s] (buffers of whole rows) from row pos[s] on, until out is
    full or every source is done; pos advances past the rows taken.  The
    number of rows written.  Rows of equal keys come in source order."""
    cdef Py_ssize_t k = len(sources), s, i, best, room, n = 0, alive = 0
    cdef const unsigned char[::1] view
    cdef const unsigned char** base = NULL
    cdef Py_ssize_t* left = NULL
    cdef uint64_t* head = NULL
    cdef Py_ssize_t* which = NULL
    cdef unsigned char* dst
    cdef uint64_t low
    if row < 8:
        raise ValueError("a run's rows are 8 bytes or more")
    if pos.shape[0] != k:
        raise ValueError(f"pos takes one position a source: {k} sources, {pos.shape[0]} positions")
    room = out.shape[0] // row
    views = []
    for s in range(k):
        view = sources[s]
        if view.shape[0] % row:
            raise ValueError(f"source {s} holds {view.shape[0]} bytes, not whole {row}-byte rows")
        if pos[s] < 0 or pos[s] > view.shape[0] // row:
            raise ValueError(f"position {pos[s]} is outside source {s}'s "
                             f"{view.shape[0] // row} rows")
        views.append(view)
    if k == 0 or room == 0:
        return 0
    base = <const unsigned char**>malloc(k * sizeof(void*))
    left = <Py_ssize_t*>malloc(k * sizeof(Py_ssize_t))
    head = <uint64_t*>malloc(k * sizeof(uint64_t))
    which = <Py_ssize_t*>malloc(k * sizeof(Py_ssize_t))
    if base == NULL or left == NULL or head == NULL or which == NULL:
        free(base); free(left); free(head); free(which)
        raise MemoryError()
    try:
        for s in range(k):
            view = views[s]
            left[alive] = view.shape[0] // row - pos[s]
            if left[alive] > 0:
                base[alive] = &view[0] + pos[s] * row
                head[alive] = cd_load64le(base[alive])
                which[alive] = s
                alive += 1
        dst = &out[0]
        with nogil:
            while n < room and alive > 0:
                # the source whose next row has the least key (the first of ties)
                best = 0
                low = head[0]
                for i in range(1, alive):
                    if head[i] < low:
                        low = head[i]
                        best = i
                memcpy(dst + n * row, base[best], row)
                n += 1
                pos[which[best]] += 1
                left[best] -= 1
                if left[best]:
                    base[best] += row
                    head[best] = cd_load64le(base[best])
                else:  # this source is done: the ones after it move down
                    for i in range(best, alive - 1):
                        base[i] = base[i + 1]
                        left[i] = left[i + 1]
                        head[i] = head[i + 1]
                        which[i] = which[i + 1]
                    alive -= 1
    finally:
        free(base); free(left); free(head); free(which)
    return n


cdef inline int _cdr_cmp(const unsigned char* a, const unsigned char* b,
                         Py_ssize_t row) noexcept nogil:
    # Rows in order: by key, then by the digest's other bytes.
    cdef uint64_t ka = cd_load64le(a), kb = cd_load64le(b)
    if ka != kb:
        return -1 if ka < kb else 1
    if row > 8:
        return memcmp(a + 8, b + 8, row - 8)
    return 0


cdef void _cdr_insertion(unsigned char* base, Py_ssize_t n, Py_ssize_t row,
                         unsigned char* tmp) noexcept nogil:
    cdef Py_ssize_t i, j
    for i in range(1, n):
        memcpy(tmp, base + i * row, row)
        j = i
        while j > 0 and _cdr_cmp(base + (j - 1) * row, tmp, row) > 0:
            memcpy(base + j * row, base + (j - 1) * row, row)
            j -= 1
        memcpy(base + j * row, tmp, row)


cdef void _cdr_sift(unsigned char* base, Py_ssize_t root, Py_ssize_t end, Py_ssize_t row,
                    unsigned char* tmp) noexcept nogil:
    cdef Py_ssize_t child
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and _cdr_cmp(base + child * row, base + (child + 1) * row, row) < 0:
            child += 1
        if _cdr_cmp(base + root * row, base + child * row, row) >= 0:
            return
        memcpy(tmp, base + root * row, row)
        memcpy(base + root * row, base + child * row, row)
        memcpy(base + child * row, tmp, row)
        root = child


cdef void _cdr_heapsort(unsigned char* base, Py_ssize_t n, Py_ssize_t row,
                        unsigned char* tmp) noexcept nogil:
    # O(n log n) whatever the keys: for the rare crowded bucket.
    cdef Py_ssize_t start, end
    for start in range(n // 2 - 1, -1, -1):
        _cdr_sift(base, start, n, row, tmp)
    for end in range(n - 1, 0, -1):
        memcpy(tmp, base, row)
        memcpy(base, base + end * row, row)
        memcpy(base + end * row, tmp, row)
        _cdr_sift(base, 0, end, row, tmp)


cdef inline uint64_t _cdr_key(const unsigned char* d, Py_ssize_t ds) noexcept nogil:
    # A digest's first 8 bytes as a big-endian integer, zero-padded.
    cdef uint64_t key = 0
    cdef Py_ssize_t j
    for j in range(8):
        key = (key << 8) | (d[j] if j < ds else 0)
    return key


cdef void _cdr_radix(unsigned char* rows, Py_ssize_t m, Py_ssize_t row, int shift,
                     unsigned char* scratch, Py_ssize_t room, unsigned char* tmp) noexcept nogil:
    # Sort m rows whose keys agree above bit `shift`: a byte of the key a
    # level, through scratch (room rows); small, tied or too large ranges
    # by insertion or heapsort.
    cdef Py_ssize_t edge[257]
    cdef Py_ssize_t i, b, j, start, end
    if m <= 16:
        _cdr_insertion(rows, m, row, tmp)
        return
    if shift <= 0 or m > room:
        _cdr_heapsort(rows, m, row, tmp)
        return
    shift -= 8
    memset(edge, 0, sizeof(edge))
    for i in range(m):
        edge[((cd_load64le(rows + i * row) >> shift) & 0xFF) + 1] += 1
    for b in range(256):
        edge[b + 1] += edge[b]
    for i in range(m):
        b = (cd_load64le(rows + i * row) >> shift) & 0xFF
        j = edge[b]
        edge[b] += 1
        memcpy(scratch + j * row, rows + i * row, row)
    memcpy(rows, scratch, m * row)
    start = 0
    for b in range(256):
        end = edge[b]
        if end - start > 1:
            _cdr_radix(rows + start * row, end - start, row, shift, scratch, room, tmp)
        start = end


def run_sort(const unsigned char[::1] digests, Py_ssize_t ds, unsigned char[::1] out):
    """Fill out with the rows of a run of the n digests of ds bytes
    concatenated in digests: each its key (its first 8 bytes as a
    big-endian integer, zero-padded, stored little-endian), then its other
    bytes; sorted by key, then by those bytes.  A radix sort a byte of the
    key at a time (the first pass from digests into out, the others through
    a scratch buffer of at most n / 16 rows), ties and small ranges by
    insertion, ranges too large for the scratch by heapsort (O(n log n)
    whatever the keys); without the GIL."""
    cdef Py_ssize_t n, row, b, i, j, start, end, room, big = 0
    cdef Py_ssize_t edge[257]
    cdef const unsigned char* d
    cdef unsigned char* p
    cdef unsigned char* scratch = NULL
    cdef unsigned char tmp[72]
    cdef uint64_t key
    if ds < 1 or ds > 64:
        raise ValueError(f"digest size must be between 1 and 64, got {ds}")
    if digests.shape[0] % ds:
        raise ValueError(f"{digests.shape[0]} bytes are not whole {ds}-byte digests")
    n = digests.shape[0] // ds
    row = ds if ds > 8 else 8
    if out.shape[0] != n * row:
        raise ValueError(f"out takes {n * row} bytes ({n} rows of {row}), "
                         f"not {out.shape[0]}")
    if n == 0:
        return
    d = &digests[0]
    p = &out[0]
    memset(edge, 0, sizeof(edge))
    with nogil:
        for i in range(n):
            edge[(_cdr_key(d + i * ds, ds) >> 56) + 1] += 1
        for b in range(256):
            if edge[b + 1] > big:
                big = edge[b + 1]
            edge[b + 1] += edge[b]
        for i in range(n):
            key = _cdr_key(d + i * ds, ds)
            b = key >> 56
            j = edge[b]
            edge[b] += 1
            for start in range(8):
                p[j * row + start] = (key >> (8 * start)) & 0xFF
            if ds > 8:
                memcpy(p + j * row + 8, d + i * ds + 8, ds - 8)
    # the scratch holds the largest bucket, up to n / 16 + 4096 rows
    room = min(big, n // 16 + 4096)
    scratch = <unsigned char*>malloc(room * row if room else 1)
    if scratch == NULL:
        raise MemoryError()
    with nogil:
        start = 0
        for b in range(256):
            end = edge[b]
            if end - start > 1:
                _cdr_radix(p + start * row, end - start, row, 56, scratch, room, tmp)
            start = end
    free(scratch)
