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
from typing import Any, Dict, Generator, Iterable, List, Optional, Tuple, Type, TypeVar, Union
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

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
    number of replies they produce.  ``node`` (host, port) sends it to that
    cluster node, after ASKING, instead of by the slot map: the resend of a
    request a migrating slot's old owner answered ASK."""

    __slots__ = ("route", "payload", "replies", "key", "node")

    def __init__(self, route: bytes, payload: Union[bytes, List[bytes]], replies: int = 1,
                 key: Optional[bytes] = None) -> None:
        self.route = route
        self.payload = payload
        self.replies = replies
        self.key = route if key is None else key
        self.node: Optional[Tuple[str, int]] = None

    def asking(self, node: Tuple[str, int]) -> "Request":
        """This request for ``node``, preceded by ASKING (one more reply)."""
        body = self.payload if isinstance(self.payload, list) else [self.payload]
        out = Request(self.route, [ASKING, *body], self.replies + 1, self.key)
        out.node = node
        return out


#: ASKING: the next command may touch a slot this node is importing.
ASKING = b"*1\r\n$6\r\nASKING\r\n"


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
    _check_query_db(url, parts.query)
    if parts.scheme == "unix":
        if not parts.path:
            raise ValueError(f"{url!r}: a unix:// Redis URL names the server's socket: "
                             f"unix:///path/to/redis.sock?db=0")
        return url, default_name
    _check_port(url, parts)
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


def _check_port(url: str, parts: SplitResult) -> None:
    """A port, when the URL gives one, is a number from 1 to 65535 (redis-py
    would raise urllib's ValueError at connection time, naming no URL)."""
    hostport = parts.netloc.rpartition("@")[2]
    after_host = hostport.rpartition("]")[2] if hostport.startswith("[") else hostport
    if ":" not in after_host:
        return
    text = after_host.rpartition(":")[2]
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= 65535):
        raise ValueError(f"{url!r}: the port must be a number from 1 to 65535, got {text!r}")


def _check_query_db(url: str, query: str) -> None:
    """``?db=N``, which redis-py reads as the database number, is a number."""
    for value in parse_qs(query, keep_blank_values=True).get("db", []):
        if not (value.isascii() and value.isdigit()):
            raise ValueError(f"{url!r}: db must be a database number, got {value!r}")


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
        split_url(client_or_url)  # checks the scheme, port and db
        try:
            client = redis.Redis.from_url(client_or_url)
        except ValueError as exc:  # e.g. a query argument redis-py cannot read
            raise ValueError(f"{client_or_url!r}: {exc}") from None
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


def routing_errors() -> Tuple[Type[BaseException], ...]:
    """redis-py exceptions of a cluster client that cannot map a key to a
    node or read the slot map (a slot not covered, no node answering)."""
    ex = redis_module().exceptions
    return (ex.RedisError, ex.RedisClusterException)


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


def redirect_errors() -> Tuple[Type[BaseException], ...]:
    """The replies of a cluster that refused a command unexecuted, its slot
    being elsewhere or unserved now (MOVED, ASK, TRYAGAIN, CLUSTERDOWN)."""
    ex = redis_module().exceptions
    return (ex.MovedError, ex.AskError, ex.TryAgainError, ex.ClusterDownError)


class Transport:
    """What both transports share: the client, the address errors name, and
    what to send again when a cluster redirects requests.

    On a cluster, a call that met a node it could not reach (killed, or
    failing over) raises StoreUnavailableError and marks the slot map
    ``stale``: the next call first reads the map again from the nodes that
    answer, as redis-py's own commands do after a connection error.  A
    replica promoted in the meantime is then where the slots go, so a
    failover costs the calls made while the cluster had no master for some
    slots, and the object keeps working after it.  Nothing is resent
    internally after a connection error: a write that may or may not have
    run (a test-and-set whose reply was lost) is reported as failed, never
    answered twice."""

    def __init__(self, client: Any, is_cluster: bool, lock: Any) -> None:
        self.client = client
        self.is_cluster = is_cluster
        self.address = describe(client)
        self._lock = lock
        self.stale = False

    def redirects(self) -> Tuple[Type[BaseException], ...]:
        """The replies that send a request again (none from a single
        server): after the slot map is refreshed, or, for ASK, to the node
        the reply names."""
        return redirect_errors() if self.is_cluster else ()

    @staticmethod
    def ask_target(exc: BaseException) -> Optional[Tuple[str, int]]:
        """The node an ASK reply sends a request to (None for the others:
        MOVED is an AskError too, and means the slot map is old)."""
        ex = redis_module().exceptions
        if isinstance(exc, ex.AskError) and not isinstance(exc, ex.MovedError):
            return (str(exc.host), int(exc.port))
        return None

    @staticmethod
    def resends(sent: List[Request], redo: List[int],
                asks: Dict[int, Tuple[str, int]]) -> List[Request]:
        """The requests to send again: an ASKed one to its node, after ASKING."""
        return [sent[i].asking(asks[i]) if i in asks else sent[i] for i in redo]

    @staticmethod
    def merge(results: List[List[Any]], redo: List[int], again: List[Request],
              replies: List[List[Any]]) -> None:
        """The resent requests' replies in place of the redirected ones (an
        ASKING's OK dropped)."""
        for i, req, r in zip(redo, again, replies):
            results[i] = r[1:] if req.node is not None else r

    def unsettled(self) -> StoreUnavailableError:
        """The error of requests still redirected after the last attempt."""
        self.stale = True
        return StoreUnavailableError(f"Redis at {self.address}: the cluster keeps "
                                     f"redirecting (resharding or failing over)")


