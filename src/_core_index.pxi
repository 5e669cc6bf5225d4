# ---------------------------------------------------------------- Hamming index
#
# Exact near-duplicate search over 64-bit fingerprints (crawldedup.SimhashIndex
# wraps it).  The data structure and its search are in _core_index_seg.pxi,
# _core_index_query.pxi, _core_index_join.pxi and _core_index_ops.pxi; this is
# the Python face: argument checks needed for memory safety, numpy in and out,
# the GIL released for batch queries and the self-join.  The pure-Python twin
# is HammingIndex in crawldedup._reference.index.

MAX_HAMMING_K = 8
# A batch query takes one more thread per this many queries (a slice of
# about a millisecond of work, so starting a thread costs little).
QUERIES_PER_THREAD = 4096


cdef int _check_hamming_k(object k) except -1:
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"an integer is required for k, not {type(k).__name__}")
    if k < 0 or k > IX_MAXK:
        raise ValueError(f"k must be in [0, {IX_MAXK}], got {k}")
    return k


def hamming_blocks(k):
    """(shift, width) of the k + 1 blocks that a HammingIndex of distance k
    cuts a fingerprint into, block 0 the highest bits, the first 64 % (k + 1)
    blocks one bit wider: two fingerprints within k agree on one at least."""
    cdef _IxLayout L
    cdef int t
    _ix_layout_init(&L, _check_hamming_k(k))
    return [(L.shift[t], L.width[t]) for t in range(L.T)]


cdef int _query_threads(Py_ssize_t m, object threads) except -1:
    """How many threads a batch of m queries runs on: ``threads`` when
    given (an int >= 1; never more than one per query nor MAX_THREADS),
    else _threads_for(m, QUERIES_PER_THREAD)."""
    cdef Py_ssize_t n
    if threads is None:
        return _threads_for(m, QUERIES_PER_THREAD)
    else:
        if isinstance(threads, bool) or not isinstance(threads, int):
            raise TypeError(f"threads must be an int or None, not {type(threads).__name__}")
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        n = min(threads, m)
    return <int>max(1, min(n, MAX_THREADS))



# One slice of a batch query, for one thread: the queries qs[0..m), its own
# offsets[m + 1] (relative to its own output o).
ctypedef struct _IxQueryJob:
    const _Ix* ix
    const uint64_t* qs
    size_t m
    int64_t* offsets
    _IxOut o


@cython.linetrace(False)
@cython.profile(False)
cdef void _ix_query_job(void* arg) noexcept nogil:
    cdef _IxQueryJob* j = <_IxQueryJob*>arg
    _ix_query_many(j.ix, j.qs, j.m, j.offsets, &j.o)


cdef inline uint64_t _ix_u64(object v, str name) except? 0:
    """A Python int in [0, 2**64) as uint64, else TypeError/ValueError."""
    if isinstance(v, bool):
        raise TypeError(f"{name} must be an int, not bool")
    if not isinstance(v, int):
        try:
            v = v.__index__()
        except AttributeError:
            raise TypeError(f"{name} must be an int, not {type(v).__name__}") from None
    if v < 0 or v > 0xFFFFFFFFFFFFFFFF:
        raise ValueError(f"{name} must be in [0, 2**64), got {v}")
    return <uint64_t>v


def _ix_u64_array(a, str name):
    arr = _np.asarray(a)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype != _np.uint64:
        if arr.size == 0:
            arr = arr.astype(_np.uint64)
        elif arr.dtype.kind == "i" and (arr >= 0).all():
            arr = arr.astype(_np.uint64)
        elif arr.dtype.kind != "u":
            raise TypeError(f"{name} must be an array of unsigned 64-bit integers, "
                            f"got dtype {arr.dtype}")
        else:
            arr = arr.astype(_np.uint64)
    return _np.ascontiguousarray(arr)


