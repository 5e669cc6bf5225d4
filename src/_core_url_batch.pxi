# ---- url batches (included by _core_url.pxi): slices on several threads, none
# holding the GIL
#
# The caller gathers every URL's UTF-8 bytes with the GIL (str: the cached
# UTF-8 or the compact ASCII data, read in place; bytes: their buffer), holding
# its own reference to each item, so nothing can free or change them; then
# releases the GIL while slices of the batch run at once on several threads
# (itself included).  Items that are neither str nor bytes, or a str that is
# not valid UTF-8, or a URL outside the fast path, come back as None for the
# wrapper to hand to w3lib with the GIL; so do the URLs whose non-ASCII netloc
# urllib refuses, checked after the threads are done (_cdu_check_wide).

# Batches of at least 2 * URL_THREAD_URLS URLs are cut into slices, one per
# URL_THREAD_URLS, up to the CPUs the process may use (or crawldedup.set_threads).
# A URL takes 0.2 to 1 microsecond; starting a thread about 50.
DEF URL_THREAD_URLS = 4096

# What a batch computes.
cdef enum:
    _CDU_B_CANONICAL = 0     # canonical URL, str
    _CDU_B_CANONICAL_BYTES = 1  # canonical URL, bytes (ASCII)
    _CDU_B_URL_MD5 = 2       # MD5 of the canonical URL
    _CDU_B_REQUEST_SHA1 = 3  # Scrapy's fingerprint, empty body, no headers
    _CDU_B_RAW_MD5 = 4       # MD5 of the URL's own UTF-8 bytes (no canonicalization)
    _CDU_B_URL_MURMUR = 5    # MurmurHash3 x64 128 (seed) of the canonical URL: h1, h2

ctypedef struct CduJob:
    const char** ptrs           # UTF-8 bytes of each URL, NULL: not ours
    Py_ssize_t* lens
    Py_ssize_t start, stop      # this job's slice
    int what, keep_fragments, keep_blank_values
    uint32_t seed               # _CDU_B_URL_MURMUR
    const char* method
    Py_ssize_t mlen
    unsigned char* done         # 1 where the slot holds the answer, 2: if its netloc
                                # passes urllib's NFKC check (_cdu_check_wide)
    unsigned char* digests      # 20 bytes a URL (digest modes)
    Py_ssize_t* offs            # canonical modes: where in arena, and how long
    Py_ssize_t* outlens
    unsigned char* arena        # canonical modes: this job's canonical URLs
    size_t arena_cap, arena_used
    int failed                  # out of memory: the caller raises MemoryError
    Py_ssize_t wide             # slots marked 2 in done


# The canonical URLs of a slice are hashed _CDU_MD5_GROUP at a time, by
# cd_md5_many (several messages side by side, in vector lanes): a group's
# canonical forms are copied end to end into buf, and hashed when it is full.
DEF _CDU_MD5_GROUP = 64

ctypedef struct CduMd5Group:
    Py_ssize_t first               # the slice index of the group's first URL
    unsigned char* buf             # the group's canonical URLs, end to end
    size_t cap, used
    size_t offs[_CDU_MD5_GROUP]    # where in buf each kept URL is, and how long
    Py_ssize_t lens[_CDU_MD5_GROUP]
    unsigned char kept[_CDU_MD5_GROUP]  # 0: no digest for that URL (yet)


@cython.linetrace(False)
@cython.profile(False)
cdef int _cdu_md5_keep(CduMd5Group* g, Py_ssize_t i, const unsigned char* canon,
                       Py_ssize_t length) noexcept nogil:
    """Keep URL i's canonical form for its group's digests; -1 out of memory."""
    cdef size_t need = g.used + <size_t>length
    cdef unsigned char* grown
    if need > g.cap:
        need = need * 2 + 4096
        grown = <unsigned char*>realloc(g.buf, need)
        if grown == NULL:
            return -1
        g.buf = grown
        g.cap = need
    memcpy(g.buf + g.used, canon, <size_t>length)
    g.offs[i - g.first] = g.used
    g.lens[i - g.first] = length
    g.kept[i - g.first] = 1
    g.used += <size_t>length
    return 0


