"""Where a RecrawlState keeps its pages: SQLite (embedded default) or Redis.

Both stores hold the same rows and answer the same calls; RecrawlState does
all the logic.  A page row is a tuple in the order of ``PAGE_FIELDS``; host
statistics are sums in the order of ``HOST_FIELDS``, always changed by
increments (so crawlers sharing a store add up correctly).

* :class:`SQLiteRecrawlStore`: one file in WAL mode; each ``commit`` is one
  transaction, so a fetch recorded before ``kill -9`` of the crawler is kept.
* :class:`~crawldedup.recrawl.redis_store.RedisRecrawlStore` (in
  ``redis_store``): the same rows in Redis.
"""

from __future__ import annotations

import abc
import math
import operator
import os
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np

from crawldedup import schemes
from crawldedup.errors import (
    CorruptDatabaseError,
    CorruptFileError,
    CorruptStateError,
    CrawldedupError,
    StoreUnavailableError,
)
from crawldedup.exact.stores.base import Store
from crawldedup.exact.stores.sqlite import SQLiteFile
from crawldedup.recrawl.pages import (
    PACKED_SIZE,
    PAGE_FIELDS,
    PAGE_NUM,
    Pages,
    bad_blob,
    damaged,
    pack,
    page_sums,
    row_sums,
    unpack,
)
from crawldedup.recrawl.schedule import HIST_BINS

try:
    import sqlite3
except ImportError:  # pragma: no cover - a Python built without SQLite
    sqlite3 = None  # type: ignore[assignment]

HOST_FIELDS = ("changes", "t_changed", "t_unchanged", "intervals", "lm_checks", "lm_lies",
               "etag_checks", "etag_lies", "bad_dates", "bad_lengths")
#: The host statistics the pooled change rate is computed from.
HOST_RATE_FIELDS = ("changes", "t_changed", "t_unchanged", "intervals")
#: What due_candidates returns of each page.
CANDIDATE_FIELDS = ("url", "host", "last_fetched", "changes", "t_changed", "t_unchanged",
                    "fetches")
_TEXT = {"url", "host", "etag", "last_modified"}
_INT = {"content_length", "simhash", "fetches", "changes"}


# Rows per statement when reading a batch (SQLite allows 999 variables before 3.32).
_STATEMENT_ROWS = 500
#: The format of the SQLite file (PRAGMA user_version): 3 keeps a checksum
#: in every row; 2 (a page's numbers packed in one BLOB, no checksums) and
#: 0 or 1 (a column a field) are converted on opening.
SQLITE_FORMAT = 3
# The columns of a page: the strings, the due time (for its index), the
# packed numbers and the row's checksum (pages.page_sums).
_PAGE_COLUMNS = "url, host, etag, last_modified, due_at, data, sum"
# A page read before, rewritten by its row id, its URL checked.
_UPDATE_SQL = ("UPDATE pages SET host = ?, etag = ?, last_modified = ?, due_at = ?, data = ?, "
               "sum = ? WHERE id = ? AND url = ?")
_INSERT_SQL = (f"INSERT INTO pages ({_PAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
               "ON CONFLICT(url) DO UPDATE SET host = excluded.host, etag = excluded.etag, "
               "last_modified = excluded.last_modified, due_at = excluded.due_at, "
               "data = excluded.data, sum = excluded.sum")
_HOST_COLUMNS = ", ".join(HOST_FIELDS)
# A host's row is rewritten only while its checksum is the one read; a new
# host is written only while no other process has written it.
_HOST_UPDATE_SQL = ("UPDATE hosts SET " + ", ".join(f"{f} = ?" for f in HOST_FIELDS)
                    + ", sum = ? WHERE id = ? AND sum = ?")
_HOST_INSERT_SQL = (f"INSERT INTO hosts (host, {_HOST_COLUMNS}, sum) VALUES ("
                    + ",".join("?" * (len(HOST_FIELDS) + 2)) + ") ON CONFLICT(host) DO NOTHING")
_ROWID = operator.itemgetter(6)
_URL = operator.itemgetter(0)
# Pages converted a statement at a time from an older format.
_CONVERT_ROWS = 20_000
#: The file checks an opening can run (SQLiteRecrawlStore's ``check``).
CHECKS = ("full", "quick")
# The first bytes of every SQLite file.
_HEADER_MAGIC = b"SQLite format 3\x00"


class _Stale(Exception):
    """A host row changed between its read and a batch's write."""


def _host_sums(hosts: Sequence[str], values: Any) -> np.ndarray:
    """The checksums of host rows (``values``: their HOST_FIELDS sums)."""
    return row_sums((hosts,), np.asarray(values, np.float64).reshape(len(hosts), -1) + 0.0)


def _hist_sums(items: Sequence[Tuple[int, int]]) -> np.ndarray:
    """The checksums of histogram rows (bin, count)."""
    return row_sums(([""] * len(items),), np.array(items, np.int64).reshape(len(items), 2))


def _meta_sums(keys: Sequence[str], values: Sequence[float]) -> np.ndarray:
    """The checksums of setting rows (key, value)."""
    return row_sums((keys,), np.array(values, np.float64) + 0.0)


def _first_wrong(found: Sequence[Any], expected: np.ndarray) -> int:
    """The first position whose stored checksum is not the expected one
    (one that is not an integer counts as wrong), or -1."""
    if set(map(type, found)) == {int}:
        wrong = np.flatnonzero(np.array(found, np.int64) != expected)
        return int(wrong[0]) if len(wrong) else -1
    for i, value in enumerate(found):
        if type(value) is not int or value != expected[i]:
            return i
    return -1  # pragma: no cover - a value that is not an int is wrong


