/* The pieces of the URL fast path (_cd_url.h): byte classes, the scratch's
 * layout, quoting and unquoting, dot segments, the strip step, IPv6 hosts,
 * userinfo, and the word-at-a-time helpers that find the bytes needing a
 * look of their own.  Included by _cd_url.h.  No Python objects here.
 */
#ifndef CD_URL_PARTS_H
#define CD_URL_PARTS_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#include "_cd_support.h"

#define CDU_FALLBACK (-1)
/* A port of more digits goes to w3lib, whose int(port) raises ValueError
 * beyond Python's digit limit (4300 by default) or maps it to 0..65535. */
#define CDU_MAX_PORT_DIGITS 5
/* The byte b in each of the 8 bytes of a 64-bit word. */
#define CDU_BYTES(b) ((uint64_t)(b) * 0x0101010101010101ULL)

/* Byte classes. */
#define CDU_UNRESERVED 1 /* A-Z a-z 0-9 - . _ ~ (RFC 3986 unreserved)            */
#define CDU_PATH_SAFE 2  /* unreserved + :/?[]@!$&'()*+,;=|%  (_PATH_SAFE_CHARS)  */
#define CDU_SAFEST 4     /* unreserved + :/?@!$&'()*+,;=%  (_PATH_SAFEST_CHARS)   */
#define CDU_USERINFO 8   /* unreserved + !$&'()*+,  (_USERINFO_SAFEST_CHARS)       */

static unsigned char cdu_class[256];
static int cdu_ready = 0;

static void cdu_init(void) {
    int c;
    const char *p;
    if (cdu_ready) return;
    for (c = 0; c < 256; c++) {
        unsigned char f = 0;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
            f |= CDU_UNRESERVED | CDU_PATH_SAFE | CDU_SAFEST | CDU_USERINFO;
        cdu_class[c] = f;
    }
    for (p = "-._~"; *p; p++)
        cdu_class[(unsigned char)*p] |= CDU_UNRESERVED | CDU_PATH_SAFE | CDU_SAFEST | CDU_USERINFO;
    for (p = "!$&'()*+,"; *p; p++) cdu_class[(unsigned char)*p] |= CDU_USERINFO;
    for (p = ":/?@!$&'()*+,;=%"; *p; p++) cdu_class[(unsigned char)*p] |= CDU_PATH_SAFE | CDU_SAFEST;
    for (p = "[]|"; *p; p++) cdu_class[(unsigned char)*p] |= CDU_PATH_SAFE;
    cdu_ready = 1;
}

static const char cdu_hex[] = "0123456789ABCDEF";

static inline int cdu_hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static inline unsigned char cdu_lower(unsigned char c) {
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

/* A query field: its key and value (decoded, or in the input when plain);
 * plain: output as it is in the input (bare: then "="). */
typedef struct {
    const unsigned char *k; size_t kl; const unsigned char *v; size_t vl;
    unsigned char plain, bare;
} cdu_field;
typedef struct { size_t off; size_t len; } cdu_seg;

/* Scratch bytes cd_url_canonicalize needs for an input of n bytes: the
 * query fields, the path segments, the output (every input byte gives at
 * most 3 output bytes, plus "=" for each bare key, at most n / 2 + 1 of
 * them, and "/" for an empty path: under 3.5n + 8, so the 4n + 64 bytes
 * leave room for the word stores that write up to 8 bytes past the
 * output's end), the decoded query and the stripped input. */
static inline size_t cd_url_work_size(size_t n) {
    return (n / 2 + 2) * sizeof(cdu_field) + (n + 2) * sizeof(cdu_seg) + (4 * n + 64)
        + 2 * (n + 8);
}

/* Quote one byte: kept when its class has `mask`, else "%HH". */
static inline unsigned char *cdu_put(unsigned char *o, unsigned char b, unsigned char mask) {
    if (cdu_class[b] & mask) {
        *o++ = b;
    } else {
        *o++ = '%'; *o++ = (unsigned char)cdu_hex[b >> 4]; *o++ = (unsigned char)cdu_hex[b & 15];
    }
    return o;
}

/* urlencode quote_plus: unreserved kept, space as "+", the rest "%HH". */
static inline unsigned char *cdu_put_plus(unsigned char *o, const unsigned char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        unsigned char b = s[i];
        if (cdu_class[b] & CDU_UNRESERVED) *o++ = b;
        else if (b == ' ') *o++ = '+';
        else { *o++ = '%'; *o++ = (unsigned char)cdu_hex[b >> 4]; *o++ = (unsigned char)cdu_hex[b & 15]; }
    }
    return o;
}

