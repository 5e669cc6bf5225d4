"""Where a RecrawlState keeps its pages: SQLite (embedded default) or Redis.

Both stores hold the same rows and answer the same calls; RecrawlState does
all the logic.  A page row is a tuple in the order of ``PAGE_FIELDS``; host
statistics are sums in the order of ``HOST_FIELDS``, always changed by
increments (so crawlers sharing a store add up correctly).

* :class:`SQLiteRecrawlStore`: one file in WAL mode; each ``commit`` is one
  transaction, so a fetch recorded before ``kill -9`` of the crawler is kept.
* :class:`RedisRecrawlStore`: a hash per URL (``PREFIX:page:URL``), a sorted
  set of URLs by due time (``PREFIX:due``), a hash per host
  (``PREFIX:host:HOST``), the rate histogram (``PREFIX:hist``) and settings
  (``PREFIX:meta``); each ``commit`` is one MULTI/EXEC transaction.
"""

from __future__ import annotations

import abc
import os
from typing import Any, Dict, List, Mapping, Sequence, Set, Tuple

import numpy as np

from crawldedup._kernel import hash64
from crawldedup.errors import StoreUnavailableError
from crawldedup.recrawl.schedule import HIST_BINS
from crawldedup.stores.sqlite import SQLiteFile

try:
    import sqlite3
except ImportError:  # pragma: no cover - a Python built without SQLite
    sqlite3 = None  # type: ignore[assignment]

PAGE_FIELDS = ("url", "host", "etag", "last_modified", "content_length", "digest", "simhash",
               "first_seen", "last_fetched", "last_changed", "fetches", "changes",
               "t_changed", "t_unchanged", "rate", "interval", "due_at")
HOST_FIELDS = ("changes", "t_changed", "t_unchanged", "intervals", "lm_checks", "lm_lies",
               "etag_checks", "etag_lies", "bad_dates", "bad_lengths")
#: The host statistics the pooled change rate is computed from.
HOST_RATE_FIELDS = ("changes", "t_changed", "t_unchanged", "intervals")
#: What due_candidates returns of each page.
CANDIDATE_FIELDS = ("url", "host", "last_fetched", "changes", "t_changed", "t_unchanged",
                    "fetches")
_TEXT = {"url", "host", "etag", "last_modified"}
_INT = {"content_length", "simhash", "fetches", "changes"}


def _sql_type(name: str) -> str:
    if name in _TEXT:
        return "TEXT"
    if name == "digest":
        return "BLOB"
    return "INTEGER" if name in _INT else "REAL"


# Rows per statement when reading a batch (SQLite allows 999 variables before 3.32).
_STATEMENT_ROWS = 500

PageRow = Sequence[Any]


class RecrawlStore(abc.ABC):
    """The calls RecrawlState makes on its store."""

    #: where the data lives, for error messages
    address: str

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

    @abc.abstractmethod
    def __len__(self) -> int:
        """Pages known."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Forget every page, host and setting."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection.  Idempotent."""

    def __enter__(self) -> "RecrawlStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _host_fields(fields: Sequence[str]) -> Sequence[str]:
    unknown = [f for f in fields if f not in HOST_FIELDS]
    if unknown or not fields:
        raise ValueError(f"fields must be HOST_FIELDS names, got {list(fields)!r}")
    return fields


def _check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or not prefix or any(c in prefix for c in "*?[]\\"):
        raise ValueError(f"prefix must be a non-empty str without glob characters, got "
                         f"{prefix!r}")
    return prefix


# ---------------------------------------------------------------- SQLite

#: The layout of the SQLite file, kept in ``PRAGMA user_version``.  1 (files
#: written before layouts were numbered, user_version 0): pages keyed by a
#: UNIQUE index on the URL text.  2: keyed by a 64-bit hash of the URL.
SQLITE_LAYOUT = 2


def url_key(url: str, probe: int = 0) -> int:
    """The key of a URL in the SQLite store: MurmurHash3's low 64 bits of its
    UTF-8 with seed ``probe``, as a signed integer.  Two URLs with the same
    key (a chance of 2**-64 for a pair) are told apart by the URL kept in the
    row: the one that comes second takes its key of the next probe."""
    value = hash64(url, probe)
    return value - (1 << 64) if value >= 1 << 63 else value