def _check_header(path: str) -> None:
    """Refuse a file whose SQLite header is not one SQLite writes (read
    before SQLite opens the file, which may write to a file it misreads):
    the magic string, a page size SQLite allows, the file-format versions,
    no reserved bytes a page, the fixed payload fractions, a schema format
    SQLite knows, UTF-8 text, the reserved area zero; and, when no WAL is
    there (in WAL mode the file's first page may be older than the WAL's
    copy), a whole number of pages and the page count the header gives.
    A missing or empty file is a new one."""
    wal = path + "-wal"
    # SQLite rewrites the file only when it checkpoints a WAL into it: its
    # length and page count are checked only when no WAL is there, before
    # the header is read and after.
    settled = not os.path.exists(wal)
    try:
        with open(path, "rb") as f:
            header = f.read(100)
            size = os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        return
    except OSError:
        return  # SQLite names what keeps the file from being read
    if size == 0:
        return

    def bad(why: str) -> CorruptFileError:
        return CorruptDatabaseError(path, f"its SQLite header is damaged: {why}")

    if len(header) < 100 or not header.startswith(_HEADER_MAGIC):
        raise CorruptDatabaseError(path, "file is not a database (no SQLite header)")
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        raise bad(f"page size {page}")
    if header[18] not in (1, 2) or header[19] not in (1, 2):
        raise bad(f"file format versions {header[18]} and {header[19]}")
    if header[20] != 0:
        raise bad(f"{header[20]} reserved bytes a page")
    if header[21:24] != b"\x40\x20\x20":
        raise bad(f"payload fractions {tuple(header[21:24])}")
    # (0: a database without tables yet, as the file's first page may say
    # while the WAL holds the first tables)
    schema = int.from_bytes(header[44:48], "big")
    if not 0 <= schema <= 4:
        raise bad(f"schema format {schema}")
    encoding = int.from_bytes(header[56:60], "big")
    if encoding not in (0, 1):
        raise bad(f"text encoding {encoding}, not UTF-8")
    if any(header[72:92]):
        raise bad("its reserved bytes 72 to 91 are not zero")
    if settled and not os.path.exists(wal):
        if size % page:
            raise bad(f"the file's {size} bytes are not a whole number of {page}-byte pages")
        pages = int.from_bytes(header[28:32], "big")
        # (the count is valid when the change counter equals its copy)
        if header[24:28] == header[92:96] and pages != size // page:
            raise bad(f"it counts {pages} pages, the file holds {size // page}")
    if not settled:
        check_wal(path)


def check_wal(path: str) -> None:
    """Refuse the state ``path`` when the WAL beside it (if any) is damaged
    where SQLite would drop committed transactions without an error (see
    _wal_damage).  It is read twice before refusing: a writer appending
    meanwhile could make one read see a frame still being written."""
    wal = path + "-wal"
    why = _wal_damage(wal)
    if why is not None and _wal_damage(wal) == why:
        raise CorruptDatabaseError(path, f"its WAL {wal!r} is damaged: {why}")


_WAL_MAGIC = (0x377F0682, 0x377F0683)
_MASK32 = np.uint64(0xFFFFFFFF)


