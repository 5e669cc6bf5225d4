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

The code lives in :mod:`crawldedup.urls`, one module per job; this module
gathers its public names (and ``FAST_PATH``).

>>> canonicalize_url("HTTP://Example.com/b?z=1&a=%e4%b8%ad#top")
'http://example.com/b?a=%E4%B8%AD&z=1'
>>> canonicalize_url("https://shop.example/item?id=7&utm_source=x&spm=a.b", strip_params=True)
'https://shop.example/item?id=7'
>>> request_fingerprint("https://example.com/?b=2&a=1").hex()
'a6ab45564523e37c0ded48d60b091ec021ca7a0f'
"""

from crawldedup.urls.canonical import CanonicalUrl as CanonicalUrl
from crawldedup.urls.canonical import UrlRule as UrlRule
from crawldedup.urls.canonical import UrlRules as UrlRules
from crawldedup.urls.canonical import canonicalize_url as canonicalize_url
from crawldedup.urls.canonical import canonicalize_urls as canonicalize_urls
from crawldedup.urls.form import FAST_PATH as FAST_PATH
from crawldedup.urls.form import FAST_PATH_W3LIB as FAST_PATH_W3LIB
from crawldedup.urls.form import W3LIB_QUERY_SEPARATOR as _W3LIB_QUERY_SEPARATOR  # noqa: F401
from crawldedup.urls.params import DEFAULT_TRACKING_PARAMS as DEFAULT_TRACKING_PARAMS
from crawldedup.urls.request_fingerprints import request_fingerprint as request_fingerprint
from crawldedup.urls.request_fingerprints import request_fingerprints as request_fingerprints
from crawldedup.urls.url_fingerprints import url_fingerprint as url_fingerprint
from crawldedup.urls.url_fingerprints import url_fingerprints as url_fingerprints

__all__ = ["DEFAULT_TRACKING_PARAMS", "CanonicalUrl", "UrlRule", "UrlRules",
           "canonicalize_url", "canonicalize_urls", "request_fingerprint",
           "request_fingerprints", "url_fingerprint", "url_fingerprints"]
