# Bloom part, 2 of 4 (included by _core_bloom.pxi): the Bloom filter's
# probes and its batch machinery: a batch's keys walked CHUNK at a time, hashed
# GROUP ahead of their probes, and lookups cut into jobs for the thread runner.
# Twin: crawldedup._reference.bloom.

# -------------------------------------------------------------- Bloom bits

cdef inline bint _probe_add(uint8_t* bits, const uint64_t* idx, int k) noexcept nogil:
    """Set the k bits with atomic ORs; True when one was clear (the key was new).
    For storage that other processes may write at the same time.

    Of processes adding one key at once, exactly one is told it is new: the
    bits are read first, the clear ones but the last (in probe order) are
    set, and the last clear one, the deciding bit, is set by a fetch-or whose
    old value is the answer.  Two adders that pick the same deciding bit are
    ordered by its fetch-or.  When P's deciding bit d comes before Q's e, P
    read e set, so after Q's fetch-or of e (P's read is an acquire, that
    fetch-or a release), by which time d was set: by Q itself, before e
    (Q read d clear), or before Q read it.  So P finds d set.  Alone, the
    answer is "one of the k bits was clear", as in _probe_add_excl (a bit
    probed twice counts once: the deciding bit is not set early).  The
    reads are plain loads (most bits of a busy filter are set, and a load is
    far cheaper than a locked read-modify-write); only a bit found clear
    costs a fetch-or."""
    cdef int i, last = -1
    cdef uint64_t pos, decide
    cdef uint8_t mask
    for i in range(k):
        pos = idx[i]
        if not (cd_load8_acquire(bits + (pos >> 3)) & (1 << (pos & 7))):
            last = i
    if last < 0:
        return False
    decide = idx[last]
    for i in range(last):
        pos = idx[i]
        if pos == decide:
            continue
        mask = <uint8_t>(1 << (pos & 7))
        if not (cd_load8(bits + (pos >> 3)) & mask):
            cd_atomic_or8(bits + (pos >> 3), mask)
    mask = <uint8_t>(1 << (decide & 7))
    return not (cd_atomic_or8_acq_rel(bits + (decide >> 3), mask) & mask)


cdef inline bint _probe_add_excl(uint8_t* bits, const uint64_t* idx, int k) noexcept nogil:
    """The same with plain stores, for a writer that excludes all others (see
    BloomBits._enter), and without branches: whether a bit was clear is a coin
    toss for a new key, so a branch on it would be mispredicted about k/2
    times a key.  (A locked RMW is a full barrier on x86 that would also stall
    the overlapping cache misses batch calls depend on.)"""
    cdef unsigned int fresh = 0
    cdef int i
    cdef uint64_t pos
    cdef uint8_t byte, mask
    for i in range(k):
        pos = idx[i]
        mask = <uint8_t>(1 << (pos & 7))
        byte = cd_load8(bits + (pos >> 3))
        fresh |= (byte & mask) ^ mask
        cd_store8(bits + (pos >> 3), byte | mask)
    return fresh != 0


@cython.linetrace(False)
@cython.profile(False)
cdef inline bint _probe_test(const uint8_t* bits, const uint64_t* idx, int k) noexcept nogil:
    cdef int i
    cdef uint64_t pos
    for i in range(k):
        pos = idx[i]
        if not (cd_load8(bits + (pos >> 3)) & (1 << (pos & 7))):
            return False
    return True


@cython.linetrace(False)
@cython.profile(False)
cdef inline void _prefetch_group(const uint8_t* bits, const uint64_t* idx, Py_ssize_t count,
                                 int k, bint all_positions, bint adding,
                                 bint one_line) noexcept nogil:
    """Prefetch the bit positions of count keys: all k of them for adds and
    for lookups in filters that fit in the caches (these test every bit,
    branch-free: a branch on each random bit would be mispredicted about once
    a key); for lookups in larger filters only the first two, as an absent key
    usually stops at its first or second clear bit (half the bits are clear
    at capacity) and fetching the other k-2 lines from memory would waste
    bandwidth.  Prefetches announce the write when adding."""
    cdef Py_ssize_t j
    cdef int t, ahead = k if all_positions or k < 2 else 2
    if one_line:  # the blocked layout: a key's bits share one cache line
        ahead = 1
    for j in range(count):
        for t in range(ahead):
            if adding:
                cd_prefetch_w(bits + (idx[j * k + t] >> 3))
            else:
                cd_prefetch(bits + (idx[j * k + t] >> 3))