def _wal_sums(s0: np.ndarray, s1: np.ndarray, words: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """SQLite's WAL checksum of each row of ``words`` (32-bit words, an even
    number a row), carried on from (s0, s1), one pair a row."""
    for i in range(0, words.shape[1], 2):
        s0 = (s0 + words[:, i].astype(np.uint64) + s1) & _MASK32
        s1 = (s1 + words[:, i + 1].astype(np.uint64) + s0) & _MASK32
    return s0, s1


def _wal_damage(wal: str) -> Optional[str]:
    """Why SQLite would silently drop transactions committed in this WAL, or
    None.  SQLite replays a WAL's frames up to the first whose salts or
    checksum do not match, and takes everything after for what a crash left
    unfinished; so one changed byte in a frame, or in the WAL's header, makes
    the transactions from there on vanish without an error.  A commit frame
    that checks out after such a frame (with the WAL's salts, chained from
    the frame before it) was written whole: only damage (or a lost write on
    power failure) puts a bad frame before it.  A damaged last commit frame
    cannot be told from one a power failure cut, and is not refused."""
    try:
        with open(wal, "rb") as f:
            data = f.read()
    except OSError:
        return None  # SQLite names what keeps the file from being read
    if len(data) < 32:
        return None
    magic, version, page = (int.from_bytes(data[i:i + 4], "big") for i in (0, 4, 8))
    order = ">u4" if magic & 1 else "<u4"
    # (the fields are big-endian; the checksums read words in the order
    # the magic number gives)
    head = np.frombuffer(data, ">u4", 8, 0).astype(np.uint64)
    s0, s1 = _wal_sums(np.zeros(1, np.uint64), np.zeros(1, np.uint64),
                       np.frombuffer(data, order, 6, 0)[None, :])
    if (magic not in _WAL_MAGIC or version != 3007000 or page < 512 or page > 65536
            or page & (page - 1) or (int(s0[0]), int(s1[0])) != (int(head[6]), int(head[7]))):
        # SQLite ignores a WAL whose header does not check out: it may hold
        # no frame (a WAL begun and left empty)
        held = (len(data) - 32) // (24 + 8192) if magic not in _WAL_MAGIC else (
            (len(data) - 32) // (24 + page) if 512 <= page <= 65536 else 1)
        return f"its header does not check out, and it holds {held} frames" if held else None
    size = 24 + page
    n = (len(data) - 32) // size
    if n == 0:
        return None
    frames = np.frombuffer(data, np.uint8, n * size, 32).reshape(n, size)
    fields = frames[:, :24].copy().view(">u4").astype(np.uint64)  # (n, 6)
    words = np.concatenate([frames[:, :8], frames[:, 24:]], axis=1).view(order)
    salted = (fields[:, 2] == head[4]) & (fields[:, 3] == head[5])
    # each frame's checksum carried on from the one stored in the frame before
    start0 = np.concatenate([head[6:7], fields[:-1, 4]])
    start1 = np.concatenate([head[7:8], fields[:-1, 5]])
    c0, c1 = _wal_sums(start0, start1, words)
    sound = salted & (c0 == fields[:, 4]) & (c1 == fields[:, 5])
    if sound.all():
        return None
    bad = int(np.argmin(sound))
    commits = np.flatnonzero(sound & (fields[:, 1] != 0))
    later = commits[commits > bad]
    if not len(later) and bad + 1 < n and salted[bad + 1] and fields[bad + 1, 1]:
        # the bad frame's stored checksum itself may be what changed: the
        # next frame then checks out from the checksum computed for it
        n0, n1 = _wal_sums(c0[bad:bad + 1], c1[bad:bad + 1], words[bad + 1:bad + 2])
        if (int(n0[0]), int(n1[0])) == (int(fields[bad + 1, 4]), int(fields[bad + 1, 5])):
            later = np.array([bad + 1])
    if not len(later):
        return None
    return (f"frame {bad + 1} of {n} does not check out, but frame {int(later[0]) + 1} "
            f"commits after it: SQLite would drop the transactions from frame {bad + 1} on")

_EXPECTED_SCHEMA: List[Tuple[Any, ...]] = []


def _expected_schema() -> List[Tuple[Any, ...]]:
    """The sqlite_master rows of the tables and indexes this format
    creates, as SQLite keeps them (made once, in memory)."""
    if not _EXPECTED_SCHEMA:
        conn = sqlite3.connect(":memory:")
        try:
            SQLiteRecrawlStore._create(conn)
            _EXPECTED_SCHEMA.extend(conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"))
        finally:
            conn.close()
    return _EXPECTED_SCHEMA


PageRow = Sequence[Any]


class RecrawlStore(Store):
    """The calls RecrawlState makes on its store (and a Store's: its length
    is the pages known; clear forgets every page, host and setting)."""

    #: where the data lives, for error messages
    address: str

    def _corrupt(self, reason: str) -> CorruptFileError:
        """The error for damaged data read from this store."""
        return CorruptStateError(self.address, reason)

    @abc.abstractmethod
    def get_pages(self, urls: Sequence[str]) -> Dict[str, PageRow]:
        """The stored rows of those URLs that are known."""

    @abc.abstractmethod
    def get_hosts(self, hosts: Sequence[str],
                  fields: Sequence[str] = HOST_FIELDS) -> Dict[str, List[float]]:
        """The statistics of those hosts that are known: ``fields`` (a subset
        of HOST_FIELDS), in that order."""

    @abc.abstractmethod
    def commit(self, pages: Sequence[PageRow], host_deltas: Mapping[str, Sequence[float]],
               hist_deltas: Mapping[int, int]) -> None:
        """Write page rows (tuples or lists in PAGE_FIELDS order), add host and
        histogram increments: all or nothing."""

    @abc.abstractmethod
    def due_candidates(self, now: float, n: int) -> List[Tuple[Any, ...]]:
        """Up to n rows (CANDIDATE_FIELDS) with due_at <= now, earliest due first."""

    # The same, a batch of pages column by column (what RecrawlState uses).
    # These defaults convert from and to rows; a store that keeps pages in
    # a columnar or packed form overrides them.

    def read_pages(self, urls: Sequence[str]) -> Pages:
        """The known pages among ``urls``."""
        return Pages.from_rows(list(self.get_pages(urls).values()))

    def write_pages(self, pages: Pages, host_deltas: Mapping[str, Sequence[float]],
                    hist_deltas: Mapping[int, int]) -> None:
        """As commit, the pages given column by column."""
        self.commit(pages.rows(), host_deltas, hist_deltas)

    def due_window(self, now: float, n: int) -> Pages:
        """As due_candidates, column by column (the fields of
        CANDIDATE_FIELDS hold their values; the others may not)."""
        rows = self.due_candidates(now, n)
        num = np.zeros(len(rows), PAGE_NUM)
        if rows:
            columns = list(zip(*rows))
            for j, name in enumerate(CANDIDATE_FIELDS[2:], 2):
                num[name] = columns[j]
        return check_pages(Pages([r[0] for r in rows], [r[1] for r in rows],
                                 [None] * len(rows), [None] * len(rows), num), self._corrupt)

    @abc.abstractmethod
    def count_due(self, now: float) -> int:
        """How many pages have due_at <= now."""

    @abc.abstractmethod
    def set_due(self, items: Sequence[Tuple[str, float]]) -> None:
        """Move the due time of known URLs (a lease on URLs handed out)."""

    @abc.abstractmethod
    def histogram(self) -> np.ndarray:
        """Pages per rate-histogram bin."""

    @abc.abstractmethod
    def get_meta(self) -> Dict[str, float]:
        """The scheduler's saved numbers."""

    @abc.abstractmethod
    def set_meta(self, values: Mapping[str, float]) -> None:
        """Save scheduler numbers."""

    # The requests made from each page (crawldedup.recrawl.links records,
    # kept as bytes by URL): a capability a store declares with keeps_links
    # (both stores here do).  Not abstract, so that a store written against
    # an interface without them keeps working for everything else; the
    # Scrapy middleware checks keeps_links when it is made.

    #: Whether read_links and write_links keep the requests made from pages.
    keeps_links = False

    def _no_links(self) -> TypeError:
        return TypeError(f"{type(self).__name__} keeps no links (keeps_links is False; the "
                         f"Scrapy middleware can do without: CRAWLDEDUP_RECRAWL_LINKS = False)")

    def read_links(self, urls: Sequence[str]) -> Dict[str, bytes]:
        """The stored link records of those ``urls`` that have one."""
        raise self._no_links()

    def write_links(self, records: Mapping[str, bytes]) -> None:
        """Store link records (URL -> bytes), replacing any before: all or nothing."""
        raise self._no_links()


def _host_fields(fields: Sequence[str]) -> Sequence[str]:
    unknown = [f for f in fields if f not in HOST_FIELDS]
    if unknown or not fields:
        raise ValueError(f"fields must be HOST_FIELDS names, got {list(fields)!r}")
    return fields


def _select_in(conn: Any, head: str, keys: Sequence[str]) -> Iterator[Tuple[Any, ...]]:
    """The rows of ``head IN (keys)``, the keys once each, a statement per
    _STATEMENT_ROWS of them."""
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), _STATEMENT_ROWS):
        part = unique[start:start + _STATEMENT_ROWS]
        yield from conn.execute(f"{head} IN ({','.join('?' * len(part))})", part)


def _check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or not prefix or any(c in prefix for c in "*?[]\\"):
        raise ValueError(f"prefix must be a non-empty str without glob characters, got "
                         f"{prefix!r}")
    return prefix


# What a store reads is checked before RecrawlState uses it: a value that
# RecrawlState never writes (a damaged file, a hand-edited key) raises the
# store's CorruptFileError naming the page, host or setting, instead of
# being taken for data or overwritten by the next write.