@cython.linetrace(False)
@cython.profile(False)
cdef void _cdu_md5_group(CduMd5Group* g, unsigned char* digests) noexcept nogil:
    """The digests of the group's kept URLs into digests (20 bytes a slot of
    the batch), and the group emptied."""
    cdef const char* ptrs[_CDU_MD5_GROUP]
    cdef Py_ssize_t j
    for j in range(_CDU_MD5_GROUP):
        ptrs[j] = <const char*>(g.buf + g.offs[j]) if g.kept[j] else NULL
    cd_md5_many(ptrs, g.lens, _CDU_MD5_GROUP, digests + 20 * g.first, 20)
    memset(g.kept, 0, sizeof(g.kept))
    g.used = 0


@cython.linetrace(False)
@cython.profile(False)
cdef void _cdu_slice(CduJob* job) noexcept nogil:
    """Canonicalize / hash the URLs of one slice (no Python API, no GIL)."""
    cdef Py_ssize_t i, length, maxlen = 0
    cdef void* work = NULL
    cdef unsigned char* json = NULL
    cdef unsigned char* p
    cdef unsigned char* grown
    cdef const unsigned char* canon
    cdef size_t need
    cdef uint64_t h1, h2
    cdef CduMd5Group group
    cdef const unsigned char* wide[2]
    if job.what == _CDU_B_RAW_MD5:  # MD5 only: many messages at once
        cd_md5_many(job.ptrs + job.start, job.lens + job.start, job.stop - job.start,
                    job.digests + 20 * job.start, 20)
        for i in range(job.start, job.stop):
            job.done[i] = job.ptrs[i] != NULL
        return
    for i in range(job.start, job.stop):
        if job.ptrs[i] != NULL and job.lens[i] > maxlen:
            maxlen = job.lens[i]
    work = malloc(cd_url_work_size(<size_t>maxlen))
    if work == NULL:
        job.failed = 1
        return
    memset(&group, 0, sizeof(group))
    group.first = job.start
    if job.what == _CDU_B_REQUEST_SHA1:
        # The request JSON around an empty body: fixed text, method, URL.
        json = <unsigned char*>malloc(<size_t>(10 + 29 + job.mlen + 11 + (4 * maxlen + 64) + 2))
        if json == NULL:
            free(work)
            job.failed = 1
            return
    for i in range(job.start, job.stop):
        if job.what == _CDU_B_URL_MD5 and i - group.first == _CDU_MD5_GROUP:
            _cdu_md5_group(&group, job.digests)
            group.first = i
        if job.ptrs[i] == NULL:
            continue
        length = cd_url_canonicalize(<const unsigned char*>job.ptrs[i], <size_t>job.lens[i],
                                     job.keep_fragments, job.keep_blank_values, work, wide)
        if length < 0:
            continue
        canon = cd_url_output(work, <size_t>job.lens[i])
        if job.what == _CDU_B_CANONICAL or job.what == _CDU_B_CANONICAL_BYTES:
            need = job.arena_used + <size_t>length
            if need > job.arena_cap:
                need = need * 2 + 4096
                grown = <unsigned char*>realloc(job.arena, need)
                if grown == NULL:
                    job.failed = 1
                    break
                job.arena = grown
                job.arena_cap = need
            memcpy(job.arena + job.arena_used, canon, <size_t>length)
            job.offs[i] = <Py_ssize_t>job.arena_used
            job.outlens[i] = length
            job.arena_used += <size_t>length
        elif job.what == _CDU_B_URL_MD5:
            if _cdu_md5_keep(&group, i, canon, length):
                job.failed = 1
                break
        elif job.what == _CDU_B_URL_MURMUR:
            cd_murmur3_x64_128(canon, <size_t>length, job.seed, &h1, &h2)
            memcpy(job.digests + 20 * i, &h1, 8)   # native order: a uint64 array
            memcpy(job.digests + 20 * i + 8, &h2, 8)
        else:
            p = json
            memcpy(p, _CDU_J1, 10); p += 10
            memcpy(p, _CDU_J2, 29); p += 29
            memcpy(p, job.method, <size_t>job.mlen); p += job.mlen
            memcpy(p, _CDU_J3, 11); p += 11
            memcpy(p, canon, <size_t>length); p += length
            memcpy(p, _CDU_J4, 2); p += 2
            cd_sha1(json, <size_t>(p - json), job.digests + 20 * i)
        if wide[0] != NULL:
            job.done[i] = 2
            job.wide += 1
        else:
            job.done[i] = 1
    if job.what == _CDU_B_URL_MD5:
        if not job.failed:
            _cdu_md5_group(&group, job.digests)
        free(group.buf)
    free(work)
    free(json)


