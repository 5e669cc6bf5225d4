"""Canonical URLs and exact request fingerprints, compatible with w3lib and Scrapy.

:func:`canonicalize_url` returns, by default, byte for byte what
``w3lib.url.canonicalize_url`` returns, but the URLs crawlers meet (http and
https with a plain host; ASCII, percent-encoded or UTF-8 paths and queries)
go through a compiled fast path, about 20 times faster; anything else (IDNA
hosts, userinfo, IPv6, whitespace, other schemes...) is handed to w3lib
itself, so the answer is always w3lib's.  Opt-in extras go beyond w3lib:
dropping tracking parameters, dropping default ports, and per-site rules that
map every URL of one product to one canonical URL and classify URLs (list page,
item page...).

:func:`request_fingerprint` is ``scrapy.utils.request.fingerprint`` of the same
request (20 bytes of SHA-1), computed without building a Scrapy ``Request``,
so Scrapy users keep their existing fingerprints.  :func:`url_fingerprint` is
the MD5 of the canonical URL (16 bytes), the scheme the seeds use.

>>> canonicalize_url("HTTP://Example.com/b?z=1&a=%e4%b8%ad#top")
'http://example.com/b?a=%E4%B8%AD&z=1'
>>> canonicalize_url("https://shop.example/item?id=7&utm_source=x&spm=a.b", strip_params=True)
'https://shop.example/item?id=7'
>>> request_fingerprint("https://example.com/?b=2&a=1").hex()
'a6ab45564523e37c0ded48d60b091ec021ca7a0f'
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
from dataclasses import dataclass, field
from typing import (Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Tuple,
                    Union, cast)
from urllib.parse import ParseResult, quote_plus

import w3lib
from w3lib.url import canonicalize_url as _w3lib_canonicalize_url
from w3lib.url import safe_url_string as _w3lib_safe_url_string

from crawldedup._kernel import canonicalize_url_fast as _fast
from crawldedup._kernel import canonicalize_urls_fast as _fast_many
from crawldedup._kernel import request_fingerprint_fast as _request_fp_fast
from crawldedup._kernel import request_fingerprints_fast as _request_fps_fast
from crawldedup._kernel import url_fingerprint_fast as _url_fp_fast
from crawldedup._kernel import url_digests_fast as _url_digests_fast
from crawldedup._kernel import url_fingerprints_fast as _url_fps_fast

__all__ = [
    "DEFAULT_TRACKING_PARAMS",
    "CanonicalUrl",
    "UrlRule",
    "UrlRules",
    "canonicalize_url",
    "canonicalize_urls",
    "request_fingerprint",
    "request_fingerprints",
    "url_fingerprint",
    "url_fingerprints",
]

# The compiled fast path reproduces the rules of w3lib 2.5 (read from its
# source and checked by differential tests).  Another w3lib could canonicalize
# differently, so with it every URL goes to w3lib itself: slower, never wrong.
FAST_PATH_W3LIB = "2.5"
FAST_PATH: bool = ".".join(str(w3lib.__version__).split(".")[:2]) == FAST_PATH_W3LIB

#: Query parameters dropped by ``strip_params=True``: analytics and ad-click
#: identifiers that never change what a page shows.  Names ending in ``*`` are
#: prefixes.  Matched against the decoded parameter name, ignoring ASCII case.
DEFAULT_TRACKING_PARAMS: Tuple[str, ...] = (
    "utm_*",            # Google Analytics campaign tags (utm_source, utm_medium, ...)
    "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "gad_source",   # Google Ads
    "fbclid",           # Facebook
    "msclkid",          # Microsoft Ads
    "yclid", "ysclid",  # Yandex
    "twclid", "ttclid", "li_fat_id", "igshid", "igsh",  # X, TikTok, LinkedIn, Instagram
    "mc_cid", "mc_eid",  # Mailchimp
    "_ga", "_gl", "_hsenc", "_hsmi", "mkt_tok", "oly_anon_id", "oly_enc_id",
    "spm", "scm",       # Alibaba (Taobao, Tmall, AliExpress) tracking positions
    "vd_source", "share_source", "share_medium", "share_plat", "share_from",
    "share_tag", "share_session_id", "spm_id_from", "from_spmid",   # Bilibili & co.
)

_W3LIB_QUERY_SEPARATOR = "query_separator" in inspect.signature(_w3lib_canonicalize_url).parameters
_UTF8_NAMES = frozenset({"utf8", "utf-8", "utf_8", "u8", "utf"})
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}
# HTTP method: an RFC 9110 token.
_METHOD_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")


# ------------------------------------------------------------ canonical URLs

class _ParamFilter:
    """Which query parameter names to drop: exact names and prefixes, both
    compared with the canonical (quote_plus-encoded) name, lower-cased."""

    __slots__ = ("exact", "prefixes")

    def __init__(self, names: Tuple[str, ...]) -> None:
        exact, prefixes = set(), []
        for name in names:
            if name.endswith("*"):
                prefixes.append(quote_plus(name[:-1].encode("utf-8"), safe="").lower())
            else:
                exact.add(quote_plus(name.encode("utf-8"), safe="").lower())
        self.exact = frozenset(exact)
        self.prefixes = tuple(prefixes)

    def drops(self, key: str) -> bool:
        key = key.lower()
        return key in self.exact or (bool(self.prefixes) and key.startswith(self.prefixes))


@functools.lru_cache(maxsize=64)
def _param_filter(names: Tuple[str, ...]) -> _ParamFilter:
    return _ParamFilter(names)


_DEFAULT_FILTER = _ParamFilter(DEFAULT_TRACKING_PARAMS)


def _check_strip_params(strip_params: Any) -> Optional[_ParamFilter]:
    if strip_params is None or strip_params is False:
        return None
    if strip_params is True:
        return _DEFAULT_FILTER
    if isinstance(strip_params, (str, bytes)):
        raise TypeError("strip_params must be True, None or an iterable of parameter names, "
                        f"not a single {type(strip_params).__name__}")
    try:
        names = tuple(strip_params)
    except TypeError:
        raise TypeError("strip_params must be True, None or an iterable of parameter names, "
                        f"not {type(strip_params).__name__}") from None
    for name in names:
        if not isinstance(name, str) or not name or name == "*":
            raise ValueError(f"strip_params entries must be non-empty parameter names, "
                             f"got {name!r}")
    return _param_filter(names)


def _split(url: str) -> Tuple[str, str, str, str]:
    """(scheme://netloc, path and params, query, fragment) of a canonical URL;
    the query and fragment without their "?"/"#"."""
    rest, _, fragment = url.partition("#")
    rest, _, query = rest.partition("?")
    start = rest.find("://")
    if start < 0:
        return "", rest, query, fragment
    slash = rest.find("/", start + 3)
    if slash < 0:
        return rest, "", query, fragment
    return rest[:slash], rest[slash:], query, fragment


def _join(origin: str, path: str, query: str, fragment: str) -> str:
    return (origin + path + ("?" + query if query else "")
            + ("#" + fragment if fragment else ""))


def _host_port(origin: str) -> Tuple[str, str, Optional[str]]:
    """(scheme, host, port) of "scheme://userinfo@host:port"."""
    scheme, _, netloc = origin.partition("://")
    hostport = netloc.rpartition("@")[2]
    if hostport.endswith("]"):
        return scheme, hostport, None
    host, colon, port = hostport.rpartition(":")
    if not colon or "]" in port:
        return scheme, hostport, None
    return scheme, host, port


def _drop_params(url: str, params: _ParamFilter) -> str:
    """url without the query fields params drops (a canonical URL's query
    comes after the first "?" that is not in the fragment)."""
    end = url.find("#")
    if end < 0:
        end = len(url)
    start = url.find("?", 0, end)
    if start < 0:
        return url
    fields = url[start + 1:end].split("&")
    kept = [f for f in fields if not params.drops(f.partition("=")[0])]
    if len(kept) == len(fields):
        return url
    query = "&".join(kept)
    return url[:start] + ("?" + query if query else "") + url[end:]


def _drop_default_port(url: str) -> str:
    """url without an explicit port that is its scheme's default."""
    start = url.find("://")
    if start < 0:
        return url
    end = len(url)
    for c in "/?#":
        i = url.find(c, start + 3, end)
        if i >= 0:
            end = i
    colon = url.rfind(":", start + 3, end)
    if colon < 0:
        return url
    port = url[colon + 1:end]
    if not (port.isascii() and port.isdigit()):
        return url  # no port (a ":" of userinfo or an IPv6 address)
    if _DEFAULT_PORTS.get(url[:start]) != int(port):
        return url
    return url[:colon] + url[end:]


def _check_separator(query_separator: Any) -> None:
    if not isinstance(query_separator, str):
        raise TypeError(f"query_separator must be a non-empty str such as '&' or ';', not "
                        f"{type(query_separator).__name__}")
    if not query_separator:
        raise ValueError("query_separator must be a non-empty str such as '&' or ';', got ''")


def _canonical(url: Any, keep_fragments: bool, keep_blank_values: bool,
               encoding: Optional[str], query_separator: Any) -> str:
    """w3lib's canonical URL, through the fast path when it applies."""
    if encoding is not None and not isinstance(encoding, str):
        raise TypeError(f"encoding must be a codec name (str) or None, not "
                        f"{type(encoding).__name__}")
    if isinstance(url, (str, bytes)):
        if (FAST_PATH and query_separator == "&"
                and (encoding is None or encoding.lower() in _UTF8_NAMES)):
            result = _fast(url, keep_fragments, keep_blank_values)
            if result is not None:
                return result
    elif not isinstance(url, ParseResult):
        # w3lib takes str, bytes and urllib's ParseResult; bytearray,
        # memoryview and the rest raise TypeError there too.
        raise TypeError(f"url must be str, bytes or urllib.parse.ParseResult, not "
                        f"{type(url).__name__}")
    if query_separator == "&":  # w3lib before 2.4 has no query_separator
        return _w3lib_canonicalize_url(url, keep_blank_values=keep_blank_values,
                                       keep_fragments=keep_fragments, encoding=encoding)
    if not _W3LIB_QUERY_SEPARATOR:
        _check_separator(query_separator)
        raise ValueError(f"query_separator other than '&' needs w3lib 2.4 or later "
                         f"(installed: {w3lib.__version__})")
    try:
        return _w3lib_canonicalize_url(url, keep_blank_values=keep_blank_values,
                                       keep_fragments=keep_fragments, encoding=encoding,
                                       query_separator=query_separator)
    except (AttributeError, TypeError, ValueError):
        # w3lib uses the separator only on a URL with a query (so "" or a
        # non-str one passes on a URL without); where it fails, say why.
        _check_separator(query_separator)
        raise


def canonicalize_url(
    url: Union[str, bytes, ParseResult],
    keep_blank_values: bool = True,
    keep_fragments: bool = False,
    encoding: Optional[str] = None,
    *,
    query_separator: str = "&",
    strip_params: Union[None, bool, Iterable[str]] = None,
    remove_default_port: bool = False,
    rules: Optional[Union["UrlRules", Iterable["UrlRule"]]] = None,
) -> str:
    """The canonical form of url: with the defaults, exactly
    ``w3lib.url.canonicalize_url(url, keep_blank_values, keep_fragments,
    encoding, query_separator=...)``, with the same arguments in the same
    order.

    w3lib's rules: scheme and host lower-cased, query arguments sorted by key
    then value, percent-escapes upper-cased and decoded where safe, non-ASCII
    percent-encoded as UTF-8, dot segments resolved, an empty path made "/",
    the fragment dropped unless ``keep_fragments``.

    Extras, all off by default (so the default result stays w3lib's):

    - ``strip_params``: ``True`` drops :data:`DEFAULT_TRACKING_PARAMS`; an
      iterable of names drops those instead (a trailing ``*`` makes a prefix;
      ``(*DEFAULT_TRACKING_PARAMS, "sid")`` extends the defaults).  Names are
      compared with the decoded parameter name, ignoring ASCII case.
    - ``remove_default_port``: drop ``:80`` from http/ws, ``:443`` from
      https/wss and ``:21`` from ftp URLs.
    - ``rules``: a :class:`UrlRules` (or a list of :class:`UrlRule`) whose
      first matching rule rewrites the URL to its canonical form.

    Rules apply first (they see every parameter), then ``strip_params``, then
    ``remove_default_port``.  ``url`` is a ``str``, ``bytes`` (decoded with
    ``encoding``, bytes that are not percent-encoded, as w3lib does) or a
    ``urllib.parse.ParseResult``; anything else raises ``TypeError``, and
    w3lib's ``ValueError`` (e.g. for a port above 65535) is raised as is.

    >>> canonicalize_url("http://www.example.com/do?c=3&b=5&b=2&a=50")
    'http://www.example.com/do?a=50&b=2&b=5&c=3'
    >>> canonicalize_url("http://example.com:80/x?utm_medium=cpc", strip_params=True,
    ...                  remove_default_port=True)
    'http://example.com/x'
    """
    result = None
    if type(url) is str and FAST_PATH and encoding is None and query_separator == "&":
        result = _fast(url, keep_fragments, keep_blank_values)
    if result is None:
        result = _canonical(url, keep_fragments, keep_blank_values, encoding, query_separator)
    if rules is None and strip_params is None and not remove_default_port:
        return result
    if rules is not None and not isinstance(rules, UrlRules):
        rules = UrlRules(rules)
    return _extras(result, keep_fragments, _check_strip_params(strip_params),
                   remove_default_port, rules)


def _extras(result: str, keep_fragments: bool, params: Optional[_ParamFilter],
            remove_default_port: bool, rules: Optional["UrlRules"]) -> str:
    """The opt-in extras of canonicalize_url on w3lib's canonical URL."""
    if rules is not None:
        hit = rules._apply(result, keep_fragments)
        if hit is not None:
            result = hit[0]
    if params is not None:
        result = _drop_params(result, params)
    if remove_default_port:
        result = _drop_default_port(result)
    return result


def canonicalize_urls(
    urls: Iterable[Union[str, bytes]],
    keep_blank_values: bool = True,
    keep_fragments: bool = False,
    encoding: Optional[str] = None,
    *,
    query_separator: str = "&",
    strip_params: Union[None, bool, Iterable[str]] = None,
    remove_default_port: bool = False,
    rules: Optional[Union["UrlRules", Iterable["UrlRule"]]] = None,
    errors: str = "raise",
) -> List[Optional[str]]:
    """``[canonicalize_url(url, ...) for url in urls]``, faster: the URLs on
    the fast path (``str`` or UTF-8 ``bytes``) are canonicalized in one
    compiled loop that releases the GIL, a large batch on several threads
    (see :func:`crawldedup.set_threads`); the others go to w3lib one by one.

    ``errors="raise"`` raises what :func:`canonicalize_url` raises for the
    first URL that has no canonical form (naming its index);
    ``errors="none"`` gives ``None`` for those URLs (a port out of range, a
    str with lone surrogates...) and keeps going.  Every argument is checked
    before any URL is canonicalized.

    >>> canonicalize_urls(["http://A.com/?b=1&a=2", b"https://a.com/%7e", "http://[::1/"],
    ...                   errors="none")
    ['http://a.com/?a=2&b=1', 'https://a.com/~', None]
    """
    if errors not in ("raise", "none"):
        raise ValueError(f"errors must be 'raise' or 'none', got {errors!r}")
    items = _as_list(urls)
    if encoding is not None and not isinstance(encoding, str):
        raise TypeError(f"encoding must be a codec name (str) or None, not "
                        f"{type(encoding).__name__}")
    params = _check_strip_params(strip_params)
    if rules is not None and not isinstance(rules, UrlRules):
        rules = UrlRules(rules)
    fast = (FAST_PATH and query_separator == "&"
            and (encoding is None or encoding.lower() in _UTF8_NAMES))
    out = cast(List[Optional[str]], _fast_many(items, keep_fragments, keep_blank_values)
               if fast else [None] * len(items))
    # The kernel answers None for every item it cannot take, wrong types
    # included: checking those (all of them, before w3lib sees any) checks
    # the whole batch.
    missing = [i for i, result in enumerate(out) if result is None]
    _check_url_types(items, missing)
    for i in missing:
        try:
            out[i] = _canonical(items[i], keep_fragments, keep_blank_values, encoding,
                                query_separator)
        except (TypeError, ValueError) as exc:
            if errors == "none" and not isinstance(exc, TypeError):
                continue
            raise _at_index(exc, i) from exc
    if params is not None or remove_default_port or rules is not None:
        out = [None if result is None else
               _extras(result, keep_fragments, params, remove_default_port, rules)
               for result in out]
    return out


def _at_index(exc: Exception, i: int) -> Exception:
    """exc, its message led by the batch index (when its type allows)."""
    if type(exc) in (TypeError, ValueError):
        return type(exc)(f"urls[{i}]: {exc}")
    if isinstance(exc, ValueError):  # UnicodeDecodeError from an older w3lib, say
        return ValueError(f"urls[{i}]: {type(exc).__name__}: {exc}")
    return exc


def url_fingerprint(url: Union[str, bytes], *, canonical: bool = True, **kwargs: Any) -> bytes:
    """MD5 (16 bytes) of the UTF-8 canonical URL; ``kwargs`` go to
    :func:`canonicalize_url`.  ``canonical=False``: the MD5 of the URL's own
    UTF-8 bytes, as given (the ``crawldedup urls --exact`` key).

    >>> url_fingerprint("http://example.com/?b=2&a=1") == url_fingerprint("http://EXAMPLE.com?a=1&b=2")
    True
    >>> url_fingerprint("http://a.com/x", canonical=False) == hashlib.md5(b"http://a.com/x").digest()
    True
    """
    if not canonical:
        if kwargs:
            raise TypeError(f"url_fingerprint(canonical=False) takes no canonicalization "
                            f"options, got {', '.join(sorted(kwargs))}")
        if isinstance(url, str):
            return hashlib.md5(url.encode("utf-8")).digest()
        if isinstance(url, bytes):
            return hashlib.md5(url).digest()
        raise TypeError(f"url must be str or bytes, not {type(url).__name__}")
    if not kwargs and FAST_PATH and type(url) is str:
        digest = _url_fp_fast(url)
        if digest is not None:
            return digest
    return hashlib.md5(canonicalize_url(url, **kwargs).encode("utf-8")).digest()


def _as_list(urls: Any) -> List[Any]:
    if isinstance(urls, (str, bytes, bytearray, memoryview, ParseResult)):
        raise TypeError(f"urls must be an iterable of URLs, not a single {type(urls).__name__}")
    try:
        return list(urls)
    except TypeError:
        raise TypeError(f"urls must be an iterable of URLs, not {type(urls).__name__}") from None


def url_fingerprints(urls: Iterable[Union[str, bytes]], *, canonical: bool = True,
                     **kwargs: Any) -> List[bytes]:
    """``[url_fingerprint(url, canonical=canonical, **kwargs) for url in
    urls]``, faster: with no kwargs, the URLs (``str`` or UTF-8 ``bytes``)
    on the fast path are canonicalized and hashed in one compiled loop that
    releases the GIL, a large batch on several threads (see
    :func:`crawldedup.set_threads`); with ``canonical=False`` every URL is
    hashed there.

    >>> a, b = url_fingerprints(["http://a.com/?b=1&a=2", b"http://A.com?a=2&b=1"])
    >>> a == b == hashlib.md5(b"http://a.com/?a=2&b=1").digest()
    True
    """
    items = _as_list(urls)
    if not canonical:
        if kwargs:
            raise TypeError(f"url_fingerprints(canonical=False) takes no canonicalization "
                            f"options, got {', '.join(sorted(kwargs))}")
        digests = _url_digests_fast(items)
        missing = [i for i, digest in enumerate(digests) if digest is None]
        _check_url_types(items, missing, (str, bytes))
        for i in missing:  # a str with lone surrogates: UnicodeEncodeError
            digests[i] = url_fingerprint(items[i], canonical=False)
        return cast(List[bytes], digests)
    if kwargs or not FAST_PATH:
        return [_fingerprint_at(i, u, kwargs) for i, u in enumerate(items)]
    out = _url_fps_fast(items, False, True)
    missing = [i for i, digest in enumerate(out) if digest is None]
    _check_url_types(items, missing)
    for i in missing:
        out[i] = _fingerprint_at(i, items[i], kwargs)
    return cast(List[bytes], out)


def _check_url_types(items: List[Any], indices: List[int],
                     types: Tuple[type, ...] = (str, bytes, ParseResult)) -> None:
    for i in indices:
        if not isinstance(items[i], types):
            names = ", ".join(t.__name__ for t in types[:-1]) + " or " + (
                "urllib.parse.ParseResult" if types[-1] is ParseResult else types[-1].__name__)
            raise TypeError(f"urls[{i}]: url must be {names}, not {type(items[i]).__name__}")


def _fingerprint_at(i: int, url: Any, kwargs: Dict[str, Any]) -> bytes:
    try:
        return url_fingerprint(url, **kwargs)
    except (TypeError, ValueError) as exc:
        raise _at_index(exc, i) from exc


# ------------------------------------------------------------ per-site rules

class CanonicalUrl(NamedTuple):
    """What :meth:`UrlRules.resolve` returns: the canonical URL and the class
    of the rule that matched (``None`` when no rule gave one)."""

    url: str
    url_class: Optional[str]


@dataclass(frozen=True)
class UrlRule:
    r"""One per-site URL rule.

    ``host``: an exact host (``"item.jd.com"``) or ``"*.jd.com"`` for every
    subdomain of jd.com (not jd.com itself); compared lower-case, without port
    (a non-ASCII host is converted to its IDNA form, as canonical URLs carry it).
    ``pattern``: a regular expression matched (``re.match``, so anchored at the
    start) against the canonical URL's path, ``;params`` and ``?query`` (query
    arguments sorted, as w3lib leaves them).  ``replacement``: optional
    ``re`` template (``\1``, ``\g<name>``) giving the canonical URL: a whole
    URL (``"https://item.jd.com/\1.html"``) or a path starting with "/" on
    the same scheme and host; the result is canonicalized again.
    ``url_class``: optional label read back by :meth:`UrlRules.classify`
    (e.g. ``"item"``, ``"list"``).

    >>> rule = UrlRule("item.jd.com", r"/(\d+)\.html", r"https://item.jd.com/\1.html", "item")
    >>> canonicalize_url("http://item.jd.com/100012043978.html?spm=1.2&from=list", rules=[rule])
    'https://item.jd.com/100012043978.html'
    """

    host: str
    pattern: str
    replacement: Optional[str] = None
    url_class: Optional[str] = None
    regex: "re.Pattern[str]" = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.host, str):
            raise TypeError(f"host must be str, not {type(self.host).__name__}")
        host = self.host.strip().lower()
        bare = host[2:] if host.startswith("*.") else host
        if not bare or "*" in bare or "/" in bare or ":" in bare:
            raise ValueError("host must be a host name such as 'item.jd.com' or '*.jd.com' "
                             f"(no scheme, port or path), got {self.host!r}")
        if not bare.isascii():  # canonical URLs carry IDNA (punycode) hosts
            try:
                idna = bare.encode("idna").decode("ascii")
            except UnicodeError:
                raise ValueError(f"host {self.host!r} is not a valid internationalized "
                                 "host name") from None
            host = host[:len(host) - len(bare)] + idna
        object.__setattr__(self, "host", host)
        if not isinstance(self.pattern, str):
            raise TypeError(f"pattern must be str, not {type(self.pattern).__name__}")
        try:
            regex = re.compile(self.pattern)
        except re.error as exc:
            raise ValueError(f"pattern {self.pattern!r} is not a valid regular expression: "
                             f"{exc}") from None
        object.__setattr__(self, "regex", regex)
        if self.replacement is not None and not isinstance(self.replacement, str):
            raise TypeError(f"replacement must be str or None, not "
                            f"{type(self.replacement).__name__}")
        if self.url_class is not None and not isinstance(self.url_class, str):
            raise TypeError(f"url_class must be str or None, not {type(self.url_class).__name__}")
        if self.replacement is None and self.url_class is None:
            raise ValueError("a UrlRule needs a replacement, a url_class or both")

    @classmethod
    def from_line(cls, line: str, replacement: Optional[str] = None,
                  url_class: Optional[str] = None) -> "UrlRule":
        """A rule from a ``host|pattern`` line, the template format of
        vertical crawlers (``book.jd.com|^/[0-9]+\\.html.*$``)."""
        host, bar, pattern = line.partition("|")
        if not bar:
            raise ValueError(f"a rule line is 'host|pattern', got {line!r}")
        return cls(host.strip(), pattern.strip(), replacement, url_class)

    def matches_host(self, host: str) -> bool:
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host


