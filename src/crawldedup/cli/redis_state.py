"""The command line's Redis parts: ``crawldedup urls --state redis://...``
(the Bloom state in Redis, shared by crawlers on several machines) and
``crawldedup info redis://...``.  ``--db redis://...`` goes through
:func:`crawldedup.exact.stores.open_store` (a RedisStore)."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
from typing import IO, Any, Callable, Dict, List, Tuple, cast

import numpy as np

import crawldedup.redis
import crawldedup.redis.store
from crawldedup.cli import _key_mode
from crawldedup.cli._common import DEFAULT_CAPACITY, DEFAULT_ERROR_RATE, UsageError
from crawldedup.cli._url_state import SHARED_PIECE, UrlState
from crawldedup.errors import CrawldedupError
from crawldedup.redis._conn import (
    RedisKeyTypeError,
    connect,
    redis_module,
    routing_errors,
    split_url,
    unavailable,
)
from crawldedup.redis._conn import describe as describe_client

#: The URL schemes redis-py connects with (``unix://`` a local socket).
SCHEMES = ("redis://", "rediss://", "unix://")


def is_redis_url(text: str) -> bool:
    return isinstance(text, str) and text.startswith(SCHEMES)


def check_url(url: str, flag: str, *, needs_name: bool) -> None:
    """A usage error (exit status 2, one line) for a Redis URL that cannot
    be used as given: its port, database number or query arguments, or no
    structure name where one is needed.  Nothing is connected."""
    _parts(url, flag, needs_name=needs_name)


def check_args(args: argparse.Namespace) -> None:
    """``crawldedup urls``: the Redis URLs of --state and --db."""
    if is_redis_url(args.state):
        check_url(args.state, "--state", needs_name=not (args.exact or args.db))
    if args.db and is_redis_url(args.db):
        check_url(args.db, "--db", needs_name=False)


def local_state_path(url: str) -> str:
    """Where this machine keeps the pending journals of a Redis state (one a
    process: BASE.pending-PID-TOKEN)."""
    digest = hashlib.sha1(url.encode("utf-8")).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"crawldedup-redis-{digest}")


def _parts(url: str, flag: str = "", *, needs_name: bool = True) -> Any:
    """(the server's URL, the structure's name) of a Redis URL, or a
    UsageError naming what is wrong with it."""
    where = f"{flag} " if flag else ""
    try:
        base, name = split_url(url)
    except ValueError as exc:
        raise UsageError(f"{where}{exc}") from None
    try:
        from redis.connection import parse_url
    except ImportError:  # redis-py is optional: opening the state says to install it
        pass
    else:
        try:  # what redis-py reads of it (query arguments such as socket_timeout)
            cast(Callable[[str], Any], parse_url)(base)
        except ValueError as exc:
            raise UsageError(f"{where}{url!r}: {exc}") from None
    if needs_name and not name:
        if url.startswith("unix://"):
            raise UsageError(f"{where}{url!r}: a Redis state needs a name, which a unix:// "
                             f"socket URL cannot carry; use redis://HOST:PORT/DB/NAME")
        raise UsageError(f"{where}{url!r}: a Redis state needs a name: "
                         f"redis://HOST:PORT/DB/NAME")
    return base, name


class RedisState(UrlState):
    """The Bloom state of ``crawldedup urls`` in a RedisBloomFilter (a
    UrlState, see crawldedup.cli._url_state).

    The command prints only what ``add_many`` reported new -- atomically, in
    Redis -- so crawlers on several machines sharing the filter print each
    URL once between them.
    """

    read_size = 1 << 20  # a round trip per chunk: big chunks
    record_piece = SHARED_PIECE
    receipts = True  # RedisBloomFilter.add_many_once

    def __init__(self, url: str, args: argparse.Namespace, err: IO[str]) -> None:
        if args.rotate_every is not None or args.generations is not None:
            raise CrawldedupError("--rotate-every/--generations are not available with a "
                                  "Redis state (use RedisStore windows through --db)")
        base, name = _parts(url)
        self.created = False  # whether this process made the filter
        try:
            try:
                self.bf = crawldedup.redis.RedisBloomFilter(base, name)
                asked = []
                if args.capacity is not None and args.capacity != self.bf.capacity:
                    asked.append(f"--capacity {args.capacity}")
                if args.error_rate is not None and args.error_rate != self.bf.error_rate:
                    asked.append(f"--error-rate {args.error_rate}")
                if args.layout is not None and args.layout != self.bf.layout:
                    asked.append(f"--layout {args.layout}")
                if asked:
                    err.write(f"crawldedup: note: {url} was created with capacity "
                              f"{self.bf.capacity}, error rate {self.bf.error_rate} and the "
                              f"{self.bf.layout} layout; using those, not {' '.join(asked)}\n")
            except ValueError as exc:
                if "no crawldedup filter" not in str(exc):
                    raise
                self.bf = crawldedup.redis.RedisBloomFilter(
                    base, name, DEFAULT_CAPACITY if args.capacity is None else args.capacity,
                    DEFAULT_ERROR_RATE if args.error_rate is None else args.error_rate,
                    layout=args.layout or "blocked")
                self.created = True
        except ImportError as exc:
            raise CrawldedupError(str(exc)) from None
        self.url = url
        self.contains_many = self.bf.contains_many
        self.add_many = self.bf.add_many

    def add_many_once(self, keys: Any, receipt: bytes) -> np.ndarray:
        return self.bf.add_many_once(keys, receipt)  # type: ignore[no-any-return]

    def forget_receipt(self, receipt: bytes) -> None:
        self.bf.forget_receipt(receipt)

    def check_key_mode(self, mode: str, err: IO[str]) -> None:
        """Record the key mode in Redis, or refuse another (cli._key_mode)."""
        record = _key_mode.RedisRecord(self.bf._transport.client, self.bf.name, self.created)
        _key_mode.check(record, mode, f"the Redis state {self.url}",
                        lambda: bool(self.bf._popcount()), err)

    def describe(self) -> str:
        return (f"Redis Bloom filter {self.bf.name!r} at {self.bf.address}, "
                f"fill ratio {self.bf.fill_ratio:.4g}")

    def warnings(self) -> List[str]:
        count = self.bf.estimated_count()
        if count <= self.bf.capacity:
            return []
        return [f"the Redis filter holds about {count:,} URLs, more than its capacity "
                f"{self.bf.capacity:,}; its false-positive rate has grown past "
                f"{self.bf.error_rate:g}. Start a new one with a larger --capacity."]

    def close(self) -> None:
        self.bf.close()


def describe(url: str) -> str:
    """``crawldedup info redis://HOST:PORT/DB/NAME``: what the name holds, read
    without writing anything: a Bloom filter (its parameters, shards and
    fill) or an exact fingerprint store (its layout, capacity, digests and
    keys).  A name that holds neither is an error."""
    base, name = _parts(url)
    try:
        client, _, owned = connect(base)
    except ImportError as exc:
        raise CrawldedupError(str(exc)) from None
    try:
        meta, holds_set = _peek(client, name)
        if isinstance(meta, dict) and meta.get("kind") == crawldedup.redis.store.KIND:
            return _describe_store(url, client, name, meta)
        if meta is None and holds_set:
            return _describe_unrecorded_set(url, client, name)
        if meta is None:
            raise CrawldedupError(f"{url}: no crawldedup filter or store named {name!r} "
                                  f"there")
        return _describe_bloom(url, client, name)
    finally:
        if owned:
            client.close()


def _peek(client: Any, name: str) -> Tuple[Any, bool]:
    """(the name's metadata, parsed when it is JSON, else its raw bytes; or
    None), and whether the name itself holds a Redis set (a store of
    crawldedup 0.1.0 has no metadata key)."""
    key = f"{name}:meta"
    try:
        raw = client.get(key)
        holds_set = raw is None and client.type(name) in (b"set", "set")
    except redis_module().exceptions.ResponseError as exc:
        if str(exc).startswith("WRONGTYPE"):
            raise RedisKeyTypeError(key, str(exc)) from None
        raise unavailable(describe_client(client), exc) from exc
    except routing_errors() as exc:
        raise unavailable(describe_client(client), exc) from exc
    if raw is None:
        return None, holds_set
    try:
        return json.loads(raw), False
    except (ValueError, RecursionError):
        return raw, False


def _describe_bloom(url: str, client: Any, name: str) -> str:
    with crawldedup.redis.RedisBloomFilter(client, name) as bf:
        popcount = bf._popcount()
        m, k = bf.num_bits, bf.num_hashes
        fill = popcount / m
        lines = [
            f"redis: {url} ({bf.address})",
            "kind: Bloom filter (crawldedup.redis.RedisBloomFilter, format version 1)",
            f"capacity: {bf.capacity:,}",
            f"error rate (target): {bf.error_rate:g}",
            f"layout: {bf.layout}",
            f"bits: {m:,} ({m / 8 / 2**20:,.2f} MiB), hash functions: {k}, seed: {bf.seed}",
            f"shards: {bf.shards} ({', '.join(bf.shard_keys[:4])}"
            f"{', ...' if bf.shards > 4 else ''})",
            f"estimated count: {bf._logic.estimate(popcount):,}",
            f"fill ratio: {fill:.4f}",
            f"estimated false-positive rate now: {fill ** k:.4g}",
        ]
    return "\n".join(lines) + "\n"


def _describe_store(url: str, client: Any, name: str, meta: Dict[str, Any]) -> str:
    """A RedisStore, opened with the parameters its metadata records (the
    store checks every field of it; a damaged one is named)."""
    store_module = crawldedup.redis.store
    try:
        store = crawldedup.redis.RedisStore(client, name, meta.get("digest_size"),
                                            window=meta.get("window"),
                                            windows=meta.get("windows"))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, CrawldedupError):
            raise
        # Fields of the wrong type: opened with the defaults, the store
        # reads the metadata and raises CorruptStateError naming the field.
        store = crawldedup.redis.RedisStore(client, name)
    with store:
        logic = store._logic
        count = len(store)
        lines = [f"redis: {url} ({store.address})",
                 f"kind: exact fingerprint store (crawldedup.redis.RedisStore, format "
                 f"version {store_module.FORMAT_VERSION})"]
        if store.layout == store_module.BUCKETS:
            capacity = cast(int, store.capacity)
            groups = logic.prefixes
            shown = ", ".join(p.decode("utf-8", "replace") for p in groups[:4])
            lines += [
                "layout: buckets (small Redis hashes, a digest a field)",
                f"digest size: {store.digest_size} bytes",
                f"capacity: {capacity:,}",
                f"fingerprints: {count:,} ({count / capacity:.2%} of the capacity)",
                f"buckets: {logic.buckets:,}{' a time slot' if logic.window else ''}, "
                f"{logic.prefix} prefix byte{'s' if logic.prefix != 1 else ''} off each field",
                f"slot groups: {logic.groups} ({shown}{', ...' if len(groups) > 4 else ''})",
            ]
        else:
            lines += [
                "layout: set (one Redis set of raw digests, as crawldedup 0.1.0 wrote it)",
                f"digest size: {store.digest_size} bytes",
                f"fingerprints: {count:,}",
            ]
        if logic.window is None:
            lines.append("window: none (a digest stays until clear())")
        else:
            lines.append(f"window: {logic.window:g} s, in {logic.windows} time "
                         f"slot{'s' if logic.windows != 1 else ''} of "
                         f"{logic.window / logic.windows:g} s")
    return "\n".join(lines) + "\n"


def _describe_unrecorded_set(url: str, client: Any, name: str) -> str:
    """A Redis set of digests under the name and no metadata key: a store
    crawldedup 0.1.0 wrote.  Read as it is: a RedisStore opened on it
    writes its metadata key (the set layout), which ``info`` does not."""
    try:
        count = client.scard(name)
        member = client.srandmember(name)
    except routing_errors() as exc:
        raise unavailable(describe_client(client), exc) from exc
    size = f"{len(member)} bytes" if member else "unknown (the set is empty)"
    lines = [f"redis: {url} ({describe_client(client)})",
             "kind: exact fingerprint store (crawldedup.redis.RedisStore), no metadata key",
             "layout: set (one Redis set of raw digests, as crawldedup 0.1.0 wrote it)",
             f"digest size: {size}",
             f"fingerprints: {count:,}"]
    return "\n".join(lines) + "\n"