cdef class HammingIndex:
    """Exact index of (fingerprint, id) pairs, both uint64, searched by
    Hamming distance <= k (0 <= k <= 8).  Ids are unique."""

    cdef _Ix _ix
    cdef Py_ssize_t _readers

    def __cinit__(self, k=3):
        _ix_init(&self._ix, _check_hamming_k(k))
        self._readers = 0

    def __dealloc__(self):
        _ix_clear(&self._ix)

    cdef int _writable(self) except -1:
        if self._readers:
            raise RuntimeError("the index is being searched by another thread; "
                               "it cannot change until that search ends")
        return 0

    @property
    def k(self):
        return self._ix.L.k

    @property
    def nbytes(self):
        """Bytes of memory held by the index."""
        return _ix_nbytes(&self._ix)

    @property
    def segments(self):
        """Sorted segments (not counting the small unsorted pending buffer)."""
        return self._ix.nsegs

    def __len__(self):
        return self._ix.live

    def __contains__(self, id):
        cdef uint64_t v
        if isinstance(id, bool) or not isinstance(id, int):
            return False
        if id < 0 or id > 0xFFFFFFFFFFFFFFFF:
            return False
        v = id
        r = _ix_contains(&self._ix, v)
        if r < 0:
            raise MemoryError()
        return r == 1

    def add(self, id, fp):
        cdef uint64_t f = _ix_u64(fp, "fp")
        cdef uint64_t i = _ix_u64(id, "id")
        cdef uint64_t bad = 0
        self._writable()
        if self._ix.live >= IX_MAX_SEGMENT:
            raise ValueError(f"an index holds at most {IX_MAX_SEGMENT} entries")
        r = _ix_add_many(&self._ix, &f, &i, 1, &bad)
        if r == -2:
            raise ValueError(f"id {bad} is already in the index")
        if r != 0:
            raise MemoryError()

    def add_many(self, ids, fps):
        """Add fps[i] under ids[i] (ids first, as every public add takes
        them); all or nothing (a repeated or present id raises ValueError and
        adds none)."""
        cdef const uint64_t[::1] f = _ix_u64_array(fps, "fps")
        cdef const uint64_t[::1] i = _ix_u64_array(ids, "ids")
        cdef uint64_t bad = 0
        cdef int r
        if f.shape[0] != i.shape[0]:
            raise ValueError(f"fps and ids differ in length: {f.shape[0]} and {i.shape[0]}")
        self._writable()
        if <size_t>f.shape[0] > IX_MAX_SEGMENT - self._ix.live:
            raise ValueError(f"an index holds at most {IX_MAX_SEGMENT} entries")
        if f.shape[0] == 0:
            return
        # Holds the GIL: no search may run while the segments change.
        r = _ix_add_many(&self._ix, &f[0], &i[0], <size_t>f.shape[0], &bad)
        if r == -2:
            raise ValueError(f"id {bad} is already in the index")
        if r != 0:
            raise MemoryError()

    def remove(self, id):
        """Remove the entry with this id; True if there was one."""
        cdef uint64_t v
        if isinstance(id, bool) or not isinstance(id, int) or id < 0 or id > 0xFFFFFFFFFFFFFFFF:
            return False
        v = id
        self._writable()
        r = _ix_remove(&self._ix, v)
        if r < 0:
            raise MemoryError()
        return r == 1

    def compact(self):
        """Fold all segments, the pending buffer and tombstones into one segment."""
        self._writable()
        if _ix_compact(&self._ix) != 0:
            raise MemoryError()

    def query(self, fp):
        """[(id, distance)] of the entries within k of fp, by distance then id."""
        cdef uint64_t q = _ix_u64(fp, "fp")
        cdef int64_t offs[2]
        cdef _IxOut o
        cdef size_t j
        memset(&o, 0, sizeof(o))
        try:
            _ix_query_many(&self._ix, &q, 1, offs, &o)
            if o.oom:
                raise MemoryError()
            return [(o.b[j], o.d[j]) for j in range(o.n)]
        finally:
            _ix_out_free(&o)

    def query_many(self, fps, threads=None):
        """(offsets int64[m+1], ids uint64, distances uint8): the results of
        query fps[i] are ids[offsets[i]:offsets[i+1]], by distance then id.
        Large batches are cut into slices searched by ``threads`` threads
        at once (None: see _query_threads); the results are the same."""
        cdef const uint64_t[::1] q = _ix_u64_array(fps, "fps")
        cdef Py_ssize_t m = q.shape[0]
        cdef int n = _query_threads(m, threads)
        offsets = _np.zeros(m + 1, dtype=_np.int64)
        cdef int64_t[::1] ov = offsets
        cdef _IxOut o
        memset(&o, 0, sizeof(o))
        if m == 0:
            return offsets, _np.zeros(0, _np.uint64), _np.zeros(0, _np.uint8)
        if n > 1:
            return self._query_many_threads(q, n, offsets)
        self._readers += 1
        try:
            with nogil:
                _ix_query_many(&self._ix, &q[0], <size_t>m, &ov[0], &o)
            if o.oom:
                raise MemoryError()
            ids = _np.empty(o.n, dtype=_np.uint64)
            dists = _np.empty(o.n, dtype=_np.uint8)
            if o.n:
                memcpy(<void*>_np_data(ids), o.b, o.n * 8)
                memcpy(<void*>_np_data(dists), o.d, o.n)
            return offsets, ids, dists
        finally:
            self._readers -= 1
            _ix_out_free(&o)

    cdef object _query_many_threads(self, const uint64_t[::1] q, int n, object offsets):
        """query_many over n slices of q, one thread each, then the slices'
        results joined in order."""
        cdef Py_ssize_t m = q.shape[0], start = 0, total = 0, i, size
        cdef int64_t[::1] ov = offsets
        cdef int r
        cdef bint oom = False
        cdef _IxQueryJob* jobs = <_IxQueryJob*>PyMem_Malloc(n * sizeof(_IxQueryJob))
        if jobs == NULL:
            raise MemoryError()
        memset(jobs, 0, n * sizeof(_IxQueryJob))
        self._readers += 1
        try:
            for r in range(n):
                size = m // n + (1 if r < m % n else 0)
                jobs[r].ix = &self._ix
                jobs[r].qs = &q[start]
                jobs[r].m = <size_t>size
                jobs[r].offsets = <int64_t*>PyMem_Malloc((size + 1) * sizeof(int64_t))
                if jobs[r].offsets == NULL:
                    raise MemoryError()
                start += size
            with nogil:
                _run_jobs(_ix_query_job, jobs, sizeof(_IxQueryJob), n)
            for r in range(n):
                oom = oom or jobs[r].o.oom
                total += <Py_ssize_t>jobs[r].o.n
            if oom:
                raise MemoryError()
            ids = _np.empty(total, dtype=_np.uint64)
            dists = _np.empty(total, dtype=_np.uint8)
            start = 0
            total = 0
            for r in range(n):
                for i in range(<Py_ssize_t>jobs[r].m):
                    ov[start + i] = jobs[r].offsets[i] + total
                if jobs[r].o.n:
                    memcpy(<char*>_np_data(ids) + total * 8, jobs[r].o.b, jobs[r].o.n * 8)
                    memcpy(<char*>_np_data(dists) + total, jobs[r].o.d, jobs[r].o.n)
                start += <Py_ssize_t>jobs[r].m
                total += <Py_ssize_t>jobs[r].o.n
            ov[m] = total
            return offsets, ids, dists
        finally:
            self._readers -= 1
            for r in range(n):
                PyMem_Free(jobs[r].offsets)
                _ix_out_free(&jobs[r].o)
            PyMem_Free(jobs)

    def pairs(self):
        """(a uint64, b uint64, d uint8): every pair of entries within k, a < b,
        sorted by (a, b).  Compacts the index first."""
        cdef _IxOut o
        self.compact()
        memset(&o, 0, sizeof(o))
        o.want_a = 1
        self._readers += 1
        try:
            with nogil:
                _ix_pairs(&self._ix, &o)
            if o.oom:
                raise MemoryError()
            a = _np.empty(o.n, dtype=_np.uint64)
            b = _np.empty(o.n, dtype=_np.uint64)
            d = _np.empty(o.n, dtype=_np.uint8)
            if o.n:
                memcpy(<void*>_np_data(a), o.a, o.n * 8)
                memcpy(<void*>_np_data(b), o.b, o.n * 8)
                memcpy(<void*>_np_data(d), o.d, o.n)
        finally:
            self._readers -= 1
            _ix_out_free(&o)
        return _ix_sort_pairs(a, b, d)

    def items(self):
        """(fps, ids) uint64 arrays of every entry in (fingerprint, id) order.
        Compacts the index first."""
        self.compact()
        n = self._ix.live
        fps = _np.empty(n, dtype=_np.uint64)
        ids = _np.empty(n, dtype=_np.uint64)
        if n:
            _ix_export(&self._ix, <uint64_t*>_np_data(fps), <uint64_t*>_np_data(ids))
        return fps, ids


def _ix_sort_pairs(a, b, d):
    """(a, b, d) ordered by (a, b): one sort of packed 64-bit keys when the
    ids fit in 30 bits (distances fit in 4), else a lexsort."""
    if len(a) and int(a.max()) < (1 << 30) and int(b.max()) < (1 << 30):
        key = (a << _np.uint64(34)) | (b << _np.uint64(4)) | d.astype(_np.uint64)
        key.sort()
        return (key >> _np.uint64(34), (key >> _np.uint64(4)) & _np.uint64((1 << 30) - 1),
                (key & _np.uint64(15)).astype(_np.uint8))
    order = _np.lexsort((b, a))
    return a[order], b[order], d[order]


cdef inline size_t _np_data(arr) except 0:
    """Address of a C-contiguous numpy array's first element."""
    return <size_t>arr.ctypes.data