@cython.linetrace(False)
@cython.profile(False)
cdef void _cdu_job(void* arg) noexcept nogil:
    _cdu_slice(<CduJob*>arg)


cdef int _cdu_check_wide(const char** ptrs, Py_ssize_t* lens, Py_ssize_t n,
                         unsigned char* done, bint keep_fragments,
                         bint keep_blank_values) except -1:
    """For each slot marked 2 in done, run urllib's NFKC check on its netloc
    (found again by cd_url_canonicalize, with the GIL: such URLs are rare)
    and mark the slot 1 (the answer stands) or 0 (w3lib's to refuse)."""
    cdef Py_ssize_t i
    cdef void* work
    cdef const unsigned char* wide[2]
    for i in range(n):
        if done[i] != 2:
            continue
        work = PyMem_Malloc(cd_url_work_size(<size_t>lens[i]))
        if work == NULL:
            raise MemoryError()
        try:
            cd_url_canonicalize(<const unsigned char*>ptrs[i], <size_t>lens[i], keep_fragments,
                                keep_blank_values, work, wide)
            done[i] = 0 if wide[0] != NULL and _cdu_wide_refused(wide) else 1
        finally:
            PyMem_Free(work)
    return 0


cdef object _cdu_ascii_str(const unsigned char* data, Py_ssize_t n):
    cdef object s = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(s), data, <size_t>n)
    return s


cdef object _cdu_batch(object urls, bint keep_fragments, bint keep_blank_values, int what,
                       object method, bint packed=False):
    """The batch kernels: a list with the answer for each item of urls (a
    list) and None where the wrapper must find it (see above).  With packed
    (digests only): (one bytes object of the digests end to end, the list of
    the indexes whose digest the wrapper must find, zeros in the bytes)."""
    cdef list items = list(urls)  # our own references: nothing frees an item mid-call
    cdef Py_ssize_t n = len(items), i
    cdef const char** ptrs = NULL
    cdef Py_ssize_t* lens = NULL
    cdef PyObject* obj
    try:
        ptrs = <const char**>PyMem_Malloc((n + 1) * sizeof(const char*))
        lens = <Py_ssize_t*>PyMem_Malloc((n + 1) * sizeof(Py_ssize_t))
        if ptrs == NULL or lens == NULL:
            raise MemoryError()
        for i in range(n):
            obj = _list_item(items, i)
            ptrs[i] = NULL
            lens[i] = 0
            if _is_str(obj):
                if not cd_compact_ascii(obj, <const unsigned char**>&ptrs[i], &lens[i]):
                    try:
                        ptrs[i] = _cdu_utf8(<object>obj, &lens[i])
                    except UnicodeEncodeError:  # lone surrogates: w3lib decides
                        ptrs[i] = NULL
            elif _is_bytes(obj):
                ptrs[i] = _bytes_data(obj)
                lens[i] = _bytes_size(obj)
        return _cdu_execute(ptrs, lens, n, keep_fragments, keep_blank_values, what, method,
                            packed)
    finally:
        PyMem_Free(ptrs)
        PyMem_Free(lens)


