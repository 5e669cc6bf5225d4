"""A request fingerprinter for Scrapy's ``REQUEST_FINGERPRINTER_CLASS``.

:class:`RequestFingerprinter` returns, for every request, exactly the bytes
of Scrapy's default fingerprinter (``scrapy.utils.request.fingerprint``: the
SHA-1 of a JSON of the method, the canonical URL, the body and the included
headers), computed by crawldedup's compiled :func:`~crawldedup.request_fingerprint`
kernel, about 20 times faster.  Whatever it cannot reproduce byte for byte
goes to Scrapy's own function instead, so the answer is always Scrapy's:

- a request with the ``verbatim_url`` meta key (its URL is not canonicalized);
- a method that is not an upper-case HTTP token (``request.method`` can be
  reassigned after the request is built);
- a URL that is not on the compiled fast path (IDNA hosts, userinfo, IPv6...);
- ``include_headers`` names that are not ASCII;
- ``REQUEST_FINGERPRINTER_IMPLEMENTATION = "2.6"`` (Scrapy before 2.12).

Like Scrapy's, the fingerprint is cached per request object (weakly: the
cache never keeps a request alive), per ``include_headers`` and
``keep_fragments``.

Settings::

    REQUEST_FINGERPRINTER_CLASS = "crawldedup.scrapy.RequestFingerprinter"
    CRAWLDEDUP_FINGERPRINT_INCLUDE_HEADERS = []      # e.g. ["Accept-Language"]
    CRAWLDEDUP_FINGERPRINT_KEEP_FRAGMENTS = False
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Optional, Tuple, Union
from weakref import ref

from crawldedup._extras import install_hint
from crawldedup._kernel import canonicalize_url_fast as _canonical_fast
from crawldedup._kernel import request_fingerprint_fast as _fp_fast
from crawldedup.fingerprint import FAST_PATH, request_fingerprint
from crawldedup.urls.request_fingerprints import included_names

try:
    from scrapy.utils.request import fingerprint as _scrapy_fingerprint
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"crawldedup.scrapy needs Scrapy: {install_hint('scrapy')}") from exc

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

__all__ = ["RequestFingerprinter", "fingerprint"]

# An upper-case RFC 9110 token: what crawldedup's kernel gives Scrapy's value
# for (it upper-cases the method; Scrapy takes request.method as it is).
_PLAIN_METHOD = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Z]+\Z")
_METHOD_OK: Dict[Any, bool] = {}

HeaderNames = Tuple[bytes, ...]
# include_headers (as Scrapy processes them) and keep_fragments -> the cache
# of fingerprints of live requests, keyed by a weak reference to the request.
_caches: Dict[Tuple[Optional[HeaderNames], bool], Dict[Any, bytes]] = {}


def _method_ok(method: Any) -> bool:
    ok = _METHOD_OK.get(method) if type(method) is str else None
    if ok is None:
        ok = type(method) is str and _PLAIN_METHOD.match(method) is not None
        if len(_METHOD_OK) < 256 and type(method) is str:
            _METHOD_OK[method] = ok
    return ok


def _header_names(include_headers: Optional[Iterable[Union[str, bytes]]]) -> Optional[HeaderNames]:
    """Scrapy's processing of include_headers: sorted, lower-cased, as bytes."""
    if not include_headers:
        return None
    if isinstance(include_headers, (str, bytes)):
        raise TypeError("include_headers must be an iterable of header names, "
                        f"not a single {type(include_headers).__name__}")
    return tuple(included_names(include_headers))


def _cache_for(names: Optional[HeaderNames], keep_fragments: bool) -> Tuple[Dict[Any, bytes],
                                                                           Callable[[Any], None]]:
    key = (names, keep_fragments)
    cache = _caches.get(key)
    if cache is None:
        cache = _caches.setdefault(key, {})

    def forget(wr: Any, _cache: Dict[Any, bytes] = cache) -> None:
        _cache.pop(wr, None)

    return cache, forget


