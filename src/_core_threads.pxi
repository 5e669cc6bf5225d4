# ---------------------------------------------------------------- threads
#
# The one thread runner and the one thread-count policy of every batch kernel
# that runs on several threads (Bloom lookups, URL batches, index queries).
# A batch is cut into n jobs; _run_jobs runs job 0 on the calling thread and
# each other on a thread of its own, then waits for them.  A job whose thread
# cannot be started runs on the calling thread, so results never depend on
# how many threads ran.  Jobs never touch Python objects' reference counts or
# call the Python API: a caller that keeps the GIL while it waits (the Bloom
# lookups: no Python code can then change the keys the jobs read) blocks no
# job.  Twin of _set_batch_threads: crawldedup._reference.bloom (which runs
# every batch on the calling thread).

cdef extern from "_cd_support.h" nogil:
    int cd_thread_start(void (*fn)(void*) noexcept nogil, void* arg)

cdef extern from "pythread.h" nogil:
    # The same functions as cpython.pythread's, declared callable without the
    # GIL (they take none: the runner may run with the GIL released).
    PyThread_type_lock _lock_new "PyThread_allocate_lock" ()
    void _lock_free "PyThread_free_lock" (PyThread_type_lock)

# At most this many threads run one batch.
DEF MAX_THREADS = 64

# Set by crawldedup.set_threads: at most this many threads a batch (0: as
# many as the CPUs the process may use).
cdef int _batch_threads = 0


def _set_batch_threads(n):
    """At most n threads for a batch call (0: as many as the CPUs the
    process may use); the previous setting.  See crawldedup.set_threads."""
    global _batch_threads
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"threads must be an int, not {type(n).__name__}")
    if n < 0:
        raise ValueError(f"threads must be at least 0, got {n}")
    previous = _batch_threads
    _batch_threads = min(n, MAX_THREADS)
    return previous


cdef int _cpus = 0


cdef int _usable_cpus_cached():
    """The CPUs this process may run on (asked once)."""
    global _cpus
    if _cpus == 0:
        import os
        try:
            _cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            _cpus = os.cpu_count() or 1
    return _cpus


cdef int _threads_for(Py_ssize_t n, Py_ssize_t per_thread) except -1:
    """How many threads a batch of n items runs on: one per per_thread items
    when that makes at least two (fewer is not worth a thread's start), up to
    the CPUs the process may use, the set_threads cap and MAX_THREADS."""
    cdef Py_ssize_t t = n // per_thread
    cdef int cpus
    if t < 2:
        return 1
    cpus = _usable_cpus_cached()
    if _batch_threads:
        cpus = min(cpus, _batch_threads)
    return <int>max(1, min(t, cpus, MAX_THREADS))


ctypedef void (*_job_fn)(void* job) noexcept nogil

ctypedef struct _Worker:
    _job_fn fn
    void* job
    PyThread_type_lock done   # held while the job runs on its own thread


# The runner and what its threads run are compiled without line tracing and
# profiling hooks: in a debug build those hooks take the GIL, which a caller
# may hold while it waits.
@cython.linetrace(False)
@cython.profile(False)
cdef void _worker_main(void* arg) noexcept nogil:
    cdef _Worker* w = <_Worker*>arg
    w.fn(w.job)
    PyThread_release_lock(w.done)


@cython.linetrace(False)
@cython.profile(False)
cdef void _run_jobs(_job_fn fn, void* jobs, size_t job_size, int n) noexcept nogil:
    """fn on each of the n jobs at jobs, job_size bytes apart, at once: job 0
    on the calling thread, each other (up to MAX_THREADS in all) on a thread
    of its own; the jobs that get no thread run on the calling thread after
    job 0.  Returns when every job is finished."""
    cdef _Worker w[MAX_THREADS]
    cdef char* base = <char*>jobs
    cdef int r, started = min(n, MAX_THREADS)
    for r in range(1, started):
        w[r].fn = fn
        w[r].job = base + r * job_size
        w[r].done = _lock_new()
        if w[r].done == NULL:
            continue
        PyThread_acquire_lock(w[r].done, WAIT_LOCK)   # released by the job
        if not cd_thread_start(_worker_main, &w[r]):
            PyThread_release_lock(w[r].done)
            _lock_free(w[r].done)
            w[r].done = NULL
    if n > 0:
        fn(jobs)
    for r in range(1, n):
        if r >= started or w[r].done == NULL:   # no thread: run it here
            fn(base + r * job_size)
        else:
            PyThread_acquire_lock(w[r].done, WAIT_LOCK)
            PyThread_release_lock(w[r].done)
            _lock_free(w[r].done)
