"""RedisStore: exact fingerprints (raw digests) in Redis sets, shared by a
fleet of crawlers, optionally forgotten after a time window."""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Iterator, List, Optional, Set, Tuple, cast

import numpy as np

from crawldedup import _checks
from crawldedup.errors import CorruptStateError
from crawldedup.exact.stores.base import FingerprintStore, check_digest_size
from crawldedup.redis import _resp
from crawldedup.redis._conn import Op, Request, SyncHandle, check_reply, split_url
from crawldedup.redis._keys import FORGET_SCRIPT, check_name, receipts_key

#: Digests per script call / SMISMEMBER: a call runs alone on the server, so
#: it stays short (about 4 ms); a batch sends all its calls in one round trip.
CHUNK = 4096

# One SMISMEMBER and one variadic SADD per call, run atomically by the script:
# a digest is new when the set lacked it before the call and it is the first
# of its repeats in the call.  Of concurrent writers exactly one sees it new.
# The reply holds 1 where the digest was already there.  (Twice as fast on the
# server as one SADD per digest; see docs/redis.md.)
ADD_SCRIPT = b"""local m = redis.call('SMISMEMBER', KEYS[1], unpack(ARGV))
redis.call('SADD', KEYS[1], unpack(ARGV))
local seen = {}
for i = 1, #ARGV do
  if m[i] == 0 then
    local d = ARGV[i]
    if seen[d] then m[i] = 1 else seen[d] = true end
  end
end
return m"""

# KEYS[1] the current window, KEYS[2..] the older live windows; ARGV[1] the
# expiry of the current window (ms since the epoch), ARGV[2..] the digests.
# A digest held by a live window is seen; the others join the current one.
ADD_WINDOWED_SCRIPT = b"""local m = redis.call('SMISMEMBER', KEYS[1], unpack(ARGV, 2))
for j = 2, #KEYS do
  local o = redis.call('SMISMEMBER', KEYS[j], unpack(ARGV, 2))
  for i = 1, #o do if o[i] == 1 then m[i] = 1 end end
end
local fresh = {}
local seen = {}
for i = 1, #m do
  if m[i] == 0 then
    local d = ARGV[i + 1]
    if seen[d] then m[i] = 1 else seen[d] = true fresh[#fresh + 1] = d end
  end
end
if #fresh > 0 then redis.call('SADD', KEYS[1], unpack(fresh)) end
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return m"""


# add_many_once, one call per CHUNK digests.  KEYS[1] the set, KEYS[2] the
# store's receipts (a hash in the set's slot); ARGV[1] the receipt's field
# for this call (RECEIPT:CALL), ARGV[2] the receipt, ARGV[3] the batch's
# digest, ARGV[4] the call's number, ARGV[5..] the digests.  A field that
# records this batch is the answer; otherwise the digests are added as by
# ADD_SCRIPT and the answer (the batch's digest, then one byte a digest: 1
# where this call added it) is recorded, and the receipt's field count.
ADD_ONCE_SCRIPT = b"""local old = redis.call('HGET', KEYS[2], ARGV[1])
if old and string.sub(old, 1, 16) == ARGV[3] then return old end
local m = redis.call('SMISMEMBER', KEYS[1], unpack(ARGV, 5))
redis.call('SADD', KEYS[1], unpack(ARGV, 5))
local seen = {}
local f = {}
for i = 1, #m do
  local d = ARGV[i + 4]
  if m[i] == 0 and not seen[d] then seen[d] = true f[i] = '\1' else f[i] = '\0' end
end
local answer = ARGV[3] .. table.concat(f)
redis.call('HSET', KEYS[2], ARGV[1], answer)
local calls = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0') or 0
if calls <= tonumber(ARGV[4]) then redis.call('HSET', KEYS[2], ARGV[2], ARGV[4] + 1) end
return answer"""

