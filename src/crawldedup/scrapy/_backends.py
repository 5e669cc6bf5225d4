"""The local backends of :class:`crawldedup.scrapy.DupeFilter` (``"exact"``:
a FingerprintSet with its JOBDIR file and journal; ``"bloom"``: a mapped
BloomFilter; ``"disk"``: a DiskStore in JOBDIR), the import of Scrapy's
``requests.seen``, and the settings
that choose a backend (the Redis ones are in ``_redis_backend``, the
settings' names, defaults and checks in ``_settings``).  Nothing here needs
Scrapy."""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import tempfile
from typing import Any, Iterator, List, Optional, Tuple

import numpy as np

from crawldedup.bloom.filter import BloomFilter
from crawldedup.errors import IncompatibleFilterError
from crawldedup.exact.disk import DiskStore
from crawldedup.exact.fpset import FingerprintSet
from crawldedup.exact.journaled import JournaledSet
from crawldedup.scrapy._settings import (
    BACKENDS,
    BLOOM_FILE,
    DEFAULT_CAPACITY,
    DEFAULT_DISK_MEMORY,
    DEFAULT_ERROR_RATE,
    DIGEST_SIZE,
    DISK_FOLDER,
    EXACT_FILE,
    LOGGER_NAME,
    SCRAPY_FILE,
    DupeFilterConfigError,
    _digest,
    _setting_int,
    _setting_rate,
)

logger = logging.getLogger(LOGGER_NAME)

#: The module of the Redis backends, imported when the setting names one:
#: a crawl on a local backend loads none of crawldedup's Redis structures.
REDIS_BACKENDS = "crawldedup.scrapy._redis_backend"

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


def _earlier_fingerprints(jobdir: str) -> List[Tuple[str, List[bytes]]]:
    """(file, fingerprints) of each earlier state in JOBDIR a new Bloom
    filter or disk store starts from: the 'exact' backend's set and its log,
    and Scrapy's requests.seen."""
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
    return sources


# ------------------------------------------------------------ backends

class _Exact:
    """A FingerprintSet, journaled in the JOBDIR when there is one (a
    JournaledSet): each new fingerprint's journal entry is handed to the OS
    at the scheduler's flush, the set saved at close."""

    name = "exact"

    def __init__(self, jobdir: Optional[str]) -> None:
        self.journaled: Optional[JournaledSet] = None
        if jobdir is None:
            self.fps = FingerprintSet(DIGEST_SIZE)
            return
        path = os.path.join(jobdir, EXACT_FILE)
        fps = None
        if not os.path.exists(path):
            fps = self._imported(jobdir)
        try:
            self.journaled = JournaledSet(path, DIGEST_SIZE, log_limit=None, fps=fps)
        except IncompatibleFilterError as exc:
            raise DupeFilterConfigError(f"{exc}: not the fingerprints of this filter "
                                        f"({DIGEST_SIZE}-byte SHA-1s)") from None
        self.fps = self.journaled.fps

    @staticmethod
    def _imported(jobdir: str) -> FingerprintSet:
        """A new set, with the fingerprints of Scrapy's requests.seen."""
        fps = FingerprintSet(DIGEST_SIZE)
        if os.path.exists(os.path.join(jobdir, BLOOM_FILE)):
            raise DupeFilterConfigError(
                f"JOBDIR {jobdir!r} holds the Bloom filter of a crawl with "
                f"CRAWLDEDUP_DUPEFILTER = 'bloom', which cannot list its fingerprints "
                f"for the 'exact' backend: keep 'bloom' or use a new JOBDIR")
        scrapy_file = os.path.join(jobdir, SCRAPY_FILE)
        if os.path.exists(scrapy_file):
            imported = [_digest(fp) for fp in read_requests_seen(scrapy_file)]
            if imported:
                fps.add_many(imported)
            logger.info("Imported %d fingerprints from Scrapy's %s", len(imported),
                        scrapy_file)
        return fps

    def __len__(self) -> int:
        return len(self.fps)

    def seen(self, fp: bytes) -> bool:
        if len(fp) != DIGEST_SIZE:
            fp = _digest(fp)
        if self.journaled is not None:
            return not self.journaled.add(fp)
        return not self.fps.add(fp)

    def flush(self) -> None:
        if self.journaled is not None:
            self.journaled.flush()

    def clear(self) -> None:
        if self.journaled is not None:
            self.journaled.clear()
        else:
            self.fps.clear()

    def close(self) -> None:
        if self.journaled is not None:
            self.journaled.close()


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
        for path, fps in _earlier_fingerprints(jobdir):
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


