"""The "redis" backend of crawldedup.scrapy.DupeFilter (docs/scrapy.md)."""

from __future__ import annotations

from typing import Any, Optional

from crawldedup.scrapy.dupefilter import DupeFilterConfigError


def open_redis_backend(settings: Any, spider_name: Optional[str]) -> Any:
    raise DupeFilterConfigError("CRAWLDEDUP_DUPEFILTER = 'redis' is not available yet")
