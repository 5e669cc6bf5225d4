"""A duplicate request filter for Scrapy's ``DUPEFILTER_CLASS``.

:class:`DupeFilter` asks the crawler's request fingerprinter for each
request's fingerprint (use :class:`~crawldedup.scrapy.RequestFingerprinter`
for Scrapy's fingerprints, faster) and keeps the fingerprints in one of
five backends, chosen by ``CRAWLDEDUP_DUPEFILTER``:

``"exact"`` (default)
    A :class:`~crawldedup.FingerprintSet` of the 20-byte fingerprints: no
    false positives, about 19 to 28 bytes per request (Scrapy's ``set`` of
    ``bytes`` takes about 98).
``"bloom"``
    A :class:`~crawldedup.BloomFilter` sized by ``CRAWLDEDUP_CAPACITY`` and
    ``CRAWLDEDUP_ERROR_RATE``: a fixed, small size, but each false positive
    drops a request that was new; a warning is logged when the filter fills
    past its capacity, where that rate starts to climb.
``"disk"``
    A :class:`~crawldedup.DiskStore` of the fingerprints: exact, in about
    ``CRAWLDEDUP_DISK_MEMORY`` bytes of memory (256 MiB) whatever the
    crawl's size, for broad crawls whose fingerprints outgrow RAM; the
    store lives in JOBDIR (``crawldedup-seen.disk``), or without JOBDIR in
    a temporary folder removed when the crawl closes.
``"redis"``
    Fingerprints in a :class:`~crawldedup.redis.RedisStore`, shared by every crawler process of the
    spider (also under scrapy-redis's scheduler); see docs/scrapy.md.
``"redis-bloom"``
    A Bloom filter in Redis (``CRAWLDEDUP_CAPACITY``,
    ``CRAWLDEDUP_ERROR_RATE``), shared the same way: a fixed size in Redis,
    with the false positives of a Bloom filter.

With ``JOBDIR`` the state lives in the job folder and survives pausing and
resuming: ``crawldedup-seen.fps`` (exact: the set, saved atomically when the
crawl closes, plus ``crawldedup-seen.fps.log``, a journal of the fingerprints
added since), ``crawldedup-seen.bloom`` (bloom: the filter itself, memory
mapped) or ``crawldedup-seen.disk`` (disk: the store's folder; its journal
takes new fingerprints 64 KiB at a time and is fsynced as the crawl closes).
A ``requests.seen`` file that Scrapy's ``RFPDupeFilter`` left in the folder
(binary, as Scrapy 2.19 writes it, or the hex lines of older versions) is
imported when crawldedup's state is created, so a running job switches
without crawling again ("disk" and "bloom" also import the "exact"
backend's set).

It logs and counts like Scrapy's filter (``DUPEFILTER_DEBUG``, "Filtered
duplicate request", the ``dupefilter/filtered`` stat), under the logger name
of Scrapy's filter, ``scrapy.dupefilters``, and closes its state on
``spider_closed``; a closed filter's ``len()`` is 0.  A bad setting raises
:class:`DupeFilterConfigError` when the crawl starts.
"""

from __future__ import annotations

import atexit
import logging
import os
import weakref
from typing import TYPE_CHECKING, Any, Optional, cast

from crawldedup._extras import install_hint
from crawldedup.errors import CorruptFileError, StoreLockedError, StoreUnavailableError

# The local backends and the settings; the names tests and users import from here.
from crawldedup.scrapy._backends import _open_backend, read_requests_seen
from crawldedup.scrapy._settings import (
    BACKENDS,
    BLOOM_FILE,
    CONFIG_ERROR_REASON,
    EXACT_FILE,
    LOGGER_NAME,
    DupeFilterConfigError,
)
from crawldedup.scrapy.fingerprinter import RequestFingerprinter

try:
    from scrapy import signals
    from scrapy.dupefilters import BaseDupeFilter
    from scrapy.exceptions import CloseSpider
    from scrapy.utils.job import job_dir
    from scrapy.utils.request import referer_str
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"crawldedup.scrapy needs Scrapy: {install_hint('scrapy')}") from exc

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

