"""Scrapy integration: ``pip install 'crawldedup[scrapy]'``.

In ``settings.py``::

    REQUEST_FINGERPRINTER_CLASS = "crawldedup.scrapy.RequestFingerprinter"
    DUPEFILTER_CLASS = "crawldedup.scrapy.DupeFilter"
    CRAWLDEDUP_DUPEFILTER = "exact"        # or "bloom", "redis"

See docs/scrapy.md; ``RecrawlMiddleware``: see docs/recrawl.md.  The names
are imported when first used, so importing this package does not import
Scrapy.
"""

from __future__ import annotations

from crawldedup._lazy import lazy_names

_HOMES = {
    "RequestFingerprinter": "crawldedup.scrapy.fingerprinter",
    "fingerprint": "crawldedup.scrapy.fingerprinter",
    "DupeFilter": "crawldedup.scrapy.dupefilter",
    "RecrawlMiddleware": "crawldedup.scrapy.recrawl",
}

__all__ = sorted(_HOMES)

__getattr__, __dir__ = lazy_names(__name__, _HOMES, __all__)