_STR = {str}
_STR_OR_NONE = {str, type(None)}
_NUMBER = {float, int}
#: Saved scheduler numbers that are positive when present.
_META_POSITIVE = ("mu", "budget")


def check_pages(pages: Pages, corrupt: Any) -> Pages:
    """``pages``, when every page holds what RecrawlState writes; else
    ``corrupt(reason)`` is raised for the first damaged one."""
    for name, column, allowed in (("URL", pages.keys, _STR), ("host", pages.host, _STR),
                                  ("ETag", pages.etag, _STR_OR_NONE),
                                  ("Last-Modified", pages.last_modified, _STR_OR_NONE)):
        if not set(map(type, column)) <= allowed:
            i = next(i for i, v in enumerate(column) if type(v) not in allowed)
            raise corrupt(f"the recrawl page {pages.keys[i]!r} is damaged: its {name} is "
                          f"{column[i]!r}")
    found = damaged(pages.num)
    if found is not None:
        i, why = found
        raise corrupt(f"the recrawl page {pages.keys[i]!r} is damaged: {why}")
    return pages


def _sound(value: Any) -> bool:
    return type(value) in _NUMBER and math.isfinite(value) and value >= 0


def check_hosts(found: Dict[str, List[Any]], fields: Sequence[str],
                corrupt: Any) -> Dict[str, List[float]]:
    """``found`` (host -> its ``fields``), when every value is a finite sum
    of at least 0; else ``corrupt(reason)`` for the first that is not."""
    flat = [v for values in found.values() for v in values]
    if set(map(type, flat)) <= _NUMBER:
        sums = np.array(flat, dtype=np.float64)
        if (sums >= 0).all() and np.isfinite(sums).all():
            return found
    for host, values in found.items():
        for name, value in zip(fields, values):
            if not _sound(value):
                raise corrupt(f"the recrawl host {host!r} is damaged: its {name} is "
                              f"{value!r}")
    return found  # pragma: no cover - the loop finds what the test above did


def check_hist(items: Sequence[Tuple[Any, Any]], corrupt: Any) -> np.ndarray:
    """Pages per rate bin from (bin, count) pairs; ``corrupt(reason)`` for a
    bin that does not exist or a count that is not an integer.  A count
    below 0 counts 0: two processes re-recording one page at the same
    moment each take it out of its old bin once."""
    counts = np.zeros(HIST_BINS, dtype=np.int64)
    for b, n in items:
        if type(b) is not int or not 0 <= b < HIST_BINS or type(n) is not int:
            raise corrupt(f"the recrawl rate histogram is damaged: bin {b!r} holds {n!r}")
        counts[b] = max(n, 0)
    return counts


def check_meta(meta: Dict[str, Any], corrupt: Any) -> Dict[str, float]:
    """The scheduler's saved numbers; ``corrupt(reason)`` for one that is not
    a finite number (or not positive, for mu and the budget)."""
    for key, value in meta.items():
        if type(value) not in _NUMBER or not math.isfinite(value) \
                or (key in _META_POSITIVE and not value > 0):
            raise corrupt(f"the recrawl scheduler setting {key!r} is damaged: {value!r}")
    return meta


def _checked_pages(urls: List[Any], hosts: List[Any], etags: List[Any], lms: List[Any],
                   dues: List[Any], blobs: List[Any], corrupt: Any) -> Pages:
    """Pages from the columns of SQLite rows, every value checked (see
    check_pages): ``corrupt(reason)`` names the first damaged page."""
    if set(map(type, blobs)) != {bytes} or set(map(len, blobs)) != {PACKED_SIZE}:
        i = bad_blob(blobs)
        blob = blobs[i]
        what = (f"{type(blob).__name__} of {len(blob)} bytes" if isinstance(blob, (bytes, str))
                else repr(blob))
        raise corrupt(f"the recrawl page {urls[i]!r} is damaged: its data is {what}, not "
                      f"{PACKED_SIZE} bytes")
    if set(map(type, dues)) - {float, int}:
        i = next(i for i, d in enumerate(dues) if type(d) not in (float, int))
        raise corrupt(f"the recrawl page {urls[i]!r} is damaged: its due time is {dues[i]!r}")
    return check_pages(Pages(urls, hosts, etags, lms, unpack(blobs, dues)), corrupt)


