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
from typing import Any, Dict, Iterator, List, Mapping, Sequence, Tuple

import numpy as np

from crawldedup.errors import CorruptFileError, CorruptStateError, StoreUnavailableError
from crawldedup.recrawl.pages import (PACKED_SIZE, PAGE_FIELDS, PAGE_NUM, Pages, bad_blob,
                                      damaged, pack, unpack)
from crawldedup.recrawl.schedule import HIST_BINS
from crawldedup.stores.base import Store
from crawldedup.stores.sqlite import SQLiteFile

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
#: The format of the SQLite file (PRAGMA user_version): 2 packs a page's
#: numbers in one BLOB; 0 or 1 (a column a field) is converted on opening.
SQLITE_FORMAT = 2
# The columns of a page in format 2: the strings, the due time (for its
# index) and the packed numbers.
_PAGE_COLUMNS = "url, host, etag, last_modified, due_at, data"
# A page read before, rewritten by its row id, its URL checked.
_UPDATE_SQL = ("UPDATE pages SET etag = ?, last_modified = ?, due_at = ?, data = ? "
               "WHERE id = ? AND url = ?")
_INSERT_SQL = (f"INSERT INTO pages ({_PAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
               "ON CONFLICT(url) DO UPDATE SET etag = excluded.etag, "
               "last_modified = excluded.last_modified, due_at = excluded.due_at, "
               "data = excluded.data")
# A host's sums are added to only while they hold what crawldedup writes
# (finite sums of at least 0; SQLite orders text and BLOBs after every
# number, and a NULL fails any comparison, so one BETWEEN a field tells).
# The histogram is checked whole before a write.
_HOST_SQL = (f"INSERT INTO hosts (host, {', '.join(HOST_FIELDS)}) VALUES ("
             + ",".join("?" * (len(HOST_FIELDS) + 1)) + ") ON CONFLICT(host) DO UPDATE SET "
             + ", ".join(f"{f} = {f} + excluded.{f}" for f in HOST_FIELDS) + " WHERE "
             + " AND ".join(f"{f} BETWEEN 0 AND 1.7976931348623157e308" for f in HOST_FIELDS))
_HIST_SQL = ("INSERT INTO hist (bin, n) VALUES (?, ?) ON CONFLICT(bin) DO UPDATE SET "
             "n = n + excluded.n")
_ROWID = operator.itemgetter(4)
_URL = operator.itemgetter(0)
# Pages converted a statement at a time from format 1.
_CONVERT_ROWS = 20_000


def _convert_v1(conn: Any, columns: Sequence[str], path: str) -> None:
    """Rewrite a format-1 pages table (a column a field) in format 2, inside
    the caller's transaction."""
    missing = [f for f in ("id", *PAGE_FIELDS) if f not in columns]
    if missing:
        raise CorruptFileError(path, f"its recrawl pages table lacks the columns {missing}")
    conn.execute("ALTER TABLE pages RENAME TO pages_v1")
    conn.execute("DROP INDEX IF EXISTS pages_due")
    SQLiteRecrawlStore._create(conn)
    select = f"SELECT id, {', '.join(PAGE_FIELDS)} FROM pages_v1 WHERE id > ? ORDER BY id LIMIT ?"
    insert = f"INSERT INTO pages (id, {_PAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
    last = -1 << 63
    while True:
        rows = conn.execute(select, (last, _CONVERT_ROWS)).fetchall()
        if not rows:
            break
        last = rows[-1][0]
        for row in rows:
            if (type(row[1]) is not str or type(row[2]) is not str
                    or type(row[-1]) not in (float, int)):
                raise CorruptFileError(path, f"the recrawl page of row {row[0]} is damaged: "
                                       f"url {row[1]!r}, host {row[2]!r}, due {row[-1]!r}")
        try:
            pages = Pages.from_rows([row[1:] for row in rows])
        except (TypeError, ValueError, OverflowError) as exc:
            raise CorruptFileError(path, f"a recrawl page between rows {rows[0][0]} and "
                                   f"{last} is damaged: {exc}") from None
        conn.executemany(insert, zip([row[0] for row in rows], pages.keys, pages.host,
                                     pages.etag, pages.last_modified,
                                     pages.num["due_at"].tolist(), pack(pages.num)))
    conn.execute("DROP TABLE pages_v1")

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
    # kept as bytes by URL).  Not abstract: a store made for an earlier
    # crawldedup keeps working for everything else.

    def read_links(self, urls: Sequence[str]) -> Dict[str, bytes]:
        """The stored link records of those ``urls`` that have one."""
        raise NotImplementedError(f"{type(self).__name__} keeps no links (the Scrapy "
                                  f"middleware can do without: CRAWLDEDUP_RECRAWL_LINKS = False)")

    def write_links(self, records: Mapping[str, bytes]) -> None:
        """Store link records (URL -> bytes), replacing any before: all or nothing."""
        raise NotImplementedError(f"{type(self).__name__} keeps no links (the Scrapy "
                                  f"middleware can do without: CRAWLDEDUP_RECRAWL_LINKS = False)")


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


