"""Request fingerprints: ``scrapy.utils.request.fingerprint`` of a request
(20 bytes of SHA-1), computed without building a Scrapy ``Request``."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union, cast

from w3lib.url import canonicalize_url as _w3lib_canonicalize_url
from w3lib.url import safe_url_string as _w3lib_safe_url_string

from crawldedup._kernel import canonicalize_url_fast as _fast
from crawldedup._kernel import request_fingerprint_fast as _request_fp_fast
from crawldedup._kernel import request_fingerprints_fast as _request_fps_fast
from crawldedup.urls.form import FAST_PATH, as_list

# HTTP method: an RFC 9110 token.
_METHOD_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")

_METHODS: Dict[str, str] = {}  # method as given -> as Scrapy stores it (upper-cased)


def _method_name(method: Any) -> str:
    if not isinstance(method, str):
        raise TypeError(f"method must be str, not {type(method).__name__}")
    if not _METHOD_RE.match(method):
        raise ValueError(f"method must be an HTTP method name (a token such as 'GET' or "
                         f"'POST'), got {method!r}")
    name = method.upper()
    if len(_METHODS) < 1024:
        _METHODS[method] = name
    return name


def _body_bytes(body: Any) -> bytes:
    # Scrapy's Request: a false body (None, b"", "", 0, an empty buffer...)
    # is empty; otherwise bytes, or str encoded as UTF-8; anything else
    # (bytearray, memoryview, int...) raises TypeError.
    if not body:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    raise TypeError(f"body must be bytes, str or None (as Scrapy's Request takes), not "
                    f"{type(body).__name__}")


def _header_bytes(value: Any) -> bytes:
    # Scrapy's Headers._tobytes: bytes, str (UTF-8), int (bool included).
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, int):
        return str(value).encode("utf-8")
    raise TypeError(f"a header value must be str, bytes or int (or an iterable of them), "
                    f"not {type(value).__name__}")


def _header_values(value: Any) -> List[bytes]:
    # Scrapy's Headers.normvalue: None -> no value, str/bytes -> one value,
    # any other iterable -> one value per item, anything else -> one value.
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        return [_header_bytes(value)]
    if hasattr(value, "__iter__"):
        return [_header_bytes(v) for v in value]
    return [_header_bytes(value)]


def _header_name(name: Any) -> bytes:
    # Scrapy's Headers.normkey: the name title-cased as it is given (a str
    # by str.title, then UTF-8; bytes by bytes.title, which capitalises ASCII
    # letters only), so "aéb" is stored as "Aéb" and looked up as b"A\xc3\xa9B".
    if isinstance(name, str):
        return name.title().encode("utf-8")
    if isinstance(name, bytes):
        return name.title()
    raise TypeError(f"a header name must be str or bytes, not {type(name).__name__}")


def _stored_headers(headers: Any) -> Dict[bytes, List[bytes]]:
    """Scrapy's Headers(headers): title-cased name -> values, those of names
    equal after title-casing joined in order.  Scrapy's Request builds them
    for any true headers, so bad ones raise even when none is included."""
    if not headers:
        return {}
    if isinstance(headers, Mapping):
        pairs: Any = headers.items()
    else:
        pairs = headers
    try:
        iterator = iter(pairs)
    except TypeError:
        raise TypeError(f"headers must be a mapping or an iterable of (name, value) pairs, "
                        f"not {type(headers).__name__}") from None
    stored: Dict[bytes, List[bytes]] = {}
    for pair in iterator:
        try:
            name, value = pair
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"headers must be a mapping or an iterable of (name, value) "
                            f"pairs, got an item {pair!r}") from None
        stored.setdefault(_header_name(name), []).extend(_header_values(value))
    return stored


def included_names(include_headers: Any) -> List[bytes]:
    """Scrapy's processing of include_headers: sorted, each lower-cased and
    UTF-8 encoded (a str is an iterable of one-letter names there too)."""
    if not include_headers:
        return []
    try:
        wanted = sorted(include_headers)
    except TypeError as exc:
        raise TypeError(f"include_headers must be an iterable of str or bytes names: "
                        f"{exc}") from None
    names = []
    for name in wanted:
        if isinstance(name, str):
            names.append(name.lower().encode("utf-8"))
        elif isinstance(name, bytes):
            names.append(name.lower())
        else:
            raise TypeError(f"include_headers names must be str or bytes, not "
                            f"{type(name).__name__}")
    return names


def _headers_part(stored: Dict[bytes, List[bytes]],
                  names: List[bytes]) -> Dict[str, List[str]]:
    """The "headers" member of Scrapy's fingerprint JSON."""
    out = {}
    for name in names:
        key = name.title()   # Scrapy looks the bytes name up: bytes.title
        if key in stored:
            out[name.hex()] = [v.hex() for v in stored[key]]
    return out