def _convert(conn: Any, version: int, columns: Sequence[str], path: str) -> None:
    """Rewrite the tables of a format-1 file (a column a page field) or a
    format-2 file (no checksums) in this format, inside the caller's
    transaction: every value is checked as a read checks it before its row
    is written with its checksum, and the first damaged one refuses the
    whole file (the transaction is rolled back)."""
    def corrupt(reason: str) -> CorruptFileError:
        return CorruptFileError(path, reason)

    if version == 1:
        missing = [f for f in ("id", *PAGE_FIELDS) if f not in columns]
        if missing:
            raise corrupt(f"its recrawl pages table lacks the columns {missing}")
        select = f"SELECT id, {', '.join(PAGE_FIELDS)} FROM old_pages WHERE id > ? " \
                 f"ORDER BY id LIMIT ?"
    else:
        select = ("SELECT id, url, host, etag, last_modified, due_at, data FROM old_pages "
                  "WHERE id > ? ORDER BY id LIMIT ?")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    old = [t for t in ("pages", "hosts", "hist", "meta") if t in tables]
    for table in old:
        conn.execute(f"ALTER TABLE {table} RENAME TO old_{table}")
    conn.execute("DROP INDEX IF EXISTS pages_due")
    SQLiteRecrawlStore._create(conn)
    insert = f"INSERT INTO pages (id, {_PAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    last = -1 << 63
    while True:
        rows = conn.execute(select, (last, _CONVERT_ROWS)).fetchall()
        if not rows:
            break
        last = rows[-1][0]
        if version == 1:
            for row in rows:
                if (type(row[1]) is not str or type(row[2]) is not str
                        or type(row[-1]) not in (float, int)):
                    raise corrupt(f"the recrawl page of row {row[0]} is damaged: url "
                                  f"{row[1]!r}, host {row[2]!r}, due {row[-1]!r}")
            try:
                pages = check_pages(Pages.from_rows([row[1:] for row in rows]), corrupt)
            except (TypeError, ValueError, OverflowError) as exc:
                raise corrupt(f"a recrawl page between rows {rows[0][0]} and {last} is "
                              f"damaged: {exc}") from None
        else:
            urls, hosts, etags, lms, dues, blobs = (list(c) for c in list(zip(*rows))[1:])
            pages = _checked_pages(urls, hosts, etags, lms, dues, blobs, corrupt)
        conn.executemany(insert, zip([row[0] for row in rows], pages.keys, pages.host,
                                     pages.etag, pages.last_modified,
                                     pages.num["due_at"].tolist(), pack(pages.num),
                                     page_sums(pages).tolist()))
    if "hosts" in old:
        rows = conn.execute(f"SELECT host, {_HOST_COLUMNS} FROM old_hosts").fetchall()
        check_hosts({row[0]: list(row[1:]) for row in rows}, HOST_FIELDS, corrupt)
        if rows:
            names = [row[0] for row in rows]
            if set(map(type, names)) != {str}:
                raise corrupt(f"a recrawl host name is damaged: "
                              f"{next(n for n in names if type(n) is not str)!r}")
            sums = _host_sums(names, [row[1:] for row in rows]).tolist()
            conn.executemany(_HOST_INSERT_SQL, [(*row, s) for row, s in zip(rows, sums)])
    if "hist" in old:
        items = conn.execute("SELECT bin, n FROM old_hist").fetchall()
        check_hist(items, corrupt)
        conn.executemany("INSERT INTO hist (bin, n, sum) VALUES (?, ?, ?)",
                         [(b, n, s) for (b, n), s in zip(items, _hist_sums(items).tolist())])
    if "meta" in old:
        meta = check_meta(dict(conn.execute("SELECT key, value FROM old_meta").fetchall()),
                          corrupt)
        keys = list(meta)
        if set(map(type, keys)) - {str}:
            raise corrupt(f"a recrawl scheduler setting's name is damaged: {keys!r}")
        values = [float(meta[k]) for k in keys]
        conn.executemany("INSERT INTO meta (key, value, sum) VALUES (?, ?, ?)",
                         list(zip(keys, values, _meta_sums(keys, values).tolist())))
    for table in old:
        conn.execute(f"DROP TABLE old_{table}")


# ---------------------------------------------------------------- SQLite

