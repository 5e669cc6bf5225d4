"""RedisRecrawlStore: a RecrawlState's pages in Redis (see
:mod:`crawldedup.recrawl.stores` for the rows, and the SQLite store that
holds the same).

A hash per URL (``PREFIX:page:URL``), a sorted set of URLs by due time
(``PREFIX:due``), a hash per host (``PREFIX:host:HOST``), the rate histogram
(``PREFIX:hist``) and settings (``PREFIX:meta``); each ``commit`` is one
MULTI/EXEC transaction.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from crawldedup.errors import StoreUnavailableError
from crawldedup.recrawl.schedule import HIST_BINS
from crawldedup.recrawl.stores import (_INT, _TEXT, CANDIDATE_FIELDS, HOST_FIELDS, PAGE_FIELDS,
                                       PageRow, RecrawlStore, _check_prefix, _host_fields)


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


__all__ = ["RedisRecrawlStore"]
