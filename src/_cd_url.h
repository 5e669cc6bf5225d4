/* Compiled fast path of w3lib.url.canonicalize_url (w3lib 2.5 rules).
 *
 * cd_url_canonicalize() handles the URLs crawlers meet: http, https and ftp
 * (the special schemes that split ";params"; ws and wss do not); a host of
 * unreserved characters or an IPv6 address in brackets, with an optional
 * numeric port and userinfo; a path, query and fragment of printable ASCII,
 * spaces, percent escapes (valid or not) and UTF-8.  Anything else (IDNA
 * hosts, IPv4-mapped or scoped IPv6 addresses, control characters inside
 * the URL, other schemes, bad ports) returns CDU_FALLBACK and the
 * caller asks w3lib itself, so the answer is always w3lib's.
 *
 * The rules reproduced, in w3lib's order (url.py _safe_url_split and
 * canonicalize_url, _url.py _strip/_urlsplit/_parse_qsl/_urlencode):
 *   strip   C0 controls and spaces stripped from both ends, tabs and
 *           newlines removed, "\\" read as "/" before the query;
 *   netloc  scheme and host lower-cased, port as int(port) (leading zeros go);
 *           userinfo decoded and quoted with _USERINFO_SAFEST_CHARS (user
 *           and password apart); an IPv6 address as Python's ipaddress
 *           writes it (RFC 5952: lower case, longest zero run as "::"); a
 *           non-ASCII netloc reported for urllib's NFKC check (which w3lib's
 *           _urlsplit runs), done by the caller;
 *   path    ";params" split off the last segment; every "%HH" decoded except
 *           %25 %2F %3B %3F (kept, hex upper-cased); bytes outside
 *           _PATH_SAFE_CHARS percent-encoded; an empty path becomes "/"; dot
 *           segments resolved (RFC 3986 5.2.4) after decoding;
 *   params  only quoted with _PATH_SAFEST_CHARS (nothing decoded);
 *   query   split on "&", empty fields dropped, "k" read as "k=", "+" and
 *           "%HH" decoded, fields sorted by (key bytes, value bytes), then
 *           re-encoded with quote_plus (unreserved kept, space as "+");
 *   fragment dropped, or kept quoted with _FRAGMENT_SAFEST_CHARS.
 * Quoting a raw byte first (as safe_url_string does) and decoding it again
 * gives the raw byte back, and a quoted byte's "%" is never a hex digit, so
 * decoding the raw text directly is the same as w3lib's two passes.
 *
 * How it runs (cdu_pass; about 1,500 instructions for a 90-byte URL):
 *   one pass  the URL is read once, left to right, straight from the
 *           caller's buffer: scheme, authority, path, query, fragment.  The
 *           strip step is not a pass of its own: the pass gives up at any
 *           byte cdu_strip would change (a control byte or DEL anywhere,
 *           "\\" before the query, whitespace at either end), and only then
 *           does cd_url_canonicalize check the URL, strip it into the scratch
 *           and pass over the copy.
 *   words   the host, the path and the query are read 8 bytes at a time
 *           (cd_load64le; cdu_tail for the last few bytes, which never reads
 *           past the end).  A few additions and masks per word (cdu_eq,
 *           CDU_IN) mark the bytes that need a look of their own; the bytes
 *           before the first of those are plain.  Host: stored as one word,
 *           lower-cased by adding 0x20 to the bytes A-Z.  Path: plain is
 *           A-Z a-z 0-9 - . / _, stored as one word; "%", ";", quoted bytes
 *           and the rarer safe ones go one at a time.  The same words tell
 *           whether a "/" is followed by "." (only then are dot segments
 *           resolved) and where the ";params" start (the first ";" after the
 *           last "/").  Query: plain is unreserved; every other byte is
 *           visited through the mask ("&" ends a field, the first "=" splits
 *           it, anything else makes it need decoding).
 *   fields  a field of plain bytes and one "=" is the same after
 *           unquote_plus and quote_plus, so it is sorted and copied from the
 *           input as it is; only the others are decoded into the scratch and
 *           re-encoded.  A few fields are sorted by insertion (an inline
 *           comparison), many by qsort.
 *   stores  whole words are written to the output and the output moves on by
 *           the bytes that count; the scratch has room for those writes
 *           (cd_url_work_size).
 */
