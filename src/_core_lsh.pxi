# MinHash LSH band tables (included by _core.pyx after the MinHash part).
#
# A signature of k values is cut into b bands of r values (b * r <= k).  A
# band's key is a 64-bit hash of its r values (lsh_key); BandTable keeps,
# per band, an open-addressing table from key to the newest row that has
# it, and a chain per row to the next older row of the same key (nxt).
# Queries and pairs compare the band's values themselves before they report
# a row, so two signatures are candidates exactly when one band's values
# are equal (a collision of two keys never makes a candidate).  Removed rows
# stay in the chains, skipped by the caller's alive mask.  Without the GIL.
# Twin: crawldedup._reference.lsh.

from libc.stdlib cimport qsort

# BandTable.add_many hashes this many signatures' bands, and asks for their
# slots, before it inserts them.
DEF LSH_GROUP = 8


cdef inline uint64_t lsh_key(const uint32_t* v, Py_ssize_t r, Py_ssize_t band) noexcept nogil:
    """The key of one band: from the band number and r, then each pair of
    values (v[i] low, v[i + 1] high; a last odd value alone) folded in with
    the MurmurHash3 finalizer."""
    cdef uint64_t h = cd_fmix64(((<uint64_t>band + 1) * 0x9E3779B97F4A7C15ULL) ^ <uint64_t>r)
    cdef Py_ssize_t i = 0
    while i + 1 < r:
        h = cd_fmix64(h ^ (<uint64_t>v[i] | (<uint64_t>v[i + 1] << 32)))
        i += 2
    if i < r:
        h = cd_fmix64(h ^ <uint64_t>v[i])
    return h


cdef int _lsh_check_shape(Py_ssize_t b, Py_ssize_t r, Py_ssize_t k) except -1:
    if b < 1 or r < 1:
        raise ValueError(f"bands and rows must be at least 1, got {b} and {r}")
    if b * r > k:
        raise ValueError(f"bands * rows must be at most num_perm ({k}), got {b} * {r}")
    return 0


def lsh_keys(const uint32_t[:, ::1] sigs, Py_ssize_t bands, Py_ssize_t rows):
    """The band keys of each signature: an (n, bands) uint64 array."""
    cdef Py_ssize_t n = sigs.shape[0], i, j
    cdef uint64_t[:, ::1] out
    _lsh_check_shape(bands, rows, sigs.shape[1])
    result = _np.empty((n, bands), dtype=_np.uint64)
    out = result
    with nogil:
        for i in range(n):
            for j in range(bands):
                out[i, j] = lsh_key(&sigs[i, j * rows], rows, j)
    return result


ctypedef struct LshSlot:
    uint64_t key
    uint32_t head           # 1 + the newest row with this key; 0: an empty slot
    uint32_t pad

ctypedef struct LshSlots:
    LshSlot* s              # key and head side by side: one cache line a probe
    size_t mask
    size_t used


cdef int _lsh_slots_init(LshSlots* t, size_t cap) noexcept nogil:
    t.s = <LshSlot*>calloc(cap, sizeof(LshSlot))
    t.mask = cap - 1
    t.used = 0
    return -1 if t.s == NULL else 0


cdef inline size_t _lsh_home(const LshSlots* t, uint64_t key) noexcept nogil:
    return <size_t>(key >> 11) & t.mask


cdef inline size_t _lsh_find(const LshSlots* t, uint64_t key) noexcept nogil:
    """The slot of key, or the empty slot where it would go."""
    cdef size_t i = _lsh_home(t, key)
    while t.s[i].head and t.s[i].key != key:
        i = (i + 1) & t.mask
    return i


cdef int _lsh_slots_grow(LshSlots* t, size_t size) noexcept nogil:
    """Move the table to size slots (a power of two above its entries)."""
    cdef LshSlots bigger
    cdef size_t i, j
    if _lsh_slots_init(&bigger, size) < 0:
        return -1
    for i in range(t.mask + 1):
        if t.s[i].head:
            j = _lsh_find(&bigger, t.s[i].key)
            bigger.s[j] = t.s[i]
    bigger.used = t.used
    free(t.s)
    t[0] = bigger
    return 0


cdef int _lsh_cmp_u32(const void* x, const void* y) noexcept nogil:
    cdef uint32_t a = (<const uint32_t*>x)[0], b = (<const uint32_t*>y)[0]
    return (a > b) - (a < b)


