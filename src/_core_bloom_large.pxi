# Bloom part, 4 of 4 (included by _core_bloom.pxi, after BloomBits): what
# large filters need: contains_many on several threads at once, and storage
# that the OS zeroes and backs with huge pages as it is touched.


cdef int _lookup_on_threads(BloomBits self, object seq, Py_ssize_t n, uint8_t* res,
                            int threads, const BatchPlan* plan,
                            const uint64_t* hashes) except -1:
    """contains_many of a large batch: slices of it looked up at once on
    threads threads (the calling one included), then the keys that are
    neither ASCII str nor bytes (with hashes, contains_hashed's: no keys
    left).  The calling thread keeps the GIL throughout, so no Python
    code can change the keys while the other threads read them (a copy of
    the list, with a new reference to every key, would make the other
    threads read lines this one just wrote)."""
    cdef object held = seq
    cdef PyObject** items = NULL
    cdef LookupJob* jobs
    cdef Py_ssize_t i, per, at = 0
    cdef int r
    global _touch_sink
    if hashes != NULL:
        pass
    elif type(held) is list:
        items = cd_list_items(held)
    else:
        items = cd_tuple_items(held)
    jobs = <LookupJob*>PyMem_Malloc(threads * sizeof(LookupJob))
    if jobs == NULL:
        raise MemoryError()
    memset(jobs, 0, threads * sizeof(LookupJob))
    try:
        per = n // threads
        for r in range(threads):
            jobs[r].items = items
            jobs[r].hashes = hashes
            jobs[r].start = at
            jobs[r].stop = n if r == threads - 1 else at + per
            at = jobs[r].stop
            jobs[r].res = res
            jobs[r].plan = plan[0]
            jobs[r].plan.prefetch = False
            jobs[r].plan.sink = 0
            jobs[r].seed = self._seed
            jobs[r].idx = <uint64_t*>malloc(CHUNK * plan.stride * sizeof(uint64_t))
            if jobs[r].idx == NULL:
                raise MemoryError()
        self._active += 1
        try:
            # the GIL held while waiting (see above)
            _run_jobs(_lookup_job, jobs, sizeof(LookupJob), threads)
        finally:
            self._active -= 1
        for r in range(threads):
            _touch_sink += jobs[r].plan.sink
        # The keys the threads left (non-ASCII str, buffers...): one
        # batch on this thread; a bad key is named by its own position.
        left = [i for i in range(n) if res[i] == 2]
        if left:
            try:
                found = self._batch([<object>items[i] for i in left], False, False)
            except TypeError:
                for i in left:
                    try:
                        BloomBits.__contains__(self, <object>items[i])
                    except TypeError as exc:
                        raise TypeError(f"keys[{i}]: {exc}") from None
                raise
            for i, hit in zip(left, found.tolist()):
                res[i] = hit
    finally:
        for r in range(threads):
            free(jobs[r].idx)
        PyMem_Free(jobs)
    return 0


cdef object _zeroed(Py_ssize_t size, bint aligned):
    """size zero bytes of private, writable memory.  Large buffers come from
    an anonymous mapping, whose pages the OS zeroes only when first touched:
    a 100-million-key filter is created at once and occupies memory as it
    fills.  MAP_PRIVATE keeps a forked child's copy apart, as for any object."""
    if size < <Py_ssize_t>CD_BIG_MAP_FROM and not aligned:
        return bytearray(size)
    if hasattr(_mmap, "MAP_PRIVATE"):
        mem = _mmap.mmap(-1, size, flags=_mmap.MAP_PRIVATE)
    else:
        mem = _mmap.mmap(-1, size)
    _huge_pages(mem, size)
    return mem


cdef _huge_pages(object mem, Py_ssize_t size):
    """Ask for transparent huge pages on a large mapping: a random probe into a
    100-million-key filter otherwise costs a TLB miss (and a page-table walk
    that itself misses the cache) on top of the cache miss."""
    if size >= <Py_ssize_t>CD_BIG_HUGE_FROM and hasattr(_mmap, "MADV_HUGEPAGE"):
        try:
            mem.madvise(_mmap.MADV_HUGEPAGE)
        except (OSError, ValueError):  # not supported here: a hint only
            pass


def nbytes_for(num_bits):
    """Bytes of storage for num_bits bits: whole 8-byte words."""
    return ((num_bits + 63) // 64) * 8
