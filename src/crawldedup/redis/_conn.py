"""Connections, errors and the thin I/O under crawldedup's Redis classes.

Every Redis class here is written sans-I/O: an operation is a generator that
yields a list of :class:`Request` (command bytes already packed, the key they
route by, how many replies they produce) and receives the replies.  A
transport runs it: :class:`SyncTransport` over redis-py's connections here,
``AsyncTransport`` over ``redis.asyncio`` in :mod:`crawldedup.redis.aio`.  The
transports own everything that touches a socket: routing to cluster nodes,
having every node's commands in flight at once, turning driver errors into
:class:`~crawldedup.errors.StoreUnavailableError` naming the server.
"""

from __future__ import annotations

import threading
from typing import (Any, Dict, Generator, Iterable, List, Optional, Tuple, Type, TypeVar,
                    Union)
from urllib.parse import unquote, urlsplit

from crawldedup._extras import install_hint
from crawldedup.errors import CrawldedupError, StoreUnavailableError

INSTALL_HINT = install_hint("redis")


def redis_module() -> Any:
    """redis-py, imported on first use."""
    try:
        import redis
    except ImportError:
        raise ImportError(f"crawldedup's Redis classes need redis-py: {INSTALL_HINT}") from None
    return redis


class RedisKeyTypeError(CrawldedupError, TypeError):
    """A key that crawldedup uses holds a value of another Redis type."""

    def __init__(self, key: Union[str, bytes], detail: str = "") -> None:
        self.key = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
        super().__init__(f"Redis key {self.key!r} holds a value of another type than "
                         f"crawldedup stores there{': ' + detail if detail else ''}; "
                         f"choose another name or delete the key")


class Request:
    """Packed command bytes, the key they route by on a cluster, and the
    number of replies they produce."""

    __slots__ = ("route", "payload", "replies", "key")

    def __init__(self, route: bytes, payload: Union[bytes, List[bytes]], replies: int = 1,
                 key: Optional[bytes] = None) -> None:
        self.route = route
        self.payload = payload
        self.replies = replies
        self.key = route if key is None else key


#: Requests in flight on one connection before the transport reads replies.
WINDOW = 4

Op = Generator[List[Request], List[List[Any]], Any]


# ------------------------------------------------------------------- URLs