class SQLiteRecrawlStore(SQLiteFile, RecrawlStore):
    """Pages in a SQLite file: ``SQLiteRecrawlStore("recrawl.db")``.

    WAL mode: readers never wait for the writer and each ``commit`` (one
    ``record``/``record_many`` call) is one transaction, durable against a
    crash of the process as soon as it returns (``synchronous="FULL"`` makes
    it durable against power loss too, slower).  Errors of SQLite raise
    StoreUnavailableError naming the file.  A file of layout 1 (written
    before layouts were numbered) is converted when opened, in one
    transaction; a file of a newer layout raises StoreUnavailableError.
    """

    def __init__(self, path: Any, *, timeout: float = 60.0, synchronous: str = "NORMAL",
                 cache_mib: int = 256) -> None:
        if isinstance(cache_mib, bool) or not isinstance(cache_mib, int) or cache_mib < 1:
            raise ValueError(f"cache_mib must be an integer >= 1, got {cache_mib!r}")
        self.cache_mib = cache_mib
        if sqlite3 is None:  # pragma: no cover
            raise ImportError("SQLiteRecrawlStore needs the sqlite3 module, which this Python "
                              "was built without")
        self.address = f"SQLite file {os.fspath(path)!r}"
        self._open_file(path, timeout, synchronous)

    def __repr__(self) -> str:
        return f"SQLiteRecrawlStore({self.path!r})"

    def _fail(self, exc: BaseException) -> StoreUnavailableError:
        return StoreUnavailableError(f"recrawl store {self.address}: {exc}")

    def _prepare(self, conn: Any) -> None:
        # Checkpoint the WAL into the file every 64 MiB instead of SQLite's
        # 4 MiB: a batch of 10,000 pages writes more than 4 MiB, so each
        # one paid a checkpoint and its fsync.
        conn.execute("PRAGMA wal_autocheckpoint=16384")
        # The page cache (SQLite takes memory up to it as pages are read):
        # a million pages make a file of ~230 MB; at the package's 64 MiB,
        # re-recording them read most table pages from the OS again.
        conn.execute(f"PRAGMA cache_size=-{self.cache_mib * 1024}")
        conn.execute("BEGIN IMMEDIATE")
        try:
            layout = conn.execute("PRAGMA user_version").fetchone()[0]
            if layout > SQLITE_LAYOUT:
                raise sqlite3.DatabaseError(
                    f"its layout is {layout}, written by a newer crawldedup; this one reads "
                    f"layouts 1 to {SQLITE_LAYOUT}: upgrade crawldedup")
            if layout < SQLITE_LAYOUT:
                tables = {row[0] for row in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'")}
                if "pages" in tables:
                    self._convert_layout_1(conn)
                else:
                    self._create(conn)
                conn.execute(f"PRAGMA user_version = {SQLITE_LAYOUT}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _create(conn: Any) -> None:
        # A rowid table with a UNIQUE index on a 64-bit hash of the URL: a
        # batch of new pages is appended at the end of the table, a batch of
        # due pages (recorded together before) is rewritten in place on
        # neighbouring pages, and the scattered inserts go to the key index,
        # whose entries are two integers (a million pages: ~20 MB, which
        # stays in the page cache; layout 1's index on the URL text was
        # several times that, and every search compared strings).
        columns = ", ".join(f"{name} {_sql_type(name)}" for name in PAGE_FIELDS[1:])
        conn.execute(f"CREATE TABLE IF NOT EXISTS pages (id INTEGER PRIMARY KEY, "
                     f"key INTEGER NOT NULL UNIQUE, url TEXT NOT NULL, {columns})")
        conn.execute("CREATE INDEX IF NOT EXISTS pages_due ON pages (due_at)")
        host_columns = ", ".join(f"{name} REAL NOT NULL DEFAULT 0" for name in HOST_FIELDS)
        conn.execute(f"CREATE TABLE IF NOT EXISTS hosts (host TEXT PRIMARY KEY NOT NULL, "
                     f"{host_columns}) WITHOUT ROWID")
        conn.execute("CREATE TABLE IF NOT EXISTS hist (bin INTEGER PRIMARY KEY, "
                     "n INTEGER NOT NULL)")
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, "
                     "value REAL) WITHOUT ROWID")

    @classmethod
    def _convert_layout_1(cls, conn: Any) -> None:
        """Layout 1 (pages keyed by their URL text) to layout 2, in the
        caller's transaction: the pages are copied in their order with their
        keys; hosts, histogram and settings stay as they are."""
        conn.execute("DROP INDEX IF EXISTS pages_due")
        conn.execute("ALTER TABLE pages RENAME TO pages_layout_1")
        cls._create(conn)
        fields = ", ".join(PAGE_FIELDS)
        insert = (f"INSERT INTO pages (key, {fields}) VALUES ("
                  + ",".join("?" * (len(PAGE_FIELDS) + 1)) + ")")
        taken: Set[int] = set()
        rows = conn.execute(f"SELECT {fields} FROM pages_layout_1 ORDER BY id")
        while True:
            chunk = rows.fetchmany(10_000)
            if not chunk:
                break
            out = []
            for row in chunk:
                probe = 0
                key = url_key(row[0])
                while key in taken:
                    probe += 1
                    key = url_key(row[0], probe)
                taken.add(key)
                out.append((key, *row))
            conn.executemany(insert, out)
        conn.execute("DROP TABLE pages_layout_1")

    @staticmethod
    def _slots(conn: Any, urls: Sequence[str], columns: str) -> Dict[str, Tuple[int, Any]]:
        """url -> (key, its row of ``url, columns``) for the known URLs among
        ``urls`` (distinct), (the key it would take, None) for the others.
        One query per _STATEMENT_ROWS URLs; a URL whose key holds another URL
        (or that another of ours claimed) asks again with its next probe."""
        out: Dict[str, Tuple[int, Any]] = {}
        claimed: Set[int] = set()
        pending = [(url, 0) for url in urls]
        while pending:
            asked: Dict[int, Tuple[str, int]] = {}
            again: List[Tuple[str, int]] = []
            for url, probe in pending:
                key = url_key(url, probe)
                if key in asked:
                    again.append((url, probe))  # the same key, in the next round
                else:
                    asked[key] = (url, probe)
            keys = list(asked)
            found: Dict[int, Any] = {}
            for start in range(0, len(keys), _STATEMENT_ROWS):
                part = keys[start:start + _STATEMENT_ROWS]
                sql = (f"SELECT key, url{columns} FROM pages WHERE key IN ("
                       + ",".join("?" * len(part)) + ")")
                for row in conn.execute(sql, part):
                    found[row[0]] = row
            for key, (url, probe) in asked.items():
                row = found.get(key)
                if row is None:
                    if key in claimed:
                        again.append((url, probe + 1))
                    else:
                        claimed.add(key)
                        out[url] = (key, None)
                elif row[1] == url:
                    out[url] = (key, row[1:])
                else:
                    again.append((url, probe + 1))
            pending = again
        return out

    def get_pages(self, urls: Sequence[str]) -> Dict[str, PageRow]:
        columns = "".join(f", {name}" for name in PAGE_FIELDS[1:])
        fields = ", ".join(PAGE_FIELDS)

        def work(conn: Any) -> Dict[str, PageRow]:
            unique = list(dict.fromkeys(urls))
            first = {url: url_key(url) for url in unique}
            found: Dict[str, PageRow] = {}
            exact = len(set(first.values())) == len(first)
            if exact:
                # The common case, one query per _STATEMENT_ROWS URLs: each
                # row found must be one of ours under its first key; if one
                # is not, some key holds another URL and _slots sorts it out.
                keys = list(first.values())
                get = first.get
                for start in range(0, len(keys), _STATEMENT_ROWS):
                    part = keys[start:start + _STATEMENT_ROWS]
                    sql = (f"SELECT key, {fields} FROM pages WHERE key IN ("
                           + ",".join("?" * len(part)) + ")")
                    for row in conn.execute(sql, part):
                        if get(row[1]) != row[0]:
                            exact = False
                        found[row[1]] = row[1:]
            if exact:
                return found
            slots = self._slots(conn, unique, columns)
            return {url: row for url, (_key, row) in slots.items() if row is not None}
        return self._run(work)  # type: ignore[no-any-return]

    def get_hosts(self, hosts: Sequence[str],
                  fields: Sequence[str] = HOST_FIELDS) -> Dict[str, List[float]]:
        columns = ", ".join(_host_fields(fields))

        def work(conn: Any) -> Dict[str, List[float]]:
            found: Dict[str, List[float]] = {}
            unique = list(dict.fromkeys(hosts))
            for start in range(0, len(unique), _STATEMENT_ROWS):
                part = unique[start:start + _STATEMENT_ROWS]
                sql = (f"SELECT host, {columns} FROM hosts WHERE host IN ("
                       + ",".join("?" * len(part)) + ")")
                for row in conn.execute(sql, part):
                    found[row[0]] = list(row[1:])
            return found
        return self._run(work)  # type: ignore[no-any-return]

    _PAGE_UPSERT = (f"INSERT INTO pages (key, {', '.join(PAGE_FIELDS)}) VALUES ("
                    + ",".join("?" * (len(PAGE_FIELDS) + 1)) + ") ON CONFLICT(key) DO UPDATE SET "
                    + ", ".join(f"{f} = excluded.{f}" for f in PAGE_FIELDS[1:])
                    + " WHERE url = excluded.url")
    _HOST_UPSERT = (f"INSERT INTO hosts (host, {', '.join(HOST_FIELDS)}) VALUES ("
                    + ",".join("?" * (len(HOST_FIELDS) + 1)) + ") ON CONFLICT(host) DO UPDATE SET "
                    + ", ".join(f"{f} = {f} + excluded.{f}" for f in HOST_FIELDS))
    _HIST_UPSERT = ("INSERT INTO hist (bin, n) VALUES (?, ?) ON CONFLICT(bin) DO UPDATE SET "
                    "n = n + excluded.n")

    def commit(self, pages: Sequence[PageRow], host_deltas: Mapping[str, Sequence[float]],
               hist_deltas: Mapping[int, int]) -> None:
        def work(conn: Any) -> None:
            conn.execute("BEGIN IMMEDIATE")
            # Each page under its first key, in key order (the key index is
            # walked left to right): an upsert that updates a known page in
            # place, unless the key holds another URL.  Then SQLite counted
            # fewer changes than pages, and the pages are placed one by one.
            rows = sorted((url_key(row[0]), *row) for row in pages)
            cursor = conn.executemany(self._PAGE_UPSERT, rows)
            if cursor.rowcount != len(rows):
                self._place(conn, rows)
            conn.executemany(self._HOST_UPSERT,
                             [(host, *delta) for host, delta in host_deltas.items()])
            conn.executemany(self._HIST_UPSERT, [(b, d) for b, d in hist_deltas.items() if d])
            conn.execute("COMMIT")
        self._run(work)

    def _place(self, conn: Any, rows: Sequence[Sequence[Any]]) -> None:
        """Write the rows (key, *PAGE_FIELDS) that the first-key upsert did
        not: under the key of the probe where the URL is, or the first free."""
        slots = self._slots(conn, [row[1] for row in rows], "")
        redo = [(slots[row[1]][0], *row[1:]) for row in rows if slots[row[1]][0] != row[0]]
        conn.executemany(self._PAGE_UPSERT, redo)

    def due_candidates(self, now: float, n: int) -> List[Tuple[Any, ...]]:
        sql = (f"SELECT {', '.join(CANDIDATE_FIELDS)} FROM pages WHERE due_at <= ? "
               f"ORDER BY due_at LIMIT ?")
        return self._run(lambda conn: conn.execute(sql, (now, n)).fetchall())  # type: ignore

    def count_due(self, now: float) -> int:
        sql = "SELECT COUNT(*) FROM pages WHERE due_at <= ?"
        return int(self._run(lambda conn: conn.execute(sql, (now,)).fetchone()[0]))

    def set_due(self, items: Sequence[Tuple[str, float]]) -> None:
        def work(conn: Any) -> None:
            conn.execute("BEGIN IMMEDIATE")
            cursor = conn.executemany("UPDATE pages SET due_at = ? WHERE key = ? AND url = ?",
                                      [(due, url_key(url), url) for url, due in items])
            if cursor.rowcount != len(items):  # some URL is under a later key, or unknown
                slots = self._slots(conn, [url for url, _due in items], "")
                conn.executemany("UPDATE pages SET due_at = ? WHERE key = ? AND url = ?",
                                 [(due, slots[url][0], url) for url, due in items])
            conn.execute("COMMIT")
        self._run(work)

    def histogram(self) -> np.ndarray:
        counts = np.zeros(HIST_BINS, dtype=np.int64)
        for b, n in self._run(lambda conn: conn.execute("SELECT bin, n FROM hist").fetchall()):
            if 0 <= b < HIST_BINS:
                counts[b] = n
        return counts

    def get_meta(self) -> Dict[str, float]:
        rows = self._run(lambda conn: conn.execute("SELECT key, value FROM meta").fetchall())
        return {key: value for key, value in rows}

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
            conn.execute("COMMIT")
        self._run(work)



# ----------------------------------------------------------------- Redis

def _redis_module() -> Any:
    try:
        import redis
    except ImportError:
        raise ImportError("RedisRecrawlStore needs the redis client: "
                          "pip install 'crawldedup[redis]'") from None
    return redis


class RedisRecrawlStore(RecrawlStore):
    """Pages in Redis: ``RedisRecrawlStore("redis://localhost:6379/0", prefix="recrawl")``.

    ``client_or_url`` is a ``redis.Redis`` client or a URL.  Every key starts
    with ``prefix + ":"``.  A server that cannot be reached, or any Redis
    error, raises StoreUnavailableError naming the address.
    """

    def __init__(self, client_or_url: Any = "redis://127.0.0.1:6379/0", *,
                 prefix: str = "crawldedup:recrawl") -> None:
        redis = _redis_module()
        self._errors = (redis.RedisError, OSError)
        self.prefix = _check_prefix(prefix)
        if isinstance(client_or_url, str):
            try:
                self.client = redis.Redis.from_url(client_or_url)
            except ValueError as exc:
                raise ValueError(f"client_or_url is not a Redis URL: {client_or_url!r} "
                                 f"({exc})") from None
            where = client_or_url
        elif hasattr(client_or_url, "pipeline") and hasattr(client_or_url, "hgetall"):
            self.client = client_or_url
            kwargs = getattr(getattr(client_or_url, "connection_pool", None),
                             "connection_kwargs", {})
            if kwargs.get("decode_responses"):
                raise ValueError("client_or_url: give a client without decode_responses=True "
                                 "(digests are bytes)")
            where = (f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
                     f"/{kwargs.get('db', 0)}")
        else:
            raise TypeError(f"client_or_url must be a redis.Redis client or a redis:// URL, "
                            f"got {type(client_or_url).__name__}")
        self.address = f"Redis {where} (prefix {prefix!r})"
        self._due = f"{prefix}:due"
        self._hist = f"{prefix}:hist"
        self._meta = f"{prefix}:meta"
        self._closed = False
        self._call(lambda: self.client.ping())

    def __repr__(self) -> str:
        return f"RedisRecrawlStore({self.address})"

    def _call(self, work: Any) -> Any:
        if self._closed:
            raise ValueError("the store is closed")
        try:
            return work()
        except self._errors as exc:
            raise StoreUnavailableError(f"recrawl store {self.address}: {exc}") from exc

    def _page_key(self, url: str) -> str:
        return f"{self.prefix}:page:{url}"

    def _host_key(self, host: str) -> str:
        return f"{self.prefix}:host:{host}"

    @staticmethod
    def _decode(url: str, raw: Mapping[bytes, bytes]) -> PageRow:
        row: List[Any] = []
        for name in PAGE_FIELDS:
            if name == "url":
                row.append(url)
                continue
            value = raw.get(name.encode())
            if value is None or value == b"" and name != "digest":
                row.append(None)
            elif name == "digest":
                row.append(value if value else None)
            elif name in _TEXT:
                row.append(value.decode("utf-8"))
            elif name in _INT:
                row.append(int(value))
            else:
                row.append(float(value))
        return tuple(row)

    def get_pages(self, urls: Sequence[str]) -> Dict[str, PageRow]:
        unique = list(dict.fromkeys(urls))

        def work() -> List[Any]:
            pipe = self.client.pipeline(transaction=False)
            for url in unique:
                pipe.hgetall(self._page_key(url))
            return pipe.execute()  # type: ignore[no-any-return]
        results = self._call(work)
        return {url: self._decode(url, raw) for url, raw in zip(unique, results) if raw}

    def get_hosts(self, hosts: Sequence[str],
                  fields: Sequence[str] = HOST_FIELDS) -> Dict[str, List[float]]:
        unique = list(dict.fromkeys(hosts))
        names = list(_host_fields(fields))

        def work() -> List[Any]:
            pipe = self.client.pipeline(transaction=False)
            for host in unique:
                pipe.hmget(self._host_key(host), names)
            return pipe.execute()  # type: ignore[no-any-return]
        results = self._call(work)
        found = {}
        for host, values in zip(unique, results):
            if any(v is not None for v in values):
                found[host] = [0.0 if v is None else float(v) for v in values]
        return found

    def commit(self, pages: Sequence[PageRow], host_deltas: Mapping[str, Sequence[float]],
               hist_deltas: Mapping[int, int]) -> None:
        def work() -> None:
            pipe = self.client.pipeline(transaction=True)
            for row in pages:
                mapping: Dict[str, Any] = {}
                for name, value in zip(PAGE_FIELDS[1:], row[1:]):
                    if value is None:
                        mapping[name] = b""
                    elif name == "digest":
                        mapping[name] = bytes(value)
                    elif name in _TEXT:
                        mapping[name] = value
                    else:
                        mapping[name] = repr(value) if isinstance(value, float) else str(value)
                pipe.hset(self._page_key(row[0]), mapping=mapping)
                pipe.zadd(self._due, {row[0]: row[-1]})
            for host, delta in host_deltas.items():
                key = self._host_key(host)
                for name, value in zip(HOST_FIELDS, delta):
                    if value:
                        pipe.hincrbyfloat(key, name, float(value))
            for b, d in hist_deltas.items():
                if d:
                    pipe.hincrby(self._hist, str(b), int(d))
            pipe.execute()
        self._call(work)

    def due_candidates(self, now: float, n: int) -> List[Tuple[Any, ...]]:
        def work() -> List[Tuple[Any, ...]]:
            items = self.client.zrangebyscore(self._due, "-inf", now, start=0, num=n,
                                              withscores=True)
            if not items:
                return []
            pipe = self.client.pipeline(transaction=False)
            for member, _ in items:
                pipe.hmget(self._page_key(member.decode("utf-8")), list(CANDIDATE_FIELDS[1:]))
            out = []
            for (member, _score), values in zip(items, pipe.execute()):
                if values[0] is None:
                    continue  # removed meanwhile
                out.append((member.decode("utf-8"), values[0].decode("utf-8"),
                            *(float(v) for v in values[1:])))
            return out
        return self._call(work)  # type: ignore[no-any-return]

    def count_due(self, now: float) -> int:
        return int(self._call(lambda: self.client.zcount(self._due, "-inf", now)))

    def set_due(self, items: Sequence[Tuple[str, float]]) -> None:
        def work() -> None:
            pipe = self.client.pipeline(transaction=True)
            for url, due in items:
                pipe.zadd(self._due, {url: due}, xx=True)
                pipe.hset(self._page_key(url), "due_at", repr(float(due)))
            pipe.execute()
        self._call(work)

    def histogram(self) -> np.ndarray:
        counts = np.zeros(HIST_BINS, dtype=np.int64)
        for b, n in self._call(lambda: self.client.hgetall(self._hist)).items():
            index = int(b)
            if 0 <= index < HIST_BINS:
                counts[index] = int(n)
        return counts

    def get_meta(self) -> Dict[str, float]:
        raw = self._call(lambda: self.client.hgetall(self._meta))
        return {k.decode("utf-8"): float(v) for k, v in raw.items()}

    def set_meta(self, values: Mapping[str, float]) -> None:
        if values:
            self._call(lambda: self.client.hset(
                self._meta, mapping={k: repr(float(v)) for k, v in values.items()}))

    def __len__(self) -> int:
        return int(self._call(lambda: self.client.zcard(self._due)))

    def clear(self) -> None:
        def work() -> None:
            batch: List[Any] = []
            for key in self.client.scan_iter(match=f"{self.prefix}:*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    self.client.delete(*batch)
                    batch = []
            if batch:
                self.client.delete(*batch)
        self._call(work)

    def close(self) -> None:
        self._closed = True


def open_recrawl_store(spec: Any, **kwargs: Any) -> RecrawlStore:
    """A store from a RecrawlStore, a ``redis://``/``rediss://``/``unix://`` URL, or a
    SQLite path (``sqlite:///PATH`` or a plain path)."""
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




__all__ = ["RecrawlStore", "SQLiteRecrawlStore", "RedisRecrawlStore", "open_recrawl_store",
           "PAGE_FIELDS", "HOST_FIELDS", "HOST_RATE_FIELDS", "SQLITE_LAYOUT", "url_key"]