cdef int _lsh_cmp_u64(const void* x, const void* y) noexcept nogil:
    cdef uint64_t a = (<const uint64_t*>x)[0], b = (<const uint64_t*>y)[0]
    return (a > b) - (a < b)


ctypedef struct LshBuf:
    void* data
    size_t n, cap, item


cdef inline int _lsh_push(LshBuf* buf, const void* item) noexcept nogil:
    cdef size_t cap
    cdef void* data
    if buf.n == buf.cap:
        cap = buf.cap * 2 if buf.cap else 1024
        data = realloc(buf.data, cap * buf.item)
        if data == NULL:
            return -1
        buf.data = data
        buf.cap = cap
    memcpy(<char*>buf.data + buf.n * buf.item, item, buf.item)
    buf.n += 1
    return 0


cdef class BandTable:
    """b tables from band key to the rows (numbered 0, 1, ... as added) whose
    signature has it; see the top of _core_lsh.pxi."""
    cdef Py_ssize_t _b, _r, _k
    cdef LshSlots* _slots
    cdef uint32_t* _nxt             # _nxt[row * b + j]: 1 + the next older row, 0: none
    cdef Py_ssize_t _n, _cap

    def __cinit__(self, Py_ssize_t bands, Py_ssize_t rows, Py_ssize_t num_perm):
        cdef Py_ssize_t j
        _lsh_check_shape(bands, rows, num_perm)
        self._b = bands
        self._r = rows
        self._k = num_perm
        self._slots = <LshSlots*>calloc(bands, sizeof(LshSlots))
        if self._slots == NULL:
            raise MemoryError()
        for j in range(bands):
            if _lsh_slots_init(&self._slots[j], 64) < 0:
                raise MemoryError()

    def __dealloc__(self):
        cdef Py_ssize_t j
        if self._slots != NULL:
            for j in range(self._b):
                free(self._slots[j].s)
            free(self._slots)
        free(self._nxt)

    @property
    def bands(self):
        return self._b

    @property
    def rows(self):
        return self._r

    @property
    def num_perm(self):
        return self._k

    def __len__(self):
        return self._n

    @property
    def nbytes(self):
        """Bytes of memory the tables and chains take."""
        cdef Py_ssize_t j
        cdef size_t total = <size_t>self._cap * <size_t>self._b * sizeof(uint32_t)
        for j in range(self._b):
            total += (self._slots[j].mask + 1) * sizeof(LshSlot)
        return total

    cdef int _check_stored(self, const uint32_t[:, ::1] stored,
                           const uint8_t[::1] alive) except -1:
        if stored.shape[1] != self._k or stored.shape[0] < self._n:
            raise ValueError(f"stored must hold the {self._n} signatures added "
                             f"({self._k} values each), got shape "
                             f"({stored.shape[0]}, {stored.shape[1]})")
        if alive.shape[0] < self._n:
            raise ValueError(f"alive must have an entry per row ({self._n}), got "
                             f"{alive.shape[0]}")
        return 0

    def add_many(self, const uint32_t[:, ::1] sigs):
        """Add each signature as the next row; returns the first row's number."""
        cdef Py_ssize_t n = sigs.shape[0], i, j, g, stop, first = self._n, cap
        cdef uint32_t* nxt
        cdef LshSlots* s
        cdef size_t slot, size
        cdef uint64_t key
        cdef uint64_t* keys = NULL
        cdef int failed = 0
        if sigs.shape[1] != self._k:
            raise ValueError(f"signatures must have {self._k} values, got {sigs.shape[1]}")
        if first + n > <Py_ssize_t>0xFFFFFFFE:
            raise OverflowError("a BandTable holds at most 2**32 - 2 rows")
        if n == 0:
            return first
        if first + n > self._cap:
            cap = max(first + n, 2 * self._cap, 1024)
            nxt = <uint32_t*>realloc(self._nxt, <size_t>cap * <size_t>self._b * sizeof(uint32_t))
            if nxt == NULL:
                raise MemoryError()
            self._nxt = nxt
            self._cap = cap
        with nogil:
            # Every table is grown first, so that no insert can fail halfway.
            # (in one step to the size the batch needs: one rehash)
            for j in range(self._b):
                s = &self._slots[j]
                size = s.mask + 1
                while 2 * (s.used + <size_t>n) > size:
                    size *= 2
                if size != s.mask + 1 and _lsh_slots_grow(s, size) < 0:
                    failed = 1
                    break
            if not failed:
                keys = <uint64_t*>malloc(<size_t>(LSH_GROUP * self._b) * sizeof(uint64_t))
                failed = keys == NULL
            if not failed:
                for g in range(0, n, LSH_GROUP):
                    # the keys of a group of signatures first, their slots
                    # asked for from memory, so that the cache misses overlap
                    stop = min(g + LSH_GROUP, n)
                    for i in range(g, stop):
                        for j in range(self._b):
                            key = lsh_key(&sigs[i, j * self._r], self._r, j)
                            keys[(i - g) * self._b + j] = key
                            cd_prefetch(&self._slots[j].s[_lsh_home(&self._slots[j], key)])
                    for i in range(g, stop):
                        for j in range(self._b):
                            s = &self._slots[j]
                            key = keys[(i - g) * self._b + j]
                            slot = _lsh_find(s, key)
                            if not s.s[slot].head:
                                s.s[slot].key = key
                                s.used += 1
                            self._nxt[(first + i) * self._b + j] = s.s[slot].head
                            s.s[slot].head = <uint32_t>(first + i + 1)
                free(keys)
        if failed:
            raise MemoryError()
        self._n = first + n
        return first

    def query_many(self, const uint32_t[:, ::1] queries, const uint32_t[:, ::1] stored,
                   const uint8_t[::1] alive):
        """(offsets, rows, agree): the alive rows sharing a band's values with
        queries[i] are rows[offsets[i]:offsets[i + 1]], ascending, each once;
        agree[x] counts the values where that row's signature equals the
        query's (of num_perm)."""
        cdef Py_ssize_t m = queries.shape[0], q, j, start
        cdef Py_ssize_t b = self._b, r = self._r, k = self._k
        cdef uint32_t* stamp = NULL
        cdef uint64_t* keys = NULL
        cdef uint32_t head, row, t
        cdef const uint32_t* qv
        cdef LshSlots* s
        cdef LshBuf found
        cdef int64_t[::1] offsets
        cdef uint32_t[::1] agree_out, rows_out
        cdef int failed = 0
        if queries.shape[1] != k:
            raise ValueError(f"signatures must have {k} values, got {queries.shape[1]}")
        self._check_stored(stored, alive)
        offsets_arr = _np.zeros(m + 1, dtype=_np.int64)
        offsets = offsets_arr
        found.data = NULL
        found.n = found.cap = 0
        found.item = sizeof(uint32_t)
        keys = <uint64_t*>malloc(<size_t>b * sizeof(uint64_t))
        if keys == NULL:
            raise MemoryError()
        if self._n:
            stamp = <uint32_t*>calloc(<size_t>self._n, sizeof(uint32_t))
            if stamp == NULL:
                free(keys)
                raise MemoryError()
        with nogil:
            for q in range(m):
                qv = &queries[q, 0]
                start = <Py_ssize_t>found.n
                if self._n == 0:
                    offsets[q + 1] = <int64_t>found.n
                    continue
                for j in range(b):      # the b probes' cache misses overlap
                    keys[j] = lsh_key(qv + j * r, r, j)
                    cd_prefetch(&self._slots[j].s[_lsh_home(&self._slots[j], keys[j])])
                for j in range(b):
                    s = &self._slots[j]
                    head = s.s[_lsh_find(s, keys[j])].head
                    while head:
                        row = head - 1
                        head = self._nxt[<Py_ssize_t>row * b + j]
                        if (alive[row] and stamp[row] != <uint32_t>(q + 1)
                                and memcmp(&stored[row, j * r], qv + j * r,
                                           <size_t>r * sizeof(uint32_t)) == 0):
                            stamp[row] = <uint32_t>(q + 1)
                            if _lsh_push(&found, &row) < 0:
                                failed = 1
                                break
                    if failed:
                        break
                if failed:
                    break
                if <Py_ssize_t>found.n - start > 1:
                    qsort(<uint32_t*>found.data + start, found.n - <size_t>start,
                          sizeof(uint32_t), _lsh_cmp_u32)
                offsets[q + 1] = <int64_t>found.n
        free(stamp)
        free(keys)
        if failed:
            free(found.data)
            raise MemoryError()
        rows_arr = _np.empty(found.n, dtype=_np.uint32)
        agree_arr = _np.zeros(found.n, dtype=_np.uint32)
        if found.n:
            rows_out = rows_arr
            memcpy(&rows_out[0], found.data, found.n * sizeof(uint32_t))
        free(found.data)
        if found.n:
            agree_out = agree_arr
            with nogil:
                _lsh_agree(queries, stored, offsets, rows_out, agree_out)
        return offsets_arr, rows_arr, agree_arr

    def pairs(self, const uint32_t[:, ::1] stored, const uint8_t[::1] alive):
        """(a, b): every pair of alive rows a < b sharing a band's values,
        once, ordered by (a, b)."""
        cdef Py_ssize_t b = self._b, r = self._r, j, x, y
        cdef size_t i, slot
        cdef LshSlots* s
        cdef LshBuf chain, out
        cdef uint32_t head, row, lo, hi
        cdef uint32_t* c
        cdef uint64_t pair
        cdef int failed = 0
        cdef size_t kept, u
        cdef uint64_t* p
        cdef uint32_t[::1] av, bv
        self._check_stored(stored, alive)
        chain.data = out.data = NULL
        chain.n = chain.cap = out.n = out.cap = 0
        chain.item = sizeof(uint32_t)
        out.item = sizeof(uint64_t)
        with nogil:
            for j in range(b):
                s = &self._slots[j]
                for slot in range(s.mask + 1):
                    head = s.s[slot].head
                    if not head or not self._nxt[<Py_ssize_t>(head - 1) * b + j]:
                        continue            # empty, or a chain of one row
                    chain.n = 0
                    while head:
                        row = head - 1
                        head = self._nxt[<Py_ssize_t>row * b + j]
                        if alive[row] and _lsh_push(&chain, &row) < 0:
                            failed = 1
                            break
                    if failed:
                        break
                    c = <uint32_t*>chain.data
                    for x in range(<Py_ssize_t>chain.n):
                        for y in range(x + 1, <Py_ssize_t>chain.n):
                            if memcmp(&stored[c[x], j * r], &stored[c[y], j * r],
                                      <size_t>r * sizeof(uint32_t)) != 0:
                                continue    # two keys collided
                            lo = c[x] if c[x] < c[y] else c[y]
                            hi = c[y] if c[x] < c[y] else c[x]
                            pair = (<uint64_t>lo << 32) | hi
                            if _lsh_push(&out, &pair) < 0:
                                failed = 1
                                break
                        if failed:
                            break
                    if failed:
                        break
                if failed:
                    break
            if not failed and out.n > 1:
                qsort(out.data, out.n, sizeof(uint64_t), _lsh_cmp_u64)
        free(chain.data)
        if failed:
            free(out.data)
            raise MemoryError()
        p = <uint64_t*>out.data
        kept = 0
        for u in range(out.n):
            if kept == 0 or p[u] != p[kept - 1]:
                p[kept] = p[u]
                kept += 1
        a_arr = _np.empty(kept, dtype=_np.uint32)
        b_arr = _np.empty(kept, dtype=_np.uint32)
        av = a_arr
        bv = b_arr
        for u in range(kept):
            av[u] = <uint32_t>(p[u] >> 32)
            bv[u] = <uint32_t>(p[u] & 0xFFFFFFFFULL)
        free(out.data)
        return a_arr, b_arr