class SQLiteRecrawlStore(SQLiteFile, RecrawlStore):
    """Pages in a SQLite file: ``SQLiteRecrawlStore("recrawl.db")``.

    WAL mode: readers never wait for the writer and each ``commit`` (one
    ``record``/``record_many`` call) is one transaction, durable against a
    crash of the process as soon as it returns (``synchronous="FULL"`` makes
    it durable against power loss too, slower).  ``cache_mib``: SQLite's
    page cache of the connection, in MiB, taken only as the file grows (the
    default holds the URL and due indexes of about a million pages, which
    spares a re-crawl of that size about 15% of the store's CPU against a
    cache of 64).

    Damage is found where it is read: every row holds a checksum of its
    values, verified on every read, and opening the file checks its header
    and schema and runs SQLite's ``PRAGMA integrity_check`` (``check="full"``,
    the default: it also finds an index entry that no longer matches its
    row, which would make a known page read as new) or ``quick_check``
    (``check="quick"``: the file's structure only, about a fifth of the
    time).  Damage raises CorruptFileError naming the file; SQLite's other
    errors raise StoreUnavailableError naming it.
    """

    keeps_links = True

    # Pages of 8 KiB in a new file instead of SQLite's 4: a batch's
    # scattered URL-index inserts then dirty fewer pages of the WAL, which
    # makes recording about a tenth faster (most of all on a first crawl);
    # 16 KiB gains nothing over 4 (docs/benchmarks/recrawl.md, "SQLite page
    # size").
    _page_size = 8192

    def __init__(self, path: Any, *, timeout: float = 60.0, synchronous: str = "NORMAL",
                 cache_mib: int = 256, check: str = "full") -> None:
        if sqlite3 is None:  # pragma: no cover
            raise ImportError("SQLiteRecrawlStore needs the sqlite3 module, which this Python "
                              "was built without")
        if isinstance(cache_mib, bool) or not isinstance(cache_mib, int):
            raise TypeError(f"cache_mib must be an int (MiB), not {type(cache_mib).__name__}")
        if cache_mib < 1:
            raise ValueError(f"cache_mib must be an integer >= 1, got {cache_mib!r}")
        if check not in CHECKS:
            raise ValueError(f"check must be one of {CHECKS}, got {check!r}")
        self.cache_mib = cache_mib
        self.check = check
        self.address = f"SQLite file {os.fspath(path)!r}"
        #: URL -> row id of the pages the last get_pages read (see commit)
        self._ids: Dict[str, int] = {}
        #: host -> (row id, sums, checksum), or None when it was not found,
        #: of the hosts the last get_hosts read (see write_pages)
        self._host_rows: Dict[str, Optional[Tuple[int, List[float], int]]] = {}
        self._open_file(path, timeout, synchronous)

    def __repr__(self) -> str:
        return f"SQLiteRecrawlStore({self.path!r})"

    def _fail(self, exc: BaseException) -> StoreUnavailableError:
        return StoreUnavailableError(f"recrawl store {self.address}: {exc}")

    def _error(self, exc: BaseException) -> CrawldedupError:
        # Text that is not UTF-8 can only be damage: crawldedup writes str.
        if str(exc).startswith("Could not decode to UTF-8"):
            return CorruptDatabaseError(self.path, f"a damaged text value: {exc}")
        return super()._error(exc)

    def _corrupt(self, reason: str) -> CorruptFileError:
        return CorruptFileError(self.path, reason)

    def _before_connect(self) -> None:
        _check_header(self.path)

    def _prepare(self, conn: Any) -> None:
        conn.execute(f"PRAGMA cache_size=-{self.cache_mib * 1024}")
        # Checkpoint the WAL into the file every 64 MiB instead of SQLite's
        # 4 MiB: a batch of 10,000 pages writes more than 4 MiB, so at 4 MiB
        # every batch would pay a checkpoint and its fsync, and the pages
        # that successive batches rewrite (the URL index, the hosts) would
        # be written to the file each time.
        conn.execute("PRAGMA wal_autocheckpoint=16384")
        if self._current(conn):
            self._check_file(conn)
            return  # no write lock taken: opening a file of this format only reads it
        conn.execute("BEGIN IMMEDIATE")
        try:
            if self._current(conn):  # another process made or converted it meanwhile
                self._check_file(conn)
            else:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                columns = [r[1] for r in conn.execute("PRAGMA table_info(pages)")]
                if columns:
                    # A file of an older format: checked whole before its
                    # rows are checked one by one and sealed with checksums.
                    if "data" not in columns and version in (0, 1):
                        self._check_file(conn)
                        _convert(conn, 1, columns, self.path)
                    elif version == 2:
                        self._check_file(conn)
                        _convert(conn, 2, columns, self.path)
                    else:
                        raise CorruptFileError(
                            self.path, f"recrawl state of format {version}, this crawldedup "
                            f"reads {SQLITE_FORMAT} and converts 1 and 2")
                elif version != 0 or self._tables(conn) & {"hosts", "hist", "meta"}:
                    raise CorruptFileError(self.path, f"its recrawl tables are damaged: format "
                                           f"{version} without a pages table")
                else:
                    self._create(conn)
            conn.execute("COMMIT")
        except BaseException:
            self._roll_back(conn)
            raise

    @staticmethod
    def _tables(conn: Any) -> Set[str]:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _current(self, conn: Any) -> bool:
        """Whether the file is of this format; CorruptFileError when it says
        it is but its tables or indexes are not this format's."""
        if conn.execute("PRAGMA user_version").fetchone()[0] != SQLITE_FORMAT:
            return False
        found = {row[1]: tuple(row) for row in conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master")}
        for entry in _expected_schema():
            if found.get(entry[1]) != entry:
                raise CorruptFileError(self.path, f"its recrawl schema is damaged: {entry[0]} "
                                       f"{entry[1]!r} is {found.get(entry[1])!r}")
        return True

    def _check_file(self, conn: Any) -> None:
        """SQLite's own check of the whole file (see ``check``)."""
        pragma = "integrity_check" if self.check == "full" else "quick_check"
        said = [row[0] for row in conn.execute(f"PRAGMA {pragma}(5)")]
        if said != ["ok"]:
            raise CorruptDatabaseError(self.path, f"SQLite's {pragma} says: "
                                       + "; ".join(map(str, said)))

    @staticmethod
    def _create(conn: Any) -> None:
        # A rowid table, with the URL in its own index: a batch of new
        # pages is appended at the end of the table, and a batch of due
        # pages (recorded together before) is rewritten in place on
        # neighbouring pages; only the small URL index takes random
        # inserts.  (A table keyed by URL without a rowid would have every
        # batch rewrite pages all over it: about 2.5 times the bytes.)
        # A page's numbers are one BLOB (pages.pack): a batch binds 7
        # values a page instead of 19.  Every row ends with its checksum
        # (pages.row_sums).  The hosts are a rowid table with the host in
        # its own index too, so that SQLite's integrity check compares the
        # two copies of every host name (a damaged key of a table without
        # rowid would only make its row unreachable).
        conn.execute("CREATE TABLE IF NOT EXISTS pages (id INTEGER PRIMARY KEY, "
                     "url TEXT NOT NULL UNIQUE, host TEXT NOT NULL, etag TEXT, "
                     "last_modified TEXT, due_at REAL NOT NULL, data BLOB NOT NULL, "
                     "sum INTEGER NOT NULL)")
        conn.execute("CREATE INDEX IF NOT EXISTS pages_due ON pages (due_at)")
        host_columns = ", ".join(f"{name} REAL NOT NULL DEFAULT 0" for name in HOST_FIELDS)
        conn.execute(f"CREATE TABLE IF NOT EXISTS hosts (id INTEGER PRIMARY KEY, "
                     f"host TEXT NOT NULL UNIQUE, {host_columns}, sum INTEGER NOT NULL)")
        conn.execute("CREATE TABLE IF NOT EXISTS hist (bin INTEGER PRIMARY KEY, "
                     "n INTEGER NOT NULL, sum INTEGER NOT NULL)")
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, "
                     "value REAL, sum INTEGER NOT NULL) WITHOUT ROWID")
        conn.execute(f"PRAGMA user_version = {SQLITE_FORMAT}")

    def _pages_of(self, rows: List[Tuple[Any, ...]]) -> Pages:
        """Pages from rows of (url, host, etag, last_modified, due_at, data,
        sum), every value and checksum checked: a damaged page raises
        CorruptFileError naming its URL."""
        if not rows:
            return Pages.empty()
        urls, hosts, etags, lms, dues, blobs, sums = (list(c) for c in zip(*rows))
        pages = _checked_pages(urls, hosts, etags, lms, dues, blobs, self._corrupt)
        wrong = _first_wrong(sums, page_sums(pages))
        if wrong >= 0:
            raise self._corrupt(f"the recrawl page {urls[wrong]!r} is damaged: its row does "
                                f"not match its checksum")
        return pages

    def read_pages(self, urls: Sequence[str]) -> Pages:
        def work(conn: Any) -> Pages:
            rows = list(_select_in(conn, f"SELECT id, {_PAGE_COLUMNS} FROM pages WHERE url",
                                   urls))
            # remembered for write_pages: these pages are rewritten by row id
            self._ids = {row[1]: row[0] for row in rows}
            return self._pages_of([row[1:] for row in rows])
        return self._run(work)  # type: ignore[no-any-return]

    def get_pages(self, urls: Sequence[str]) -> Dict[str, PageRow]:
        return {row[0]: row for row in self.read_pages(urls).rows()}

    def get_hosts(self, hosts: Sequence[str],
                  fields: Sequence[str] = HOST_FIELDS) -> Dict[str, List[float]]:
        fields = _host_fields(fields)
        found = self._run(lambda conn: self._hosts_in(conn, hosts))
        # remembered for write_pages: these rows are updated by row id
        self._host_rows = {host: found.get(host) for host in hosts}
        if tuple(fields) == HOST_FIELDS:
            return {host: values for host, (_, values, _) in found.items()}
        at = [HOST_FIELDS.index(f) for f in fields]
        return {host: [values[i] for i in at] for host, (_, values, _) in found.items()}

    def _hosts_in(self, conn: Any,
                  hosts: Sequence[str]) -> Dict[str, Tuple[int, List[float], int]]:
        """host -> (row id, its HOST_FIELDS sums, checksum) of those hosts
        that are known, values and checksums checked."""
        rows = list(_select_in(conn, f"SELECT id, host, {_HOST_COLUMNS}, sum FROM hosts "
                                     f"WHERE host", hosts))
        check_hosts({row[1]: list(row[2:-1]) for row in rows}, HOST_FIELDS, self._corrupt)
        if rows:
            names = [row[1] for row in rows]
            if set(map(type, names)) != {str}:
                i = next(i for i, name in enumerate(names) if type(name) is not str)
                raise self._corrupt(f"the recrawl host {names[i]!r} is damaged: its name is "
                                    f"not text")
            wrong = _first_wrong([row[-1] for row in rows],
                                 _host_sums(names, [row[2:-1] for row in rows]))
            if wrong >= 0:
                raise self._corrupt(f"the recrawl host {names[wrong]!r} is damaged: its row "
                                    f"does not match its checksum")
        return {row[1]: (row[0], list(row[2:-1]), row[-1]) for row in rows}

    def _hist_in(self, conn: Any) -> List[Tuple[int, int]]:
        """The histogram's (bin, count) rows, checked."""
        rows = conn.execute("SELECT bin, n, sum FROM hist").fetchall()
        items = [(b, n) for b, n, _ in rows]
        check_hist(items, self._corrupt)
        wrong = _first_wrong([row[2] for row in rows], _hist_sums(items))
        if wrong >= 0:
            raise self._corrupt(f"the recrawl rate histogram is damaged: bin {items[wrong][0]} "
                                f"does not match its checksum")
        return items

    def write_pages(self, pages: Pages, host_deltas: Mapping[str, Sequence[float]],
                    hist_deltas: Mapping[int, int]) -> None:
        blobs = pack(pages.num)
        dues = pages.num["due_at"].tolist()
        sums = page_sums(pages).tolist()
        deltas = np.array([list(d) for d in host_deltas.values()], np.float64).reshape(
            len(host_deltas), len(HOST_FIELDS))

        known_hosts, self._host_rows = self._host_rows, {}
        ids_read = self._ids
        fast = True

        def work(conn: Any) -> None:
            # The pages the last read_pages read are updated in place by
            # their row id (one B-tree seek instead of two), in table
            # order; the URL is checked too, and should a row have gone or
            # changed hands since it was read (another process), the
            # upsert below writes it like any new page.  Either way every
            # value of the row is written, with its checksum.
            ids, self._ids = self._ids, {}
            rows = list(zip(pages.keys, pages.host, pages.etag, pages.last_modified, dues,
                            blobs, sums))
            rowids = list(map(ids.get, pages.keys))
            new = [row for row, rowid in zip(rows, rowids) if rowid is None]
            # (host, etag, last_modified, due_at, data, sum, id, url): the update's values
            known = [(*row[1:], rowid, row[0]) for row, rowid in zip(rows, rowids)
                     if rowid is not None]
            conn.execute("BEGIN IMMEDIATE")
            if known:
                known.sort(key=_ROWID)
                if conn.executemany(_UPDATE_SQL, known).rowcount != len(known):
                    new.extend(row for row, rowid in zip(rows, rowids) if rowid is not None)
            # New pages in URL order: the URL index is walked left to right,
            # and their row ids (the due index's tie-break) follow the URLs.
            new.sort(key=_URL)
            conn.executemany(_INSERT_SQL, new)
            if host_deltas:
                self._write_hosts(conn, host_deltas, deltas, known_hosts if fast else {})
            bins = [(b, d) for b, d in hist_deltas.items() if d]
            if bins:  # (a few hundred rows at most)
                counts = dict(self._hist_in(conn))
                changed = [(b, counts.get(b, 0) + d) for b, d in bins]
                conn.executemany("INSERT OR REPLACE INTO hist (bin, n, sum) VALUES (?, ?, ?)",
                                 [(b, n, s) for (b, n), s in
                                  zip(changed, _hist_sums(changed).tolist())])
            conn.execute("COMMIT")
        try:
            self._run(work)
        except _Stale:  # another process wrote one of the hosts since it was read
            fast = False
            self._ids = ids_read
            self._run(work)

    def _write_hosts(self, conn: Any, host_deltas: Mapping[str, Sequence[float]],
                     deltas: np.ndarray,
                     known: Mapping[str, Optional[Tuple[int, List[float], int]]]) -> None:
        """Add a batch's increments to its hosts' sums, inside the batch's
        transaction.  Hosts the last get_hosts read (``known``) are written
        from the values it checked, each update conditional on the row's
        checksum being the one read (_Stale when another process changed
        it meanwhile); the others are read (and checked) here first.  A
        damaged host is refused, never added to (which would seal the
        damage)."""
        names = list(host_deltas)
        unread = [name for name in names if name not in known]
        stored = [known.get(name) for name in names]
        if unread:
            found = self._hosts_in(conn, unread)
            stored = [found.get(name) if name in found else row
                      for name, row in zip(names, stored)]
        values = deltas.copy()
        at = [i for i, row in enumerate(stored) if row is not None]
        if at:
            values[at] += np.array([stored[i][1] for i in at], np.float64)  # type: ignore[index]
        sums = _host_sums(names, values).tolist()
        listed = values.tolist()
        updates = [(*listed[i], sums[i], stored[i][0], stored[i][2])  # type: ignore[index]
                   for i in at]
        inserts = [(name, *v, s) for name, v, s, row in zip(names, listed, sums, stored)
                   if row is None]
        for sql, rows in ((_HOST_UPDATE_SQL, updates), (_HOST_INSERT_SQL, inserts)):
            if rows and conn.executemany(sql, rows).rowcount != len(rows):
                raise _Stale()

    def commit(self, pages: Sequence[PageRow], host_deltas: Mapping[str, Sequence[float]],
               hist_deltas: Mapping[int, int]) -> None:
        self.write_pages(Pages.from_rows(pages), host_deltas, hist_deltas)

    def due_window(self, now: float, n: int) -> Pages:
        sql = (f"SELECT {_PAGE_COLUMNS} FROM pages WHERE due_at <= ? ORDER BY due_at LIMIT ?")
        return self._pages_of(self._run(lambda conn: conn.execute(sql, (now, n)).fetchall()))

    def due_candidates(self, now: float, n: int) -> List[Tuple[Any, ...]]:
        window = self.due_window(now, n)
        num = window.num
        columns = [num[name].tolist() for name in CANDIDATE_FIELDS[2:]]
        return list(zip(window.keys, window.host, *columns))

    def count_due(self, now: float) -> int:
        sql = "SELECT COUNT(*) FROM pages WHERE due_at <= ?"
        return int(self._run(lambda conn: conn.execute(sql, (now,)).fetchone()[0]))

    def set_due(self, items: Sequence[Tuple[str, float]]) -> None:
        due_of = dict(items)

        def work(conn: Any) -> None:
            # The rows are read (and checked) in the transaction, and
            # written back whole with their new due time and checksum.
            conn.execute("BEGIN IMMEDIATE")
            rows = list(_select_in(conn, f"SELECT id, {_PAGE_COLUMNS} FROM pages WHERE url",
                                   list(due_of)))
            pages = self._pages_of([row[1:] for row in rows])
            pages.num["due_at"] = [due_of[url] for url in pages.keys]
            conn.executemany("UPDATE pages SET due_at = ?, sum = ? WHERE id = ?",
                             zip(pages.num["due_at"].tolist(), page_sums(pages).tolist(),
                                 [row[0] for row in rows]))
            conn.execute("COMMIT")
        self._run(work)

    def histogram(self) -> np.ndarray:
        return check_hist(self._run(self._hist_in), self._corrupt)

    def get_meta(self) -> Dict[str, float]:
        rows = self._run(lambda conn: conn.execute("SELECT key, value, sum FROM meta")
                         .fetchall())
        meta = check_meta({key: value for key, value, _ in rows}, self._corrupt)
        if rows:
            keys = [row[0] for row in rows]
            if set(map(type, keys)) != {str}:
                raise self._corrupt(f"the recrawl scheduler settings are damaged: a name is "
                                    f"{next(k for k in keys if type(k) is not str)!r}")
            wrong = _first_wrong([row[2] for row in rows],
                                 _meta_sums(keys, [row[1] for row in rows]))
            if wrong >= 0:
                raise self._corrupt(f"the recrawl scheduler setting {keys[wrong]!r} is "
                                    f"damaged: its row does not match its checksum")
        return meta

    def set_meta(self, values: Mapping[str, float]) -> None:
        keys = list(values)
        numbers = [float(values[k]) for k in keys]
        sums = _meta_sums(keys, numbers).tolist()

        def work(conn: Any) -> None:
            conn.executemany("INSERT OR REPLACE INTO meta (key, value, sum) VALUES (?, ?, ?)",
                             list(zip(keys, numbers, sums)))
        self._run(work)

    def __len__(self) -> int:
        return int(self._run(lambda conn: conn.execute("SELECT COUNT(*) FROM pages")
                             .fetchone()[0]))

    def clear(self) -> None:
        def work(conn: Any) -> None:
            conn.execute("BEGIN IMMEDIATE")
            for table in ("pages", "hosts", "hist", "meta"):
                conn.execute(f"DELETE FROM {table}")
            conn.execute("DROP TABLE IF EXISTS links")
            conn.execute("COMMIT")
        self._run(work)

    # The links table is made by the first write_links: a file that never
    # had links written has none, and reads as holding no links.

    def read_links(self, urls: Sequence[str]) -> Dict[str, bytes]:
        def work(conn: Any) -> Dict[str, bytes]:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                            "AND name = 'links'").fetchone() is None:
                return {}
            found = {}
            for url, data in _select_in(conn, "SELECT url, data FROM links WHERE url", urls):
                if type(url) is not str or type(data) is not bytes:
                    raise self._corrupt(f"the recrawl links of {url!r} are damaged: "
                                        f"{type(data).__name__} instead of bytes")
                found[url] = data
            return found
        return self._run(work)  # type: ignore[no-any-return]

    def write_links(self, records: Mapping[str, bytes]) -> None:
        rows = [(url, bytes(data)) for url, data in records.items()]

        def work(conn: Any) -> None:
            conn.execute("BEGIN IMMEDIATE")
            # a rowid table: a record may hold a page's body (kilobytes),
            # which a WITHOUT ROWID table would keep in its B-tree's cells
            conn.execute("CREATE TABLE IF NOT EXISTS links (url TEXT PRIMARY KEY NOT NULL, "
                         "data BLOB NOT NULL)")
            conn.executemany("INSERT OR REPLACE INTO links (url, data) VALUES (?, ?)", rows)
            conn.execute("COMMIT")
        if rows:
            self._run(work)



