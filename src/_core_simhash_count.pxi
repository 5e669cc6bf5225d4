# SimHash kernels, part 1 (included by _core_simhash.pxi): bit-majority
# accumulation over 64-bit feature hashes, and the set of the distinct
# feature hashes of one document; without the GIL.

from libc.stdint cimport int64_t
from libc.stdlib cimport calloc

# ------------------------------------------------------------ accumulation
# Per-bit counts of many 64-bit values, each with weight 1, without a loop
# over the 64 bits per value.  nib[k] holds 16 four-bit counters, lane j
# counting bit 4j+k: adding a value is (h >> k) & 0x1111... per word, 12
# operations for all 64 bits.  Before a nibble can overflow (every 15 values)
# the nibbles move into byte counters (byte[k] lane i: bit 8i+k, byte[4+k]
# lane i: bit 8i+4+k), and before a byte can overflow (every 17 nibble
# flushes, 255 values) the bytes move into the 64-bit counts.
ctypedef struct ShCounter:
    uint64_t nib[4]
    uint64_t byte[8]
    int nib_pending         # values in nib since its last flush (< 15)
    int byte_pending        # nibble flushes in byte since its last flush (< 17)
    int64_t counts[64]      # counts[j]: values with bit j set
    int64_t total           # values added


cdef inline void sh_counter_init(ShCounter* c) noexcept nogil:
    memset(c, 0, sizeof(ShCounter))


cdef inline void sh_counter_flush_bytes(ShCounter* c) noexcept nogil:
    cdef int k, i
    for k in range(4):
        for i in range(8):
            c.counts[8 * i + k] += <int64_t>((c.byte[k] >> (8 * i)) & 0xff)
            c.counts[8 * i + 4 + k] += <int64_t>((c.byte[4 + k] >> (8 * i)) & 0xff)
        c.byte[k] = 0
        c.byte[4 + k] = 0
    c.byte_pending = 0


cdef inline void sh_counter_flush_nibbles(ShCounter* c) noexcept nogil:
    cdef int k
    for k in range(4):
        c.byte[k] += c.nib[k] & 0x0F0F0F0F0F0F0F0FULL
        c.byte[4 + k] += (c.nib[k] >> 4) & 0x0F0F0F0F0F0F0F0FULL
        c.nib[k] = 0
    c.nib_pending = 0
    c.byte_pending += 1
    if c.byte_pending == 17:
        sh_counter_flush_bytes(c)


cdef inline void sh_counter_flush(ShCounter* c) noexcept nogil:
    sh_counter_flush_nibbles(c)
    sh_counter_flush_bytes(c)


cdef inline void sh_counter_add(ShCounter* c, uint64_t h) noexcept nogil:
    c.nib[0] += h & 0x1111111111111111ULL
    c.nib[1] += (h >> 1) & 0x1111111111111111ULL
    c.nib[2] += (h >> 2) & 0x1111111111111111ULL
    c.nib[3] += (h >> 3) & 0x1111111111111111ULL
    c.total += 1
    c.nib_pending += 1
    if c.nib_pending == 15:
        sh_counter_flush_nibbles(c)


cdef inline uint64_t sh_counter_result(ShCounter* c) noexcept nogil:
    """Bit j of the result is set when more than half of the values have it."""
    cdef uint64_t out = 0
    cdef int j
    sh_counter_flush(c)
    for j in range(64):
        if 2 * c.counts[j] > c.total:
            out |= (<uint64_t>1) << j
    return out


# ------------------------------------------------------- feature hash sets
# Distinct 64-bit feature hashes of one document (open addressing, linear
# probing, grows at half load).  0 marks an empty slot; the hash 0 itself is
# tracked by a flag.
ctypedef struct ShHashset:
    uint64_t* slots
    size_t mask       # capacity - 1, capacity a power of two
    size_t used
    int has_zero


cdef inline int sh_hashset_init(ShHashset* s, size_t capacity) noexcept nogil:
    cdef size_t cap = 64
    while cap < capacity:
        cap <<= 1
    s.slots = <uint64_t*>calloc(cap, sizeof(uint64_t))
    if s.slots == NULL:
        return -1
    s.mask = cap - 1
    s.used = 0
    s.has_zero = 0
    return 0


cdef inline void sh_hashset_clear(ShHashset* s) noexcept nogil:
    if s.used:
        memset(s.slots, 0, (s.mask + 1) * sizeof(uint64_t))
    s.used = 0
    s.has_zero = 0


cdef inline void sh_hashset_free(ShHashset* s) noexcept nogil:
    free(s.slots)
    s.slots = NULL


cdef int sh_hashset_grow(ShHashset* s) noexcept nogil:
    cdef size_t cap = (s.mask + 1) * 2, i, j
    cdef uint64_t* old = s.slots
    cdef uint64_t* slots = <uint64_t*>calloc(cap, sizeof(uint64_t))
    cdef uint64_t h
    if slots == NULL:
        return -1
    for i in range(s.mask + 1):
        h = old[i]
        if h:
            j = <size_t>(h >> 7) & (cap - 1)    # the low bits feed the counters
            while slots[j]:
                j = (j + 1) & (cap - 1)
            slots[j] = h
    free(old)
    s.slots = slots
    s.mask = cap - 1
    return 0


cdef inline int sh_hashset_add(ShHashset* s, uint64_t h) noexcept nogil:
    """1 when h was new, 0 when already present, -1 when out of memory."""
    cdef size_t j
    if h == 0:
        if s.has_zero:
            return 0
        s.has_zero = 1
        return 1
    j = <size_t>(h >> 7) & s.mask
    while s.slots[j]:
        if s.slots[j] == h:
            return 0
        j = (j + 1) & s.mask
    s.slots[j] = h
    s.used += 1
    if s.used * 2 > s.mask + 1 and sh_hashset_grow(s) < 0:
        return -1
    return 1