@cython.linetrace(False)
@cython.profile(False)
cdef inline bint _plain_key(PyObject* obj, const unsigned char** data,
                            Py_ssize_t* size) noexcept nogil:
    """Point at the bytes of an ASCII str or a bytes key, without copying;
    False for any other key."""
    if cd_compact_ascii(obj, data, size):
        return True
    if _is_bytes(obj):
        data[0] = <const unsigned char*>_bytes_data(obj)
        size[0] = _bytes_size(obj)
        return True
    return False


cdef int _batch_key_open(object key, Py_ssize_t position, KeyView* kv) except -1:
    """_key_open for the key at a position of a batch, naming the position."""
    try:
        return _key_open(key, kv)
    except TypeError as exc:
        raise TypeError(f"keys[{position}]: {exc}") from None


cdef inline bint _str_encodable(PyObject* s) noexcept:
    """False when a (ready) str holds a lone surrogate, which UTF-8 cannot
    encode; a scan, cheaper than encoding the key twice."""
    cdef Py_ssize_t i, n = _unicode_length(s)
    cdef int kind = _unicode_kind(s)
    cdef const uint16_t* u2
    cdef const uint32_t* u4
    if kind == 1:
        return True
    if kind == 2:
        u2 = <const uint16_t*>_unicode_data(s)
        for i in range(n):
            if (u2[i] & 0xF800) == 0xD800:
                return False
        return True
    u4 = <const uint32_t*>_unicode_data(s)
    for i in range(n):
        if (u4[i] & 0xFFFFF800) == 0xD800:
            return False
    return True


cdef int _check_batch_keys(object seq, Py_ssize_t n, bint is_list) except -1:
    """Raise for the first key of a batch that cannot be hashed (naming its
    position), before an adding batch changes anything: a batch is added
    whole or not at all."""
    cdef Py_ssize_t j
    cdef PyObject* obj
    cdef const unsigned char* data
    cdef Py_ssize_t size
    cdef KeyView kv
    for j in range(n):
        obj = _list_item(seq, j) if is_list else _tuple_item(seq, j)
        if _plain_key(obj, &data, &size):
            continue
        if _is_str(obj):
            cd_unicode_ready(obj)
            if _str_encodable(obj):
                continue
        if _is_bytes(obj):
            continue
        # Anything else is opened once, so that the error is the one the
        # key itself would raise (a non-contiguous buffer, a surrogate).
        _batch_key_open(<object>obj, j, &kv)
        _key_close(&kv)
    return 0


cdef inline bint _lookup(const uint8_t* bits, uint64_t h1, uint64_t h2, int k,
                         uint64_t m, uint64_t unit) noexcept nogil:
    """Is every bit of the key set?  Positions are computed one at a time, so
    an absent key (usually rejected by its first or second bit) costs little;
    for a present key the processor runs ahead into the next probes itself.
    Same positions as _indices."""
    cdef uint64_t x = h1, y = h2, pos
    cdef int i
    for i in range(k):
        pos = cd_mulhi64(x, m)
        if not (cd_load8(bits + (pos >> 3)) & (1 << (pos & 7))):
            return False
        x += y
        y += <uint64_t>(i + 1) * unit
    return True


@cython.linetrace(False)
@cython.profile(False)
cdef inline bint _probe_test_all(const uint8_t* bits, const uint64_t* idx, int k) noexcept nogil:
    """_probe_test without early exit: no branch to mispredict on the
    random outcome of each probe, for batches whose positions are prefetched."""
    cdef int i
    cdef uint64_t pos
    cdef unsigned int acc = 1
    for i in range(k):
        pos = idx[i]
        acc &= cd_load8(bits + (pos >> 3)) >> (pos & 7)
    return acc & 1


