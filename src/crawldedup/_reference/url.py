"""Twin of ``src/_core_url.pxi`` (+ ``src/_cd_url.h``): the URL fast path.

w3lib 2.5's canonicalize_url for http, https and ftp URLs with a plain or
IPv6 host, None otherwise (and for a netloc urllib refuses under NFKC, where
w3lib raises); URL and Scrapy request fingerprints over it.
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Any, FrozenSet, List, Optional, Tuple, Union

_URL_UNRESERVED = frozenset(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# w3lib's _PATH_SAFE_CHARS (kept when re-quoting a path) and
# _PATH_SAFEST_CHARS (kept when quoting ;params and fragments).
_URL_PATH_SAFE = _URL_UNRESERVED | frozenset(b":/?[]@!$&'()*+,;=|%")
_URL_SAFEST = _URL_UNRESERVED | frozenset(b":/?@!$&'()*+,;=%")
_URL_HEX = b"0123456789ABCDEFabcdef"
# w3lib's _USERINFO_SAFEST_CHARS.
_URL_USERINFO = _URL_UNRESERVED | frozenset(b"!$&'()*+,")
# The special schemes that split ";params" off the path (ws and wss do not).
_URL_SCHEMES = (b"http", b"https", b"ftp")
_URL_KEPT_ESCAPES = frozenset((0x25, 0x2F, 0x3B, 0x3F))  # % / ; ? stay escaped in a path


def _url_quote(data: bytes, safe: FrozenSet[int]) -> bytes:
    return b"".join(bytes((b,)) if b in safe else b"%%%02X" % b for b in data)


def _url_escape_at(data: bytes, i: int, end: int) -> Optional[int]:
    """The byte of a valid "%HH" at data[i] (which must end before end), else None."""
    if data[i] == 0x25 and i + 2 < end and data[i + 1] in _URL_HEX and data[i + 2] in _URL_HEX:
        return int(data[i + 1:i + 3], 16)
    return None


def _url_unquote_plus(data: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(data):
        v = _url_escape_at(data, i, len(data))
        if v is not None:
            out.append(v)
            i += 3
        else:
            out.append(0x20 if data[i] == 0x2B else data[i])
            i += 1
    return bytes(out)


def _url_quote_plus(data: bytes) -> bytes:
    return b"".join(bytes((b,)) if b in _URL_UNRESERVED else b"+" if b == 0x20
                    else b"%%%02X" % b for b in data)


def _url_unquote(data: bytes) -> bytes:
    """Valid "%HH" escapes decoded, the rest as it is."""
    out = bytearray()
    i = 0
    while i < len(data):
        v = _url_escape_at(data, i, len(data))
        if v is None:
            out.append(data[i])
            i += 1
        else:
            out.append(v)
            i += 3
    return bytes(out)


def _url_strip(s: bytes) -> Optional[bytes]:
    """w3lib's _strip and _urlsplit's first steps: C0 controls and spaces
    stripped from both ends, tabs and newlines removed, "\\" read as "/"
    before the first "?" or "#"; None for another control byte or DEL."""
    s = s.strip(bytes(range(0x21)))
    s = s.replace(b"\t", b"").replace(b"\n", b"").replace(b"\r", b"")
    if any(b < 0x20 or b == 0x7F for b in s):
        return None
    cut = min([len(s)] + [s.index(c) for c in b"?#" if c in s])
    return s[:cut].replace(b"\\", b"/") + s[cut:]


def _url_ipv6(text: bytes) -> Optional[bytes]:
    """An IPv6 address of 16-bit groups as Python's ipaddress writes it
    (RFC 5952), or None: not one (by Python's rules), scoped, dotted, or
    IPv4-mapped (which Python 3.13 writes ::ffff:a.b.c.d and older ones not)."""
    if not text or any(b != 0x3A and b not in _URL_HEX for b in text):
        return None
    parts = text.split(b":")
    if not 3 <= len(parts) <= 9:
        return None
    empty = [i for i in range(1, len(parts) - 1) if not parts[i]]
    if len(empty) > 1:
        return None
    if empty:
        hi, lo = parts[:empty[0]], parts[empty[0] + 1:]
        if hi == [b""]:
            hi = []
        if lo == [b""]:
            lo = []
        if len(hi) + len(lo) > 7:
            return None
        groups_text = hi + [b"0"] * (8 - len(hi) - len(lo)) + lo
    else:
        if len(parts) != 8:
            return None
        groups_text = parts
    if any(not g or len(g) > 4 for g in groups_text):
        return None
    groups = [int(g, 16) for g in groups_text]
    if groups[:6] == [0, 0, 0, 0, 0, 0xFFFF]:
        return None
    best, best_len, run = -1, 0, 0
    for i, g in enumerate(groups):
        run = 0 if g else run + 1
        if run > best_len:
            best, best_len = i - run + 1, run
    words = [b"%x" % g for g in groups]
    if best_len > 1:
        words[best:best + best_len] = [b""]
        if best == 0:
            words.insert(0, b"")
        if best + best_len == 8:
            words.append(b"")
    return b":".join(words)


def _url_path(path: bytes) -> bytes:
    """Decode escapes (but %25 %2F %3B %3F, upper-cased) and re-quote."""
    out = []
    i = 0
    while i < len(path):
        v = _url_escape_at(path, i, len(path))
        if v is None:
            out.append(_url_quote(path[i:i + 1], _URL_PATH_SAFE))
            i += 1
        else:
            out.append(b"%%%02X" % v if v in _URL_KEPT_ESCAPES
                       else _url_quote(bytes((v,)), _URL_PATH_SAFE))
            i += 3
    return b"".join(out)


def _url_dot_segments(path: bytes) -> bytes:
    """RFC 3986 5.2.4 for a path starting with "/", as w3lib resolves it."""
    segments = path[1:].split(b"/")
    out: List[bytes] = []
    for seg in segments[:-1]:
        if seg == b"..":
            if out:
                out.pop()
        elif seg != b".":
            out.append(seg)
    last = segments[-1]
    if last in (b".", b".."):
        if last == b".." and out:
            out.pop()
        out.append(b"")
    else:
        out.append(last)
    return b"/" + b"/".join(out)


def _url_utf8(url: object) -> Optional[bytes]:
    """The bytes the fast path reads: a str as UTF-8 (None when it cannot
    be: lone surrogates), bytes as they are (read as UTF-8; w3lib
    percent-encodes the bytes that are not, as the fast path does every byte
    >= 0x80)."""
    if isinstance(url, bytes):
        return url
    if not isinstance(url, str):
        raise TypeError(f"url must be str or bytes, not {type(url).__name__}")
    try:
        return url.encode("utf-8")
    except UnicodeEncodeError:
        return None


def _url_netloc_refused(netloc: str) -> bool:
    """True when urllib's urlsplit (and so w3lib) refuses netloc: it is not
    ASCII and the NFKC form of its text without "@", ":", "#" and "?" holds
    one of "/?#@:" (U+FF0F "／" is "/", U+2100 "℀" is "a/c")."""
    if netloc.isascii() or unicodedata.is_normalized("NFKC", netloc):
        return False  # the usual case, quickly: a separator's code point is never NFKC-normal
    bare = netloc.replace("@", "").replace(":", "").replace("#", "").replace("?", "")
    normal = unicodedata.normalize("NFKC", bare)
    return normal != bare and any(c in normal for c in "/?#@:")


# A port of more digits goes to w3lib: its int(port) raises ValueError past
# Python's digit limit (4300), and maps shorter ones (leading zeros) to 0..65535.
_URL_MAX_PORT_DIGITS = 5


def canonicalize_url_fast(url: object, keep_fragments: bool = False,
                          keep_blank_values: bool = True) -> Optional[str]:
    """w3lib.url.canonicalize_url(url, keep_blank_values, keep_fragments) for
    http/https URLs with a plain host, None for any other URL.  url is str
    or bytes."""
    s = _url_utf8(url)
    if s is None:
        return None
    s = _url_strip(s)
    if s is None:
        return None
    scheme, colon, rest = s.partition(b":")
    scheme = scheme.lower()
    if not colon or scheme not in _URL_SCHEMES or not rest.startswith(b"//"):
        return None
    rest = rest[2:]
    cut = min([len(rest)] + [rest.index(c) for c in b"/?#" if c in rest])
    authority, rest = rest[:cut], rest[cut:]
    if _url_netloc_refused(authority.decode("utf-8", "replace")):
        return None
    userinfo, at, hostport = authority.rpartition(b"@")
    if b"[" in userinfo or b"]" in userinfo:
        return None
    if hostport.startswith(b"["):
        address, bracket, port_part = hostport[1:].partition(b"]")
        host = _url_ipv6(address) if bracket else None
        if host is None or (port_part and not port_part.startswith(b":")):
            return None
        host, port = b"[" + host + b"]", port_part[1:]
    else:
        host, colon, port = hostport.partition(b":")
        if not host or any(b not in _URL_UNRESERVED for b in host):
            return None
        host = host.lower()
    if port and (not port.isdigit() or len(port) > _URL_MAX_PORT_DIGITS
                 or int(port) > 65535):
        return None
    out = scheme + b"://"
    if at:
        user, colon, password = userinfo.partition(b":")
        out += _url_quote(_url_unquote(user), _URL_USERINFO)
        if colon:
            out += b":" + _url_quote(_url_unquote(password), _URL_USERINFO)
        out += b"@"
    out += host + (b":%d" % int(port) if port else b"")

    rest, hash_, fragment = rest.partition(b"#")
    path, question, query = rest.partition(b"?")
    if not path:
        out += b"/"
    else:
        semi = path.find(b";", path.rfind(b"/") + 1)
        params = b""
        if semi != -1:
            path, params = path[:semi], path[semi + 1:]
        out += _url_dot_segments(_url_path(path))
        if params:
            out += b";" + _url_quote(params, _URL_SAFEST)
    fields = []
    for field in query.split(b"&"):
        if not field:
            continue
        key, eq, value = field.partition(b"=")
        if keep_blank_values or (eq and value):
            fields.append((_url_unquote_plus(key), _url_unquote_plus(value)))
    if fields:
        fields.sort()
        out += b"?" + b"&".join(_url_quote_plus(k) + b"=" + _url_quote_plus(v) for k, v in fields)
    if keep_fragments and fragment:
        out += b"#" + _url_quote(fragment, _URL_SAFEST)
    return out.decode("ascii")


_URL_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789"
                       "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def url_fingerprint_fast(url: object, keep_fragments: bool = False,
                         keep_blank_values: bool = True) -> Optional[bytes]:
    """MD5 (16 bytes) of canonicalize_url_fast(url, ...), None outside the fast path."""
    canonical = canonicalize_url_fast(url, keep_fragments, keep_blank_values)
    return None if canonical is None else hashlib.md5(canonical.encode("ascii")).digest()


def request_fingerprint_fast(url: object, method: object, body: object,
                             keep_fragments: bool = False) -> Optional[bytes]:
    """Scrapy's request fingerprint (SHA-1 of its sort_keys JSON, no headers)
    when url is on the fast path, else None; method used as given (an HTTP
    token), body bytes."""
    if not isinstance(url, str):
        raise TypeError(f"url must be str, not {type(url).__name__}")
    if not isinstance(method, str):
        raise TypeError(f"method must be str, not {type(method).__name__}")
    if not isinstance(body, bytes):
        raise TypeError(f"body must be bytes, not {type(body).__name__}")
    if not method:
        raise ValueError("method must be an HTTP method name, got ''")
    if any(c not in _URL_TCHAR for c in method):
        raise ValueError(f"method must be an HTTP method name (a token), got {method!r}")
    canonical = canonicalize_url_fast(url, keep_fragments, True)
    if canonical is None:
        return None
    data = ('{"body": "' + body.hex() + '", "headers": {}, "method": "' + method
            + '", "url": "' + canonical + '"}')
    return hashlib.sha1(data.encode("ascii")).digest()


def _url_batch(urls: object) -> List[Any]:
    if not isinstance(urls, list):
        raise TypeError(f"urls must be a list, not {type(urls).__name__}")
    return list(urls)


def url_fingerprints_fast(urls: object, keep_fragments: bool = False,
                          keep_blank_values: bool = True) -> List[Optional[bytes]]:
    """[url_fingerprint_fast(u, ...) for u in urls], None for items that are
    neither str nor bytes."""
    return [url_fingerprint_fast(u, keep_fragments, keep_blank_values)
            if isinstance(u, (str, bytes)) else None for u in _url_batch(urls)]


def canonicalize_urls_fast(urls: object, keep_fragments: bool = False,
                           keep_blank_values: bool = True,
                           as_bytes: bool = False) -> List[Union[str, bytes, None]]:
    """[canonicalize_url_fast(u, ...) for u in urls], None for items that are
    neither str nor bytes; bytes results (ASCII) with as_bytes."""
    out: List[Union[str, bytes, None]] = []
    for u in _url_batch(urls):
        c = canonicalize_url_fast(u, keep_fragments, keep_blank_values) \
            if isinstance(u, (str, bytes)) else None
        out.append(c.encode("ascii") if as_bytes and c is not None else c)
    return out


def url_digests_fast(urls: object) -> List[Optional[bytes]]:
    """[MD5 of the UTF-8 bytes of u for u in urls] (no canonicalization), None
    for items that are neither str nor bytes and for a str that is not valid
    UTF-8."""
    out: List[Optional[bytes]] = []
    for u in _url_batch(urls):
        data = _url_utf8(u) if isinstance(u, (str, bytes)) else None
        out.append(None if data is None else hashlib.md5(data).digest())
    return out


def url_digests_packed(urls: object, canonical: bool = False) -> Tuple[bytes, List[int]]:
    """The digests of url_digests_fast(urls) (of url_fingerprints_fast(urls)
    with canonical) end to end, 16 bytes each (zeros where those give None),
    and the indexes where those give None."""
    if not isinstance(urls, list):
        raise TypeError(f"urls must be a list, not {type(urls).__name__}")
    digests = url_fingerprints_fast(urls) if canonical else url_digests_fast(urls)
    missing = [i for i, d in enumerate(digests) if d is None]
    return b"".join(bytes(16) if d is None else d for d in digests), missing


def request_fingerprints_fast(urls: object, method: object,
                              keep_fragments: bool = False) -> List[Optional[bytes]]:
    """[request_fingerprint_fast(u, method, b"", keep_fragments) for u in urls],
    None for items that are not str."""
    urls = _url_batch(urls)
    request_fingerprint_fast("http:", method, b"")  # checks method
    return [request_fingerprint_fast(u, method, b"", keep_fragments) if isinstance(u, str)
            else None for u in urls]
