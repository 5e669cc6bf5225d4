# FingerprintTable: the exact set of fixed-size digests behind
# crawldedup.FingerprintSet.  The table itself is C (src/_cd_fpset.h); this
# part takes keys from Python, validates them as far as memory safety needs,
# and runs batches without the GIL.  Twin: FingerprintTable in
# crawldedup._reference.fpset.

cdef extern from "_cd_fpset.h" nogil:
    ctypedef struct cd_fpset:
        int has_zero
        uint64_t nz
    int cd_fpset_init(cd_fpset* s, size_t ds)
    void cd_fpset_free(cd_fpset* s)
    size_t cd_fpset_nbytes(const cd_fpset* s)
    int cd_fpset_migrate(cd_fpset* s, size_t steps)
    int cd_fpset_reserve(cd_fpset* s, uint64_t n)
    int cd_fpset_add(cd_fpset* s, const unsigned char* key, int incremental)
    int cd_fpset_has(const cd_fpset* s, const unsigned char* key)
    int cd_fpset_batch(cd_fpset* s, const unsigned char* data, size_t n, int adding,
                       unsigned char* out, size_t* done)
    void cd_fpset_export(const cd_fpset* s, unsigned char* out)
    int cd_fpset_load(cd_fpset* s, const unsigned char* data, size_t n, size_t* bad)
    uint64_t cd_fp_hash(const unsigned char* d, size_t ds)
    const size_t CD_FP_MAX_DIGEST

FP_MAX_DIGEST_SIZE = CD_FP_MAX_DIGEST
# Keys of a list are copied FP_CHUNK at a time into a staging buffer (with
# the GIL), then probed without it.
DEF FP_CHUNK = 1 << 20


def fp_hash(digest):
    """The 64-bit hash that orders a FingerprintSet (docs/fpset.md)."""
    cdef const unsigned char[::1] view = _fp_view(digest)
    if view.shape[0] == 0 or view.shape[0] > CD_FP_MAX_DIGEST:
        raise ValueError(f"digest must be 1 to {CD_FP_MAX_DIGEST} bytes long, "
                         f"got {view.shape[0]}")
    return cd_fp_hash(&view[0], view.shape[0])


cdef object _fp_view(object key):
    if isinstance(key, str):
        raise TypeError("a digest must be bytes-like, not str (hash the text first, e.g. "
                        "hashlib.md5(url.encode()).digest())")
    if not PyObject_CheckBuffer(key):
        raise TypeError(f"a digest must be bytes-like, not {type(key).__name__}")
    m = memoryview(key)
    if not m.c_contiguous:
        raise TypeError("a digest must be a contiguous buffer")
    if holds_objects(m.format):
        raise objects_error("a digest", key)
    if m.format != "B" or m.ndim != 1:
        m = m.cast("B")
    return m


cdef inline int _fp_copy_key(object key, unsigned char* out, size_t ds) except -1:
    """Copy one digest (exactly ds bytes) to out; TypeError/ValueError otherwise."""
    cdef Py_buffer view
    if PyBytes_Check(key):
        if <size_t>PyBytes_GET_SIZE(key) != ds:
            raise ValueError(f"a digest must be exactly {ds} bytes long, got "
                             f"{PyBytes_GET_SIZE(key)}")
        memcpy(out, PyBytes_AS_STRING(key), ds)
        return 0
    if isinstance(key, str) or not PyObject_CheckBuffer(key):
        _fp_view(key)  # raises the TypeError
    try:
        _buffer_open(key, &view, "a digest")
    except TypeError:
        _fp_view(key)  # the digests' own wording
        raise
    try:
        if <size_t>view.len != ds:
            raise ValueError(f"a digest must be exactly {ds} bytes long, got {view.len}")
        memcpy(out, view.buf, ds)
    finally:
        PyBuffer_Release(&view)
    return 0