# ---------------------------------------------------------------- SQLite

class SQLiteRecrawlStore(SQLiteFile, RecrawlStore):
    """Pages in a SQLite file: ``SQLiteRecrawlStore("recrawl.db")``.

    WAL mode: readers never wait for the writer and each ``commit`` (one
    ``record``/``record_many`` call) is one transaction, durable against a
    crash of the process as soon as it returns (``synchronous="FULL"`` makes
    it durable against power loss too, slower).  ``cache_mib``: SQLite's
    page cache of the connection, in MiB, taken only as the file grows (the
    default holds the URL and due indexes of about a million pages; a
    store's writes and reads of a re-crawl of 1,000,000 URLs took 15% less
    CPU with it than with 64).
    Errors of SQLite raise StoreUnavailableError naming the file.
    """

    # Pages of 8 KiB in a new file instead of SQLite's 4: a million pages
    # recorded in batches of 10,000 went 9 to 12% faster over both crawls
    # (the first crawl 13 to 24%: a batch's scattered URL-index inserts
    # dirty fewer pages of the WAL), 16 KiB no better than 4.
    _page_size = 8192

    def __init__(self, path: Any, *, timeout: float = 60.0, synchronous: str = "NORMAL",
                 cache_mib: int = 256) -> None:
        if sqlite3 is None:  # pragma: no cover
            raise ImportError("SQLiteRecrawlStore needs the sqlite3 module, which this Python "
                              "was built without")
        if isinstance(cache_mib, bool) or not isinstance(cache_mib, int) or cache_mib < 1:
            raise ValueError(f"cache_mib must be an integer >= 1, got {cache_mib!r}")
        self.cache_mib = cache_mib
        self.address = f"SQLite file {os.fspath(path)!r}"
        #: URL -> row id of the pages the last get_pages read (see commit)
        self._ids: Dict[str, int] = {}
        self._open_file(path, timeout, synchronous)

    def __repr__(self) -> str:
        return f"SQLiteRecrawlStore({self.path!r})"

    def _fail(self, exc: BaseException) -> StoreUnavailableError:
        return StoreUnavailableError(f"recrawl store {self.address}: {exc}")

    def _corrupt(self, reason: str) -> CorruptFileError:
        return CorruptFileError(self.path, reason)

    def _prepare(self, conn: Any) -> None:
        conn.execute(f"PRAGMA cache_size=-{self.cache_mib * 1024}")
        # Checkpoint the WAL into the file every 64 MiB instead of SQLite's
        # 4 MiB: a batch of 10,000 pages writes more than 4 MiB, so each
        # one paid a checkpoint and its fsync, and pages that successive
        # batches rewrite (the URL index, the hosts) were written each time.
        conn.execute("PRAGMA wal_autocheckpoint=16384")
        if self._ready(conn):
            return  # no write lock taken: a file only read opens as before
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            columns = [r[1] for r in conn.execute("PRAGMA table_info(pages)")]
            if columns and "data" not in columns:
                _convert_v1(conn, columns, self.path)
            elif columns and version != SQLITE_FORMAT:
                raise CorruptFileError(self.path, f"recrawl state of format {version}, "
                                       f"this crawldedup reads {SQLITE_FORMAT} and converts 1")
            self._create(conn)
            conn.execute("COMMIT")
        except BaseException:
            self._roll_back(conn)
            raise

    @staticmethod
    def _ready(conn: Any) -> bool:
        """Whether the file has the tables of this format already."""
        if conn.execute("PRAGMA user_version").fetchone()[0] != SQLITE_FORMAT:
            return False
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master "
                                              "WHERE type = 'table'")}
        return {"pages", "hosts", "hist", "meta"} <= tables

    @staticmethod
    def _create(conn: Any) -> None:
        # A rowid table, with the URL in its own index: a batch of new
        # pages is appended at the end of the table, and a batch of due
        # pages (recorded together before) is rewritten in place on
        # neighbouring pages; only the small URL index takes random
        # inserts.  (Keyed by URL without a rowid, every batch rewrote
        # pages all over the table: about 2.5 times the bytes written.)
        # A page's numbers are one BLOB (pages.pack): a batch binds 6
        # values a page instead of 18, and reads 7.
        conn.execute("CREATE TABLE IF NOT EXISTS pages (id INTEGER PRIMARY KEY, "
                     "url TEXT NOT NULL UNIQUE, host TEXT NOT NULL, etag TEXT, "
                     "last_modified TEXT, due_at REAL NOT NULL, data BLOB NOT NULL)")
        conn.execute("CREATE INDEX IF NOT EXISTS pages_due ON pages (due_at)")
        host_columns = ", ".join(f"{name} REAL NOT NULL DEFAULT 0" for name in HOST_FIELDS)
        conn.execute(f"CREATE TABLE IF NOT EXISTS hosts (host TEXT PRIMARY KEY NOT NULL, "
                     f"{host_columns}) WITHOUT ROWID")
        conn.execute("CREATE TABLE IF NOT EXISTS hist (bin INTEGER PRIMARY KEY, "
                     "n INTEGER NOT NULL)")
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, "
                     "value REAL) WITHOUT ROWID")
        conn.execute(f"PRAGMA user_version = {SQLITE_FORMAT}")

    def _pages_of(self, rows: List[Tuple[Any, ...]]) -> Pages:
        """Pages from rows of (url, host, etag, last_modified, due_at, data),
        every BLOB checked: a damaged one raises CorruptFileError naming its
        URL."""
        if not rows:
            return Pages.empty()
        urls, hosts, etags, lms, dues, blobs = (list(c) for c in zip(*rows))
        if set(map(type, blobs)) != {bytes} or set(map(len, blobs)) != {PACKED_SIZE}:
            i = bad_blob(blobs)
            raise self._corrupt(f"the recrawl page {urls[i]!r} is damaged: its data is "
                                f"{type(blobs[i]).__name__} of "
                                f"{len(blobs[i]) if blobs[i] is not None else 0} bytes, "
                                f"not {PACKED_SIZE} bytes")
        if set(map(type, dues)) - {float, int}:
            i = next(i for i, d in enumerate(dues) if type(d) not in (float, int))
            raise self._corrupt(f"the recrawl page {urls[i]!r} is damaged: its due time is "
                                f"{dues[i]!r}")
        return check_pages(Pages(urls, hosts, etags, lms, unpack(blobs, dues)), self._corrupt)

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
        return self._run(lambda conn: self._hosts_in(conn, hosts, fields))  # type: ignore[no-any-return]

    def _hosts_in(self, conn: Any, hosts: Sequence[str],
                  fields: Sequence[str]) -> Dict[str, List[float]]:
        """The ``fields`` of those hosts that are known, checked."""
        rows = _select_in(conn, f"SELECT host, {', '.join(fields)} FROM hosts WHERE host",
                          hosts)
        return check_hosts({row[0]: list(row[1:]) for row in rows}, fields, self._corrupt)

    def write_pages(self, pages: Pages, host_deltas: Mapping[str, Sequence[float]],
                    hist_deltas: Mapping[int, int]) -> None:
        blobs = pack(pages.num)
        dues = pages.num["due_at"].tolist()

        def work(conn: Any) -> None:
            # The pages the last read_pages read are updated in place by
            # their row id (one B-tree seek instead of two), in table
            # order; the URL is checked too, and should a row have gone or
            # changed hands since it was read (another process), the
            # upsert below writes it like any new page.
            ids, self._ids = self._ids, {}
            rows = list(zip(pages.keys, pages.host, pages.etag, pages.last_modified, dues,
                            blobs))
            rowids = list(map(ids.get, pages.keys))
            new = [row for row, rowid in zip(rows, rowids) if rowid is None]
            # (etag, last_modified, due_at, data, id, url): the update's values
            known = [(*row[2:], rowid, row[0]) for row, rowid in zip(rows, rowids)
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
            # A damaged host or bin is not added to (which would hide it):
            # its upsert changes nothing, and the transaction is refused.
            sums = [(host, *delta) for host, delta in host_deltas.items()]
            if conn.executemany(_HOST_SQL, sums).rowcount != len(sums):
                self._hosts_in(conn, list(host_deltas), HOST_FIELDS)
                raise self._corrupt("a recrawl host could not be updated")  # pragma: no cover
            bins = [(b, d) for b, d in hist_deltas.items() if d]
            if bins:  # (a few hundred rows at most)
                check_hist(conn.execute("SELECT bin, n FROM hist").fetchall(), self._corrupt)
                conn.executemany(_HIST_SQL, bins)
            conn.execute("COMMIT")
        self._run(work)

    def commit(self, pages: Sequence[PageRow], host_deltas: Mapping[str, Sequence[float]],
               hist_deltas: Mapping[int, int]) -> None:
        self.write_pages(Pages.from_rows(pages), host_deltas, hist_deltas)

    def due_window(self, now: float, n: int) -> Pages:
        # What the ranking reads: not the validators (two strings a row).
        sql = ("SELECT url, host, NULL, NULL, due_at, data FROM pages WHERE due_at <= ? "
               "ORDER BY due_at LIMIT ?")
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
        def work(conn: Any) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("UPDATE pages SET due_at = ? WHERE url = ?",
                             [(due, url) for url, due in items])
            conn.execute("COMMIT")
        self._run(work)

    def histogram(self) -> np.ndarray:
        return check_hist(self._run(lambda conn: conn.execute("SELECT bin, n FROM hist")
                                    .fetchall()), self._corrupt)

    def get_meta(self) -> Dict[str, float]:
        rows = self._run(lambda conn: conn.execute("SELECT key, value FROM meta").fetchall())
        return check_meta({key: value for key, value in rows}, self._corrupt)

    def set_meta(self, values: Mapping[str, float]) -> None:
        def work(conn: Any) -> None:
            conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                             list(values.items()))
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

    # The links table is made by the first write_links: a file written
    # before has none, and reads as holding no links.

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
    """A store from a RecrawlStore, a ``redis://``/``rediss://``/``unix://`` URL, or a
    SQLite path (``sqlite:///PATH`` or a plain path)."""
    from crawldedup.recrawl.redis_store import RedisRecrawlStore
    if isinstance(spec, RecrawlStore):
        return spec
    if hasattr(spec, "pipeline") and hasattr(spec, "hgetall"):
        return RedisRecrawlStore(spec, **kwargs)
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str):
        raise TypeError(f"store must be a RecrawlStore, a redis.Redis client, a redis:// URL "
                        f"or a SQLite path, got {type(spec).__name__}")
    if spec.startswith(("redis://", "rediss://", "unix://")):
        return RedisRecrawlStore(spec, **kwargs)
    if spec.startswith("sqlite:///"):
        spec = spec[len("sqlite:///"):]
    if not spec:
        raise ValueError("store path is empty")
    return SQLiteRecrawlStore(spec, **kwargs)




def __getattr__(name: str) -> Any:
    # RedisRecrawlStore lives in redis_store (which imports this module).
    if name == "RedisRecrawlStore":
        from crawldedup.recrawl.redis_store import RedisRecrawlStore
        return RedisRecrawlStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["RecrawlStore", "SQLiteRecrawlStore", "open_recrawl_store",
           "PAGE_FIELDS", "HOST_FIELDS", "HOST_RATE_FIELDS"]