def split_url(url: str, *, default_name: Optional[str] = None) -> Tuple[str, Optional[str]]:
    """``redis://host:port/db/NAME`` -> (``redis://host:port/db``, NAME).

    The first path segment is the database number (redis-py's form); a
    second one, when present, is the name of the crawldedup structure.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ValueError(f"not a Redis URL (redis://host:port/db/name): {url!r}")
    if parts.scheme == "unix":
        return url, default_name
    try:
        parts.port  # (urllib checks it when asked: a number in 0..65535)
    except ValueError as exc:
        raise ValueError(f"{url!r}: {exc} (redis://host:port/db/name)") from None
    segments = [s for s in parts.path.split("/") if s]
    db = "0"
    name = default_name
    if segments:
        if not segments[0].isdigit():
            raise ValueError(f"{url!r}: the first path segment must be the database "
                             f"number (redis://host:port/0/name), got {segments[0]!r}")
        db = segments[0]
        if len(segments) > 1:
            name = unquote("/".join(segments[1:]))
    base = parts._replace(path="/" + db).geturl()
    return base, name


def connect(client_or_url: Any) -> Tuple[Any, bool, bool]:
    """(client, is_cluster, owned): a redis-py client from a URL (a cluster
    when the server says ``cluster_enabled:1``) or the client given."""
    redis = redis_module()
    from redis.cluster import RedisCluster
    if isinstance(client_or_url, RedisCluster):
        return client_or_url, True, False
    if isinstance(client_or_url, redis.Redis):
        return client_or_url, False, False
    if isinstance(client_or_url, str):
        split_url(client_or_url)  # checks the scheme
        client = redis.Redis.from_url(client_or_url)
        address = describe(client)
        try:
            enabled = client.info("cluster").get("cluster_enabled", 0)
        except redis.exceptions.RedisError as exc:
            client.close()
            raise unavailable(address, exc) from exc
        if enabled:
            client.close()
            try:
                cluster = RedisCluster.from_url(client_or_url)
            except redis.exceptions.RedisError as exc:
                raise unavailable(address, exc) from exc
            return cluster, True, True
        return client, False, True
    raise not_a_client(client_or_url, "a redis.Redis or redis.cluster.RedisCluster client")


def not_a_client(value: object, clients: str) -> TypeError:
    """The error for a client_or_url that is neither of the clients nor a URL."""
    return TypeError(f"client_or_url must be {clients} or a redis:// URL, not "
                     f"{type(value).__name__}")


def describe(client: Any) -> str:
    """host:port (or the socket path) of a client, for error messages."""
    pool = getattr(client, "connection_pool", None)
    if pool is None:  # a cluster: its nodes
        try:
            nodes = client.get_nodes()
            return "Redis Cluster " + ",".join(sorted(n.name for n in nodes))
        except Exception:  # pragma: no cover - a client without nodes yet
            return "Redis Cluster"
    kw = pool.connection_kwargs
    if kw.get("path"):
        return f"unix:{kw['path']}"
    return f"{kw.get('host', 'localhost')}:{kw.get('port', 6379)}"


def unavailable(address: str, exc: BaseException) -> StoreUnavailableError:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return StoreUnavailableError(f"Redis at {address} is unavailable: "
                                 f"{type(exc).__name__}: {text}")


def driver_errors() -> Tuple[Type[BaseException], ...]:
    """redis-py exceptions that mean the server cannot serve us now."""
    ex = redis_module().exceptions
    return (ex.ConnectionError, ex.TimeoutError, ex.BusyLoadingError)


def check_reply(reply: Any, request: Request, address: str) -> Any:
    """The reply, or the error it stands for raised the crawldedup way."""
    ex = redis_module().exceptions
    if isinstance(reply, ex.ResponseError):
        text = str(reply)
        if text.startswith("WRONGTYPE"):
            raise RedisKeyTypeError(request.key, text)
        raise StoreUnavailableError(f"Redis at {address} refused a command on key "
                                    f"{request.key.decode('utf-8', 'replace')!r}: {text}")
    return reply


def _get_connection(pool: Any) -> Any:
    try:
        return pool.get_connection()
    except TypeError:  # redis-py < 5.3 wants a command name
        return pool.get_connection("_")


def _redirected(replies: List[Any]) -> bool:
    ex = redis_module().exceptions
    return any(isinstance(r, (ex.MovedError, ex.AskError, ex.TryAgainError,
                              ex.ClusterDownError)) for r in replies)


class Transport:
    """What both transports share: the client, the address errors name, and
    what to send again when a cluster redirects requests."""

    def __init__(self, client: Any, is_cluster: bool, lock: Any) -> None:
        self.client = client
        self.is_cluster = is_cluster
        self.address = describe(client)
        self._lock = lock

    def to_resend(self, results: List[List[Any]]) -> List[int]:
        """The requests a cluster redirected (the slots moved): sent again
        after the slot map is refreshed."""
        return [i for i, r in enumerate(results) if _redirected(r)] if self.is_cluster else []

    def settled(self, results: List[List[Any]]) -> List[List[Any]]:
        if any(_redirected(r) for r in results):
            raise StoreUnavailableError(f"Redis at {self.address}: the cluster keeps "
                                        f"redirecting (resharding or failing over)")
        return results


class SyncTransport(Transport):
    """Sends requests through redis-py's (blocking) connections."""

    def __init__(self, client: Any, is_cluster: bool) -> None:
        super().__init__(client, is_cluster, threading.Lock())

    def _route(self, key: bytes) -> Tuple[str, Any]:
        if not self.is_cluster:
            return self.address, self.client
        node = self.client.get_node_from_key(key)
        return node.name, self.client.get_redis_connection(node)

    def execute(self, requests: Iterable[Request]) -> List[List[Any]]:
        """The replies of each request (errors as exception objects).

        Requests (a list, or a generator that builds them while earlier
        ones run) are written as they come, each to its node's connection;
        replies are read once more than WINDOW requests wait on a
        connection, and at the end.  A redirected cluster request (the slots
        moved) is sent again after the slot map is refreshed; every request
        crawldedup sends is idempotent or was refused unexecuted."""
        ex = redis_module().exceptions
        results, sent = self._execute_once(requests)
        for _attempt in range(3):
            redo = self.to_resend(results)
            if not redo:
                break
            try:
                self.client.nodes_manager.initialize()
            except ex.RedisError as exc:
                raise unavailable(self.address, exc) from exc
            again, _ = self._execute_once([sent[i] for i in redo])
            for i, r in zip(redo, again):
                results[i] = r
        return self.settled(results)

    def _execute_once(self, requests: Iterable[Request]
                      ) -> Tuple[List[List[Any]], List[Request]]:
        ex = redis_module().exceptions
        results: List[List[Any]] = []
        conns: Dict[str, Tuple[Any, Any, Any]] = {}  # node -> (pool, conn, pending indices)
        name = self.address

        def read(conn: Any, i: int, req: Request) -> None:
            out = results[i]
            for _ in range(req.replies):
                try:
                    out.append(conn.read_response())
                except ex.ResponseError as exc:
                    out.append(exc)

        sent: List[Request] = []
        try:
            with self._lock:
                for req in requests:
                    try:
                        name, client = self._route(req.route)
                    except ex.RedisError as exc:
                        raise unavailable(self.address, exc) from exc
                    if name not in conns:
                        pool = client.connection_pool
                        conns[name] = (pool, _get_connection(pool), [])
                    _, conn, pending = conns[name]
                    results.append([])
                    sent.append(req)
                    conn.send_packed_command(req.payload if isinstance(req.payload, list)
                                             else [req.payload])
                    pending.append(len(results) - 1)
                    while len(pending) > WINDOW:
                        i = pending.pop(0)
                        read(conn, i, sent[i])
                for name, (_, conn, pending) in conns.items():  # noqa: B007 - named in errors
                    for i in pending:
                        read(conn, i, sent[i])
                    pending.clear()
        except driver_errors() as exc:
            for _, conn, _ in conns.values():
                conn.disconnect()
            raise unavailable(name, exc) from exc
        except BaseException:
            for _, conn, _ in conns.values():  # a half-read pipeline must not be reused
                conn.disconnect()
            raise
        finally:
            for pool, conn, _ in conns.values():
                pool.release(conn)
        return results, sent

    def run(self, op: Op) -> Any:
        """Drive a sans-I/O operation to its result."""
        try:
            requests = next(op)
            while True:
                requests = op.send(self.execute(requests))
        except StopIteration as stop:
            return stop.value

    def close(self) -> None:
        self.client.close()