cdef class FingerprintTable:
    """An exact set of ``digest_size``-byte digests in one flat buffer.

    The storage of :class:`crawldedup.FingerprintSet`.  Not a Python object
    per entry: about ``max(digest_size, 8) / load`` bytes per digest, the
    load staying between 0.84 and 0.95 from 65,536 digests on.  Safe to
    share between threads: batch calls probe without the GIL, holding the
    table's own lock.
    """

    cdef cd_fpset _s
    cdef size_t _ds
    cdef bint _ready
    # Batch calls running without the GIL (changed only with the GIL held);
    # while nonzero, every access takes _lock.
    cdef Py_ssize_t _nogil_users
    cdef PyThread_type_lock _lock

    def __cinit__(self, *args, **kwargs):
        self._ready = False
        self._nogil_users = 0
        self._lock = PyThread_allocate_lock()
        if self._lock == NULL:
            raise MemoryError()

    def __init__(self, digest_size=16):
        if isinstance(digest_size, bool) or not isinstance(digest_size, int):
            raise TypeError(f"digest_size must be an int, not {type(digest_size).__name__}")
        if not 1 <= digest_size <= CD_FP_MAX_DIGEST:
            raise ValueError(f"digest_size must be between 1 and {CD_FP_MAX_DIGEST}, "
                             f"got {digest_size}")
        if self._ready:
            raise RuntimeError("FingerprintTable.__init__ called twice")
        self._ds = digest_size
        if cd_fpset_init(&self._s, self._ds) != 0:
            raise MemoryError()
        self._ready = True

    def __dealloc__(self):
        if self._ready:
            cd_fpset_free(&self._s)
            self._ready = False
        if self._lock != NULL:
            PyThread_free_lock(self._lock)
            self._lock = NULL

    cdef inline void _check(self) except *:
        if not self._ready:
            raise RuntimeError("FingerprintTable is not initialised")

    cdef inline bint _lock_if_shared(self) noexcept:
        """With the GIL; True when the caller now holds _lock (a batch call
        is running in another thread)."""
        if self._nogil_users == 0:
            return False
        with nogil:
            PyThread_acquire_lock(self._lock, WAIT_LOCK)
        return True

    @property
    def digest_size(self):
        return self._ds

    @property
    def nbytes(self):
        """Bytes of table memory held (while growing: the parts of both
        tables in use; the new one fills as the old one empties)."""
        self._check()
        return cd_fpset_nbytes(&self._s)

    def __len__(self):
        self._check()
        return self._s.nz + self._s.has_zero

    def reserve(self, n):
        """Make room for n digests in all, so that adding up to n grows the
        table no more: a caller that knows how many are coming saves the
        growths on the way (each moves every digest).  The memory is taken
        now; a table already that large is left as it is."""
        cdef bint locked
        cdef int r
        self._check()
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"n must be an int, not {type(n).__name__}")
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if n >= 1 << 62:
            raise MemoryError(f"no room for {n} digests")
        locked = self._lock_if_shared()
        try:
            r = cd_fpset_reserve(&self._s, <uint64_t>n)
        finally:
            if locked:
                PyThread_release_lock(self._lock)
        if r != 0:
            raise MemoryError(f"no room for {n} digests")

    def add(self, key):
        """Add one digest; True when it was new."""
        cdef unsigned char buf[CD_FP_MAX_DIGEST]
        cdef int r
        cdef bint locked
        self._check()
        _fp_copy_key(key, buf, self._ds)
        locked = self._lock_if_shared()
        r = cd_fpset_add(&self._s, buf, 1)
        if locked:
            PyThread_release_lock(self._lock)
        if r < 0:
            raise MemoryError("no memory to grow the fingerprint set")
        return r == 1

    def contains(self, key):
        """True when the digest is in the set."""
        cdef unsigned char buf[CD_FP_MAX_DIGEST]
        cdef int r
        cdef bint locked
        self._check()
        _fp_copy_key(key, buf, self._ds)
        locked = self._lock_if_shared()
        r = cd_fpset_has(&self._s, buf)
        if locked:
            PyThread_release_lock(self._lock)
        return r == 1

    def __contains__(self, key):
        return self.contains(key)

    def add_many(self, keys):
        """Add every digest in order; a numpy bool array, True where new."""
        return self._batch(keys, True)

    def contains_many(self, keys):
        """A numpy bool array, True where the digest is in the set."""
        return self._batch(keys, False)

    cdef object _run(self, const unsigned char* data, size_t n, bint adding,
                     unsigned char* res):
        """Probe n staged keys without the GIL, holding _lock."""
        cdef int r
        cdef size_t done = 0
        self._nogil_users += 1
        try:
            with nogil:
                PyThread_acquire_lock(self._lock, WAIT_LOCK)
                r = cd_fpset_batch(&self._s, data, n, adding, res, &done)
                PyThread_release_lock(self._lock)
        finally:
            self._nogil_users -= 1
        if r == -3:
            raise RuntimeError("keys: the array changed during the call")
        if r < 0:
            raise MemoryError(f"no memory to grow the fingerprint set "
                              f"(the first {done} digests of this chunk were handled)")

    cdef object _batch(self, object keys, bint adding):
        cdef size_t ds = self._ds
        cdef Py_ssize_t n, start, cnt, j
        cdef unsigned char* staging
        cdef bint is_list
        cdef const unsigned char[::1] flat
        cdef uint8_t[::1] outv
        self._check()
        if isinstance(keys, (str, bytes, bytearray, memoryview)):
            raise TypeError(
                f"keys must be a list of digests or a numpy S{ds} array, not a single "
                f"{type(keys).__name__}; use add()/`in` for one digest")
        if isinstance(keys, _np.ndarray):
            arr = keys
            if arr.dtype.kind == "S":
                if arr.dtype.itemsize != ds:
                    raise ValueError(f"keys: a numpy array of dtype {arr.dtype} holds "
                                     f"{arr.dtype.itemsize}-byte items; this set holds "
                                     f"{ds}-byte digests (dtype S{ds})")
                if arr.ndim != 1:
                    raise ValueError(f"keys: a numpy S{ds} array must be 1-D, got "
                                     f"{arr.ndim} dimensions")
            elif arr.dtype == _np.uint8 and arr.ndim == 2:
                if arr.shape[1] != ds:
                    raise ValueError(f"keys: a 2-D uint8 array must have {ds} columns, got "
                                     f"{arr.shape[1]}")
            else:
                raise TypeError(f"keys: a numpy array must have dtype S{ds} (or be 2-D "
                                f"uint8 with {ds} columns), not {arr.dtype} with "
                                f"{arr.ndim} dimensions")
            n = arr.shape[0]
            out = _np.zeros(n, dtype=_np.bool_)
            if n == 0:
                return out
            flat = _np.ascontiguousarray(arr).reshape(-1).view(_np.uint8)
            outv = out.view(_np.uint8)
            self._run(&flat[0], n, adding, &outv[0])
            return out
        if type(keys) is list or type(keys) is tuple:
            seq = keys
        else:
            try:
                seq = list(keys)
            except TypeError:
                raise TypeError(f"keys must be an iterable of digests, not "
                                f"{type(keys).__name__}") from None
        n = len(seq)
        out = _np.zeros(n, dtype=_np.bool_)
        if n == 0:
            return out
        outv = out.view(_np.uint8)
        # Big chunks let a large batch take the sort-and-merge path.
        cnt = min(n, FP_CHUNK)
        staging = <unsigned char*>PyMem_Malloc(cnt * ds)
        if staging == NULL:
            raise MemoryError()
        is_list = type(seq) is list
        try:
            if adding and n > FP_CHUNK:
                # Several chunks: every digest is checked before the first
                # chunk is added, so a bad one anywhere leaves the set as it was.
                for j in range(n):
                    if is_list:
                        if j >= _list_size(seq):
                            raise RuntimeError("keys: the list changed size during the call")
                        _fp_copy_key(<object>_list_item(seq, j), staging, ds)
                    else:
                        _fp_copy_key(seq[j], staging, ds)
            start = 0
            while start < n:
                cnt = min(n - start, FP_CHUNK)
                for j in range(cnt):
                    if is_list:
                        # A buffer's exporter may run Python code that
                        # shrinks the list: check before every borrow.
                        if start + j >= _list_size(seq):
                            raise RuntimeError("keys: the list changed size during the call")
                        _fp_copy_key(<object>_list_item(seq, start + j), staging + j * ds, ds)
                    else:
                        _fp_copy_key(seq[start + j], staging + j * ds, ds)
                self._run(staging, cnt, adding, &outv[start])
                start += cnt
        finally:
            PyMem_Free(staging)
        return out

    def clear(self):
        """Remove every digest (and give the memory back)."""
        self._check()
        locked = self._lock_if_shared()
        cd_fpset_free(&self._s)
        r = cd_fpset_init(&self._s, self._ds)
        if locked:
            PyThread_release_lock(self._lock)
        if r != 0:
            self._ready = False
            raise MemoryError()

    def to_bytes(self):
        """Every digest, concatenated in the canonical order (docs/fpset.md)."""
        cdef int r
        cdef bint locked
        self._check()
        locked = self._lock_if_shared()
        r = cd_fpset_migrate(&self._s, <size_t>-1)
        if r == 0:
            n = (self._s.nz + self._s.has_zero) * self._ds
            try:
                # written in place: a bytearray turned into bytes would be
                # a second copy of every digest for a moment
                out = PyBytes_FromStringAndSize(NULL, n)
            except MemoryError:
                if locked:
                    PyThread_release_lock(self._lock)
                raise
            if n:
                cd_fpset_export(&self._s, <unsigned char*>PyBytes_AS_STRING(out))
        if locked:
            PyThread_release_lock(self._lock)
        if r != 0:
            raise MemoryError("no memory to finish growing the fingerprint set")
        return out

    def load(self, data):
        """Replace the contents with the digests of data (a multiple of
        digest_size bytes, in the canonical order); ValueError otherwise."""
        cdef const unsigned char[::1] view = _fp_view(data)
        cdef size_t n, bad = 0
        cdef int r
        self._check()
        if view.shape[0] % self._ds:
            raise ValueError(f"data of {view.shape[0]} bytes is not a whole number of "
                             f"{self._ds}-byte digests")
        n = view.shape[0] // self._ds
        locked = self._lock_if_shared()
        if n:
            r = cd_fpset_load(&self._s, &view[0], n, &bad)
        else:
            cd_fpset_free(&self._s)
            r = cd_fpset_init(&self._s, self._ds)
        if locked:
            PyThread_release_lock(self._lock)
        if r == -2:
            raise ValueError(f"digest {bad} is out of the canonical order (or a repeat, or a "
                             f"second all-zero digest)")
        if r != 0:
            raise MemoryError()

    def __reduce__(self):
        return (_fp_table_restore, (self._ds, self.to_bytes()))


def _fp_table_restore(digest_size, data):
    t = FingerprintTable(digest_size)
    t.load(data)
    return t