cdef object _cdu_execute(const char** ptrs, Py_ssize_t* lens, Py_ssize_t n,
                         bint keep_fragments, bint keep_blank_values, int what, object method,
                         bint packed, uint32_t seed=0):
    """Run a batch kernel over n URLs given as UTF-8 pointers and lengths
    (NULL: not ours), which the caller keeps alive; answers as _cdu_batch
    (seed: _CDU_B_URL_MURMUR's)."""
    cdef Py_ssize_t i, mlen = 0, per, at = 0
    cdef Py_ssize_t width = 20 if what == _CDU_B_REQUEST_SHA1 else 16
    cdef bint canonical = what == _CDU_B_CANONICAL or what == _CDU_B_CANONICAL_BYTES
    cdef Py_ssize_t* offs = NULL
    cdef Py_ssize_t* outlens = NULL
    cdef unsigned char* digests = NULL
    cdef unsigned char* done = NULL
    cdef CduJob* jobs = NULL
    cdef const char* m = NULL
    cdef int threads, r, failed = 0
    cdef Py_ssize_t wide = 0
    cdef list out
    if what == _CDU_B_REQUEST_SHA1:
        m = _cdu_utf8(method, &mlen)
    threads = _threads_for(n, URL_THREAD_URLS)
    try:
        done = <unsigned char*>PyMem_Malloc(n + 1)
        jobs = <CduJob*>PyMem_Malloc(threads * sizeof(CduJob))
        if done == NULL or jobs == NULL:
            raise MemoryError()
        if canonical:
            offs = <Py_ssize_t*>PyMem_Malloc((n + 1) * sizeof(Py_ssize_t))
            outlens = <Py_ssize_t*>PyMem_Malloc((n + 1) * sizeof(Py_ssize_t))
            if offs == NULL or outlens == NULL:
                raise MemoryError()
        else:
            digests = <unsigned char*>PyMem_Malloc((n + 1) * 20)
            if digests == NULL:
                raise MemoryError()
        memset(jobs, 0, threads * sizeof(CduJob))
        memset(done, 0, <size_t>(n + 1))
        per = n // threads
        for r in range(threads):
            jobs[r].ptrs = ptrs
            jobs[r].lens = lens
            jobs[r].start = at
            jobs[r].stop = n if r == threads - 1 else at + per
            at = jobs[r].stop
            jobs[r].what = what
            jobs[r].seed = seed
            jobs[r].keep_fragments = keep_fragments
            jobs[r].keep_blank_values = keep_blank_values
            jobs[r].method = m
            jobs[r].mlen = mlen
            jobs[r].done = done
            jobs[r].digests = digests
            jobs[r].offs = offs
            jobs[r].outlens = outlens
        with nogil:
            _run_jobs(_cdu_job, jobs, sizeof(CduJob), threads)
        for r in range(threads):
            failed |= jobs[r].failed
            wide += jobs[r].wide
        if failed:
            raise MemoryError()
        if wide:
            _cdu_check_wide(ptrs, lens, n, done, keep_fragments, keep_blank_values)
        if packed:
            return _cdu_packed(digests, done, n, width)
        out = [None] * n
        for r in range(threads):
            for i in range(jobs[r].start, jobs[r].stop):
                if not done[i]:
                    continue
                if what == _CDU_B_CANONICAL:
                    out[i] = _cdu_ascii_str(jobs[r].arena + offs[i], outlens[i])
                elif what == _CDU_B_CANONICAL_BYTES:
                    out[i] = _cdu_bytes(<const char*>(jobs[r].arena + offs[i]), outlens[i])
                else:
                    out[i] = _cdu_bytes(<const char*>(digests + 20 * i), width)
        return out
    finally:
        if jobs != NULL:
            for r in range(threads):
                free(jobs[r].arena)
        PyMem_Free(jobs)
        PyMem_Free(offs)
        PyMem_Free(outlens)
        PyMem_Free(digests)
        PyMem_Free(done)