__all__ = ["BACKENDS", "BLOOM_FILE", "EXACT_FILE", "DupeFilter", "DupeFilterConfigError",
           "read_requests_seen"]

logger = logging.getLogger(LOGGER_NAME)  # Scrapy's filter's name: see _backends


# Filters whose state must reach the disk even if the process ends without
# closing them (a second Ctrl-C stops Scrapy's reactor at once).
_open_filters: "weakref.WeakSet[DupeFilter]" = weakref.WeakSet()


@atexit.register
def _flush_open_filters() -> None:
    for df in list(_open_filters):
        try:
            df._backend.flush()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


class DupeFilter(BaseDupeFilter):
    """Scrapy's duplicate request filter, with crawldedup's state (see the
    module docstring for the backends and settings).

    >>> from scrapy import Request
    >>> df = DupeFilter()
    >>> df.request_seen(Request("https://example.com/?b=2&a=1"))
    False
    >>> df.request_seen(Request("https://example.com/?a=1&b=2"))
    True
    >>> df.close("finished")
    """

    def __init__(self, backend: str = "exact", *, jobdir: Optional[str] = None,
                 debug: bool = False, fingerprinter: Any = None, settings: Any = None,
                 stats: Any = None, spider_name: Optional[str] = None) -> None:
        if fingerprinter is None:
            fingerprinter = RequestFingerprinter()
        if settings is None:
            from scrapy.settings import Settings
            settings = Settings()
        self.fingerprinter = fingerprinter
        self.debug = bool(debug)
        self.logdupes = True
        self.stats = stats
        self.jobdir = jobdir
        # crawldedup's fingerprinter (not a subclass's own fingerprint()),
        # uncached: the scheduler asks about each request once, and caching
        # its fingerprint costs more than computing it.
        ours = getattr(type(fingerprinter), "fingerprint", None) is RequestFingerprinter.fingerprint
        self._fingerprint = (fingerprinter.uncached_fingerprint if ours
                             else fingerprinter.fingerprint)
        if jobdir is not None:
            os.makedirs(jobdir, exist_ok=True)
        self._backend = _open_backend(backend, settings, jobdir, spider_name)
        self.backend: str = self._backend.name
        self._seen = self._backend.seen
        self._closed = False
        self._error: Optional[Exception] = None
        self._crawler: Optional["Crawler"] = None  # set only for a refused crawl
        _open_filters.add(self)

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "DupeFilter":
        """The filter the crawler's settings ask for.  When they are bad (or
        Redis cannot be reached), the filter that comes back logs the reason
        and stops the crawl as the spider opens (``CloseSpider`` with the
        reason ``crawldedup_config_error``, from the ``spider_opened``
        signal, once every component is open), and the crawl counts as
        failed (``scrapy crawl`` exits 1); no request passes it."""
        return cls._build(crawler, getattr(getattr(crawler, "spider", None), "name", None))

    @classmethod
    def _build(cls, crawler: "Crawler", spider_name: Optional[str]) -> "DupeFilter":
        settings = crawler.settings
        try:
            df = cls(settings.get("CRAWLDEDUP_DUPEFILTER", "exact"),
                     jobdir=job_dir(settings), debug=settings.getbool("DUPEFILTER_DEBUG"),
                     fingerprinter=crawler.request_fingerprinter, settings=settings,
                     stats=crawler.stats, spider_name=spider_name)
        # a damaged state (a JOBDIR file, a Redis metadata key), or a disk
        # store another crawl has open, stops the crawl the same way: one
        # error line naming it, and the crawl fails
        except (DupeFilterConfigError, StoreUnavailableError, StoreLockedError,
                CorruptFileError) as exc:
            df = cls.__new__(cls)
            df._fail(exc)
            crawler.signals.connect(df._refuse, signal=signals.spider_opened)
            df._crawler = crawler
            crawler.signals.connect(df._fail_the_crawl, signal=signals.spider_closed)
            return df
        crawler.signals.connect(df._spider_closed, signal=signals.spider_closed)
        return df

    @classmethod
    def from_spider(cls, spider: "Spider") -> "DupeFilter":
        """For scrapy-redis's Scheduler, which builds its filter from the
        spider when the spider opens (and never calls ``open``)."""
        return cls._build(spider.crawler, spider.name)

    def _fail(self, error: Exception) -> None:
        self._error = error
        self._crawler = None
        self._seen = self._unusable
        self._fingerprint = type  # anything; then _unusable raises the error
        self._closed = True
        self.backend = "unusable"
        self.jobdir = None
        self.fingerprinter = None
        self.debug = False
        self.logdupes = True
        self.stats = None

    def _refuse(self, spider: "Spider") -> None:
        logger.error("crawldedup.scrapy.DupeFilter cannot start, so the crawl stops: %s",
                     self._error, extra={"spider": spider})
        raise CloseSpider(CONFIG_ERROR_REASON)

    def _fail_the_crawl(self, spider: "Spider", reason: str = "") -> None:
        """After the refused crawl closed (whatever reason it closed with,
        should another component have stopped it first): make ``scrapy
        crawl`` exit 1.

        Scrapy's crawler processes set ``bootstrap_failed`` (exit code 1)
        when a crawl ends without ``crawler.spider``, and have no other way
        for a component to fail a crawl that closed cleanly (an exception
        during the engine's start leaves Scrapy 2.19 closing a half-open
        engine, with tracebacks of its own).  So the spider is unset here, in
        the ``spider_closed`` signal of that close (this filter connects
        when the engine opens, after the spider and the extensions); the stats stay readable
        (kept by spider name, as Scrapy's MemoryStatsCollector does)."""
        crawler = self._crawler
        if crawler is None:
            return
        stats = crawler.stats
        kept = getattr(stats, "spider_stats", None)
        if isinstance(kept, dict) and stats is not None:
            kept[spider.name] = stats.get_stats()
        crawler.spider = None

    def request_seen(self, request: "Request") -> bool:
        """True when a request with the same fingerprint was seen before
        (then the scheduler drops it); else records it and returns False."""
        return cast(bool, self._seen(self._fingerprint(request)))

    def _unusable(self, fp: bytes) -> bool:
        assert self._error is not None
        raise self._error

    def __len__(self) -> int:
        """The number of fingerprints held (an estimate for the Bloom
        backends); 0 once the filter is closed, whatever the backend (a
        closed filter has released its state, and asks no server)."""
        return 0 if self._closed else len(self._backend)

    def log(self, request: "Request", spider: "Spider") -> None:
        if self.debug:
            logger.debug("Filtered duplicate request: %(request)s (referer: %(referer)s)",
                         {"request": request, "referer": referer_str(request)},
                         extra={"spider": spider})
        elif self.logdupes:
            logger.debug("Filtered duplicate request: %(request)s - no more duplicates will "
                         "be shown (see DUPEFILTER_DEBUG to show all duplicates)",
                         {"request": request}, extra={"spider": spider})
            self.logdupes = False
        stats = self.stats
        if stats is None:
            crawler = getattr(spider, "crawler", None)
            stats = getattr(crawler, "stats", None)
        if stats is not None:
            stats.inc_value("dupefilter/filtered")

    def clear(self) -> None:
        """Forget every fingerprint (scrapy-redis's scheduler calls it when it
        flushes, i.e. on close without SCHEDULER_PERSIST)."""
        if self._error is None:
            self._backend.clear()

    def close(self, reason: str = "") -> None:
        """Save and release the state; later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        _open_filters.discard(self)
        try:
            self._backend.close()
        except OSError as exc:
            raise StoreUnavailableError(f"cannot save the duplicate filter's state in "
                                        f"{self.jobdir!r}: {exc}") from exc

    def _spider_closed(self, spider: "Spider", reason: str = "") -> None:
        self.close(reason)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"len={len(self)}"
        return f"DupeFilter(backend={self.backend!r}, jobdir={self.jobdir!r}, {state})"
