"""The local backends of :class:`crawldedup.scrapy.DupeFilter` (``"exact"``:
a FingerprintSet with its JOBDIR file and journal; ``"bloom"``: a mapped
BloomFilter), the import of Scrapy's ``requests.seen``, and the settings
that choose and size a backend (the Redis ones are in ``_redis_backend``).
Nothing here needs Scrapy."""

from __future__ import annotations

import hashlib
import logging
import os
from typing import Any, BinaryIO, Iterator, Optional

import numpy as np

from crawldedup.bloom import BloomFilter
from crawldedup.errors import CrawldedupError
from crawldedup.fpset import FingerprintSet

BACKENDS = ("exact", "bloom", "redis", "redis-bloom")
#: The close reason of a crawl stopped at start-up by a bad setting.
CONFIG_ERROR_REASON = "crawldedup_config_error"
DEFAULT_CAPACITY = 10_000_000
DEFAULT_ERROR_RATE = 0.001
DIGEST_SIZE = 20  # Scrapy's fingerprints: SHA-1
EXACT_FILE = "crawldedup-seen.fps"
BLOOM_FILE = "crawldedup-seen.bloom"
SCRAPY_FILE = "requests.seen"

#: The filter logs under the name of Scrapy's own filter (scrapy.dupefilters'
#: module logger), so a logging configuration made for Scrapy's filter (its
#: level, handlers, filters) applies to this one too.
LOGGER_NAME = "scrapy.dupefilters"
logger = logging.getLogger(LOGGER_NAME)


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
    return open_redis_backend(settings, spider_name, name, jobdir)


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
