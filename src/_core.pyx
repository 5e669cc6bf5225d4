# The compiled core of crawldedup, imported as ``crawldedup._core``.
#
# Pure computation on buffers, no I/O and no policy.  This file holds the
# module's imports, the compile-time sizes of the Bloom batches and the
# thread runner and thread-count policy that every batch kernel shares
# (_core_threads.pxi); the parts follow, one .pxi each (with the files it
# includes): key access, MurmurHash3 and the Bloom filter bit array
# (_core_bloom.pxi: _core_keys.pxi, shared by every part,
# _core_bloom_batch.pxi and _core_bloom_large.pxi), SimHash
# (_core_simhash.pxi), MinHash signatures over the SimHash tokenizers
# (_core_minhash.pxi, with _cd_minhash.h) and their LSH band tables
# (_core_lsh.pxi), the exact Hamming-distance index (_core_index_*.pxi,
# its Python face _core_index.pxi),
# URL canonicalization and URL and request fingerprints (_core_url.pxi), the
# compact fingerprint table behind FingerprintSet (_core_fpset.pxi), Redis
# command bytes (_core_resp.pxi), line splitting and hashing for the
# command line (_core_lines.pxi), the JSON-lines reader of near-dups
# (_core_jsonl.pxi) and the lookups in DiskStore's sorted runs
# (_core_runs.pxi).
# Primitives that Cython cannot express live in the _cd_*.h headers
# (_cd_support.h holds those every part shares).
#
# Parameters are validated here only as far as memory safety needs (a core
# object can never index outside its buffer); friendly argument checking
# lives in the Python wrappers.  Every function and class here has a
# bit-for-bit twin in the package ``crawldedup._reference`` (one module per
# part: ``bloom`` for _core_bloom.pxi, which also holds the twins of the batch
# switches _set_prefetching and _set_batch_threads); the test suite runs both.
#
# Compiler directives are set once, in setup.py.

from cpython.buffer cimport (PyBUF_FORMAT, PyBUF_ND, PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_CheckBuffer, PyObject_GetBuffer)
from cpython.bytes cimport (PyBytes_AS_STRING, PyBytes_Check, PyBytes_FromStringAndSize,
                            PyBytes_GET_SIZE)
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.pythread cimport (WAIT_LOCK, PyThread_acquire_lock, PyThread_allocate_lock,
                               PyThread_free_lock, PyThread_release_lock, PyThread_type_lock)
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_Check
from libc.stdint cimport UINT64_MAX, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memset, strchr

cimport cython

import mmap as _mmap
import re as _re

import numpy as _np

cdef extern from "Python.h" nogil:
    # Borrowed-pointer access for the batch loop, without reference counting
    # on every touch (field reads only, so also without the GIL).
    PyObject* _list_item "PyList_GET_ITEM" (object, Py_ssize_t)
    PyObject* _tuple_item "PyTuple_GET_ITEM" (object, Py_ssize_t)
    Py_ssize_t _list_size "PyList_GET_SIZE" (object)
    bint _is_str "PyUnicode_Check" (PyObject*)
    bint _is_bytes "PyBytes_Check" (PyObject*)
    char* _bytes_data "PyBytes_AS_STRING" (PyObject*)
    Py_ssize_t _bytes_size "PyBytes_GET_SIZE" (PyObject*)

cdef extern from "_cd_support.h" nogil:
    uint64_t cd_mulhi64(uint64_t a, uint64_t b)
    uint8_t cd_atomic_or8(uint8_t* p, uint8_t v)
    uint8_t cd_atomic_or8_acq_rel(uint8_t* p, uint8_t v)
    uint8_t cd_load8_acquire(const uint8_t* p)
    uint8_t cd_load8(const uint8_t* p)
    void cd_store8(uint8_t* p, uint8_t v)
    void cd_atomic_add64(uint64_t* p, uint64_t v)
    uint64_t cd_atomic_load64(const uint64_t* p)
    void cd_atomic_store64(uint64_t* p, uint64_t v)
    void cd_prefetch(const void* p)
    void cd_prefetch_w(const void* p)
    uint64_t cd_load64le(const unsigned char* p)
    const uint64_t CD_LCG_MULTIPLIER
    const uint64_t CD_LCG_INCREMENT
    int cd_popcount64(uint64_t x)
    bint cd_rarely(bint x)
    bint cd_compact_ascii(PyObject* o, const unsigned char** data, Py_ssize_t* size)
    PyObject** cd_list_items(object o)
    PyObject** cd_tuple_items(object o)
    void cd_murmur3_x64_128(const unsigned char* data, size_t length, uint32_t seed,
                            uint64_t* out1, uint64_t* out2)
    void cd_murmur3_x64_128_x2(const unsigned char* a, size_t la,
                               const unsigned char* b, size_t lb, uint32_t seed,
                               uint64_t* a1, uint64_t* a2, uint64_t* b1, uint64_t* b2)

