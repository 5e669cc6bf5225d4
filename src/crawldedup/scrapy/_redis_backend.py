"""The Redis backends of crawldedup.scrapy.DupeFilter, shared by every
crawler process of the spider: "redis", the 20-byte fingerprints in a
:class:`crawldedup.redis.RedisStore` (raw digests in small Redis hashes,
tested and added atomically), and "redis-bloom", a
:class:`crawldedup.redis.RedisBloomFilter` sized by ``CRAWLDEDUP_CAPACITY``
and ``CRAWLDEDUP_ERROR_RATE`` (a fixed size in Redis, at the price of
false positives).

Settings (scrapy-redis's names are read too, so a scrapy-redis project
needs no new connection settings; see docs/scrapy.md):

``CRAWLDEDUP_REDIS_URL``
    default: ``REDIS_URL``, else ``redis://REDIS_HOST:REDIS_PORT`` when
    those are set, else ``redis://127.0.0.1:6379``.
``CRAWLDEDUP_REDIS_KEY``
    default ``"%(spider)s:crawldedup-seen"`` ("redis": the store's name;
    docs/redis.md lists the keys it makes of it) or
    ``"%(spider)s:crawldedup-bloom"`` ("redis-bloom": the prefix of the
    filter's keys): the spider's name is put in, as scrapy-redis does with
    ``SCHEDULER_DUPEFILTER_KEY`` (``"%(spider)s:dupefilter"``, a set of hex
    strings, which these backends leave alone).

When the filter is kept (the conventions of scrapy-redis's scheduler, whose
setting names are read when crawldedup's are not set):

``CRAWLDEDUP_REDIS_PERSIST``
    keep the filter in Redis when the crawl closes; default:
    ``SCHEDULER_PERSIST`` when set, else True with ``JOBDIR`` (a job that is
    paused and resumed), else False: the filter is deleted when the crawl
    closes (a "redis" store is cleared: its metadata key stays), so each
    crawl starts afresh, as the local backends do without ``JOBDIR``.
``CRAWLDEDUP_REDIS_FLUSH_ON_START``
    clear the filter when the crawl starts; default:
    ``SCHEDULER_FLUSH_ON_START``, else False.

With "redis", each process also keeps the fingerprints it has met in a local
:class:`~crawldedup.FingerprintSet`: a request whose fingerprint is there
was seen (Redis never forgets one, short of ``clear``), so only the
fingerprints new to the process cost a round trip.  Most links of a crawl
are repeats, so that spares most of them.  "redis-bloom" keeps nothing
locally (its point is a small, fixed size): every request is one round trip.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from crawldedup.errors import IncompatibleFilterError, StoreUnavailableError
from crawldedup.exact.fpset import FingerprintSet
from crawldedup.redis._conn import RedisKeyTypeError
from crawldedup.redis.bloom import RedisBloomFilter
from crawldedup.redis.store import RedisStore
from crawldedup.scrapy._settings import (
    DEFAULT_CAPACITY,
    DEFAULT_ERROR_RATE,
    DIGEST_SIZE,
    LOGGER_NAME,
    DupeFilterConfigError,
    _digest,
    _setting_int,
    _setting_rate,
)

logger = logging.getLogger(LOGGER_NAME)

DEFAULT_KEY = "%(spider)s:crawldedup-seen"
DEFAULT_BLOOM_KEY = "%(spider)s:crawldedup-bloom"
#: "redis-bloom" compares the filter's estimated count with its capacity
#: once per this many requests new to the process (one BITCOUNT).
CAPACITY_CHECK_EVERY = 10_000
DEFAULT_URL = "redis://127.0.0.1:6379"


def redis_url(settings: Any) -> str:
    url = settings.get("CRAWLDEDUP_REDIS_URL") or settings.get("REDIS_URL")
    if url:
        return str(url)
    host, port = settings.get("REDIS_HOST"), settings.get("REDIS_PORT")
    if host or port:
        return f"redis://{host or '127.0.0.1'}:{port or 6379}"
    return DEFAULT_URL


def _setting_bool(settings: Any, name: str, fallback: str, default: bool) -> bool:
    """A boolean setting; when unset, scrapy-redis's ``fallback`` setting,
    and when that is unset too, ``default``."""
    for setting in (name, fallback):
        if settings.get(setting) is None:
            continue
        try:
            return bool(settings.getbool(setting))
        except ValueError:
            raise DupeFilterConfigError(f"{setting} must be True or False, got "
                                        f"{settings.get(setting)!r}") from None
    return default


def redis_key(settings: Any, spider_name: Optional[str], default: str = DEFAULT_KEY) -> str:
    pattern = settings.get("CRAWLDEDUP_REDIS_KEY") or default
    if not isinstance(pattern, str):
        raise DupeFilterConfigError(f"CRAWLDEDUP_REDIS_KEY must be a str, got {pattern!r}")
    if "%(spider)s" in pattern and not spider_name:
        raise DupeFilterConfigError(f"CRAWLDEDUP_REDIS_KEY {pattern!r} names the spider, but "
                                    f"the duplicate filter was built without one")
    try:
        key = pattern % {"spider": spider_name}
    except (KeyError, ValueError, TypeError) as exc:
        raise DupeFilterConfigError(f"CRAWLDEDUP_REDIS_KEY {pattern!r} is not a valid "
                                    f"pattern (only %(spider)s is filled in): {exc}") from None
    if not key:
        raise DupeFilterConfigError("CRAWLDEDUP_REDIS_KEY must not be empty")
    return key


class _Redis:
    name = "redis"

    def __init__(self, url: str, key: str, persist: bool = True,
                 flush_on_start: bool = False) -> None:
        try:
            self.store = RedisStore(url, key, DIGEST_SIZE)
        except (ValueError, TypeError) as exc:
            raise DupeFilterConfigError(f"CRAWLDEDUP_REDIS_URL {url!r}: {exc}") from None
        self.url, self.key = url, key
        self.persist = persist
        try:
            # reach the server now: an unreachable Redis stops the start
            held = len(self.store)
            if held and flush_on_start:
                self.store.clear()
        except StoreUnavailableError:
            self.store.close()
            raise
        except Exception as exc:  # e.g. the key holds another Redis type
            self.store.close()
            raise DupeFilterConfigError(f"Redis key {key!r} at {url!r} cannot hold the "
                                        f"fingerprints: {exc}") from None
        _log_start(key, url, held, flush_on_start, persist)
        self.add = self.store.add
        self.local = FingerprintSet(DIGEST_SIZE)

    def __len__(self) -> int:
        return len(self.store)

    def seen(self, fp: bytes) -> bool:
        if len(fp) != DIGEST_SIZE:
            fp = _digest(fp)
        if fp in self.local:
            return True
        new = self.add(fp)  # atomic test-and-set in Redis, shared by the fleet
        self.local.add(fp)
        return not new

    def flush(self) -> None:
        pass

    def clear(self) -> None:
        self.store.clear()
        self.local.clear()

    def close(self) -> None:
        try:
            if not self.persist:
                self.store.clear()
                _log_deleted(self.key)
        finally:
            self.store.close()


class _RedisBloom:
    name = "redis-bloom"

    def __init__(self, url: str, key: str, capacity: int, error_rate: float,
                 persist: bool = True, flush_on_start: bool = False) -> None:
        self.url, self.key, self.capacity = url, key, capacity
        try:
            self.bf = RedisBloomFilter(url, key, capacity=capacity, error_rate=error_rate)
        except IncompatibleFilterError as exc:
            raise DupeFilterConfigError(
                f"the Redis Bloom filter {key!r} at {url!r} cannot be opened with these "
                f"CRAWLDEDUP_CAPACITY / CRAWLDEDUP_ERROR_RATE settings ({exc}); set them as "
                f"they were, or use another CRAWLDEDUP_REDIS_KEY") from None
        except StoreUnavailableError:
            raise
        except RedisKeyTypeError as exc:  # a key holds another Redis type
            raise DupeFilterConfigError(f"Redis key {key!r} at {url!r} cannot hold the "
                                        f"Bloom filter: {exc}") from None
        except (ValueError, TypeError) as exc:
            raise DupeFilterConfigError(f"CRAWLDEDUP_REDIS_URL {url!r}: {exc}") from None
        self.persist = persist
        try:
            held = self.bf.estimated_count()
            if held and flush_on_start:
                self.bf.clear()
        except BaseException:
            self.bf.close()
            raise
        _log_start(key, url, held, flush_on_start, persist)
        self.new = 0
        self.warned = False

    def __len__(self) -> int:
        return self.bf.estimated_count()

    def seen(self, fp: bytes) -> bool:
        if len(fp) != DIGEST_SIZE:
            fp = _digest(fp)
        if not self.bf.add(fp):  # atomic test-and-set in Redis, shared by the fleet
            return True
        self.new += 1
        if not self.warned and self.new % CAPACITY_CHECK_EVERY == 0:
            self._check_capacity()
        return False

    def _check_capacity(self) -> None:
        count = self.bf.estimated_count()
        if count > self.capacity:
            self.warned = True
            logger.warning(
                "The Redis Bloom filter %r of the duplicate filter holds about %d requests, "
                "more than its capacity (CRAWLDEDUP_CAPACITY = %d): from now on more new "
                "requests than CRAWLDEDUP_ERROR_RATE says may be dropped as duplicates. Use "
                "a larger CRAWLDEDUP_CAPACITY with a new CRAWLDEDUP_REDIS_KEY, or the "
                "'redis' backend.", self.key, count, self.capacity)

    def flush(self) -> None:
        pass

    def clear(self) -> None:
        self.bf.clear()
        self.new = 0
        self.warned = False

    def close(self) -> None:
        try:
            if not self.persist:
                self.bf.drop()  # its keys deleted: the bits and the metadata
                _log_deleted(self.key)
        finally:
            self.bf.close()


def _log_start(key: str, url: str, held: int, flushed: bool, persist: bool) -> None:
    # Say why a crawl drops requests it has never fetched, or forgets them.
    if held and flushed:
        logger.info("Cleared the Redis duplicate filter %r at %s (about %d fingerprints): "
                    "CRAWLDEDUP_REDIS_FLUSH_ON_START", key, url, held)
    elif held:
        logger.info("The Redis duplicate filter %r at %s holds about %d fingerprints from "
                    "earlier crawls: requests that match them are dropped", key, url, held)
    if not persist:
        logger.info("The Redis duplicate filter %r is deleted when the crawl closes "
                    "(CRAWLDEDUP_REDIS_PERSIST = False)", key)


def _log_deleted(key: str) -> None:
    logger.info("Deleted the Redis duplicate filter %r (CRAWLDEDUP_REDIS_PERSIST = False)", key)


def open_redis_backend(settings: Any, spider_name: Optional[str], name: str = "redis",
                       jobdir: Optional[str] = None) -> Any:
    persist = _setting_bool(settings, "CRAWLDEDUP_REDIS_PERSIST", "SCHEDULER_PERSIST",
                            jobdir is not None)
    flush = _setting_bool(settings, "CRAWLDEDUP_REDIS_FLUSH_ON_START", "SCHEDULER_FLUSH_ON_START",
                          False)
    if name == "redis-bloom":
        capacity = _setting_int(settings, "CRAWLDEDUP_CAPACITY", DEFAULT_CAPACITY)
        error_rate = _setting_rate(settings, "CRAWLDEDUP_ERROR_RATE", DEFAULT_ERROR_RATE)
        return _RedisBloom(redis_url(settings),
                           redis_key(settings, spider_name, DEFAULT_BLOOM_KEY),
                           capacity, error_rate, persist, flush)
    return _Redis(redis_url(settings), redis_key(settings, spider_name), persist, flush)