/* unquote_plus of s[0:n] into d; returns the decoded length. */
static inline size_t cdu_unquote_plus(const unsigned char *s, size_t n, unsigned char *d) {
    size_t i = 0, j = 0;
    while (i < n) {
        unsigned char b = s[i];
        if (b == '+') { d[j++] = ' '; i++; continue; }
        if (b == '%' && i + 2 < n) {
            int h = cdu_hexval(s[i + 1]), l = cdu_hexval(s[i + 2]);
            if (h >= 0 && l >= 0) { d[j++] = (unsigned char)(h * 16 + l); i += 3; continue; }
        }
        d[j++] = b; i++;
    }
    return j;
}

static inline int cdu_bytes_cmp(const unsigned char *a, size_t al, const unsigned char *b, size_t bl) {
    size_t m = al < bl ? al : bl, j;
    for (j = 0; j < m; j++)  /* keys are short and differ early: no memcmp call */
        if (a[j] != b[j]) return (int)a[j] - (int)b[j];
    return al < bl ? -1 : (al > bl ? 1 : 0);
}

/* Python's ordering of (key, value) tuples of bytes. */
static int cdu_field_cmp(const void *pa, const void *pb) {
    const cdu_field *a = (const cdu_field *)pa, *b = (const cdu_field *)pb;
    int c = cdu_bytes_cmp(a->k, a->kl, b->k, b->kl);
    if (c) return c;
    return cdu_bytes_cmp(a->v, a->vl, b->v, b->vl);
}

/* cdu_field_cmp(a, b) < 0, inline for the insertion sort. */
static inline int cdu_field_less(const cdu_field *a, const cdu_field *b) {
    int c = cdu_bytes_cmp(a->k, a->kl, b->k, b->kl);
    if (c) return c < 0;
    return cdu_bytes_cmp(a->v, a->vl, b->v, b->vl) < 0;
}

/* Resolve dot segments of out[0:len] (which starts with "/") in place, as
 * w3lib's _remove_dot_segments; returns the new length. */
static size_t cdu_dot_segments(unsigned char *p, size_t len, cdu_seg *segs) {
    size_t i, start, nseg = 0, top = 0, o;
    int has = 0;
    for (i = 0; i + 1 < len; i++)
        if (p[i] == '/' && p[i + 1] == '.') { has = 1; break; }
    if (!has) return len;
    /* Split p[1:] on "/". */
    start = 1;
    for (i = 1; i <= len; i++) {
        if (i == len || p[i] == '/') {
            segs[nseg].off = start; segs[nseg].len = i - start; nseg++;
            start = i + 1;
        }
    }
    /* segs doubles as the output stack: top <= index read, so it is safe. */
    for (i = 0; i < nseg; i++) {
        cdu_seg s = segs[i];
        int last = (i + 1 == nseg);
        int dot = (s.len == 1 && p[s.off] == '.');
        int dotdot = (s.len == 2 && p[s.off] == '.' && p[s.off + 1] == '.');
        if (dotdot) {
            if (top) top--;
            if (last) { segs[top].off = s.off; segs[top].len = 0; top++; }
        } else if (dot) {
            if (last) { segs[top].off = s.off; segs[top].len = 0; top++; }
        } else {
            segs[top++] = s;
        }
    }
    /* Rewrite "/" + "/".join(segments); segment offsets only grow, and each
     * is copied to an offset no greater than its own. */
    o = 1;
    for (i = 0; i < top; i++) {
        if (i) p[o++] = '/';
        if (segs[i].len) memmove(p + o, p + segs[i].off, segs[i].len);
        o += segs[i].len;
    }
    return o;
}