_Handle = TypeVar("_Handle", bound="SyncHandle")


class SyncHandle:
    """What the blocking Redis classes share: connecting (from a URL or a
    client), running operations until closed, and closing what they opened.
    ``_what`` names the object in the error raised once it is closed."""

    _what = "object"
    _logic: Any
    _transport: SyncTransport
    _owned: bool
    _closed: bool = False

    def _attach(self, client_or_url: Any) -> Tuple[Any, bool]:
        """Connects; (client, is_cluster)."""
        if isinstance(client_or_url, str):
            client_or_url, _ = split_url(client_or_url)
        client, is_cluster, self._owned = connect(client_or_url)
        self._transport = SyncTransport(client, is_cluster)
        self._logic.address = self._transport.address
        self._closed = False
        return client, is_cluster

    @property
    def name(self) -> str:
        return str(self._logic.name.decode("utf-8", "replace"))

    @property
    def address(self) -> str:
        return self._transport.address

    def _run(self, op: Op) -> Any:
        if self._closed:
            raise ValueError(f"the {self._what} is closed")
        return self._transport.run(op)

    def close(self) -> None:
        """Close the connections if this object opened them (from a URL).  Idempotent."""
        if not self._closed:
            self._closed = True
            if self._owned:
                self._transport.close()

    def __enter__(self: _Handle) -> _Handle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