class UrlRules:
    r"""An ordered list of :class:`UrlRule`; the first rule whose host and
    pattern match a URL decides its canonical form and class.

    >>> rules = UrlRules([
    ...     UrlRule("item.jd.com", r"/(\d+)\.html", r"https://item.jd.com/\1.html", "item"),
    ...     UrlRule("list.jd.com", r"/list\.html\?", url_class="list"),
    ... ])
    >>> rules.resolve("https://item.jd.com/100012043978.html?utm_source=x#comments")
    CanonicalUrl(url='https://item.jd.com/100012043978.html', url_class='item')
    >>> rules.classify("https://list.jd.com/list.html?cat=652,828")
    'list'
    >>> rules.classify("https://www.jd.com/") is None
    True
    """

    def __init__(self, rules: Iterable[UrlRule] = ()) -> None:
        if isinstance(rules, UrlRule):
            rules = [rules]
        try:
            items = list(rules)
        except TypeError:
            raise TypeError(f"rules must be an iterable of UrlRule, not "
                            f"{type(rules).__name__}") from None
        for rule in items:
            if not isinstance(rule, UrlRule):
                raise TypeError(f"rules must hold UrlRule objects, got {type(rule).__name__}")
        self._rules: List[UrlRule] = items
        self._exact: Dict[str, List[int]] = {}
        for index, rule in enumerate(items):
            if not rule.host.startswith("*."):
                self._exact.setdefault(rule.host, []).append(index)
        self._wild = [i for i, r in enumerate(items) if r.host.startswith("*.")]

    def __len__(self) -> int:
        return len(self._rules)

    def __iter__(self) -> Iterator[UrlRule]:
        return iter(self._rules)

    def __repr__(self) -> str:
        return f"UrlRules({self._rules!r})"

    def _candidates(self, host: str) -> List[UrlRule]:
        indices = list(self._exact.get(host, ()))
        indices += [i for i in self._wild if self._rules[i].matches_host(host)]
        indices.sort()
        return [self._rules[i] for i in indices]

    def _apply(self, canonical: str, keep_fragments: bool) -> Optional[Tuple[str, Optional[str]]]:
        """(rewritten canonical URL, class) for the first matching rule, or None."""
        origin, path, query, fragment = _split(canonical)
        if not origin:
            return None
        scheme, host, _port = _host_port(origin)
        rules = self._candidates(host)
        if not rules:
            return None
        target = path + ("?" + query if query else "")
        for rule in rules:
            m = rule.regex.match(target)
            if m is None:
                continue
            url = canonical
            if rule.replacement is not None:
                new = m.expand(rule.replacement)
                if "://" not in new:
                    if not new.startswith("/"):
                        raise ValueError(f"rule {rule!r} produced {new!r}: a replacement must "
                                         "give a whole URL or a path starting with '/'")
                    new = origin + new
                url = _canonical(new, keep_fragments, True, None, "&")
            return url, rule.url_class
        return None

    def resolve(self, url: Union[str, bytes], **kwargs: Any) -> CanonicalUrl:
        """The canonical URL (``kwargs`` as for :func:`canonicalize_url`,
        with these rules) and the class of the matching rule."""
        if "rules" in kwargs:
            raise TypeError("resolve() uses its own rules; do not pass rules=")
        keep_fragments = bool(kwargs.get("keep_fragments", False))
        base = dict(kwargs)
        strip, port = base.pop("strip_params", None), base.pop("remove_default_port", False)
        canonical = canonicalize_url(url, **base)
        hit = self._apply(canonical, keep_fragments)
        url_class = None
        if hit is not None:
            canonical, url_class = hit
        if strip is not None and strip is not False:
            canonical = _drop_params(canonical, _check_strip_params(strip))  # type: ignore[arg-type]
        if port:
            canonical = _drop_default_port(canonical)
        return CanonicalUrl(canonical, url_class)

    def classify(self, url: Union[str, bytes], **kwargs: Any) -> Optional[str]:
        """The ``url_class`` of the first rule matching url, or None."""
        return self.resolve(url, **kwargs).url_class


# ------------------------------------------------------------ request fingerprints

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


def _included_names(include_headers: Any) -> List[bytes]:
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
    names = _included_names(include_headers)
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
    items = _as_list(urls)
    name = _method_name(method)
    if not FAST_PATH:
        return [request_fingerprint(u, name, keep_fragments=keep_fragments) for u in items]
    out = _request_fps_fast(items, name, keep_fragments)
    for i, digest in enumerate(out):
        if digest is None:
            out[i] = request_fingerprint(items[i], name, keep_fragments=keep_fragments)
    return cast(List[bytes], out)
