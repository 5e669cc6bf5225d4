/* Portable primitives for crawldedup._core: 64x64->128 multiply-high, atomic
 * byte OR and unaligned little-endian loads.  Everything here is a few
 * instructions on x86-64 and AArch64 with GCC, Clang and MSVC. */
#ifndef CRAWLDEDUP_SUPPORT_H
#define CRAWLDEDUP_SUPPORT_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER)
#include <intrin.h>
#endif

/* High 64 bits of the 128-bit product a*b: Lemire's multiply-shift range
 * reduction, (x * m) >> 64, maps a uniform 64-bit x onto [0, m) without a
 * division. */
static inline uint64_t cd_mulhi64(uint64_t a, uint64_t b) {
#if defined(__SIZEOF_INT128__)
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_AMD64))
    return __umulh(a, b);
#elif defined(_MSC_VER) && defined(_M_ARM64)
    return __umulh(a, b);
#else
    uint64_t a_lo = (uint32_t)a, a_hi = a >> 32;
    uint64_t b_lo = (uint32_t)b, b_hi = b >> 32;
    uint64_t lo_lo = a_lo * b_lo;
    uint64_t hi_lo = a_hi * b_lo;
    uint64_t lo_hi = a_lo * b_hi;
    uint64_t hi_hi = a_hi * b_hi;
    uint64_t cross = (lo_lo >> 32) + (uint32_t)hi_lo + lo_hi;
    return hi_hi + (hi_lo >> 32) + (cross >> 32);
#endif
}

/* Atomic OR of one byte; returns the previous value.  Bits are only ever set
 * (never cleared) while keys are added, so concurrent adders in several
 * threads (GIL released) or processes (shared mappings) never lose a bit. */
static inline uint8_t cd_atomic_or8(uint8_t *p, uint8_t v) {
#if defined(_MSC_VER)
    return (uint8_t)_InterlockedOr8((volatile char *)p, (char)v);
#else
    return __atomic_fetch_or(p, v, __ATOMIC_RELAXED);
#endif
}

/* The same with acquire-release order: the fetch-or that decides whether a
 * key was new in a shared mapping.  Release: the key's other bits, set
 * before it, are visible to whoever sees this bit set; acquire: so are the
 * bits of adders whose deciding bit this process saw set. */
static inline uint8_t cd_atomic_or8_acq_rel(uint8_t *p, uint8_t v) {
#if defined(_MSC_VER)
    return (uint8_t)_InterlockedOr8((volatile char *)p, (char)v);  /* a full barrier */
#else
    return __atomic_fetch_or(p, v, __ATOMIC_ACQ_REL);
#endif
}

/* A load with acquire order (a plain load on x86 and a load-acquire on
 * ARM): see cd_atomic_or8_acq_rel. */