class _Disk:
    """A DiskStore: in JOBDIR when there is one (a crawl paused and resumed
    keeps it), else in a temporary folder removed at close.  Its memory is
    bounded by CRAWLDEDUP_DISK_MEMORY whatever the crawl's size; new
    fingerprints reach its journal 64 KiB at a time (a kill loses at most
    those of the last 64 KiB), and are fsynced when the crawl closes."""

    name = "disk"

    def __init__(self, jobdir: Optional[str], memory: int) -> None:
        self.temporary: Optional[str] = None
        if jobdir is None:
            path = self.temporary = tempfile.mkdtemp(prefix="crawldedup-seen-")
        else:
            path = os.path.join(jobdir, DISK_FOLDER)
        created = not os.path.exists(path) or path == self.temporary
        if created and jobdir is not None and os.path.exists(os.path.join(jobdir, BLOOM_FILE)):
            raise DupeFilterConfigError(
                f"JOBDIR {jobdir!r} holds the Bloom filter of a crawl with "
                f"CRAWLDEDUP_DUPEFILTER = 'bloom', which cannot list its fingerprints "
                f"for the 'disk' backend: keep 'bloom' or use a new JOBDIR")
        try:
            self.store = DiskStore(path, DIGEST_SIZE, memory=memory)
        except ValueError as exc:
            raise DupeFilterConfigError(f"{path!r}: {exc}") from None
        if created and jobdir is not None:
            for source, fps in _earlier_fingerprints(jobdir):
                if fps:
                    self.store.add_many(fps)
                logger.info("Imported %d fingerprints from %s", len(fps), source)
            self.store.flush()

    def __len__(self) -> int:
        return len(self.store)

    def seen(self, fp: bytes) -> bool:
        if len(fp) != DIGEST_SIZE:
            fp = _digest(fp)
        return not self.store.add(fp)

    def flush(self) -> None:
        if not self.store.closed:
            self.store.flush()

    def clear(self) -> None:
        self.store.clear()

    def close(self) -> None:
        try:
            self.store.close()
        finally:
            if self.temporary is not None:
                shutil.rmtree(self.temporary, ignore_errors=True)


def _open_backend(name: Any, settings: Any, jobdir: Optional[str],
                  spider_name: Optional[str]) -> Any:
    if name not in BACKENDS:
        raise DupeFilterConfigError(f"CRAWLDEDUP_DUPEFILTER must be one of "
                                    f"{', '.join(repr(b) for b in BACKENDS)}, got {name!r}")
    if name == "exact":
        return _Exact(jobdir)
    if name == "disk":
        return _Disk(jobdir, _setting_int(settings, "CRAWLDEDUP_DISK_MEMORY", DEFAULT_DISK_MEMORY))
    if name == "bloom":
        capacity = _setting_int(settings, "CRAWLDEDUP_CAPACITY", DEFAULT_CAPACITY)
        error_rate = _setting_rate(settings, "CRAWLDEDUP_ERROR_RATE", DEFAULT_ERROR_RATE)
        return _Bloom(jobdir, capacity, error_rate)
    redis_backends = importlib.import_module(REDIS_BACKENDS)
    return redis_backends.open_redis_backend(settings, spider_name, name, jobdir)
