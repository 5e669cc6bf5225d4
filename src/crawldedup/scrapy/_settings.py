"""The settings of crawldedup's Scrapy duplicate filter: their names,
defaults and checks, the files it keeps in JOBDIR, its logger and its
configuration error, shared by the local and the Redis backends."""

from __future__ import annotations

import hashlib
from typing import Any

from crawldedup import _defaults
from crawldedup.errors import CrawldedupError

BACKENDS = ("exact", "bloom", "disk", "redis", "redis-bloom")
#: The close reason of a crawl stopped at start-up by a bad setting.
CONFIG_ERROR_REASON = "crawldedup_config_error"
DEFAULT_CAPACITY = _defaults.CAPACITY
DEFAULT_ERROR_RATE = _defaults.SCRAPY_ERROR_RATE
DIGEST_SIZE = 20  # Scrapy's fingerprints: SHA-1
EXACT_FILE = "crawldedup-seen.fps"
#: The folder of the "disk" backend's DiskStore in JOBDIR.
DISK_FOLDER = "crawldedup-seen.disk"
#: The "disk" backend's memory budget (CRAWLDEDUP_DISK_MEMORY), in bytes.
DEFAULT_DISK_MEMORY = 256 << 20
BLOOM_FILE = "crawldedup-seen.bloom"
SCRAPY_FILE = "requests.seen"

#: The filter logs under the name of Scrapy's own filter (scrapy.dupefilters'
#: module logger), so a logging configuration made for Scrapy's filter (its
#: level, handlers, filters) applies to this one too.
LOGGER_NAME = "scrapy.dupefilters"


class DupeFilterConfigError(CrawldedupError, ValueError):
    """A ``CRAWLDEDUP_*`` setting (or the state it points to) that the
    duplicate filter cannot work with; raised when the crawl starts."""


def _digest(fp: bytes) -> bytes:
    """The 20 bytes kept for a fingerprint: itself when it has 20 bytes (all
    of Scrapy's), else its SHA-1 (from a fingerprinter of another size)."""
    return fp if len(fp) == DIGEST_SIZE else hashlib.sha1(fp).digest()


def _setting_int(settings: Any, name: str, default: int) -> int:
    value = settings.get(name, default)
    try:
        number = int(value)
        if number != float(value):
            raise ValueError
    except (TypeError, ValueError):
        raise DupeFilterConfigError(f"{name} must be a positive integer, got {value!r}") from None
    if number < 1:
        raise DupeFilterConfigError(f"{name} must be a positive integer, got {value!r}")
    return number


def _setting_rate(settings: Any, name: str, default: float) -> float:
    value = settings.get(name, default)
    try:
        rate = float(value)
    except (TypeError, ValueError):
        rate = float("nan")
    if not 0.0 < rate < 1.0:
        raise DupeFilterConfigError(f"{name} must be a number between 0 and 1 (exclusive), "
                                    f"got {value!r}")
    return rate