/* w3lib's _strip and _urlsplit's first steps, into d: C0 controls and
 * spaces stripped from both ends, tabs, CR and LF removed, and (the fast
 * path's schemes are all special) "\\" read as "/" before the first "?" or
 * "#".  Returns the length, or CDU_FALLBACK for another control character
 * or DEL inside the URL. */
static Py_ssize_t cdu_strip(const unsigned char *s, size_t n, unsigned char *d) {
    size_t lo = 0, hi = n, i, m = 0;
    int slashes = 1;
    while (lo < hi && s[lo] <= 0x20) lo++;
    while (hi > lo && s[hi - 1] <= 0x20) hi--;
    for (i = lo; i < hi; i++) {
        unsigned char b = s[i];
        if (b < 0x20 || b == 0x7F) {
            if (b == '\t' || b == '\n' || b == '\r') continue;
            return CDU_FALLBACK;
        }
        if (b == '?' || b == '#') slashes = 0;
        else if (b == '\\' && slashes) b = '/';
        d[m++] = b;
    }
    return (Py_ssize_t)m;
}

/* An IPv6 address of 16-bit groups only (no scope, no dotted tail) by the
 * rules of Python's ipaddress; writes its 8 groups, returns 0, or -1 when
 * Python would reject it. */
static int cdu_ipv6_parse(const unsigned char *p, size_t len, unsigned int g[8]) {
    size_t off[10], plen[10], i, st = 0;
    int np = 0, k, skip = -1, hi, lo, j;
    for (i = 0; i <= len; i++) {
        if (i == len || p[i] == ':') {
            if (np == 9) return -1;
            off[np] = st; plen[np] = i - st; np++;
            st = i + 1;
        }
    }
    if (np < 3) return -1;
    for (k = 1; k < np - 1; k++) {
        if (plen[k] == 0) {
            if (skip >= 0) return -1;
            skip = k;
        }
    }
    if (skip >= 0) {
        hi = skip;
        lo = np - skip - 1;
        if (plen[0] == 0 && --hi) return -1;
        if (plen[np - 1] == 0 && --lo) return -1;
        if (8 - (hi + lo) < 1) return -1;
    } else {
        if (np != 8 || plen[0] == 0 || plen[np - 1] == 0) return -1;
        hi = np;
        lo = 0;
    }
    for (j = 0; j < 8; j++) g[j] = 0;
    for (k = 0; k < hi + lo; k++) {
        int part = k < hi ? k : np - (hi + lo) + k;
        unsigned int v = 0;
        if (plen[part] == 0 || plen[part] > 4) return -1;
        for (i = off[part]; i < off[part] + plen[part]; i++) {
            int x = cdu_hexval(p[i]);
            if (x < 0) return -1;
            v = v * 16 + (unsigned int)x;
        }
        g[k < hi ? k : 8 - (hi + lo) + k] = v;
    }
    return 0;
}

/* The 8 groups as Python's str(IPv6Address) writes them: lower-case hex
 * without leading zeros, the first longest run of two or more zero groups
 * as "::". */
static unsigned char *cdu_ipv6_put(unsigned char *o, const unsigned int g[8]) {
    int best = -1, best_len = 0, run = 0, k;
    for (k = 0; k < 8; k++) {
        run = g[k] ? 0 : run + 1;
        if (run > best_len) { best_len = run; best = k - run + 1; }
    }
    if (best_len < 2) best = -1;
    for (k = 0; k < 8; k++) {
        if (k == best) {
            *o++ = ':';
            if (k == 0) *o++ = ':';
            k += best_len - 1;
            continue;
        }
        {
            unsigned int v = g[k];
            int shift = 12;
            while (shift > 0 && !(v >> shift)) shift -= 4;
            for (; shift >= 0; shift -= 4) *o++ = (unsigned char)"0123456789abcdef"[(v >> shift) & 15];
        }
        if (k < 7) *o++ = ':';
    }
    return o;
}