class RequestFingerprinter:
    """Scrapy's default request fingerprint, byte for byte, from crawldedup's
    compiled kernel (see the module docstring).

    ``include_headers`` and ``keep_fragments`` have the meaning of the
    arguments of ``scrapy.utils.request.fingerprint``; from a crawler they
    come from ``CRAWLDEDUP_FINGERPRINT_INCLUDE_HEADERS`` and
    ``CRAWLDEDUP_FINGERPRINT_KEEP_FRAGMENTS``.

    >>> from scrapy import Request
    >>> from scrapy.utils.request import fingerprint
    >>> request = Request("https://example.com/?b=2&a=1#top")
    >>> RequestFingerprinter().fingerprint(request) == fingerprint(request)
    True
    """

    def __init__(self, crawler: Optional["Crawler"] = None, *,
                 include_headers: Optional[Iterable[Union[str, bytes]]] = None,
                 keep_fragments: Optional[bool] = None) -> None:
        legacy = False
        if crawler is not None:
            settings = crawler.settings
            if include_headers is None:
                include_headers = settings.getlist("CRAWLDEDUP_FINGERPRINT_INCLUDE_HEADERS")
            if keep_fragments is None:
                keep_fragments = settings.getbool("CRAWLDEDUP_FINGERPRINT_KEEP_FRAGMENTS")
            # Scrapy before 2.12 still offered the 2.6 algorithm (a different
            # JSON); only Scrapy's own code gives it.
            legacy = str(settings.get("REQUEST_FINGERPRINTER_IMPLEMENTATION", "")) == "2.6"
        if keep_fragments is not None and not isinstance(keep_fragments, bool):
            raise TypeError(f"keep_fragments must be a bool, not {type(keep_fragments).__name__}")
        self.keep_fragments: bool = bool(keep_fragments)
        self._names = _header_names(include_headers)
        self.include_headers: Optional[HeaderNames] = self._names
        self._scrapy: Optional[Any] = None
        if legacy:
            from scrapy.utils.request import RequestFingerprinter as ScrapyFingerprinter
            self._scrapy = ScrapyFingerprinter(crawler)
        # Names that are not ASCII: Scrapy's Headers title-case str and bytes
        # names differently, which only Scrapy reproduces.
        self._ascii_names = self._names is None or all(n.isascii() for n in self._names)
        self._cache, self._forget = _cache_for(self._names, self.keep_fragments)

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "RequestFingerprinter":
        return cls(crawler)

    def _scrapy_fingerprint(self, request: "Request") -> bytes:
        if self._scrapy is not None:
            return self._scrapy.fingerprint(request)  # type: ignore[no-any-return]
        return _scrapy_fingerprint(request, include_headers=self._names,
                                   keep_fragments=self.keep_fragments)

    def fingerprint(self, request: "Request") -> bytes:
        """The 20-byte fingerprint Scrapy's default fingerprinter gives request
        (cached for the request's lifetime, as Scrapy's)."""
        meta = request.meta
        if meta and meta.get("verbatim_url"):
            return self._scrapy_fingerprint(request)
        digest = self._cache.get(ref(request))
        if digest is not None:
            return digest
        digest = self._kernel_fingerprint(request)
        if digest is None:
            return self._scrapy_fingerprint(request)
        self._cache[ref(request, self._forget)] = digest
        return digest

    def uncached_fingerprint(self, request: "Request") -> bytes:
        """:meth:`fingerprint` without the cache, for a caller that meets each
        request once (the duplicate filter does: a weak reference per request
        costs more than the kernel)."""
        meta = request.meta
        if meta and meta.get("verbatim_url"):
            return self._scrapy_fingerprint(request)
        digest = self._kernel_fingerprint(request)
        if digest is None:
            return self._scrapy_fingerprint(request)
        return digest

    def _kernel_fingerprint(self, request: "Request") -> Optional[bytes]:
        """The kernel's fingerprint, or None where only Scrapy's own code
        gives the right bytes."""
        method = request.method
        if self._scrapy is not None or not FAST_PATH or not _method_ok(method):
            return None
        if self._names is None:
            return _fp_fast(request.url, method, request.body, self.keep_fragments)
        url = request.url
        if self._ascii_names and _canonical_fast(url, self.keep_fragments, True) is not None:
            # request_fingerprint canonicalizes url by the same fast path.
            return request_fingerprint(url, method, request.body, request.headers,
                                       include_headers=self._names,
                                       keep_fragments=self.keep_fragments)
        return None

    def __repr__(self) -> str:
        return (f"RequestFingerprinter(include_headers={self.include_headers!r}, "
                f"keep_fragments={self.keep_fragments})")


def fingerprint(request: "Request", *,
                include_headers: Optional[Iterable[Union[str, bytes]]] = None,
                keep_fragments: bool = False) -> bytes:
    """``scrapy.utils.request.fingerprint(request, include_headers=...,
    keep_fragments=...)``, from crawldedup's kernel where it gives the same
    bytes (see the module docstring).

    >>> from scrapy import Request
    >>> fingerprint(Request("https://example.com/a?y=2&x=1")).hex()
    '56c4591dad2740434a909f89aa7c2847cf3fb1a9'
    """
    return RequestFingerprinter(include_headers=include_headers,
                                keep_fragments=keep_fragments).fingerprint(request)