# What a batch call needs of the filter while it runs (BloomBits._plan).
ctypedef struct BatchPlan:
    uint8_t* bits
    uint64_t m, unit
    int k, layout, stride
    bint adding, atomic, blocked, branchless, prefetch, touch, lines
    uint64_t fresh            # keys the call added
    uint64_t sink             # see _touch_sink


@cython.linetrace(False)
@cython.profile(False)
cdef inline void _key_slot(const BatchPlan* p, uint64_t h1, uint64_t h2,
                           uint64_t* at) noexcept nogil:
    """Write a key's slot (its positions, or its line for a blocked lookup)
    from its hashes, and fetch its bits while the next keys are hashed: by
    the time the chunk is probed they are in cache."""
    if p.lines:
        _line_of(h1, h2, p.m, at)
    else:
        _positions(p.layout, h1, h2, p.k, p.m, p.unit, at)
    if p.prefetch:
        _prefetch_group(p.bits, at, 1, p.stride, p.branchless, p.adding, p.blocked)


# Everything the lookup threads run is compiled without line tracing and
# profiling hooks (the decorators on it and on the helpers it calls): in a
# debug build those hooks take the GIL, which the calling thread holds while
# it waits for the threads.
ctypedef struct LookupJob:
    PyObject** items          # the batch's keys (kept alive by the caller), or
    const uint64_t* hashes    # their (h1, h2) hashes, two words a key
    Py_ssize_t start, stop    # this job's slice
    uint8_t* res              # 1 / 0, or 2 for a key left to the caller
    uint64_t* idx             # CHUNK * plan.stride words of scratch
    BatchPlan plan            # the caller's, without prefetches
    uint32_t seed


@cython.linetrace(False)
@cython.profile(False)
cdef void _lookup_slice(LookupJob* job) noexcept nogil:
    """contains_many over a slice of keys without the GIL: the keys that are
    ASCII str or bytes (immutable, their bytes read in place) are hashed and
    probed chunk by chunk, as _batch does; any other key is marked 2 for the
    caller to look up with the GIL.  With hashes, contains_hashed's slice."""
    cdef Py_ssize_t c0, c1, j
    cdef PyObject* obj
    cdef const unsigned char* data
    cdef const unsigned char* data2
    cdef Py_ssize_t size, size2
    cdef uint64_t h1, h2, g1, g2
    cdef uint64_t* at
    cdef const BatchPlan* p = &job.plan
    cdef int stride = p.stride
    c0 = job.start
    while c0 < job.stop:
        c1 = min(c0 + CHUNK, job.stop)
        j = c0
        while j < c1:
            at = &job.idx[(j - c0) * stride]
            job.res[j] = 0
            if job.hashes != NULL:
                _key_slot(p, job.hashes[2 * j], job.hashes[2 * j + 1], at)
                j += 1
                continue
            if j + PREFETCH_KEYS + 1 < c1:
                cd_prefetch(job.items[j + PREFETCH_KEYS])
                cd_prefetch(<char*>job.items[j + PREFETCH_KEYS] + 64)
                cd_prefetch(job.items[j + PREFETCH_KEYS + 1])
                cd_prefetch(<char*>job.items[j + PREFETCH_KEYS + 1] + 64)
            obj = job.items[j]
            if _plain_key(obj, &data, &size):
                if j + 1 < c1 and _plain_key(job.items[j + 1], &data2, &size2):
                    # two keys at once, as _batch hashes them
                    cd_murmur3_x64_128_x2(data, <size_t>size, data2, <size_t>size2, job.seed,
                                          &h1, &h2, &g1, &g2)
                    _key_slot(p, h1, h2, at)
                    _key_slot(p, g1, g2, at + stride)
                    job.res[j + 1] = 0
                    j += 2
                    continue
                cd_murmur3_x64_128(data, <size_t>size, job.seed, &h1, &h2)
                _key_slot(p, h1, h2, at)
            else:
                job.res[j] = 2   # no positions: skipped below
            j += 1
        if p.touch:
            for j in range(c0, c1):
                if job.res[j] != 2:
                    job.plan.sink += cd_load8(p.bits + (job.idx[(j - c0) * stride] >> 3))
        for j in range(c0, c1):
            if job.res[j] == 2:
                continue
            at = &job.idx[(j - c0) * stride]
            if p.lines:
                job.res[j] = _probe_test_line(p.bits, at, p.k)
            elif p.branchless:
                job.res[j] = _probe_test_all(p.bits, at, p.k)
            else:
                job.res[j] = _probe_test(p.bits, at, p.k)
        c0 = c1