#ifndef CD_URL_H
#define CD_URL_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#include "_cd_support.h"
/* Byte classes, quoting, dot segments, strip, IPv6, word helpers. */
#include "_cd_url_parts.h"

/* One pass of the fast path over s[0:n], into out; CDU_FALLBACK outside it
 * and wherever cdu_strip would change s (see cd_url_canonicalize). */
static Py_ssize_t cdu_pass(const unsigned char *s, size_t n, int keep_fragments,
                           int keep_blank_values, cdu_field *fields, cdu_seg *segs,
                           unsigned char *out, unsigned char *dec,
                           const unsigned char **wide) {
    unsigned char *o = out;
    const unsigned char *end = s + n;
    size_t i, a, at, host, host_end, auth_end, q_end, port_start, scheme_len;
    size_t nfields = 0;
    unsigned int groups[8];
    int ipv6 = 0, nonascii = 0;
    uint64_t w;

    /* Ends that cdu_strip would trim; bytes inside are checked where read. */
    if (n == 0 || s[n - 1] <= 0x20) return CDU_FALLBACK;
    /* Scheme: http, https or ftp, any case, then "://"; out gets it in lower
     * case (one word: "https://" is 8 bytes, the others leave slack). */
    if (n >= 8) {
        w = cd_load64le(s);
    } else {
        unsigned char head[8] = {0};
        memcpy(head, s, n);
        w = cd_load64le(head);
    }
    if ((w | 0x2020202020ULL) == CDU_WORD_HTTPS) {
        scheme_len = 5;
        cdu_store(o, CDU_WORD_HTTPS);
    } else if (((w | 0x20202020ULL) & 0x00FFFFFFFFFFFFFFULL) == CDU_WORD_HTTP) {
        scheme_len = 4;
        cdu_store(o, CDU_WORD_HTTP);
    } else if (((w | 0x202020ULL) & 0x0000FFFFFFFFFFFFULL) == CDU_WORD_FTP) {
        scheme_len = 3;
        cdu_store(o, CDU_WORD_FTP);
    } else {
        return CDU_FALLBACK;
    }
    a = scheme_len + 3;
    o += a;
    /* Authority.  The common case first: a host of unreserved bytes, copied
     * a word at a time and lower-cased on the way (0x20 added to the bytes
     * A-Z), an optional ":digits", then "/", "?", "#" or the end. */
    i = a;
    for (;;) {
        uint64_t stops, before;
        if (i + 8 <= n) w = cd_load64le(s + i);
        else if (i < n) w = cdu_tail(s, i, n);
        else break;
        stops = cdu_query_stops(w);
        before = (stops & (0 - stops)) - 1;
        cdu_store(o, w | ((CDU_IN(w & CDU_LOW7, 0x41, 0x5A) & before & CDU_HIGH) >> 2));
        if (!stops) { o += 8; i += 8; continue; }
        {
            unsigned k = cdu_ctz64(stops) >> 3;
            o += k; i += k;
        }
        if (i < n && s[i] == '~') { *o++ = '~'; i++; continue; }
        break;
    }
    host_end = i;
    port_start = 0;
    if (i < n && s[i] == ':') {
        port_start = ++i;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {}
    }
    if (host_end > a && (i == n || s[i] == '/' || s[i] == '?' || s[i] == '#')) {
        auth_end = i;
    } else {
        /* Anything else: up to the first "/", "?" or "#"; userinfo up to its
         * last "@"; then a host of unreserved characters or "[IPv6]", and an
         * optional ":digits". */
        o = out + a;
        for (auth_end = a; auth_end < n && s[auth_end] != '/' && s[auth_end] != '?'
             && s[auth_end] != '#'; auth_end++) {
            unsigned char b = s[auth_end];
            if (b < 0x20 || b == 0x7F || b == '\\') return CDU_FALLBACK;
            nonascii |= b >= 0x80;
        }
        /* A netloc with non-ASCII (only the userinfo can have it here) is
         * refused by urllib when its NFKC form holds a separator (U+FF0F
         * is "/"): the caller applies that check, with Python's Unicode
         * tables, to the bytes reported in wide (see cd_url_canonicalize). */
        if (nonascii) {
            wide[0] = s + a;
            wide[1] = s + auth_end;
        }
        at = auth_end;
        for (i = auth_end; i > a; i--) {
            if (s[i - 1] == '@') { at = i - 1; break; }
        }
        host = at < auth_end ? at + 1 : a;
        if (at < auth_end) {
            for (i = a; i < at; i++)
                if (s[i] == '[' || s[i] == ']') return CDU_FALLBACK;
        }
        if (host < auth_end && s[host] == '[') {
            for (i = host + 1; i < auth_end && s[i] != ']'; i++) {
                unsigned char b = s[i];
                if (b != ':' && cdu_hexval(b) < 0) return CDU_FALLBACK;  /* scope, dotted, IPvFuture */
            }
            if (i == auth_end) return CDU_FALLBACK;
            if (cdu_ipv6_parse(s + host + 1, i - host - 1, groups)) return CDU_FALLBACK;
            /* IPv4-mapped: Python 3.13 writes these ::ffff:a.b.c.d, older ones not. */
            if (!groups[0] && !groups[1] && !groups[2] && !groups[3] && !groups[4]
                && groups[5] == 0xFFFF)
                return CDU_FALLBACK;
            ipv6 = 1;
            host_end = ++i;
        } else {
            for (i = host; i < auth_end && (cdu_class[s[i]] & CDU_UNRESERVED); i++) {}
            host_end = i;
            if (host_end == host) return CDU_FALLBACK;
        }
        port_start = 0;
        if (i < auth_end && s[i] == ':') {
            port_start = ++i;
            for (; i < auth_end && s[i] >= '0' && s[i] <= '9'; i++) {}
        }
        if (i != auth_end) return CDU_FALLBACK;
        if (at < auth_end) {
            size_t colon;
            for (colon = a; colon < at && s[colon] != ':'; colon++) {}
            o = cdu_put_userinfo(o, s + a, colon - a);
            if (colon < at) {
                *o++ = ':';
                o = cdu_put_userinfo(o, s + colon + 1, at - colon - 1);
            }
            *o++ = '@';
        }
        if (ipv6) {
            *o++ = '[';
            o = cdu_ipv6_put(o, groups);
            *o++ = ']';
        } else {
            for (i = host; i < host_end; i++) *o++ = cdu_lower(s[i]);
        }
    }
    if (port_start && auth_end > port_start) {
        /* int(port): leading zeros dropped, 0..65535 else w3lib raises. */
        unsigned long v = 0;
        size_t digits = 0;
        unsigned char tmp[8];
        if (auth_end - port_start > CDU_MAX_PORT_DIGITS) return CDU_FALLBACK;
        for (i = port_start; i < auth_end; i++) {
            v = v * 10 + (unsigned long)(s[i] - '0');
            if (v > 65535) return CDU_FALLBACK;
        }
        *o++ = ':';
        do { tmp[digits++] = (unsigned char)('0' + v % 10); v /= 10; } while (v);
        while (digits) *o++ = tmp[--digits];
    }

    /* Path: from auth_end up to the first "?" or "#", in one pass.  Runs of
     * A-Z a-z 0-9 - . / _ are copied a word at a time (the word is stored
     * whole, then o moves past the bytes before the first other byte);
     * every other byte is handled alone.  Along the way: where ";params"
     * would start (the first ";" after the last "/": semi_in, and semi_out
     * in out) and whether out may hold a dot segment (a "/" then "."). */
    i = auth_end;
    if (i == n || s[i] != '/') {
        *o++ = '/';
    } else {
        unsigned char *ps = o, *semi_out = NULL;
        size_t semi_in = 0;
        int dots = 0;
        for (;;) {
            uint64_t stops, before, d;
            unsigned char b;
            if (i + 8 <= n) w = cd_load64le(s + i);
            else if (i < n) w = cdu_tail(s, i, n);
            else break;
            stops = cdu_path_stops(w);
            before = (stops & (0 - stops)) - 1;  /* the bits of the bytes copied */
            cdu_store(o, w);
            d = cdu_eq(w & CDU_LOW7, '.') & before;
            if (d && (((cdu_eq(w & CDU_LOW7, '/') << 8) & d) || ((d & 0x80) && o[-1] == '/')))
                dots = 1;
            if (semi_out && (cdu_eq(w & CDU_LOW7, '/') & before)) semi_out = NULL;
            if (!stops) { o += 8; i += 8; continue; }
            {
                unsigned k = cdu_ctz64(stops) >> 3;
                o += k; i += k;
            }
            if (i >= n) break;
            b = s[i];
            if (b == '?' || b == '#') break;
            if (b == '%') {
                int h = i + 2 < n ? cdu_hexval(s[i + 1]) : -1, l = h >= 0 ? cdu_hexval(s[i + 2]) : -1;
                if (l >= 0) {
                    unsigned char v = (unsigned char)(h * 16 + l);
                    if (v == 0x25 || v == 0x2F || v == 0x3B || v == 0x3F) {
                        *o++ = '%'; *o++ = (unsigned char)cdu_hex[h]; *o++ = (unsigned char)cdu_hex[l];
                    } else {
                        if (v == '.') dots = 1;
                        o = cdu_put(o, v, CDU_PATH_SAFE);
                    }
                    i += 3;
                    continue;
                }
                *o++ = '%';
            } else if (b == ';') {
                if (!semi_out) { semi_in = i; semi_out = o; }
                *o++ = ';';
            } else if (b < 0x20 || b == 0x7F || b == '\\') {
                return CDU_FALLBACK;  /* cdu_strip's to handle */
            } else {
                o = cdu_put(o, b, CDU_PATH_SAFE);
            }
            i++;
        }
        /* The path before ";params": dot segments resolved; then the params,
         * only quoted with _PATH_SAFEST_CHARS. */
        if (semi_out) o = semi_out;
        if (dots) o = ps + cdu_dot_segments(ps, (size_t)(o - ps), segs);
        if (semi_out && semi_in + 1 < i) {
            size_t j;
            *o++ = ';';
            for (j = semi_in + 1; j < i; j++) o = cdu_put(o, s[j], CDU_SAFEST);
        }
    }

    /* Query: between "?" and "#".  Words of unreserved bytes are skipped;
     * each other byte is looked at alone ("&" ends a field, the first "="
     * splits it, any other makes it need decoding). */
    q_end = i;
    if (i < n && s[i] == '?') {
        size_t f0 = i + 1, eq = 0;
        int plain = 1;
        unsigned char *d = dec;
        i = f0;
        for (;;) {
            uint64_t stops;
            if (i + 8 <= n) w = cd_load64le(s + i);
            else if (i < n) w = cdu_tail(s, i, n);
            else break;
            stops = cdu_query_stops(w);
            while (stops) {
                size_t j = i + (cdu_ctz64(stops) >> 3);
                unsigned char b;
                stops &= stops - 1;
                if (j >= n) break;
                b = s[j];
                if (b == '&' || b == '#') {
                    if (j > f0 && (keep_blank_values || (eq && eq + 1 < j)))
                        cdu_add_field(&fields[nfields++], s, f0, j, eq, plain, &d);
                    if (b == '#') { i = j; goto query_done; }
                    f0 = j + 1; eq = 0; plain = 1;
                } else if (b == '=' && !eq) {
                    eq = j;
                } else if (b < 0x20 || b == 0x7F) {
                    return CDU_FALLBACK;
                } else {
                    plain = 0;
                }
            }
            i += 8;
        }
        i = n;
        if (n > f0 && (keep_blank_values || (eq && eq + 1 < n)))
            cdu_add_field(&fields[nfields++], s, f0, n, eq, plain, &d);
    query_done:
        q_end = i;
        if (nfields) {
            if (nfields > 1) {
                if (nfields <= 16) {  /* insertion sort: few fields is the norm */
                    size_t x, y;
                    for (x = 1; x < nfields; x++) {
                        cdu_field t = fields[x];
                        for (y = x; y > 0 && cdu_field_less(&t, &fields[y - 1]); y--)
                            fields[y] = fields[y - 1];
                        fields[y] = t;
                    }
                } else {
                    qsort(fields, nfields, sizeof(cdu_field), cdu_field_cmp);
                }
            }
            *o++ = '?';
            for (i = 0; i < nfields; i++) {
                const cdu_field *f = &fields[i];
                if (i) *o++ = '&';
                if (f->plain) {
                    /* key "=" value, as in s */
                    o = cdu_copy(o, f->k, f->kl + (f->bare ? 0 : 1 + f->vl), end);
                    if (f->bare) *o++ = '=';
                } else {
                    o = cdu_put_plus(o, f->k, f->kl);
                    *o++ = '=';
                    o = cdu_put_plus(o, f->v, f->vl);
                }
            }
        }
    }

    /* Fragment: dropped, or kept quoted with _FRAGMENT_SAFEST_CHARS. */
    if (q_end < n) {
        unsigned char *fs = o;
        *o++ = '#';
        for (i = q_end + 1; i < n; i++) {
            unsigned char b = s[i];
            if (b < 0x20 || b == 0x7F) return CDU_FALLBACK;
            o = cdu_put(o, b, CDU_SAFEST);
        }
        if (!keep_fragments || q_end + 1 == n) o = fs;
    }
    return (Py_ssize_t)(o - out);
}

