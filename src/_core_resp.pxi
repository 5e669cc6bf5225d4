# Redis command bytes for crawldedup.redis.RedisBloomFilter, built next to the
# hashing: the BITFIELD operations of a batch of keys, grouped by shard, as
# RESP bulk strings ready to follow a command head.  Built by redis-py in
# Python instead (four objects a bit), the arguments would cost the client
# several times the rest of its work on a batch (docs/redis.md).
# Twin: bloom_resp in crawldedup._reference.resp.

# "$3\r\nSET\r\n$2\r\nu1\r\n" + "$20\r\n" + 20 digits + "\r\n" + "$1\r\n1\r\n"
from cpython.bytes cimport PyBytes_FromStringAndSize

DEF RESP_OP_MAX = 17 + 5 + 20 + 2 + 7

cdef const char* _RESP_SET = b"$3\r\nSET\r\n$2\r\nu1\r\n"
cdef const char* _RESP_GET = b"$3\r\nGET\r\n$2\r\nu1\r\n"
cdef const char* _RESP_ONE = b"$1\r\n1\r\n"


@cython.linetrace(False)
@cython.profile(False)
cdef inline char* _resp_offset(char* out, uint64_t value) noexcept nogil:
    """``$<len>\\r\\n<decimal>\\r\\n`` for value; the end of what it wrote."""
    cdef char digits[20]
    cdef int n = 0, i
    while True:
        digits[n] = <char>(48 + value % 10)
        value //= 10
        n += 1
        if value == 0:
            break
    out[0] = 36  # '$'
    out += 1
    if n >= 10:
        out[0] = <char>(48 + n // 10)
        out += 1
    out[0] = <char>(48 + n % 10)
    out[1] = 13
    out[2] = 10
    out += 3
    for i in range(n):
        out[i] = digits[n - 1 - i]
    out[n] = 13
    out[n + 1] = 10
    return out + n + 2


def bloom_resp(keys, k, m, seed, layout, shard_bits, shards, setting):
    """The BITFIELD operations for keys in a filter of m bits and k hashes
    split into ``shards`` strings of ``shard_bits`` bits each.

    Returns ``(ops, shard_of)``: ``ops[s]`` holds, for each key of shard s in
    the order of keys, its k operations ``SET u1 <offset> 1`` (``setting``)
    or ``GET u1 <offset>`` as RESP bulk strings; ``shard_of`` (numpy uint32)
    is each key's shard.  A key's positions are ``hash_indices(key, k, m,
    seed, layout)``; the shard is the first position's ``// shard_bits``,
    and all k must fall in it (the blocked layout with ``shard_bits`` a
    multiple of 512, or one shard).  The offset in the shard string is in
    Redis's bit order (most significant bit of a byte first) mapped so that
    the string's bytes are the local filter's storage (docs/redis.md).
    """
    cdef uint32_t s = _check_seed(seed)
    cdef int code = _layout_code(layout)
    if not isinstance(k, int) or not isinstance(m, int) or not isinstance(shard_bits, int) \
            or not isinstance(shards, int):
        raise TypeError("k, m, shard_bits and shards must be ints")
    if k < 1 or k > MAX_HASHES:
        raise ValueError(f"k must be in [1, {MAX_HASHES}], got {k}")
    if m < 1 or m >= 2 ** 64:
        raise ValueError(f"m must be in [1, 2**64), got {m}")
    if code == LAYOUT_BLOCKED and m % 512:
        raise ValueError(f"m must be a multiple of 512 for the blocked layout, got {m}")
    if shards < 1 or shards > 1 << 16:
        raise ValueError(f"shards must be in [1, 65536], got {shards}")
    if shard_bits < 1 or shard_bits * shards < m:
        raise ValueError(f"shards * shard_bits must cover the m = {m} bits, "
                         f"got {shards} * {shard_bits}")
    if shards > 1 and (code != LAYOUT_BLOCKED or shard_bits % 512):
        raise ValueError("several shards need the blocked layout and shard_bits a multiple "
                         "of 512 (all bits of a key in one shard)")
    if not isinstance(keys, (list, tuple)):
        keys = list(keys)
    cdef Py_ssize_t n = len(keys), i, nsh = shards
    cdef int kk = k, j
    cdef uint64_t mm = m, sb = shard_bits, unit = _unit(m), base, off
    cdef uint64_t h1, h2
    cdef KeyView kv
    cdef bint sets = bool(setting)
    shard_of = _np.zeros(n, dtype=_np.uint32)
    cdef uint32_t[::1] sh = shard_of
    cdef uint64_t* pos = <uint64_t*>PyMem_Malloc(max(n, 1) * kk * sizeof(uint64_t))
    cdef Py_ssize_t* counts = <Py_ssize_t*>PyMem_Malloc(nsh * sizeof(Py_ssize_t))
    cdef char** bufs = <char**>PyMem_Malloc(nsh * sizeof(char*))
    cdef char** ends = <char**>PyMem_Malloc(nsh * sizeof(char*))
    cdef char* w
    cdef uint32_t shard
    if pos == NULL or counts == NULL or bufs == NULL or ends == NULL:
        PyMem_Free(pos); PyMem_Free(counts); PyMem_Free(bufs); PyMem_Free(ends)
        raise MemoryError()
    for i in range(nsh):
        counts[i] = 0
        bufs[i] = NULL
    try:
        for i in range(n):
            _key_open(keys[i], &kv)
            cd_murmur3_x64_128(kv.data, <size_t>kv.size, s, &h1, &h2)
            _key_close(&kv)
            _positions(code, h1, h2, kk, mm, unit, pos + i * kk)
            shard = <uint32_t>(pos[i * kk] // sb)
            sh[i] = shard
            counts[shard] += 1
        for i in range(nsh):
            bufs[i] = <char*>PyMem_Malloc(max(counts[i], 1) * kk * RESP_OP_MAX)
            if bufs[i] == NULL:
                raise MemoryError()
            ends[i] = bufs[i]
        with nogil:
            for i in range(n):
                shard = sh[i]
                base = <uint64_t>shard * sb
                w = ends[shard]
                for j in range(kk):
                    # bit b of the shard is bit b % 8, least significant first,
                    # of byte b // 8 (the local storage); Redis numbers the
                    # bits of a byte from the most significant one.
                    off = pos[i * kk + j] - base
                    off = (off & ~(<uint64_t>7)) | (7 - (off & 7))
                    if sets:
                        memcpy(w, _RESP_SET, 17)
                    else:
                        memcpy(w, _RESP_GET, 17)
                    w = _resp_offset(w + 17, off)
                    if sets:
                        memcpy(w, _RESP_ONE, 7)
                        w += 7
                ends[shard] = w
        ops = [PyBytes_FromStringAndSize(bufs[i], ends[i] - bufs[i]) for i in range(nsh)]
    finally:
        for i in range(nsh):
            PyMem_Free(bufs[i])
        PyMem_Free(pos)
        PyMem_Free(counts)
        PyMem_Free(bufs)
        PyMem_Free(ends)
    return ops, shard_of
