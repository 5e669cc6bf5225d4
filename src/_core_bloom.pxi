# Bloom part (included first by _core.pyx): key access and hashing
# (_core_keys.pxi), the probes and batch machinery (_core_bloom_batch.pxi),
# then here BloomBits, the Bloom filter's bit array, and last what large
# filters need (_core_bloom_large.pxi: threaded lookups, lazily zeroed
# storage).  Over 500 lines: one cdef class, whose body Cython cannot split
# across files ("include statement not allowed here").
# Twin: crawldedup._reference.bloom.

include "_core_keys.pxi"
include "_core_bloom_batch.pxi"


@cython.no_gc_clear
cdef class BloomBits:
    """A bit array of ``num_bits`` bits probed by ``num_hashes`` positions per key.

    The storage for :class:`crawldedup.BloomFilter`; it knows nothing of
    capacities, error rates or files.  Construct with no arguments, then call
    ``_init_bits`` exactly once (subclasses have their own constructors).
    Bit ``i`` is bit ``i % 8`` of byte ``i // 8``; the buffer is a whole
    number of 8-byte words and the padding bits past ``num_bits`` stay zero.
    """

    cdef uint8_t* _bits
    cdef Py_ssize_t _nbytes
    cdef uint64_t _m
    cdef uint64_t _unit
    cdef int _k
    cdef int _layout
    cdef uint32_t _seed
    cdef uint64_t _count
    cdef object _owner
    cdef Py_buffer _view
    cdef bint _has_view
    # Writers without the GIL, counted and changed only with the GIL held;
    # they set bits only while holding _lock.  See _enter.
    cdef Py_ssize_t _nogil_writers
    cdef PyThread_type_lock _lock
    # Storage given by the caller may be shared with other processes: every
    # write is then an atomic OR.
    cdef bint _atomic
    cdef bint _readonly
    # Calls running without the GIL on the storage; _release waits for none.
    cdef Py_ssize_t _active
    # The insert count in shared storage (a file's header), when attached.
    cdef uint64_t* _shared_count
    cdef Py_buffer _count_view
    cdef bint _has_count_view
    # Called once before the first change to the bits (see _set_write_hook).
    cdef object _write_hook

    def __cinit__(self, *args, **kwargs):
        self._bits = NULL
        self._has_view = False
        self._nogil_writers = 0
        self._atomic = False
        self._readonly = False
        self._active = 0
        self._shared_count = NULL
        self._has_count_view = False
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError()

    def __dealloc__(self):
        self._drop_buffers()
        if self._lock != NULL:
            PyThread_free_lock(self._lock)
            self._lock = NULL

    cdef void _drop_buffers(self) noexcept:
        self._bits = NULL
        self._shared_count = NULL
        if self._has_count_view:
            PyBuffer_Release(&self._count_view)
            self._has_count_view = False
        if self._has_view:
            PyBuffer_Release(&self._view)
            self._has_view = False

    def _release(self):
        """Let go of the storage (so that a mapping can be closed); every
        later use raises.  Refused while another thread runs a batch call."""
        if self._active:
            raise BufferError("the filter is in use by a batch call in another thread")
        self._drop_buffers()
        self._owner = None

    def _attach_counter(self, buffer):
        """Keep the insert count in buffer (8 bytes, native order, e.g. a
        mapped file's header), updated atomically by every attached writer."""
        self._ready()
        if self._has_count_view:
            raise RuntimeError("a counter is already attached")
        flags = PyBUF_SIMPLE if self._readonly else PyBUF_WRITABLE
        try:
            PyObject_GetBuffer(buffer, &self._count_view, flags)
        except BufferError:
            raise TypeError("counter buffer must be writable and contiguous") from None
        self._has_count_view = True
        if self._count_view.len < 8 or (<size_t>self._count_view.buf) % 8:
            PyBuffer_Release(&self._count_view)
            self._has_count_view = False
            raise ValueError("counter buffer must be 8 bytes, 8-byte aligned")
        self._shared_count = <uint64_t*>self._count_view.buf

    # Writers exclude each other so that bits can be set with plain stores.
    # A writer holding the GIL may write directly when no GIL-free writer is
    # counted (none can start while it holds the GIL).  Otherwise it counts
    # itself, waits for the lock without the GIL, writes, and unlocks.  No
    # thread ever waits for the lock while holding the GIL, and the lock
    # holder never needs the GIL to let go, so there is no deadlock.

    cdef inline bint _enter(self) noexcept:
        """Called with the GIL; True when the caller now holds _lock."""
        if self._nogil_writers == 0:
            return False
        self._nogil_writers += 1
        with nogil:
            PyThread_acquire_lock(self._lock, WAIT_LOCK)
        return True

    cdef inline void _leave(self, bint locked) noexcept:
        if locked:
            PyThread_release_lock(self._lock)
            self._nogil_writers -= 1

    def _init_bits(self, num_bits, num_hashes, seed=0, buffer=None, layout="standard",
                   readonly=False):
        """Attach storage: a new zeroed buffer, or ``buffer`` (at least
        ``nbytes_for(num_bits)`` bytes, used in place; writable unless
        ``readonly``, when every add raises)."""
        cdef uint32_t s = _check_seed(seed)
        cdef int code = _layout_code(layout)
        cdef Py_ssize_t need
        if self._bits != NULL:
            raise RuntimeError("bits are already initialised")
        if not isinstance(num_bits, int) or not isinstance(num_hashes, int):
            raise TypeError("num_bits and num_hashes must be ints")
        if num_hashes < 1 or num_hashes > MAX_HASHES:
            raise ValueError(f"num_hashes must be in [1, {MAX_HASHES}], got {num_hashes}")
        if num_bits < 1 or num_bits > (1 << 62):
            raise ValueError(f"num_bits must be in [1, 2**62], got {num_bits}")
        if code == LAYOUT_BLOCKED and num_bits % 512:
            raise ValueError(
                f"num_bits must be a multiple of 512 for the blocked layout, got {num_bits}")
        need = nbytes_for(num_bits)
        # Blocks must be whole cache lines: mapped memory is page-aligned.
        owner = _zeroed(need, code == LAYOUT_BLOCKED) if buffer is None else buffer
        try:
            PyObject_GetBuffer(owner, &self._view, PyBUF_SIMPLE if readonly else PyBUF_WRITABLE)
        except BufferError:
            raise TypeError("buffer must be a writable, C-contiguous bytes-like object") from None
        self._has_view = True
        if self._view.len < need:
            PyBuffer_Release(&self._view)
            self._has_view = False
            raise ValueError(f"buffer holds {self._view.len} bytes; {need} are needed")
        self._owner = owner
        self._atomic = buffer is not None
        self._readonly = bool(readonly)
        self._nbytes = need
        self._m = num_bits
        self._unit = _unit(self._m)
        self._k = num_hashes
        self._layout = code
        self._seed = s
        self._count = 0
        self._bits = <uint8_t*>self._view.buf

    cdef inline int _ready(self) except -1:
        if self._bits == NULL:
            if self._nbytes:
                raise ValueError("the filter is closed")
            raise RuntimeError("BloomBits used before _init_bits()")
        return 0

    cdef inline int _writable(self) except -1:
        if self._bits == NULL:
            self._ready()
        if self._readonly:
            raise ValueError("the filter is open read-only")
        if self._write_hook is not None:
            self._run_write_hook()
        return 0

    cdef int _run_write_hook(self) except -1:
        hook = self._write_hook
        hook()  # may raise: the hook stays, and every later change raises too
        if self._write_hook is hook:
            self._write_hook = None
        return 0

    def _set_write_hook(self, hook):
        """Call hook() (once it returns) before the first change to the bits:
        a mapped file checks and marks itself there.  None removes it."""
        if hook is not None and not callable(hook):
            raise TypeError("the write hook must be callable or None")
        self._write_hook = hook

    cdef inline void _count_add(self, uint64_t n) noexcept nogil:
        if self._shared_count != NULL:
            cd_atomic_add64(self._shared_count, n)
        else:
            self._count += n

    @property
    def num_bits(self):
        """Number of bits, m."""
        return self._m

    @property
    def num_hashes(self):
        """Number of bit positions per key, k."""
        return self._k

    @property
    def layout(self):
        """'standard' or 'blocked' (all of a key's bits in one cache line)."""
        return "blocked" if self._layout == LAYOUT_BLOCKED else "standard"

    @property
    def seed(self):
        """Seed of the MurmurHash3 used for keys."""
        return self._seed

    @property
    def insert_count(self):
        """Number of adds that reported a new key."""
        if self._shared_count != NULL:
            return cd_atomic_load64(self._shared_count)
        return self._count

    @property
    def readonly(self):
        """True for a filter opened read-only."""
        return self._readonly

    def _set_insert_count(self, uint64_t value):
        if self._shared_count != NULL:
            self._writable()
            cd_atomic_store64(self._shared_count, value)
        else:
            self._count = value

    def add(self, key):
        """Add key; True when it was not present before (like Redis BF.ADD)."""
        cdef uint64_t h1, h2
        cdef uint64_t idx[MAX_HASHES]
        cdef int i
        cdef bint fresh, locked
        self._ready()
        _hash_key(key, self._seed, &h1, &h2)
        self._writable()
        _positions(self._layout, h1, h2, self._k, self._m, self._unit, idx)
        for i in range(self._k):
            cd_prefetch(self._bits + (idx[i] >> 3))
        if self._atomic:
            fresh = _probe_add(self._bits, idx, self._k)
        else:
            locked = self._enter()
            fresh = _probe_add_excl(self._bits, idx, self._k)
            self._leave(locked)
        if fresh:
            self._count_add(1)
        return fresh

    def __contains__(self, key):
        cdef uint64_t h1, h2
        cdef uint64_t idx[MAX_HASHES]
        self._ready()
        _hash_key(key, self._seed, &h1, &h2)
        if self._layout == LAYOUT_BLOCKED:
            _indices_blocked(h1, h2, self._k, self._m >> 9, idx)
            return _probe_test_all(self._bits, idx, self._k)
        return _lookup(self._bits, h1, h2, self._k, self._m, self._unit)

    def add_many(self, keys):
        """Add every key in order; a numpy bool array, True where the key was new."""
        return self._batch(keys, True)

    def contains_many(self, keys):
        """A numpy bool array, True where the key is (probably) present."""
        return self._batch(keys, False)

    def add_hashed(self, hashes):
        """add_many for keys given by their hashes: ``hashes`` is a uint64
        numpy array of shape (n, 2), one row (h1, h2) a key, where h1 and h2
        are the low and high 64 bits of ``hash128(key, seed)`` (the filter's
        seed).  Sets the same bits and gives the same answers as
        ``add_many(keys)``."""
        return self._batch_hashed(hashes, True)

    def contains_hashed(self, hashes):
        """contains_many for keys given by their hashes (see add_hashed)."""
        return self._batch_hashed(hashes, False)

    cdef int _plan(self, BatchPlan* p, bint adding) except -1:
        """What a batch call needs of the filter, for _key_slot and
        _probe_chunk (after _writable for an adding call)."""
        p.bits = self._bits
        p.m = self._m
        p.unit = self._unit
        p.k = self._k
        p.layout = self._layout
        p.adding = adding
        p.atomic = self._atomic
        p.blocked = self._layout == LAYOUT_BLOCKED
        # See _prefetch_group.
        p.branchless = adding or p.blocked or self._nbytes <= BRANCHLESS_MAX_BYTES
        p.prefetch = _prefetching
        p.touch = p.prefetch and self._nbytes > TOUCH_MIN_BYTES
        # Lookups in the blocked layout keep a key's line and generator state
        # (see _line_of) instead of its k positions.
        p.lines = p.blocked and not adding
        # idx holds stride words a key: its k positions, or its line (2 words).
        p.stride = 2 if p.lines and p.k < 2 else p.k
        p.fresh = 0
        p.sink = 0
        return 0

    cdef int _probe_chunk(self, BatchPlan* p, const uint64_t* idx, Py_ssize_t cnt,
                          uint8_t* res) except -1:
        """Probe (or set) the bits of cnt keys whose slots (_key_slot) are in
        idx, without the GIL: res[j] is the answer for key j."""
        # Everything in locals: res may alias anything, p included.
        cdef Py_ssize_t j, g, gcnt
        cdef int stride = p.stride, k = p.k
        cdef uint8_t* bits = p.bits
        cdef bint adding = p.adding, atomic = p.atomic, hit
        cdef bint lines = p.lines, branchless = p.branchless, touch = p.touch
        cdef uint64_t sink = 0, fresh = 0
        if adding and not atomic:
            self._nogil_writers += 1
        self._active += 1
        with nogil:
            if adding and not atomic:
                PyThread_acquire_lock(self._lock, WAIT_LOCK)
            # Touch each key's first line in a loop of a few instructions per
            # key, so the processor has many misses in flight at once (the
            # probes below take tens of instructions a key, which bounds how
            # far out-of-order execution reaches ahead); software prefetches
            # alone leave most of the latency exposed.
            if touch:
                for j in range(cnt):
                    sink += cd_load8(bits + (idx[j * stride] >> 3))
            g = 0
            while g < cnt:
                gcnt = cnt - g
                if gcnt > GROUP:
                    gcnt = GROUP
                for j in range(g, g + gcnt):
                    if adding:
                        if atomic:
                            hit = _probe_add(bits, &idx[j * stride], k)
                        else:
                            hit = _probe_add_excl(bits, &idx[j * stride], k)
                        fresh += hit
                    else:
                        if lines:
                            hit = _probe_test_line(bits, &idx[j * stride], k)
                        elif branchless:
                            hit = _probe_test_all(bits, &idx[j * stride], k)
                        else:
                            hit = _probe_test(bits, &idx[j * stride], k)
                    res[j] = hit
                g += gcnt
            if adding and not atomic:
                PyThread_release_lock(self._lock)
        if adding and not atomic:
            self._nogil_writers -= 1
        self._active -= 1
        p.sink += sink
        p.fresh += fresh
        return 0

    cdef int _finish(self, BatchPlan* p) noexcept:
        """Account for a batch call's probes (also after an error)."""
        global _touch_sink
        _touch_sink += p.sink
        if p.fresh:
            self._count_add(p.fresh)
        p.sink = 0
        p.fresh = 0
        return 0

    cdef object _batch_hashed(self, object hashes, bint adding):
        cdef const uint64_t[:, ::1] v
        self._ready()
        if adding and self._readonly:
            raise ValueError("the filter is open read-only")
        v = _check_hashes(hashes)
        return self._run(None, False, v, v.shape[0], adding, True)

    cdef object _batch(self, object keys, bint adding, bint may_thread=True):
        cdef object seq
        self._ready()
        if adding and self._readonly:
            raise ValueError("the filter is open read-only")
        if isinstance(keys, (str, bytes, bytearray, memoryview)):
            raise TypeError(
                f"keys must be an iterable of keys, not a single {type(keys).__name__}; "
                f"use add()/`in` for one key")
        if type(keys) is list or type(keys) is tuple:
            seq = keys
        else:
            seq = list(keys)
        return self._run(seq, type(seq) is list, None, len(seq), adding, may_thread)

    cdef object _run(self, object seq, bint is_list, const uint64_t[:, ::1] hashes,
                     Py_ssize_t n, bint adding, bint may_thread):
        # The batch calls, over n keys given as a list or tuple seq, or by
        # their hashes (the rows of hashes).  Chunk by chunk: with the GIL,
        # compute each key's bit positions (_walk_keys, or from its row) and
        # start fetching them (_key_slot); then, without the GIL, probe
        # (_probe_chunk), so the cache misses of a large filter overlap.
        # Key bytes are only read while the GIL is held, so no other thread
        # can free or resize a key under us.
        cdef BatchPlan p
        cdef uint64_t* idx
        cdef Py_ssize_t start, cnt, j
        cdef const unsigned char* data
        cdef Py_ssize_t size
        cdef uint8_t* res
        cdef int threads
        cdef const uint64_t* rows = NULL
        out = _np.empty(n, dtype=_np.bool_)
        if n == 0:
            return out
        cdef uint8_t[::1] outv = out.view(_np.uint8)
        res = &outv[0]
        if adding:
            if seq is not None:
                _check_batch_keys(seq, n, is_list)
            self._writable()
        self._plan(&p, adding)
        if not adding and may_thread:
            threads = _threads_for(n, THREAD_KEYS)
            # The threads read ASCII str and bytes keys only (the rest is
            # left to this thread): a batch with other keys among 64
            # spread samples stays on this thread.
            j = 0
            while seq is not None and threads > 1 and j < 64:
                if not _plain_key(_list_item(seq, j * (n // 64)) if is_list
                                  else _tuple_item(seq, j * (n // 64)), &data, &size):
                    threads = 1
                j += 1
            if threads > 1:
                if seq is None:
                    rows = &hashes[0, 0]
                _lookup_on_threads(self, seq, n, res, threads, &p, rows)
                return out
        idx = <uint64_t*>PyMem_Malloc(CHUNK * p.stride * sizeof(uint64_t))
        if idx == NULL:
            raise MemoryError()
        start = 0
        try:
            while start < n:
                cnt = min(n - start, CHUNK)
                if seq is None:
                    # without the GIL: the other thread of the command
                    # (KeysAhead in crawldedup/cli/_delivery.py) runs meanwhile
                    rows = &hashes[start, 0]
                    with nogil:
                        for j in range(cnt):
                            _key_slot(&p, rows[2 * j], rows[2 * j + 1], &idx[j * p.stride])
                else:
                    _walk_keys(&p, seq, is_list, start, cnt, self._seed, idx)
                self._probe_chunk(&p, idx, cnt, res + start)
                start += cnt
        finally:
            PyMem_Free(idx)
            self._finish(&p)
        return out

    def _popcount(self):
        """Number of set bits."""
        cdef Py_ssize_t i
        cdef uint64_t w, total = 0
        cdef const uint8_t* bits = self._bits
        cdef Py_ssize_t nbytes = self._nbytes
        self._ready()
        self._active += 1
        with nogil:
            for i in range(0, nbytes, 8):
                memcpy(&w, bits + i, 8)
                total += <uint64_t>cd_popcount64(w)
        self._active -= 1
        return total

    cdef int _check_peer(self, BloomBits other) except -1:
        self._ready()
        other._ready()
        if (other._m != self._m or other._k != self._k or other._seed != self._seed
                or other._layout != self._layout):
            raise ValueError("bit arrays differ in num_bits, num_hashes, seed or layout")
        return 0

    def _or_from(self, BloomBits other):
        """self |= other, bit by bit."""
        self._merge_from(other, True)

    def _and_from(self, BloomBits other):
        """self &= other, bit by bit."""
        self._merge_from(other, False)

    cdef int _merge_from(self, BloomBits other, bint union) except -1:
        # One loop for both (the compiler unswitches it on union).
        cdef Py_ssize_t i
        cdef uint64_t a, b
        cdef bint locked
        self._check_peer(other)
        self._writable()
        locked = self._enter()
        for i in range(0, self._nbytes, 8):
            memcpy(&a, self._bits + i, 8)
            memcpy(&b, other._bits + i, 8)
            if union:
                a |= b
            else:
                a &= b
            memcpy(self._bits + i, &a, 8)
        self._leave(locked)
        return 0

    def _bits_equal(self, BloomBits other):
        self._check_peer(other)
        return self._bits_view() == other._bits_view()

    def _clear(self):
        cdef bint locked
        self._writable()
        locked = self._enter()
        memset(self._bits, 0, self._nbytes)
        self._leave(locked)
        self._set_insert_count(0)

    def _bits_view(self):
        """A memoryview of the ``nbytes_for(num_bits)`` storage bytes
        (writable unless the filter is read-only)."""
        self._ready()
        return memoryview(self._owner).cast("B")[:self._nbytes]


include "_core_bloom_large.pxi"
