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
import operator
import os
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

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
# A page read before, rewritten by its row id: PAGE_FIELDS[1:], then id and url.
_UPDATE_SQL = ("UPDATE pages SET " + ", ".join(f"{name} = ?" for name in PAGE_FIELDS[1:])
               + " WHERE id = ? AND url = ?")
_ROWID = operator.itemgetter(len(PAGE_FIELDS) - 1)

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

    def _prepare(self, conn: Any) -> None:
        conn.execute(f"PRAGMA cache_size=-{self.cache_mib * 1024}")
        # Checkpoint the WAL into the file every 64 MiB instead of SQLite's
        # 4 MiB: a batch of 10,000 pages writes more than 4 MiB, so each
        # one paid a checkpoint and its fsync, and pages that successive
        # batches rewrite (the URL index, the hosts) were written each time.
        conn.execute("PRAGMA wal_autocheckpoint=16384")
        # A rowid table, with the URL in its own index: a batch of new
        # pages is appended at the end of the table, and a batch of due
        # pages (recorded together before) is rewritten in place on
        # neighbouring pages; only the small URL index takes random
        # inserts.  (Keyed by URL without a rowid, every batch rewrote
        # pages all over the table: about 2.5 times the bytes written.)
        columns = ", ".join(f"{name} {_sql_type(name)}" for name in PAGE_FIELDS[1:])
        conn.execute(f"CREATE TABLE IF NOT EXISTS pages (id INTEGER PRIMARY KEY, "
                     f"url TEXT NOT NULL UNIQUE, {columns})")
        conn.execute("CREATE INDEX IF NOT EXISTS pages_due ON pages (due_at)")
        host_columns = ", ".join(f"{name} REAL NOT NULL DEFAULT 0" for name in HOST_FIELDS)
        conn.execute(f"CREATE TABLE IF NOT EXISTS hosts (host TEXT PRIMARY KEY NOT NULL, "
                     f"{host_columns}) WITHOUT ROWID")
        conn.execute("CREATE TABLE IF NOT EXISTS hist (bin INTEGER PRIMARY KEY, "
                     "n INTEGER NOT NULL)")
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, "
                     "value REAL) WITHOUT ROWID")

    def get_pages(self, urls: Sequence[str]) -> Dict[str, PageRow]:
        fields = ", ".join(PAGE_FIELDS)

        def work(conn: Any) -> Dict[str, PageRow]:
            found: Dict[str, PageRow] = {}
            ids: Dict[str, int] = {}
            unique = list(dict.fromkeys(urls))
            for start in range(0, len(unique), _STATEMENT_ROWS):
                part = unique[start:start + _STATEMENT_ROWS]
                sql = (f"SELECT id, {fields} FROM pages WHERE url IN ("
                       + ",".join("?" * len(part)) + ")")
                for row in conn.execute(sql, part):
                    found[row[1]] = row[1:]
                    ids[row[1]] = row[0]
            self._ids = ids
            return found
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

    def commit(self, pages: Sequence[PageRow], host_deltas: Mapping[str, Sequence[float]],
               hist_deltas: Mapping[int, int]) -> None:
        # An upsert updates a known page in place (REPLACE would delete and
        # re-insert it, touching the B-trees twice).
        page_sql = (f"INSERT INTO pages ({', '.join(PAGE_FIELDS)}) VALUES ("
                    + ",".join("?" * len(PAGE_FIELDS)) + ") ON CONFLICT(url) DO UPDATE SET "
                    + ", ".join(f"{f} = excluded.{f}" for f in PAGE_FIELDS[1:]))
        host_sql = (f"INSERT INTO hosts (host, {', '.join(HOST_FIELDS)}) VALUES ("
                    + ",".join("?" * (len(HOST_FIELDS) + 1)) + ") ON CONFLICT(host) DO UPDATE SET "
                    + ", ".join(f"{f} = {f} + excluded.{f}" for f in HOST_FIELDS))
        hist_sql = ("INSERT INTO hist (bin, n) VALUES (?, ?) ON CONFLICT(bin) DO UPDATE SET "
                    "n = n + excluded.n")

        def work(conn: Any) -> None:
            # The pages the last get_pages read are updated in place by
            # their row id (one B-tree seek instead of two), in table
            # order; the URL is checked too, and should a row have gone or
            # changed hands since it was read (another process), the
            # upsert below writes it like any new page.
            ids, self._ids = self._ids, {}
            known = []
            new = []
            for row in pages:
                rowid = ids.get(row[0])
                if rowid is None:
                    new.append(row)
                else:
                    known.append((*row[1:], rowid, row[0]))
            conn.execute("BEGIN IMMEDIATE")
            if known:
                known.sort(key=_ROWID)
                if conn.executemany(_UPDATE_SQL, known).rowcount != len(known):
                    new.extend((row[-1], *row[:-2]) for row in known)
            conn.executemany(page_sql, new)
            conn.executemany(host_sql, [(host, *delta) for host, delta in host_deltas.items()])
            conn.executemany(hist_sql, [(b, d) for b, d in hist_deltas.items() if d])
            conn.execute("COMMIT")
        self._run(work)

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
            conn.executemany("UPDATE pages SET due_at = ? WHERE url = ?",
                             [(due, url) for url, due in items])
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
           "PAGE_FIELDS", "HOST_FIELDS", "HOST_RATE_FIELDS"]