cdef void _lsh_agree(const uint32_t[:, ::1] queries, const uint32_t[:, ::1] stored,
                     const int64_t[::1] offsets, const uint32_t[::1] rows,
                     uint32_t[::1] agree) noexcept nogil:
    cdef Py_ssize_t q, x, i, k = queries.shape[1]
    cdef uint32_t count
    for q in range(queries.shape[0]):
        for x in range(offsets[q], offsets[q + 1]):
            count = 0
            for i in range(k):
                count += queries[q, i] == stored[rows[x], i]
            agree[x] = count


def lsh_agree(const uint32_t[:, ::1] a, const uint32_t[:, ::1] b):
    """For each i, how many of the num_perm values of a[i] and b[i] are equal
    (a uint32 array): the numerator of the Jaccard estimate."""
    cdef Py_ssize_t n = a.shape[0], i, j, k = a.shape[1]
    cdef uint32_t[::1] out
    cdef uint32_t count
    if b.shape[0] != n or b.shape[1] != k:
        raise ValueError(f"a and b must have the same shape, got ({a.shape[0]}, {a.shape[1]}) "
                         f"and ({b.shape[0]}, {b.shape[1]})")
    result = _np.zeros(n, dtype=_np.uint32)
    out = result
    with nogil:
        for i in range(n):
            count = 0
            for j in range(k):
                count += a[i, j] == b[i, j]
            out[i] = count
    return result