/* Canonicalize s[0:n] (UTF-8).  Writes the canonical URL (ASCII) into work
 * (cd_url_work_size(n) bytes, aligned for pointers), at cd_url_output(work,
 * n), and returns its length, or CDU_FALLBACK outside the fast path.
 *
 * wide[0:2] is set to the start and end of the netloc (in s or in its
 * stripped copy in work) when the answer holds only if the netloc passes
 * urllib's _checknetloc (it has a byte >= 0x80), else both are NULL: the
 * netloc is refused when the NFKC form of its text without "@", ":", "#"
 * and "?" holds one of "/?#@:", which needs Unicode tables (nineteen code
 * points in Unicode 15, such as U+FF0F and U+2100 "a/c").
 *
 * The pass reads s as it is and gives up (CDU_FALLBACK) at any byte that
 * cdu_strip would change: a control byte or DEL anywhere, "\\" before the
 * query, whitespace at the end.  Only then is s checked, stripped into the
 * scratch and passed over again. */
static Py_ssize_t cd_url_canonicalize(const unsigned char *s, size_t n, int keep_fragments,
                                      int keep_blank_values, void *work,
                                      const unsigned char **wide) {
    cdu_field *fields = (cdu_field *)work;
    cdu_seg *segs = (cdu_seg *)(fields + (n / 2 + 2));
    unsigned char *out = (unsigned char *)(segs + (n + 2));
    unsigned char *dec = out + (4 * n + 64);
    unsigned char *stripped = dec + (n + 8);
    Py_ssize_t r, m;

    cdu_init();
    for (;;) {  /* one call site: the compiler inlines cdu_pass */
        wide[0] = wide[1] = NULL;
        r = cdu_pass(s, n, keep_fragments, keep_blank_values, fields, segs, out, dec, wide);
        if (r != CDU_FALLBACK || s == stripped || !cdu_strip_needed(s, n)) return r;
        m = cdu_strip(s, n, stripped);
        if (m < 0) return CDU_FALLBACK;
        s = stripped;
        n = (size_t)m;
    }
}

/* Where cd_url_canonicalize put its output. */
static inline const unsigned char *cd_url_output(void *work, size_t n) {
    cdu_field *fields = (cdu_field *)work;
    cdu_seg *segs = (cdu_seg *)(fields + (n / 2 + 2));
    return (const unsigned char *)(segs + (n + 2));
}

/* SHA-1 and MD5 of one contiguous buffer: cd_sha1, cd_md5. */
#include "_cd_digest.h"

#endif
