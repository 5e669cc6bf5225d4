"""RedisRecrawlStore: a RecrawlState's pages in Redis (see
:mod:`crawldedup.recrawl.stores` for the rows, and the SQLite store that
holds the same).

A hash per URL (``PREFIX:page:URL``), a sorted set of URLs by due time
(``PREFIX:due``), a hash per host (``PREFIX:host:HOST``), the rate histogram
(``PREFIX:hist``), settings (``PREFIX:meta``) and the requests made from a
page (``PREFIX:links:URL``, a string); each ``commit`` is one MULTI/EXEC
transaction.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from crawldedup._extras import install_hint
from crawldedup.errors import StoreUnavailableError
from crawldedup.recrawl.pages import Pages
from crawldedup.recrawl.stores import (
    _INT,
    _TEXT,
    CANDIDATE_FIELDS,
    HOST_FIELDS,
    PAGE_FIELDS,
    PageRow,
    RecrawlStore,
    _check_prefix,
    _host_fields,
    check_hist,
    check_hosts,
    check_meta,
    check_pages,
)
from crawldedup.redis._conn import RedisKeyTypeError, connect, describe

_INT64 = (-(1 << 63), 1 << 63)
#: The fields of a page that may be absent.
_OPTIONAL = {"etag", "last_modified", "content_length", "digest", "simhash"}


def _number(raw: Any, kind: Any = float) -> Any:
    """``kind(raw)`` of a Redis value; the raw value itself when it is not a
    number (the checks then name it)."""
    try:
        return kind(raw)
    except (TypeError, ValueError):
        return raw


def _redis_module() -> Any:
    try:
        import redis
    except ImportError:
        raise ImportError(f"RedisRecrawlStore needs the redis client: "
                          f"{install_hint('redis')}") from None
    return redis


class RedisRecrawlStore(RecrawlStore):
    """Pages in Redis: ``RedisRecrawlStore("redis://localhost:6379/0", prefix="recrawl")``.

    ``client_or_url`` is a ``redis.Redis`` or ``redis.cluster.RedisCluster``
    client, or a URL (of a Redis Cluster node too: the server says it is
    one).  Every key starts with ``prefix + ":"``; on a Redis Cluster with
    ``"{" + prefix + "}:"``, a hash tag that keeps a state's keys in one
    slot, so that each ``record_many`` is still one MULTI/EXEC (the state
    lives on one node of the cluster).  A server that cannot be reached, or
    any Redis error, raises StoreUnavailableError naming the address.
    """

    keeps_links = True

    def __init__(self, client_or_url: Any = "redis://127.0.0.1:6379/0", *,
                 prefix: str = "crawldedup:recrawl") -> None:
        redis = _redis_module()
        from redis.cluster import RedisCluster
        from redis.exceptions import RedisClusterException
        self._errors = (redis.RedisError, RedisClusterException, OSError)
        self._closed = False
        self.prefix = _check_prefix(prefix)
        if isinstance(client_or_url, str):
            try:
                self.client, cluster, self._owned = connect(client_or_url)
            except ValueError as exc:
                raise ValueError(f"client_or_url is not a Redis URL: {client_or_url!r} "
                                 f"({exc})") from None
            where = describe(self.client) if cluster else client_or_url
        elif isinstance(client_or_url, RedisCluster) or (
                hasattr(client_or_url, "pipeline") and hasattr(client_or_url, "hgetall")):
            self.client, cluster, self._owned = client_or_url, isinstance(
                client_or_url, RedisCluster), False
            if cluster:
                kwargs = client_or_url.get_connection_kwargs()
                where = describe(client_or_url)
            else:
                kwargs = getattr(getattr(client_or_url, "connection_pool", None),
                                 "connection_kwargs", {})
                where = (f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
                         f"/{kwargs.get('db', 0)}")
            if kwargs.get("decode_responses"):
                raise ValueError("client_or_url: give a client without decode_responses=True "
                                 "(digests are bytes)")
        else:
            raise TypeError(f"client_or_url must be a redis.Redis client or a redis:// URL, "
                            f"got {type(client_or_url).__name__}")
        self.address = f"Redis {where} (prefix {prefix!r})"
        self.cluster = cluster
        try:
            self._check_server(redis, client_or_url)
        except BaseException:
            self.close()
            raise
        self._keys = "{" + prefix + "}" if cluster else prefix
        self._due = f"{self._keys}:due"
        self._hist = f"{self._keys}:hist"
        self._meta = f"{self._keys}:meta"

    def _check_server(self, redis: Any, client_or_url: Any) -> None:
        """That the server answers, and can hold the state as asked."""
        from redis.exceptions import RedisClusterException
        prefix = self.prefix
        if self.cluster:
            if "{" in prefix or "}" in prefix:
                raise ValueError(f"prefix: on a Redis Cluster the prefix becomes the keys' "
                                 f"hash tag, so it cannot hold braces; got {prefix!r}")
            try:
                self.client.pipeline(transaction=True)
            except RedisClusterException as exc:
                raise StoreUnavailableError(
                    f"recrawl store {self.address}: this redis-py "
                    f"({redis.__version__}) cannot run a transaction on a Redis Cluster "
                    f"({exc}); a newer redis-py can") from None
        elif not isinstance(client_or_url, str) and self._call(
                lambda: self.client.info("cluster")).get("cluster_enabled"):
            raise ValueError(f"client_or_url: {self.address} is a node of a Redis Cluster; "
                             f"give a redis.cluster.RedisCluster client or the node's URL")
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
        return f"{self._keys}:page:{url}"

    def _host_key(self, host: str) -> str:
        return f"{self._keys}:host:{host}"

    def _decode(self, url: str, raw: Mapping[bytes, bytes]) -> PageRow:
        row: List[Any] = [url]
        for name in PAGE_FIELDS[1:]:
            value = raw.get(name.encode())
            parsed: Any = None
            if not value:  # absent, or written as b"" (None)
                if name in _OPTIONAL:
                    row.append(None)
                    continue
            elif name == "digest":
                parsed = value if len(value) == 16 else None
            elif name in _TEXT:
                parsed = _number(value, lambda v: v.decode("utf-8"))
            elif name in _INT:
                parsed = _number(value, int)
                if type(parsed) is int and not _INT64[0] <= parsed < _INT64[1]:
                    parsed = None
            else:
                parsed = _number(value)
            if parsed is None or type(parsed) is bytes and name != "digest":
                raise self._corrupt(f"the recrawl page {url!r} is damaged: its {name} is "
                                    f"{value!r}")
            row.append(parsed)
        return tuple(row)

    def read_pages(self, urls: Sequence[str]) -> Pages:
        unique = list(dict.fromkeys(urls))

        def work() -> List[Any]:
            pipe = self.client.pipeline(transaction=False)
            for url in unique:
                pipe.hgetall(self._page_key(url))
            return pipe.execute()  # type: ignore[no-any-return]
        results = self._call(work)
        return check_pages(Pages.from_rows([self._decode(url, raw)
                                            for url, raw in zip(unique, results) if raw]),
                           self._corrupt)

    def get_pages(self, urls: Sequence[str]) -> Dict[str, PageRow]:
        return {row[0]: row for row in self.read_pages(urls).rows()}

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
                found[host] = [0.0 if v is None else _number(v) for v in values]
        return check_hosts(found, names, self._corrupt)

    def commit(self, pages: Sequence[PageRow], host_deltas: Mapping[str, Sequence[float]],
               hist_deltas: Mapping[int, int]) -> None:
        # What the transaction adds to is checked first: in MULTI/EXEC a
        # command that fails (HINCRBYFLOAT on a value that is not a number,
        # ZADD on a key of another type) does not stop the others, and
        # adding to a damaged value would hide it.  (The pages' hashes were
        # read by read_pages.)
        if host_deltas:
            self.get_hosts(list(host_deltas))
        if any(hist_deltas.values()):
            self.histogram()
        if pages:
            kind = self._call(lambda: self.client.type(self._due))
            if kind not in (b"zset", b"none"):
                raise RedisKeyTypeError(self._due, f"a {kind.decode('ascii', 'replace')}, "
                                                   f"not the sorted set of due times")

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
                url = _number(member, lambda v: v.decode("utf-8"))
                numbers = [_number(v) for v in values[1:]]
                if type(url) is bytes or not all(type(v) is float for v in numbers):
                    raise self._corrupt(f"the recrawl page {member!r} is damaged: "
                                        f"{dict(zip(CANDIDATE_FIELDS[1:], values))!r}")
                out.append((url, _number(values[0], lambda v: v.decode("utf-8")), *numbers))
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
        raw = self._call(lambda: self.client.hgetall(self._hist))
        return check_hist([(_number(b, int), _number(n, int)) for b, n in raw.items()],
                          self._corrupt)

    def get_meta(self) -> Dict[str, float]:
        raw = self._call(lambda: self.client.hgetall(self._meta))
        return check_meta({k.decode("utf-8", "replace"): _number(v) for k, v in raw.items()},
                          self._corrupt)

    def set_meta(self, values: Mapping[str, float]) -> None:
        if values:
            self._call(lambda: self.client.hset(
                self._meta, mapping={k: repr(float(v)) for k, v in values.items()}))

    def _links_key(self, url: str) -> str:
        return f"{self._keys}:links:{url}"

    def read_links(self, urls: Sequence[str]) -> Dict[str, bytes]:
        unique = list(dict.fromkeys(urls))

        def work() -> List[Any]:
            pipe = self.client.pipeline(transaction=False)
            for url in unique:
                pipe.get(self._links_key(url))
            return pipe.execute(raise_on_error=False)  # type: ignore[no-any-return]
        found = {}
        for url, data in zip(unique, self._call(work)):
            if isinstance(data, self._errors):
                if "WRONGTYPE" in str(data):
                    raise self._corrupt(f"the recrawl links of {url!r} are damaged: their "
                                        f"key is not a string")
                raise StoreUnavailableError(f"recrawl store {self.address}: {data}")
            if data is not None:
                found[url] = data
        return found

    def write_links(self, records: Mapping[str, bytes]) -> None:
        def work() -> None:
            pipe = self.client.pipeline(transaction=True)
            for url, data in records.items():
                pipe.set(self._links_key(url), bytes(data))
            pipe.execute()
        if records:
            self._call(work)

    def __len__(self) -> int:
        return int(self._call(lambda: self.client.zcard(self._due)))

    def clear(self) -> None:
        def work() -> None:
            batch: List[Any] = []
            for key in self.client.scan_iter(match=f"{self._keys}:*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    self.client.delete(*batch)
                    batch = []
            if batch:
                self.client.delete(*batch)
        self._call(work)

    def close(self) -> None:
        """Stop using the store (a client it made from a URL is closed)."""
        if not self._closed and self._owned:
            try:
                if self.cluster:  # every node's connections (close() may leave some)
                    for node in self.client.get_nodes():
                        if node.redis_connection is not None:
                            node.redis_connection.connection_pool.disconnect()
                self.client.close()
            except self._errors:  # pragma: no cover - closing a broken connection
                pass
        self._closed = True


__all__ = ["RedisRecrawlStore"]