/* w3lib's userinfo part: escapes decoded, then quoted with
 * _USERINFO_SAFEST_CHARS. */
static unsigned char *cdu_put_userinfo(unsigned char *o, const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        if (b == '%' && i + 2 < n) {
            int h = cdu_hexval(s[i + 1]), l = cdu_hexval(s[i + 2]);
            if (h >= 0 && l >= 0) {
                o = cdu_put(o, (unsigned char)(h * 16 + l), CDU_USERINFO);
                i += 3;
                continue;
            }
        }
        o = cdu_put(o, b, CDU_USERINFO);
        i++;
    }
    return o;
}

/* Word-at-a-time helpers.  A word is 8 input bytes read as a little-endian
 * integer (byte j of the input in bits 8j..8j+7 on every platform); the
 * masks below hold 0x80 in each byte they pick.  Every test first clears
 * the high bit of each byte (t = w & 0x7F..), so no addition carries from
 * one byte into the next and every byte's answer is exact; bytes >= 0x80
 * are added back from w itself. */
#define CDU_HIGH CDU_BYTES(0x80)
#define CDU_LOW7 CDU_BYTES(0x7F)
/* "https://", "http://" and "ftp://" as little-endian words. */
#define CDU_WORD_HTTPS 0x2F2F3A7370747468ULL
#define CDU_WORD_HTTP 0x2F2F3A70747468ULL
#define CDU_WORD_FTP 0x2F2F3A707466ULL

/* Bytes t (high bits clear) equal to c. */
static inline uint64_t cdu_eq(uint64_t t, unsigned char c) {
    uint64_t z = t ^ CDU_BYTES(c);
    return ~((z + CDU_LOW7) | z) & CDU_HIGH;
}

/* Bytes t (high bits clear) in [lo, hi], in the high bits (the others are
 * noise: mask with CDU_HIGH): t + (0x80 - lo) reaches 0x80 when
 * t >= lo, t + (0x7F - hi) when t > hi, and neither carries. */
#define CDU_IN(t, lo, hi) (((t) + CDU_BYTES(0x80 - (lo))) & ~((t) + CDU_BYTES(0x7F - (hi))))

/* The bytes of w that the path's word loop does not copy as they are: all
 * but A-Z a-z 0-9 - . / _ (so "%", ";", "?", "#", quoted bytes, the rarer
 * _PATH_SAFE_CHARS, controls, DEL, "\\" and bytes >= 0x80). */
static inline uint64_t cdu_path_stops(uint64_t w) {
    uint64_t t = w & CDU_LOW7, y = t | CDU_BYTES(0x20);
    uint64_t keep = CDU_IN(t, 0x2D, 0x39) | CDU_IN(y, 0x61, 0x7A) | cdu_eq(t, '_');
    return (~keep | w) & CDU_HIGH;
}

/* The bytes of w that are not unreserved (A-Z a-z 0-9 - . _; "~" is left to
 * the byte loop): what the query loop looks at one by one. */
static inline uint64_t cdu_query_stops(uint64_t w) {
    uint64_t t = w & CDU_LOW7, y = t | CDU_BYTES(0x20);
    uint64_t keep = CDU_IN(t, 0x30, 0x39) | CDU_IN(t, 0x2D, 0x2E) | CDU_IN(y, 0x61, 0x7A)
        | cdu_eq(t, '_');
    return (~keep | w) & CDU_HIGH;
}