def request_fingerprint(
    url: str,
    method: str = "GET",
    body: Union[bytes, str, None] = b"",
    headers: Optional[Union[Mapping[Any, Any], Iterable[Tuple[Any, Any]]]] = None,
    *,
    include_headers: Optional[Iterable[Union[str, bytes]]] = None,
    keep_fragments: bool = False,
) -> bytes:
    """``scrapy.utils.request.fingerprint(Request(url, method, body=body,
    headers=headers), include_headers=..., keep_fragments=...)``: 20 bytes,
    the SHA-1 of Scrapy's JSON of the method, canonical URL, body and the
    included headers, computed without Scrapy.

    Arguments are taken as Scrapy's ``Request`` takes them: ``body`` bytes or
    str (UTF-8, Scrapy's default encoding), any false body being empty;
    ``headers`` a mapping or an iterable of (name, value) pairs, names str or
    bytes, values str, bytes, int (``True`` included) or an iterable of
    them, checked even when no header is included; only the headers named in
    ``include_headers`` count (Scrapy's default: none).  Where Scrapy raises,
    this raises (``TypeError`` for a bad type, ``ValueError`` for a URL
    without a scheme or with a bad port); a method that is not an HTTP token
    raises ``ValueError`` (Scrapy upper-cases any ``str(method)``).

    >>> request_fingerprint("http://example.com/?b=2&a=1") == request_fingerprint("http://example.com?a=1&b=2")
    True
    >>> len(request_fingerprint("http://example.com/api", "POST", b'{"q": 1}'))
    20
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be str, not {type(url).__name__}")
    name = _METHODS.get(method) if type(method) is str else None
    if name is None:
        name = _method_name(method)
    if type(body) is not bytes:
        body = _body_bytes(body)
    # Checked as Scrapy's Request checks them, whether they count or not.
    stored = _stored_headers(headers) if headers is not None else {}
    names = included_names(include_headers)
    canonical = None
    if FAST_PATH:
        if not names:
            digest = _request_fp_fast(url, name, body, keep_fragments)
            if digest is not None:
                return digest
        else:
            canonical = _fast(url, keep_fragments, True)
    if canonical is None:
        # Scrapy's Request stores safe_url_string(url), then checks the scheme.
        safe = _w3lib_safe_url_string(url, "utf-8")
        if "://" not in safe and not safe.startswith(("about:", "data:")):
            raise ValueError(f"url has no scheme (Scrapy's 'Missing scheme'): {url!r}")
        # The safe URL is often on the fast path even when url was not
        # (spaces and control characters are gone from it).
        canonical = _fast(safe, keep_fragments, True) if FAST_PATH else None
        if canonical is None:
            canonical = _w3lib_canonicalize_url(safe, keep_fragments=keep_fragments)
    payload = {"method": name, "url": canonical, "body": body.hex(),
               "headers": _headers_part(stored, names)}
    return hashlib.sha1(json.dumps(payload, sort_keys=True).encode()).digest()


def request_fingerprints(urls: Iterable[str], method: str = "GET", *,
                         keep_fragments: bool = False) -> List[bytes]:
    """``[request_fingerprint(url, method, keep_fragments=keep_fragments) for
    url in urls]`` (empty bodies, no headers), faster: the URLs on the fast
    path are fingerprinted in one compiled loop that releases the GIL.

    >>> fps = request_fingerprints(["https://example.com/?b=2&a=1", "https://example.com/x"])
    >>> fps[0] == request_fingerprint("https://example.com/?b=2&a=1"), len(fps[1])
    (True, 20)
    """
    items = as_list(urls)
    name = _method_name(method)
    if not FAST_PATH:
        return [request_fingerprint(u, name, keep_fragments=keep_fragments) for u in items]
    out = _request_fps_fast(items, name, keep_fragments)
    for i, digest in enumerate(out):
        if digest is None:
            out[i] = request_fingerprint(items[i], name, keep_fragments=keep_fragments)
    return cast(List[bytes], out)