static inline uint8_t cd_load8_acquire(const uint8_t *p) {
#if defined(_MSC_VER)
    return *(volatile const uint8_t *)p;  /* /volatile:ms: acquire */
#else
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

static inline uint8_t cd_load8(const uint8_t *p) {
#if defined(_MSC_VER)
    return *(volatile const uint8_t *)p;
#else
    return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

/* The insert count a mapped file keeps in its header, shared by processes. */
static inline void cd_atomic_add64(uint64_t *p, uint64_t v) {
#if defined(_MSC_VER)
    _InterlockedExchangeAdd64((volatile __int64 *)p, (__int64)v);
#else
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

static inline uint64_t cd_atomic_load64(const uint64_t *p) {
#if defined(_MSC_VER)
    return *(volatile const uint64_t *)p;
#else
    return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

static inline void cd_atomic_store64(uint64_t *p, uint64_t v) {
#if defined(_MSC_VER)
    *(volatile uint64_t *)p = v;
#else
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

static inline void cd_store8(uint8_t *p, uint8_t v) {
#if defined(_MSC_VER)
    *(volatile uint8_t *)p = v;
#else
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

static inline void cd_prefetch(const void *p) {
#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_AMD64))
    _mm_prefetch((const char *)p, _MM_HINT_T0);
#elif defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 3);
#else
    (void)p;
#endif
}

/* The same for a line read once (a fingerprint-table slot probed by a
 * batch): a low temporal-locality hint, so the lines of a large table do not
 * evict those still in use. */
static inline void cd_prefetch_once(const void *p) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 0, 1);
#else
    (void)p;
#endif
}

/* The same, announcing a write: the line arrives in a writable state, which
 * saves the adder a second round trip when it sets a bit. */
static inline void cd_prefetch_w(const void *p) {
#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_AMD64))
    _mm_prefetch((const char *)p, _MM_HINT_T0);
#elif defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(p, 1, 3);
#else
    (void)p;
#endif
}

/* Little-endian 64-bit load from any address (MurmurHash3 reads its input
 * blocks as little-endian words on every platform, so the digest is the same
 * everywhere). */
static inline uint64_t cd_load64le(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* Knuth's MMIX linear congruential generator (offsets in a blocked filter). */
#define CD_LCG_MULTIPLIER 6364136223846793005ULL
#define CD_LCG_INCREMENT 1442695040888963407ULL

/* cd_rarely(x): x, telling the compiler that it is seldom true, so that a
 * hot loop keeps the rare branch out of its straight line (the Hamming
 * self-join finds a pair in about one candidate of millions). */
#if defined(__GNUC__) || defined(__clang__)
#define cd_rarely(x) __builtin_expect(!!(x), 0)
#else
#define cd_rarely(x) (x)
#endif

static inline int cd_popcount64(uint64_t x) {
#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_AMD64))
    return (int)__popcnt64(x);
#elif defined(__GNUC__) || defined(__clang__)
    return __builtin_popcountll(x);
#else
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (int)((x * 0x0101010101010101ULL) >> 56);
#endif
}

static inline uint64_t cd_rotl64(uint64_t x, int r) {
    return (x << r) | (x >> (64 - r));
}

/* xor-shift by 33, multiply by m1, xor-shift, multiply by m2, xor-shift: the
 * shape of MurmurHash3's finalizer and of its inverse (cd_fp_unfmix). */
static inline uint64_t cd_xsmul33(uint64_t k, uint64_t m1, uint64_t m2) {
    k ^= k >> 33;
    k *= m1;
    k ^= k >> 33;
    k *= m2;
    k ^= k >> 33;
    return k;
}

static inline uint64_t cd_fmix64(uint64_t k) {
    return cd_xsmul33(k, 0xff51afd7ed558ccdULL, 0xc4ceb9fe1a85ec53ULL);
}

/* MurmurHash3_x64_128 (Austin Appleby's public-domain algorithm), written from
 * its specification: 16-byte blocks read as two little-endian words, a tail of
 * 0..15 bytes, then finalisation.  The 32-bit seed initialises both lanes. */
#define CD_MM3_C1 0x87c37b91114253d5ULL
#define CD_MM3_C2 0x4cf5ad432745937fULL

/* One 16-byte block of MurmurHash3 x64 128 into the state (h1, h2). */
#define CD_MM3_BLOCK(p_, h1_, h2_) do {                                              \
        uint64_t k1_ = cd_load64le(p_), k2_ = cd_load64le((p_) + 8);                 \
        k1_ *= CD_MM3_C1; k1_ = cd_rotl64(k1_, 31); k1_ *= CD_MM3_C2; (h1_) ^= k1_;  \
        (h1_) = cd_rotl64((h1_), 27); (h1_) += (h2_); (h1_) = (h1_) * 5 + 0x52dce729;\
        k2_ *= CD_MM3_C2; k2_ = cd_rotl64(k2_, 33); k2_ *= CD_MM3_C1; (h2_) ^= k2_;  \
        (h2_) = cd_rotl64((h2_), 31); (h2_) += (h1_); (h2_) = (h2_) * 5 + 0x38495ab5;\
    } while (0)

/* The rest of MurmurHash3 x64 128 from block `from` on, given the state
 * after the blocks before it. */
static inline void cd_murmur3_x64_128_rest(const unsigned char *data, size_t len, size_t from,
                                           uint64_t h1, uint64_t h2,
                                           uint64_t *out1, uint64_t *out2) {
    const uint64_t c1 = CD_MM3_C1;
    const uint64_t c2 = CD_MM3_C2;
    size_t nblocks = len / 16, i;
    for (i = from; i < nblocks; i++) CD_MM3_BLOCK(data + 16 * i, h1, h2);
    if (len >= 8) {
        /* The tail's words with whole 8-byte loads ending at the last byte
         * (inside the key, since it is at least 8 bytes long) instead of
         * assembling them byte by byte. */
        const unsigned char *end = data + len;
        size_t r = len & 15;
        uint64_t k1, k2;
        if (r > 8) {
            k1 = cd_load64le(end - r);
            k2 = cd_load64le(end - 8) >> (8 * (16 - r));
            k2 *= c2; k2 = cd_rotl64(k2, 33); k2 *= c1; h2 ^= k2;
            k1 *= c1; k1 = cd_rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        } else if (r > 0) {
            k1 = cd_load64le(end - 8) >> (8 * (8 - r));
            k1 *= c1; k1 = cd_rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        }
    } else {
        const unsigned char *tail = data + 16 * nblocks;
        uint64_t k1 = 0, k2 = 0;
        switch (len & 15) {
        case 15: k2 ^= (uint64_t)tail[14] << 48; /* fall through */
        case 14: k2 ^= (uint64_t)tail[13] << 40; /* fall through */
        case 13: k2 ^= (uint64_t)tail[12] << 32; /* fall through */
        case 12: k2 ^= (uint64_t)tail[11] << 24; /* fall through */
        case 11: k2 ^= (uint64_t)tail[10] << 16; /* fall through */
        case 10: k2 ^= (uint64_t)tail[9] << 8;   /* fall through */
        case 9:  k2 ^= (uint64_t)tail[8];
                 k2 *= c2; k2 = cd_rotl64(k2, 33); k2 *= c1; h2 ^= k2;
                 /* fall through */
        case 8:  k1 ^= (uint64_t)tail[7] << 56;  /* fall through */
        case 7:  k1 ^= (uint64_t)tail[6] << 48;  /* fall through */
        case 6:  k1 ^= (uint64_t)tail[5] << 40;  /* fall through */
        case 5:  k1 ^= (uint64_t)tail[4] << 32;  /* fall through */
        case 4:  k1 ^= (uint64_t)tail[3] << 24;  /* fall through */
        case 3:  k1 ^= (uint64_t)tail[2] << 16;  /* fall through */
        case 2:  k1 ^= (uint64_t)tail[1] << 8;   /* fall through */
        case 1:  k1 ^= (uint64_t)tail[0];
                 k1 *= c1; k1 = cd_rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        }
    }
    h1 ^= (uint64_t)len; h2 ^= (uint64_t)len;
    h1 += h2; h2 += h1;
    h1 = cd_fmix64(h1); h2 = cd_fmix64(h2);
    h1 += h2; h2 += h1;
    *out1 = h1; *out2 = h2;
}

static inline void cd_murmur3_x64_128(const unsigned char *data, size_t len,
                                      uint32_t seed, uint64_t *out1, uint64_t *out2) {
    cd_murmur3_x64_128_rest(data, len, 0, seed, seed, out1, out2);
}

/* Two keys at once: the same results as two calls, but the blocks the keys
 * have in common are hashed in one loop, so the processor works on both
 * dependency chains together (one key's chain leaves it mostly idle). */
static inline void cd_murmur3_x64_128_x2(const unsigned char *a, size_t la,
                                         const unsigned char *b, size_t lb, uint32_t seed,
                                         uint64_t *a1, uint64_t *a2,
                                         uint64_t *b1, uint64_t *b2) {
    uint64_t ha1 = seed, ha2 = seed, hb1 = seed, hb2 = seed;
    size_t na = la / 16, nb = lb / 16, n = na < nb ? na : nb, i;
    for (i = 0; i < n; i++) {
        CD_MM3_BLOCK(a + 16 * i, ha1, ha2);
        CD_MM3_BLOCK(b + 16 * i, hb1, hb2);
    }
    cd_murmur3_x64_128_rest(a, la, n, ha1, ha2, a1, a2);
    cd_murmur3_x64_128_rest(b, lb, n, hb1, hb2, b1, b2);
}

/* --- str keys without caching their UTF-8 form ---------------------------
 * PyUnicode_AsUTF8AndSize stores the UTF-8 copy of a non-ASCII string inside
 * the string for its whole life (doubling its memory) and allocates it.  Keys
 * are hashed once, so we encode them into a scratch buffer instead. */

static inline int cd_unicode_ready(PyObject *o) {
#if PY_VERSION_HEX < 0x030C0000
    return PyUnicode_READY(o);
#else
    (void)o;
    return 0;
#endif
}

/* Bytes needed for the UTF-8 form of a ready str of length n and this kind. */
static inline Py_ssize_t cd_utf8_bound(PyObject *o) {
    int kind = PyUnicode_KIND(o);
    Py_ssize_t n = PyUnicode_GET_LENGTH(o);
    return n * (kind == PyUnicode_1BYTE_KIND ? 2 : kind == PyUnicode_2BYTE_KIND ? 3 : 4);
}

#define CD_UTF8_PUT(c) do {                                        \
        if ((c) < 0x80) {                                           \
            *p++ = (unsigned char)(c);                              \
        } else if ((c) < 0x800) {                                   \
            *p++ = (unsigned char)(0xC0 | ((c) >> 6));              \
            *p++ = (unsigned char)(0x80 | ((c) & 0x3F));            \
        } else if ((c) < 0x10000) {                                 \
            if ((c) >= 0xD800 && (c) <= 0xDFFF)                     \
                return -1;                                          \
            *p++ = (unsigned char)(0xE0 | ((c) >> 12));             \
            *p++ = (unsigned char)(0x80 | (((c) >> 6) & 0x3F));     \
            *p++ = (unsigned char)(0x80 | ((c) & 0x3F));            \
        } else {                                                    \
            *p++ = (unsigned char)(0xF0 | ((c) >> 18));             \
            *p++ = (unsigned char)(0x80 | (((c) >> 12) & 0x3F));    \
            *p++ = (unsigned char)(0x80 | (((c) >> 6) & 0x3F));     \
            *p++ = (unsigned char)(0x80 | ((c) & 0x3F));            \
        }                                                           \
    } while (0)

/* UTF-8 of a ready str into out (at least cd_utf8_bound bytes); the number
 * of bytes written, or -1 for a lone surrogate (not encodable: the caller
 * lets Python raise UnicodeEncodeError).  One loop per storage kind, so the
 * compiler keeps the kind test out of the loop. */
static inline Py_ssize_t cd_utf8_encode(PyObject *o, unsigned char *out) {
    int kind = PyUnicode_KIND(o);
    const void *data = PyUnicode_DATA(o);
    Py_ssize_t n = PyUnicode_GET_LENGTH(o), i;
    unsigned char *p = out;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *s = (const Py_UCS1 *)data;
        for (i = 0; i < n; i++) { Py_UCS4 c = s[i]; CD_UTF8_PUT(c); }
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *s = (const Py_UCS2 *)data;
        for (i = 0; i < n; i++) { Py_UCS4 c = s[i]; CD_UTF8_PUT(c); }
    } else {
        const Py_UCS4 *s = (const Py_UCS4 *)data;
        for (i = 0; i < n; i++) { Py_UCS4 c = s[i]; CD_UTF8_PUT(c); }
    }
    return p - out;
}

/* A Python int from the two 64-bit lanes of a 128-bit hash, h1 the low half,
 * in one allocation (shifting and or-ing Python ints would take four). */
static inline PyObject *cd_pylong_from_u128(uint64_t lo, uint64_t hi) {
    unsigned char buf[16];
    int i;
    for (i = 0; i < 8; i++) {
        buf[i] = (unsigned char)(lo >> (8 * i));
        buf[8 + i] = (unsigned char)(hi >> (8 * i));
    }
#if PY_VERSION_HEX >= 0x030D0000
    return PyLong_FromUnsignedNativeBytes(buf, 16, Py_ASNATIVEBYTES_LITTLE_ENDIAN);
#else
    return _PyLong_FromByteArray(buf, 16, 1, 0);
#endif
}

/* The bytes of a compact ASCII str (the usual URL), which are its UTF-8. */
/* The item arrays of a list and a tuple (borrowed references). */
#define cd_list_items(o) (((PyListObject *)(o))->ob_item)
#define cd_tuple_items(o) (((PyTupleObject *)(o))->ob_item)

static inline int cd_compact_ascii(PyObject *o, const unsigned char **data, Py_ssize_t *size) {
    if (!PyUnicode_Check(o) || !PyUnicode_IS_COMPACT_ASCII(o))
        return 0;
    *data = (const unsigned char *)(((PyASCIIObject *)o) + 1);
    *size = ((PyASCIIObject *)o)->length;
    return 1;
}

/* --- large allocations ----------------------------------------------------
 * One rule for every big array of the core (fingerprint-set tables, index
 * segments and the temporaries of building them): from CD_BIG_MAP_FROM bytes
 * on, a private anonymous mapping, zeroed by the OS page by page as it is
 * first touched and returned to the system when freed (through malloc a freed
 * temporary would often stay in the heap: glibc raises its mapping threshold
 * after the first big free); from CD_BIG_HUGE_FROM on, whole aligned huge
 * pages with MADV_HUGEPAGE, since these arrays are read at random (a TLB miss
 * per probe otherwise) and written once (a fault per huge page, not 512).
 * Below the threshold, malloc/calloc.  16 bytes just before the data say how
 * to free it.  The Bloom filter's bits (_zeroed) use the same thresholds. */
#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#define CD_BIG_HAVE_MMAP 1
#endif
#define CD_BIG_MAP_FROM ((size_t)1 << 20)
#define CD_BIG_HUGE_FROM ((size_t)4 << 20)
#define CD_BIG_HUGE_PAGE ((size_t)2 << 20)

/* n bytes (zeroed when zero is set; mapped memory always is), or NULL. */
static void *cd_big_alloc(size_t n, int zero) {
    unsigned char *h;
    if (n > SIZE_MAX / 2) return NULL;
#ifdef CD_BIG_HAVE_MMAP
    if (n >= CD_BIG_MAP_FROM) {
        /* The data starts a page into the mapping (the header ends the
         * first page: a fingerprint set gives pages of its data back while
         * it grows, which needs them page-aligned), or, for huge pages, at
         * the first huge-page boundary past that, the mapping trimmed to
         * whole pages around it. */
        int huge = n >= CD_BIG_HUGE_FROM;
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t len = huge ? (n + CD_BIG_HUGE_PAGE - 1) / CD_BIG_HUGE_PAGE * CD_BIG_HUGE_PAGE : n;
        size_t total = len + page + (huge ? CD_BIG_HUGE_PAGE : 0);
        void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m != MAP_FAILED) {
            uintptr_t base = (uintptr_t)m, data = base + page, keep = base, end = base + total;
            if (huge) {
                data = (base + page + CD_BIG_HUGE_PAGE - 1) & ~(uintptr_t)(CD_BIG_HUGE_PAGE - 1);
                keep = data - page;
                if (keep > base) munmap(m, keep - base);
                if (end > data + len) munmap((void *)(data + len), end - (data + len));
                end = data + len;
#if defined(MADV_HUGEPAGE)
                madvise((void *)data, len, MADV_HUGEPAGE); /* a hint only */
#endif
            }
            ((size_t *)data)[-2] = end - keep;  /* bytes mapped */
            ((size_t *)data)[-1] = data - keep; /* where the data starts in them */
            return (void *)data;
        }
        /* no mapping: the heap */
    }
#endif
    h = (unsigned char *)(zero ? calloc(1, n + 16) : malloc(n + 16));
    if (!h) return NULL;
    ((size_t *)h)[0] = 0;
    ((size_t *)h)[1] = 16;
    return h + 16;
}

/* Is p (from cd_big_alloc) a mapping, whose pages may be given back with
 * madvise(MADV_DONTNEED)? */
static inline int cd_big_mapped(const void *p) {
    return ((const size_t *)p)[-2] != 0;
}

static void cd_big_free(void *p) {
    size_t mapped, offset;
    if (!p) return;
    mapped = ((size_t *)p)[-2];
    offset = ((size_t *)p)[-1];
#ifdef CD_BIG_HAVE_MMAP
    if (mapped) { munmap((unsigned char *)p - offset, mapped); return; }
#endif
    free((unsigned char *)p - offset);
}

/* --- threads --------------------------------------------------------------
 * Start fn(arg) on a new thread (Python's portable threads; the GIL is not
 * needed); 1 when started, 0 when not.  The one piece of the core's thread
 * runner (_core_threads.pxi) Cython cannot declare as is: the prototype
 * returns unsigned long, (unsigned long)-1 on failure. */
static inline int cd_thread_start(void (*fn)(void *), void *arg) {
    return PyThread_start_new_thread(fn, arg) != (unsigned long)-1;
}

/* --- function attributes ---------------------------------------------------
 * Cython cannot put attributes on a function; the core gives them as the
 * return type.  CD_POPCNT_VOID: a function compiled for processors with the
 * popcnt instruction, called only when cd_have_popcnt() says this one has it
 * (x86 wheels are built for processors that may lack it, where the portable
 * popcount is a dozen instructions); CD_ALWAYS_INLINE_VOID: a body inlined
 * into every caller, so that inside a CD_POPCNT_VOID function it uses the
 * instruction; CD_NOINLINE_VOID: a function kept out of line (out of a hot
 * loop, where its arguments would take registers).  The Hamming search
 * scans buckets with one popcount a candidate, so it is compiled both ways
 * (_core_index_query.pxi, _core_index_join.pxi). */
#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
#define CD_POPCNT_VOID __attribute__((target("popcnt"))) void
static inline int cd_have_popcnt(void) { return __builtin_cpu_supports("popcnt"); }
#else
#define CD_POPCNT_VOID void
static inline int cd_have_popcnt(void) { return 0; }
#endif
#if defined(__GNUC__) || defined(__clang__)
#define CD_ALWAYS_INLINE_VOID __attribute__((always_inline)) void
#define CD_NOINLINE_VOID __attribute__((noinline)) void
#else
#define CD_ALWAYS_INLINE_VOID void
#define CD_NOINLINE_VOID void
#endif

#endif
