"""A duplicate request filter for Scrapy's ``DUPEFILTER_CLASS``.

:class:`DupeFilter` asks the crawler's request fingerprinter for each
request's fingerprint (use :class:`~crawldedup.scrapy.RequestFingerprinter`
for Scrapy's fingerprints, faster) and keeps the fingerprints in one of
four backends, chosen by ``CRAWLDEDUP_DUPEFILTER``:

``"exact"`` (default)
    A :class:`~crawldedup.FingerprintSet` of the 20-byte fingerprints: no
    false positives, about 19 to 28 bytes per request (Scrapy's ``set`` of
    ``bytes`` takes about 98).
``"bloom"``
    A :class:`~crawldedup.BloomFilter` sized by ``CRAWLDEDUP_CAPACITY`` and
    ``CRAWLDEDUP_ERROR_RATE``: a fixed, small size, but each false positive
    drops a request that was new; a warning is logged when the filter fills
    past its capacity, where that rate starts to climb.
``"redis"``
    Fingerprints in a Redis set, shared by every crawler process of the
    spider (also under scrapy-redis's scheduler); see docs/scrapy.md.
``"redis-bloom"``
    A Bloom filter in Redis (``CRAWLDEDUP_CAPACITY``,
    ``CRAWLDEDUP_ERROR_RATE``), shared the same way: a fixed size in Redis,
    with the false positives of a Bloom filter.

With ``JOBDIR`` the state lives in the job folder and survives pausing and
resuming: ``crawldedup-seen.fps`` (exact: the set, saved atomically when the
crawl closes, plus ``crawldedup-seen.fps.log``, a journal of the fingerprints
added since) or ``crawldedup-seen.bloom`` (bloom: the filter itself, memory
mapped).  A ``requests.seen`` file that Scrapy's ``RFPDupeFilter`` left in
the folder (binary, as Scrapy 2.19 writes it, or the hex lines of older
versions) is imported when crawldedup's state is created, so a running job
switches without crawling again.

It logs and counts like Scrapy's filter (``DUPEFILTER_DEBUG``, "Filtered
duplicate request", the ``dupefilter/filtered`` stat) and closes its state on
``spider_closed``.  A bad setting raises :class:`DupeFilterConfigError` when
the crawl starts.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import weakref
from typing import TYPE_CHECKING, Any, BinaryIO, Iterator, Optional, cast

import numpy as np

from crawldedup.bloom import BloomFilter
from crawldedup.errors import CrawldedupError, StoreUnavailableError
from crawldedup.fpset import FingerprintSet

try:
    from scrapy import signals
    from scrapy.dupefilters import BaseDupeFilter
    from scrapy.exceptions import CloseSpider
    from scrapy.utils.job import job_dir
    from scrapy.utils.request import referer_str
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("crawldedup.scrapy needs Scrapy: pip install 'crawldedup[scrapy]'") from exc

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

__all__ = ["BACKENDS", "DupeFilter", "DupeFilterConfigError", "read_requests_seen"]

BACKENDS = ("exact", "bloom", "redis", "redis-bloom")
#: The close reason of a crawl stopped at start-up by a bad setting.
CONFIG_ERROR_REASON = "crawldedup_config_error"
DEFAULT_CAPACITY = 10_000_000
DEFAULT_ERROR_RATE = 0.001
DIGEST_SIZE = 20  # Scrapy's fingerprints: SHA-1
EXACT_FILE = "crawldedup-seen.fps"
BLOOM_FILE = "crawldedup-seen.bloom"
SCRAPY_FILE = "requests.seen"

logger = logging.getLogger(__name__)


class DupeFilterConfigError(CrawldedupError, ValueError):
    """A ``CRAWLDEDUP_*`` setting (or the state it points to) that the
    duplicate filter cannot work with; raised when the crawl starts."""


# ------------------------------------------------------------ requests.seen

def read_requests_seen(path: str) -> Iterator[bytes]:
    """The fingerprints in a ``requests.seen`` file of Scrapy's RFPDupeFilter.

    Recent Scrapy (2.19) writes each fingerprint as a 2-byte big-endian
    length and the bytes; older versions wrote one hex fingerprint a line.
    The first byte tells them apart (a length below 256 starts with a zero
    byte, a hex line never does).  A record cut short by a killed process at
    the end of the file is left out, as Scrapy leaves it out; anything else
    that is not a fingerprint raises :class:`DupeFilterConfigError`.
    """
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        return
    if data[0] == 0:
        yield from _binary_records(data, path)
    else:
        yield from _hex_lines(data, path)


def _binary_records(data: bytes, path: str) -> Iterator[bytes]:
    n = len(data) // (DIGEST_SIZE + 2)
    if n:  # the usual file: 20-byte fingerprints only, read at once
        records = np.frombuffer(data, dtype=np.uint8, count=n * (DIGEST_SIZE + 2))
        records = records.reshape(n, DIGEST_SIZE + 2)
        if bool((records[:, 0] == 0).all() and (records[:, 1] == DIGEST_SIZE).all()):
            body = records[:, 2:].tobytes()
            yield from (body[i:i + DIGEST_SIZE] for i in range(0, len(body), DIGEST_SIZE))
            data = data[n * (DIGEST_SIZE + 2):]
    pos = 0
    while pos + 2 <= len(data):
        size = int.from_bytes(data[pos:pos + 2], "big")
        if size == 0:
            raise DupeFilterConfigError(f"{path!r}: a fingerprint of length 0 at byte {pos}; "
                                        f"not a requests.seen file of Scrapy")
        pos += 2
        if pos + size > len(data):
            return  # cut short by an unclean shutdown
        yield data[pos:pos + size]
        pos += size


def _hex_lines(data: bytes, path: str) -> Iterator[bytes]:
    # Scrapy ended every line with a newline: text after the last one is a
    # line cut short by an unclean shutdown, left out.
    lines = data.split(b"\n")[:-1]
    for number, line in enumerate(lines):
        line = line.strip()
        if not line:
            continue
        try:
            yield bytes.fromhex(line.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            raise DupeFilterConfigError(
                f"{path!r} line {number + 1} is not a hex fingerprint: {line[:60]!r}; "
                f"not a requests.seen file of Scrapy") from None


# ------------------------------------------------------------ backends

def _digest(fp: bytes) -> bytes:
    """The 20 bytes kept for a fingerprint: itself when it has 20 bytes (all
    of Scrapy's), else its SHA-1 (from a fingerprinter of another size)."""
    return fp if len(fp) == DIGEST_SIZE else hashlib.sha1(fp).digest()


class _Exact:
    """A FingerprintSet, with its JOBDIR file and journal."""

    name = "exact"

    def __init__(self, jobdir: Optional[str]) -> None:
        self.fps = FingerprintSet(DIGEST_SIZE)
        self.path: Optional[str] = None
        self.journal: Optional[BinaryIO] = None
        if jobdir is None:
            return
        path = self.path = os.path.join(jobdir, EXACT_FILE)
        if os.path.exists(path):
            self.fps = FingerprintSet.load(path)
            if self.fps.digest_size != DIGEST_SIZE:
                raise DupeFilterConfigError(f"{path!r} holds {self.fps.digest_size}-byte "
                                            f"digests, not {DIGEST_SIZE}-byte fingerprints")
        else:
            bloom = os.path.join(jobdir, BLOOM_FILE)
            if os.path.exists(bloom):
                raise DupeFilterConfigError(
                    f"JOBDIR {jobdir!r} holds the Bloom filter of a crawl with "
                    f"CRAWLDEDUP_DUPEFILTER = 'bloom', which cannot list its fingerprints "
                    f"for the 'exact' backend: keep 'bloom' or use a new JOBDIR")
            scrapy_file = os.path.join(jobdir, SCRAPY_FILE)
            if os.path.exists(scrapy_file):
                imported = [_digest(fp) for fp in read_requests_seen(scrapy_file)]
                if imported:
                    self.fps.add_many(imported)
                logger.info("Imported %d fingerprints from Scrapy's %s", len(imported),
                            scrapy_file)
        journal = open(path + ".log", "a+b")
        try:
            journal.seek(0)
            logged = journal.read()
            whole = len(logged) - len(logged) % DIGEST_SIZE  # a killed write leaves a tail
            if whole:
                self.fps.add_many(np.frombuffer(logged, dtype=f"S{DIGEST_SIZE}", count=whole
                                                // DIGEST_SIZE))
            if whole != len(logged):
                journal.truncate(whole)
            journal.seek(0, os.SEEK_END)
        except BaseException:
            journal.close()
            raise
        self.journal = journal

    def __len__(self) -> int:
        return len(self.fps)

    def seen(self, fp: bytes) -> bool:
        if len(fp) != DIGEST_SIZE:
            fp = _digest(fp)
        if self.fps.add(fp):
            if self.journal is not None:
                self.journal.write(fp)
            return False
        return True

    def flush(self) -> None:
        if self.journal is not None and not self.journal.closed:
            self.journal.flush()

    def clear(self) -> None:
        self.fps.clear()
        if self.journal is not None:
            self.journal.seek(0)
            self.journal.truncate()
        if self.path is not None and os.path.exists(self.path):
            os.unlink(self.path)

    def close(self) -> None:
        if self.journal is None or self.journal.closed:
            return
        assert self.path is not None
        self.journal.flush()
        self.fps.save(self.path)  # holds everything the journal holds
        self.journal.seek(0)
        self.journal.truncate()
        self.journal.close()
        try:
            os.unlink(self.path + ".log")
        except OSError:
            pass


class _Bloom:
    """A BloomFilter, memory-mapped in the JOBDIR when there is one."""

    name = "bloom"

    def __init__(self, jobdir: Optional[str], capacity: int, error_rate: float) -> None:
        self.capacity = capacity
        self.warned = False
        if jobdir is None:
            self.bf = BloomFilter(capacity, error_rate)
        else:
            path = os.path.join(jobdir, BLOOM_FILE)
            created = not os.path.exists(path)
            try:
                self.bf = BloomFilter.open(path, capacity=capacity, error_rate=error_rate)
            except ValueError as exc:  # IncompatibleFilterError: other parameters
                raise DupeFilterConfigError(
                    f"{path!r} was made with other CRAWLDEDUP_CAPACITY / CRAWLDEDUP_ERROR_RATE "
                    f"settings ({exc}); set them as they were or use a new JOBDIR") from None
            if created:
                self._import(jobdir)
        self.count = self.bf.insert_count

    def _import(self, jobdir: str) -> None:
        sources = []
        exact = os.path.join(jobdir, EXACT_FILE)
        if os.path.exists(exact):
            sources.append((exact, list(FingerprintSet.load(exact))))
            log = exact + ".log"
            if os.path.exists(log):
                with open(log, "rb") as f:
                    data = f.read()
                data = data[:len(data) - len(data) % DIGEST_SIZE]
                sources.append((log, [data[i:i + DIGEST_SIZE]
                                      for i in range(0, len(data), DIGEST_SIZE)]))
        scrapy_file = os.path.join(jobdir, SCRAPY_FILE)
        if os.path.exists(scrapy_file):
            sources.append((scrapy_file, [_digest(fp) for fp in read_requests_seen(scrapy_file)]))
        for path, fps in sources:
            if fps:
                self.bf.add_many(fps)
            logger.info("Imported %d fingerprints from %s", len(fps), path)

    def __len__(self) -> int:
        return int(self.bf.insert_count)

    def seen(self, fp: bytes) -> bool:
        if len(fp) != DIGEST_SIZE:
            fp = _digest(fp)
        if self.bf.add(fp):
            self.count += 1
            if self.count > self.capacity and not self.warned:
                self.warned = True
                logger.warning(
                    "The Bloom filter of the duplicate filter holds more than its capacity "
                    "(CRAWLDEDUP_CAPACITY = %d): from now on more new requests than "
                    "CRAWLDEDUP_ERROR_RATE says may be dropped as duplicates. Raise "
                    "CRAWLDEDUP_CAPACITY (with a new JOBDIR) or use the 'exact' backend.",
                    self.capacity)
            return False
        return True

    def flush(self) -> None:
        if not self.bf.closed:
            self.bf.flush()

    def clear(self) -> None:
        self.bf.clear()
        self.count = 0

    def close(self) -> None:
        self.bf.close()


def _open_backend(name: Any, settings: Any, jobdir: Optional[str],
                  spider_name: Optional[str]) -> Any:
    if name not in BACKENDS:
        raise DupeFilterConfigError(f"CRAWLDEDUP_DUPEFILTER must be one of "
                                    f"{', '.join(repr(b) for b in BACKENDS)}, got {name!r}")
    if name == "exact":
        return _Exact(jobdir)
    if name == "bloom":
        capacity = _setting_int(settings, "CRAWLDEDUP_CAPACITY", DEFAULT_CAPACITY)
        error_rate = _setting_rate(settings, "CRAWLDEDUP_ERROR_RATE", DEFAULT_ERROR_RATE)
        return _Bloom(jobdir, capacity, error_rate)
    from crawldedup.scrapy._redis_backend import open_redis_backend
    return open_redis_backend(settings, spider_name, name)


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
            from crawldedup.scrapy.fingerprinter import RequestFingerprinter
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
        from crawldedup.scrapy.fingerprinter import RequestFingerprinter as _Ours
        ours = getattr(type(fingerprinter), "fingerprint", None) is _Ours.fingerprint
        self._fingerprint = (fingerprinter.uncached_fingerprint if ours
                             else fingerprinter.fingerprint)
        if jobdir is not None:
            os.makedirs(jobdir, exist_ok=True)
        self._backend = _open_backend(backend, settings, jobdir, spider_name)
        self.backend: str = self._backend.name
        self._seen = self._backend.seen
        self._closed = False
        self._error: Optional[Exception] = None
        _open_filters.add(self)

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "DupeFilter":
        """The filter the crawler's settings ask for.  When they are bad (or
        Redis cannot be reached), the filter that comes back logs the reason
        and stops the crawl as the spider opens (``CloseSpider`` with the
        reason ``crawldedup_config_error``, from the ``spider_opened``
        signal, once every component is open); no request passes it."""
        return cls._build(crawler, getattr(getattr(crawler, "spider", None), "name", None))

    @classmethod
    def _build(cls, crawler: "Crawler", spider_name: Optional[str]) -> "DupeFilter":
        settings = crawler.settings
        try:
            df = cls(settings.get("CRAWLDEDUP_DUPEFILTER", "exact"),
                     jobdir=job_dir(settings), debug=settings.getbool("DUPEFILTER_DEBUG"),
                     fingerprinter=crawler.request_fingerprinter, settings=settings,
                     stats=crawler.stats, spider_name=spider_name)
        except (DupeFilterConfigError, StoreUnavailableError) as exc:
            df = cls.__new__(cls)
            df._fail(exc)
            crawler.signals.connect(df._refuse, signal=signals.spider_opened)
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

    def request_seen(self, request: "Request") -> bool:
        """True when a request with the same fingerprint was seen before
        (then the scheduler drops it); else records it and returns False."""
        return cast(bool, self._seen(self._fingerprint(request)))

    def _unusable(self, fp: bytes) -> bool:
        assert self._error is not None
        raise self._error

    def __len__(self) -> int:
        """The number of fingerprints held (an estimate for 'bloom')."""
        return 0 if self._error is not None else len(self._backend)

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
        return f"DupeFilter(backend={self.backend!r}, jobdir={self.jobdir!r}, len={len(self)})"