def _seconds(window: Any) -> float:
    return _checks.positive_seconds("window", window, "seconds (a number) or a timedelta",
                                    "a positive number of seconds")


class StoreLogic:
    """What RedisStore sends and how it reads the replies, without I/O
    (shared by :class:`RedisStore` and the asyncio one)."""

    def __init__(self, name: Any, digest_size: int, window: Any, windows: Any,
                 clock: Callable[[], float]) -> None:
        self.name = check_name(name)
        self.digest_size = check_digest_size(digest_size)
        if windows is not None and window is None:
            raise ValueError("windows needs window (the seconds a digest stays seen)")
        self.window: Optional[float] = None if window is None else _seconds(window)
        if windows is None:
            windows = 1
        if isinstance(windows, bool) or not isinstance(windows, int):
            raise TypeError(f"windows must be an int, not {type(windows).__name__}")
        if not 1 <= windows <= 64:
            raise ValueError(f"windows must be between 1 and 64, got {windows}")
        self.windows = windows
        if not callable(clock):
            raise TypeError("clock must be callable (returning seconds since the epoch)")
        self.clock = clock

    # ----------------------------------------------------------- keys

    def live_keys(self) -> Tuple[List[bytes], int]:
        """(keys of the live sets, current first; expiry of the current in ms)."""
        if self.window is None:
            return [self.name], 0
        slot = self.window / self.windows
        now = float(self.clock())
        current = int(now // slot)
        keys = [b"{%s}:%d" % (self.name, i) for i in range(current, current - self.windows - 1, -1)]
        expire_ms = int(math.ceil((current + self.windows + 1) * slot * 1000))
        return keys, expire_ms

    # ----------------------------------------------------- operations

    def _chunks(self, raw: bytes, count: int) -> Iterator[Tuple[int, bytes]]:
        """(n, the n digests as RESP bulk strings) for each run of at most
        CHUNK of the count digests concatenated in raw."""
        ds = self.digest_size
        for start in range(0, count, CHUNK):
            n = min(CHUNK, count - start)
            yield n, _resp.bulk_fixed(raw[start * ds:(start + n) * ds], ds)

    def add_op(self, raw: bytes, count: int) -> Op:
        """Adds ``count`` digests (concatenated in ``raw``); the result is a
        bool array, True where this call added the digest."""
        if count == 0:
            return np.zeros(0, dtype=np.bool_)
        keys, expire_ms = self.live_keys()
        requests = []
        for n, body in self._chunks(raw, count):
            if self.window is None:
                head = _resp.head(3 + 1 + n, b"EVAL", ADD_SCRIPT, 1, keys[0])
            else:
                head = _resp.head(3 + len(keys) + 1 + n, b"EVAL", ADD_WINDOWED_SCRIPT,
                                  len(keys), *keys, expire_ms)
            requests.append(Request(keys[0], [head, body], 1))
        replies = yield requests
        return ~self._flags(replies, requests, count)

    def add_once_op(self, raw: bytes, count: int, receipt: bytes, batch: bytes) -> Op:
        """add_many_once of ``count`` digests: the flags of unique order
        (see RedisStore.add_many_once)."""
        if self.window is not None:
            raise NotImplementedError("a RedisStore with a window keeps no receipts")
        key = self.live_keys()[0][0]
        receipts = self.receipts_key
        hexed = receipt.hex().encode("ascii")
        requests, sizes = [], []
        for call, (n, body) in enumerate(self._chunks(raw, count)):
            sizes.append(n)
            field = b"%s:%d" % (hexed, call)
            head = _resp.head(3 + 2 + 4 + n, b"EVAL", ADD_ONCE_SCRIPT, 2, key, receipts, field,
                              hexed, batch, call)
            requests.append(Request(key, [head, body], 1))
        replies = yield requests
        parts = []
        for n, req, reply in zip(sizes, requests, replies):
            answer = check_reply(reply[0], req, self.address)
            flags = bytes(answer)[16:] if isinstance(answer, bytes) else b""
            if not isinstance(answer, bytes) or not answer.startswith(batch) \
                    or len(flags) != n or flags.strip(b"\x00\x01"):
                raise CorruptStateError(
                    f"Redis at {self.address}, store {self.name.decode('utf-8', 'replace')!r}",
                    f"its receipts {receipts.decode('utf-8', 'replace')!r} hold for this "
                    f"batch {answer!r:.80}, not {n} flags")
            parts.append(np.frombuffer(flags, dtype=np.uint8).astype(np.bool_))
        return np.concatenate(parts)

    def forget_op(self, receipt: bytes) -> Op:
        receipts = self.receipts_key
        req = Request(receipts, _resp.command(b"EVAL", FORGET_SCRIPT, 1, receipts,
                                              receipt.hex()), 1)
        replies = yield [req]
        self._flags(replies, [req], None)
        return None

    @property
    def receipts_key(self) -> bytes:
        return receipts_key(self.name)

    def contains_op(self, raw: bytes, count: int) -> Op:
        if count == 0:
            return np.zeros(0, dtype=np.bool_)
        keys, _ = self.live_keys()
        requests = []
        for n, body in self._chunks(raw, count):
            for key in keys:
                requests.append(Request(keys[0], [_resp.head(2 + n, b"SMISMEMBER", key), body],
                                        1, key))
        replies = yield requests
        self._flags(replies, requests, None)
        per = len(keys)
        parts = []
        for r in range(0, len(requests), per):
            acc = np.asarray(replies[r][0], dtype=np.bool_)
            for j in range(1, per):
                acc = acc | np.asarray(replies[r + j][0], dtype=np.bool_)
            parts.append(acc)
        return np.concatenate(parts)

    def len_op(self) -> Op:
        keys, _ = self.live_keys()
        requests = [Request(keys[0], _resp.command(b"SCARD", key), 1, key) for key in keys]
        replies = yield requests
        self._flags(replies, requests, None)
        return sum(int(r[0]) for r in replies)

    def clear_op(self) -> Op:
        keys, _ = self.live_keys()
        if self.window is None:  # and the receipts of add_many_once
            requests = [Request(keys[0], _resp.command(b"DEL", *keys), 1),
                        Request(self.receipts_key, _resp.command(b"DEL", self.receipts_key), 1)]
        else:
            requests = [Request(keys[0], _resp.command(b"DEL", *keys), 1)]
        replies = yield requests
        self._flags(replies, requests, None)
        return None

    def _flags(self, replies: List[List[Any]], requests: List[Request],
               count: Optional[int]) -> np.ndarray:
        """Checks every reply (errors raised); for add, the concatenated flags."""
        parts = []
        for req, reply in zip(requests, replies):
            value = check_reply(reply[0], req, self.address)
            if count is not None:
                parts.append(np.asarray(value, dtype=np.bool_))
        if count is None:
            return np.zeros(0, dtype=np.bool_)
        out = np.concatenate(parts) if parts else np.zeros(0, dtype=np.bool_)
        if len(out) != count:  # pragma: no cover - a server bug, never silently
            raise RuntimeError(f"Redis answered {len(out)} flags for {count} digests")
        return out

    address = "Redis"


class RedisStore(SyncHandle, FingerprintStore):
    """Fingerprints (raw digests) in a Redis set: ``RedisStore(url_or_client, name)``.

    ``add`` reports "new" exactly once across any number of concurrent
    writers: one script call per 4,096 digests (all of a batch's calls in
    one round trip) tests and adds them atomically.  Works on Redis
    Cluster (one set is one key, on one node).  Needs Redis 6.2 or later.

    ``window=seconds`` forgets digests: they go to one set per time slot of
    ``window / windows`` seconds, each set expiring by TTL, and a digest
    counts as seen while any of the last ``windows + 1`` slots holds it -- so
    for at least ``window`` and at most ``window * (1 + 1/windows)`` seconds
    after it was added.  A crawler uses it to fetch a page again after N
    days.  The windows' sets share a hash tag, so one script checks them all
    atomically, on a cluster too.  Time is the client's clock (``clock``).

    A server that cannot be reached raises StoreUnavailableError naming it,
    never "not seen".  Needs ``pip install 'crawldedup[redis]'``.
    """

    _logic: StoreLogic
    _what = "store"

    def __init__(self, client_or_url: Any, name: Any,
                 digest_size: int = 16, *, window: Any = None, windows: Optional[int] = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._logic = StoreLogic(name, digest_size, window, windows, clock)
        self.digest_size = self._logic.digest_size
        self._attach(client_or_url)

    def __repr__(self) -> str:
        window = "" if self._logic.window is None else \
            f", window={self._logic.window!r}, windows={self._logic.windows}"
        return f"RedisStore({self.address!r}, {self.name!r}{window})"

    def _raw(self, fps: Any) -> Tuple[bytes, int]:
        ds = self.digest_size
        if isinstance(fps, np.ndarray) and fps.dtype.kind == "S" and fps.ndim == 1 \
                and fps.dtype.itemsize == ds:
            return np.ascontiguousarray(fps).tobytes(), len(fps)
        items = self._fps(fps)
        return b"".join(items), len(items)

    def add_many(self, fps: Any) -> np.ndarray:
        """Add every digest; a numpy bool array, True where this call added it
        (the first of repeats within the call counts as new)."""
        raw, count = self._raw(fps)
        return cast(np.ndarray, self._run(self._logic.add_op(raw, count)))

    def contains_many(self, fps: Any) -> np.ndarray:
        raw, count = self._raw(fps)
        return cast(np.ndarray, self._run(self._logic.contains_op(raw, count)))

    @property
    def supports_receipts(self) -> bool:  # type: ignore[override]
        """add_many_once / forget_receipt: on a store without a window."""
        return self._logic.window is None

    def _insert_once(self, unique: List[bytes], receipt: bytes, batch: bytes) -> bytes:
        """One script call per CHUNK digests, each idempotent under its own
        field of the receipt (RECEIPT:CALL): a retry of the batch gets each
        call's recorded answer where that call ran, and runs the others.  A
        call of the killed client that the server runs late finds its
        answer recorded and adds nothing."""
        flags = self._run(self._logic.add_once_op(b"".join(unique), len(unique), receipt,
                                                  batch))
        return bytes(np.asarray(flags, dtype=np.uint8))

    def _forget_receipt(self, receipt: bytes) -> None:
        self._run(self._logic.forget_op(receipt))

    def _insert(self, unique: List[bytes]) -> Set[bytes]:
        flags = self.add_many(unique)
        return {fp for fp, new in zip(unique, flags) if new}

    def _select(self, unique: List[bytes]) -> Set[bytes]:
        flags = self.contains_many(unique)
        return {fp for fp, hit in zip(unique, flags) if hit}

    def __len__(self) -> int:
        return int(self._run(self._logic.len_op()))

    def clear(self) -> None:
        """Remove every digest (the live windows' sets)."""
        self._run(self._logic.clear_op())


DEFAULT_NAME = "crawldedup:fingerprints"


def open_redis_store(url: str, *, name: Optional[str] = None, digest_size: int = 16,
                     **kwargs: Any) -> RedisStore:
    """A RedisStore for ``redis://host:port/db/name`` (the name from the URL,
    else ``name``, else ``crawldedup:fingerprints``)."""
    base, from_url = split_url(url)
    return RedisStore(base, from_url or name or DEFAULT_NAME, digest_size, **kwargs)


def open_redis_url(url: str, *, table: Optional[str] = None,
                   digest_size: int = 16) -> RedisStore:
    """open_redis_store with ``table`` as the name (open_store's backend)."""
    return open_redis_store(url, name=table, digest_size=digest_size)
