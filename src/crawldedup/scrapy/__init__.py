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

import importlib
from typing import Any, Dict

# public name -> module (relative to this package) that defines it
_EXPORTS: Dict[str, str] = {
    "RequestFingerprinter": ".fingerprinter",
    "fingerprint": ".fingerprinter",
    "DupeFilter": ".dupefilter",
    "RecrawlMiddleware": ".recrawl",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> Any:
    return sorted(set(globals()) | set(_EXPORTS))