/* Index of the lowest set bit of x (x != 0). */
static inline unsigned cdu_ctz64(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctzll(x);
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_AMD64) || defined(_M_ARM64))
    unsigned long r;
    _BitScanForward64(&r, x);
    return (unsigned)r;
#else
    unsigned r = 0;
    while (!(x & 1)) { x >>= 1; r++; }
    return r;
#endif
}

/* The word at s + i when fewer than 8 bytes are left (0 < n - i < 8): the
 * n - i bytes, then zero bytes (which every loop stops at, and then sees
 * that i reached n).  Reads only s[0:n]. */
static inline uint64_t cdu_tail(const unsigned char *s, size_t i, size_t n) {
    size_t r = n - i, j;
    uint64_t w = 0;
    if (n >= 8) return cd_load64le(s + n - 8) >> (8 * (8 - r));
    for (j = 0; j < r; j++) w |= (uint64_t)s[i + j] << (8 * j);
    return w;
}

/* Store the word w (as cd_load64le read it) at o: 8 bytes. */
static inline void cdu_store(unsigned char *o, uint64_t w) {
#if defined(__BYTE_ORDER__) && (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
    w = __builtin_bswap64(w);
#endif
    memcpy(o, &w, 8);
}

/* Copy p[0:len] to o.  Whole words while 8 bytes remain before end (the
 * end of the input), which may write up to 7 bytes past o + len (the
 * output has room, see cd_url_work_size); memcpy for the rest. */
static inline unsigned char *cdu_copy(unsigned char *o, const unsigned char *p, size_t len,
                                      const unsigned char *end) {
    size_t j = 0;
    for (; j < len && (size_t)(end - p) - j >= 8; j += 8) memcpy(o + j, p + j, 8);
    if (j < len) memcpy(o + j, p + j, len - j);
    return o + len;
}

/* Whether cdu_strip would change s[0:n] (or reject it): a byte below 0x21,
 * DEL or "\\" anywhere.  Eight bytes at a time: each test below is nonzero
 * exactly when some byte of the word is below 0x21 / equals 0x7F / equals
 * "\\" (bytes >= 0x80 never count). */
static int cdu_strip_needed(const unsigned char *s, size_t n) {
    size_t i;
    for (i = 0; i + 8 <= n; i += 8) {
        uint64_t w, x, y;
        memcpy(&w, s + i, 8);
        x = w ^ CDU_BYTES(0x7F);
        y = w ^ CDU_BYTES(0x5C);
        if (((w - CDU_BYTES(0x21)) & ~w & CDU_BYTES(0x80))
            | ((x - CDU_BYTES(0x01)) & ~x & CDU_BYTES(0x80))
            | ((y - CDU_BYTES(0x01)) & ~y & CDU_BYTES(0x80)))
            return 1;
    }
    for (; i < n; i++) {
        unsigned char b = s[i];
        if (b <= 0x20 || b == 0x7F || b == '\\') return 1;
    }
    return 0;
}

/* One field of the query, s[f0:f1] with its first "=" at eq (0: none), as
 * a cdu_field: pointing into s when it is plain (only unreserved bytes and
 * that "="), which unquote_plus and quote_plus leave as they are; else
 * decoded into *d. */
static inline void cdu_add_field(cdu_field *f, const unsigned char *s, size_t f0, size_t f1,
                                 size_t eq, int plain, unsigned char **d) {
    size_t e = eq ? eq : f1;
    f->plain = (unsigned char)plain;
    f->bare = (unsigned char)!eq;
    if (plain) {
        f->k = s + f0; f->kl = e - f0;
        f->v = s + e + !!eq; f->vl = eq ? f1 - eq - 1 : 0;
    } else {
        f->k = *d; f->kl = cdu_unquote_plus(s + f0, e - f0, *d); *d += f->kl;
        f->v = *d; f->vl = eq ? cdu_unquote_plus(s + eq + 1, f1 - eq - 1, *d) : 0; *d += f->vl;
    }
}

#endif /* CD_URL_PARTS_H */
