"""The "redis" backend of crawldedup.scrapy.DupeFilter: the 20-byte
fingerprints in a :class:`crawldedup.redis.RedisStore` (a Redis set of raw
digests, tested and added atomically), shared by every crawler process of
the spider.

Settings (scrapy-redis's names are read too, so a scrapy-redis project
needs no new connection settings; see docs/scrapy.md):

``CRAWLDEDUP_REDIS_URL``
    default: ``REDIS_URL``, else ``redis://REDIS_HOST:REDIS_PORT`` when
    those are set, else ``redis://127.0.0.1:6379``.
``CRAWLDEDUP_REDIS_KEY``
    default ``"%(spider)s:crawldedup-seen"``: the spider's name is put in,
    as scrapy-redis does with ``SCHEDULER_DUPEFILTER_KEY``
    (``"%(spider)s:dupefilter"``, a set of hex strings, which this backend
    leaves alone).

Each process also keeps the fingerprints it has met in a local
:class:`~crawldedup.FingerprintSet`: a request whose fingerprint is there
was seen (Redis never forgets one, short of ``clear``), so only the
fingerprints new to the process cost a round trip.  Most links of a crawl
are repeats, so that spares most of them.
"""

from __future__ import annotations

from typing import Any, Optional

from crawldedup.errors import StoreUnavailableError
from crawldedup.fpset import FingerprintSet
from crawldedup.scrapy.dupefilter import DIGEST_SIZE, DupeFilterConfigError, _digest

DEFAULT_KEY = "%(spider)s:crawldedup-seen"
DEFAULT_URL = "redis://127.0.0.1:6379"


def redis_url(settings: Any) -> str:
    url = settings.get("CRAWLDEDUP_REDIS_URL") or settings.get("REDIS_URL")
    if url:
        return str(url)
    host, port = settings.get("REDIS_HOST"), settings.get("REDIS_PORT")
    if host or port:
        return f"redis://{host or '127.0.0.1'}:{port or 6379}"
    return DEFAULT_URL


def redis_key(settings: Any, spider_name: Optional[str]) -> str:
    pattern = settings.get("CRAWLDEDUP_REDIS_KEY") or DEFAULT_KEY
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

    def __init__(self, url: str, key: str) -> None:
        try:
            from crawldedup.redis import RedisStore
        except ImportError as exc:
            raise DupeFilterConfigError(
                f"CRAWLDEDUP_DUPEFILTER = 'redis' needs redis-py: pip install "
                f"'crawldedup[redis]' ({exc})") from None
        try:
            self.store = RedisStore(url, key, DIGEST_SIZE)
        except (ValueError, TypeError) as exc:
            raise DupeFilterConfigError(f"CRAWLDEDUP_REDIS_URL {url!r}: {exc}") from None
        self.url, self.key = url, key
        try:
            len(self.store)  # reach the server now: an unreachable Redis stops the start
        except StoreUnavailableError:
            self.store.close()
            raise
        except Exception as exc:  # e.g. the key holds another Redis type
            self.store.close()
            raise DupeFilterConfigError(f"Redis key {key!r} at {url!r} cannot hold the "
                                        f"fingerprints: {exc}") from None
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
        self.store.close()


def open_redis_backend(settings: Any, spider_name: Optional[str]) -> Any:
    return _Redis(redis_url(settings), redis_key(settings, spider_name))