def open_recrawl_store(spec: Any, **kwargs: Any) -> RecrawlStore:
    """A store from a RecrawlStore, a redis-py client, a ``redis://``,
    ``rediss://`` or ``unix://`` URL, or a SQLite path (``sqlite:///PATH``
    or a plain path)."""
    if isinstance(spec, RecrawlStore):
        return spec
    if hasattr(spec, "pipeline") and hasattr(spec, "hgetall"):  # a redis-py client
        store: RecrawlStore = schemes.backend("recrawl", "redis")(spec, **kwargs)
        return store
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise TypeError(f"store must be a RecrawlStore, a redis.Redis client, a redis:// URL "
                        f"or a SQLite path, got {type(spec).__name__}")
    if schemes.scheme_of(spec) is None:  # a plain path
        return open_sqlite_url(spec, **kwargs)
    store = schemes.opener("recrawl", spec)(spec, **kwargs)
    return store


def open_sqlite_url(url: str, **kwargs: Any) -> SQLiteRecrawlStore:
    """The SQLiteRecrawlStore of ``sqlite:///PATH`` or a plain path."""
    path = schemes.sqlite_path(url)
    if not path:
        raise ValueError("store path is empty")
    return SQLiteRecrawlStore(path, **kwargs)


__all__ = ["RecrawlStore", "SQLiteRecrawlStore", "open_recrawl_store",
           "PAGE_FIELDS", "HOST_FIELDS", "HOST_RATE_FIELDS"]