@cython.linetrace(False)
@cython.profile(False)
cdef void _lookup_job(void* arg) noexcept nogil:
    _lookup_slice(<LookupJob*>arg)


cdef int _walk_keys(const BatchPlan* p, object seq, bint is_list, Py_ssize_t start,
                    Py_ssize_t cnt, uint32_t seed, uint64_t* idx) except -1:
    """The slots (_key_slot) of the cnt keys of seq from start, with the GIL:
    borrowed references, key objects prefetched ahead (freshly built strings
    are rarely in cache)."""
    cdef KeyView kv
    cdef Py_ssize_t j
    cdef PyObject* obj
    cdef PyObject* obj2
    cdef PyObject* obj3
    cdef const unsigned char* data
    cdef const unsigned char* data2
    cdef Py_ssize_t size, size2
    cdef uint64_t h1, h2, g1, g2
    cdef int stride = p.stride
    if is_list and _list_size(seq) < start + cnt:
        raise RuntimeError("the list of keys changed size during the call")
    j = 0
    while j < cnt:
        if j + PREFETCH_KEYS < cnt:
            obj = _list_item(seq, start + j + PREFETCH_KEYS) if is_list else \
                _tuple_item(seq, start + j + PREFETCH_KEYS)
            cd_prefetch(obj)
            cd_prefetch(<char*>obj + 64)
            cd_prefetch(<char*>obj + 128)
        obj = _list_item(seq, start + j) if is_list else _tuple_item(seq, start + j)
        # Two ASCII str or bytes keys in a row (the common case): hashed
        # together, see cd_murmur3_x64_128_x2.
        if j + 1 < cnt and _plain_key(obj, &data, &size):
            obj2 = _list_item(seq, start + j + 1) if is_list else _tuple_item(seq, start + j + 1)
            if j + 1 + PREFETCH_KEYS < cnt:
                obj3 = _list_item(seq, start + j + 1 + PREFETCH_KEYS) if is_list \
                    else _tuple_item(seq, start + j + 1 + PREFETCH_KEYS)
                cd_prefetch(obj3)
                cd_prefetch(<char*>obj3 + 64)
                cd_prefetch(<char*>obj3 + 128)
            if _plain_key(obj2, &data2, &size2):
                cd_murmur3_x64_128_x2(data, <size_t>size, data2, <size_t>size2, seed,
                                      &h1, &h2, &g1, &g2)
                _key_slot(p, h1, h2, &idx[j * stride])
                _key_slot(p, g1, g2, &idx[(j + 1) * stride])
                j += 2
                continue
        if _is_str(obj):
            kv.has_buffer = False
            kv.heap = NULL
            _str_open(obj, &kv)
            cd_murmur3_x64_128(kv.data, <size_t>kv.size, seed, &h1, &h2)
            _key_close(&kv)
        elif _is_bytes(obj):
            cd_murmur3_x64_128(<const unsigned char*>_bytes_data(obj),
                               <size_t>_bytes_size(obj), seed, &h1, &h2)
        else:
            _batch_key_open(<object>obj, start + j, &kv)
            cd_murmur3_x64_128(kv.data, <size_t>kv.size, seed, &h1, &h2)
            _key_close(&kv)
        _key_slot(p, h1, h2, &idx[j * stride])
        j += 1
    return 0


cdef const uint64_t[:, ::1] _check_hashes(object hashes) except *:
    """hashes as a C-contiguous (n, 2) uint64 view, or TypeError."""
    if not isinstance(hashes, _np.ndarray) or hashes.dtype != _np.uint64 \
            or hashes.ndim != 2 or hashes.shape[1] != 2:
        raise TypeError("hashes must be a uint64 numpy array of shape (n, 2), one (h1, h2) "
                        "row a key")
    return _np.ascontiguousarray(hashes)