class SyncTransport(Transport):
    """Sends requests through redis-py's (blocking) connections."""

    def __init__(self, client: Any, is_cluster: bool) -> None:
        super().__init__(client, is_cluster, threading.Lock())

    def _route(self, req: Request) -> Tuple[str, Any]:
        if not self.is_cluster:
            return self.address, self.client
        if req.node is not None:
            node = self.client.get_node(host=req.node[0], port=req.node[1])
            if node is None:
                raise StoreUnavailableError(f"Redis at {self.address}: a migrating slot "
                                            f"sent a command to an unknown node {req.node}")
        else:
            node = self.client.get_node_from_key(req.route)
        return node.name, self.client.get_redis_connection(node)

    def execute(self, requests: Iterable[Request]) -> List[List[Any]]:
        """The replies of each request (errors as exception objects).

        Requests (a list, or a generator that builds them while earlier
        ones run) are written as they come, each to its node's connection;
        replies are read once more than WINDOW requests wait on a
        connection, and at the end.  A redirected cluster request was
        refused unexecuted, so it is sent again: after the slot map is
        refreshed (MOVED: the slot moved; TRYAGAIN, CLUSTERDOWN), or to the
        node an ASK names (its slot migrating), up to 3 times."""
        if self.stale:
            self.refresh()
        results, sent, redo, asks = self._execute_once(requests)
        for _attempt in range(3):
            if not redo:
                break
            if any(i not in asks for i in redo):
                self.refresh()
            again = self.resends(sent, redo, asks)
            replies, _, still, asked = self._execute_once(again)
            self.merge(results, redo, again, replies)
            asks = {redo[j]: node for j, node in asked.items()}
            redo = [redo[j] for j in still]
        if redo:
            raise self.unsettled()
        return results

    def refresh(self) -> None:
        """Reads a cluster's slot map again (slots moved, a node failed)."""
        self.stale = True
        try:
            self.client.nodes_manager.initialize()
        except routing_errors() as exc:
            raise unavailable(self.address, exc) from exc
        self.stale = False

    def _execute_once(self, requests: Iterable[Request]
                      ) -> Tuple[List[List[Any]], List[Request], List[int],
                                 Dict[int, Tuple[str, int]]]:
        """(the replies of each request, the requests, the indices of those
        a cluster redirected, {index: node} of those it ASKed elsewhere)."""
        ex = redis_module().exceptions
        results: List[List[Any]] = []
        conns: Dict[str, Tuple[Any, Any, Any]] = {}  # node -> (pool, conn, pending indices)
        name = self.address
        redirects = self.redirects()
        redirected: Dict[int, None] = {}
        asks: Dict[int, Tuple[str, int]] = {}

        def read(conn: Any, i: int, req: Request) -> None:
            out = results[i]
            for _ in range(req.replies):
                try:
                    out.append(conn.read_response())
                except ex.ResponseError as exc:
                    out.append(exc)
                    if isinstance(exc, redirects):
                        redirected[i] = None
                        target = self.ask_target(exc)
                        if target is not None:
                            asks[i] = target

        sent: List[Request] = []
        try:
            with self._lock:
                for req in requests:
                    try:
                        name, client = self._route(req)
                    except routing_errors() as exc:
                        self.stale = self.is_cluster
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
            self.stale = self.is_cluster
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
        return results, sent, sorted(redirected), asks

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

    def _open_logic(self, logic: Any, client_or_url: Any) -> None:
        """Take logic, connect, and run its open_op (its metadata read or
        written, its shards counted from the cluster's masters); closed
        again if that fails."""
        self._logic = logic
        client, is_cluster = self._attach(client_or_url)
        try:
            nodes = len(client.get_primaries()) if is_cluster else 1
            self._transport.run(logic.open_op(nodes))
        except BaseException:
            self.close()
            raise

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