cdef tuple _cdu_packed(const unsigned char* digests, const unsigned char* done, Py_ssize_t n,
                       Py_ssize_t width):
    """(the digests (stride 20) end to end at width bytes each, zeros where
    not done; the indexes not done)."""
    cdef object blob = _cdu_bytes(NULL, n * width)
    cdef unsigned char* o = <unsigned char*>PyBytes_AS_STRING(blob)
    cdef Py_ssize_t i
    cdef list missing = []
    for i in range(n):
        if done[i]:
            memcpy(o + i * width, digests + 20 * i, <size_t>width)
        else:
            memset(o + i * width, 0, <size_t>width)
            missing.append(i)
    return blob, missing


def url_digests_packed(urls, bint canonical=False):
    """The digests of url_digests_fast(urls) (or, with canonical, of
    url_fingerprints_fast(urls)) end to end in one bytes object, 16 bytes
    each, and the list of the indexes where those give None (their 16 bytes
    are zeros here).  No object per URL: the command line's exact mode."""
    if not isinstance(urls, list):
        raise TypeError(f"urls must be a list, not {type(urls).__name__}")
    return _cdu_batch(urls, False, True, _CDU_B_URL_MD5 if canonical else _CDU_B_RAW_MD5,
                      None, True)


def canonicalize_urls_fast(urls, bint keep_fragments=False, bint keep_blank_values=True,
                           bint as_bytes=False):
    """[canonicalize_url_fast(u, ...) for u in urls] for a list of str and
    bytes (read as UTF-8; invalid bytes are percent-encoded, as w3lib does),
    None for the other items; as str, or bytes with as_bytes.  Runs without
    the GIL, a large batch on several threads."""
    if not isinstance(urls, list):
        raise TypeError(f"urls must be a list, not {type(urls).__name__}")
    return _cdu_batch(urls, keep_fragments, keep_blank_values,
                      _CDU_B_CANONICAL_BYTES if as_bytes else _CDU_B_CANONICAL, None)


def url_digests_fast(urls):
    """[MD5 of the UTF-8 bytes of u for u in urls] (no canonicalization), None
    for items that are neither str nor bytes and for a str that is not valid
    UTF-8.  Runs without the GIL, a large batch on several threads."""
    if not isinstance(urls, list):
        raise TypeError(f"urls must be a list, not {type(urls).__name__}")
    return _cdu_batch(urls, False, True, _CDU_B_RAW_MD5, None)


def url_fingerprints_fast(urls, bint keep_fragments=False, bint keep_blank_values=True):
    """[url_fingerprint_fast(u, ...) for u in urls] for a list of str and bytes
    (read as UTF-8), None for the other items; runs without the GIL, a large
    batch on several threads."""
    if not isinstance(urls, list):
        raise TypeError(f"urls must be a list, not {type(urls).__name__}")
    return _cdu_batch(urls, keep_fragments, keep_blank_values, _CDU_B_URL_MD5, None)


def request_fingerprints_fast(urls, method, bint keep_fragments=False):
    """[request_fingerprint_fast(u, method, b"", keep_fragments) for u in
    urls], with None for items that are not str (bytes included: Scrapy's
    Request decodes them first); runs without the GIL, a large batch on
    several threads."""
    cdef Py_ssize_t mlen, i
    cdef const char* m
    if not isinstance(urls, list):
        raise TypeError(f"urls must be a list, not {type(urls).__name__}")
    if not isinstance(method, str):
        raise TypeError(f"method must be str, not {type(method).__name__}")
    m = _cdu_utf8(method, &mlen)
    if mlen == 0:
        raise ValueError("method must be an HTTP method name, got ''")
    for i in range(mlen):
        if m[i] == 0 or strchr(_CDU_TCHAR, m[i]) == NULL:
            raise ValueError(f"method must be an HTTP method name (a token), got {method!r}")
    return _cdu_batch([u if isinstance(u, str) else None for u in urls], keep_fragments, True,
                      _CDU_B_REQUEST_SHA1, method)