cdef extern from "_cd_support.h":
    int cd_unicode_ready(PyObject* o) except -1
    Py_ssize_t cd_utf8_bound(PyObject* o)
    Py_ssize_t cd_utf8_encode(PyObject* o, unsigned char* out)
    bint _is_ascii "PyUnicode_IS_ASCII" (PyObject*)
    int _unicode_kind "PyUnicode_KIND" (PyObject*)
    void* _unicode_data "PyUnicode_DATA" (PyObject*)
    Py_ssize_t _unicode_length "PyUnicode_GET_LENGTH" (PyObject*)
    object PyUnicode_AsUTF8String(object)
    object cd_pylong_from_u128(uint64_t lo, uint64_t hi)

cdef extern from "_cd_support.h" nogil:
    # One rule for large allocations (see _cd_support.h).
    const size_t CD_BIG_MAP_FROM
    const size_t CD_BIG_HUGE_FROM

include "_core_threads.pxi"

IMPLEMENTATION = "core"

# k is at most 64: an error rate of 1e-19 already needs 63 hash functions.
DEF MAX_HASHES = 64
# Batch calls take the keys CHUNK at a time (a chunk's key bytes stay in
# cache between finding them and hashing them), and hash GROUP keys ahead of
# probing them so that the cache misses of a large filter overlap.  Key
# objects are prefetched PREFETCH_KEYS ahead while walking the container.
DEF CHUNK = 512
DEF GROUP = 16
DEF PREFETCH_KEYS = 8
# Storage from CD_BIG_MAP_FROM bytes on is mapped memory, zeroed lazily by
# the OS, and from CD_BIG_HUGE_FROM on asks for transparent huge pages (the
# core's one rule for large allocations, _cd_support.h).
# Lookups in filters up to this size test every bit without branching; see
# _prefetch_group.
DEF BRANCHLESS_MAX_BYTES = 8 << 20
# Batches on filters larger than the caches touch each key's line first.
DEF TOUCH_MIN_BYTES = 4 << 20
# Where the touched bytes go, so the loads are not optimised away.
cdef uint64_t _touch_sink = 0
# Benchmarks switch prefetching (and touching) off to measure what it buys.
cdef bint _prefetching = True


# Lookup batches of at least 2 * THREAD_KEYS keys are cut into slices looked
# up on several threads (_threads_for, _run_jobs).
DEF THREAD_KEYS = 16384


def _set_prefetching(enabled):
    """Turn the batch kernels' prefetches and line touches on or off (for
    benchmarks; results are the same either way); the previous setting."""
    global _prefetching
    previous = _prefetching
    _prefetching = bool(enabled)
    return previous

# Bit layouts (ids as stored in files).
DEF LAYOUT_STANDARD = 0
DEF LAYOUT_BLOCKED = 1

MAX_NUM_HASHES = MAX_HASHES
MAX_SEED = 0xFFFFFFFF


include "_core_bloom.pxi"
include "_core_simhash.pxi"
include "_core_minhash.pxi"
include "_core_lsh.pxi"
include "_core_index_seg.pxi"
include "_core_index_sort.pxi"
include "_core_index_query.pxi"
include "_core_index_join.pxi"
include "_core_index_ops.pxi"
include "_core_index.pxi"
include "_core_url.pxi"
include "_core_fpset.pxi"
include "_core_resp.pxi"
include "_core_lines.pxi"
include "_core_jsonl.pxi"
include "_core_runs.pxi"
