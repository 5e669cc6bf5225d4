"""RedisStore: exact fingerprints (raw digests) in Redis, shared by a fleet
of crawlers, optionally forgotten after a time window.

Layout ``buckets`` (what a new store gets): the digests are cut by a
prefix into many small Redis hashes, kept in Redis's compact listpack
encoding; a digest is a field of its bucket, with the prefix bytes the
bucket's name implies taken off and an empty value -- about 22 bytes of
Redis memory a digest against about 72 in a Redis set.  Layout ``set``:
one Redis set of raw digests under the store's name (and ``{NAME}:SLOT``
per time slot), as crawldedup 0.1.0 wrote it; a name that holds such a set
keeps it.  ``NAME:meta`` (JSON) records which, and the parameters.
docs/redis.md ("RedisStore") gives the reasons and the numbers.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple, cast

import numpy as np

from crawldedup import _checks, _defaults
from crawldedup.errors import CorruptStateError, IncompatibleFilterError, StoreUnavailableError
from crawldedup.exact.stores.base import FingerprintStore, check_digest_size
from crawldedup.redis import _resp
from crawldedup.redis._conn import (
    Op,
    RedisKeyTypeError,
    Request,
    SyncHandle,
    check_reply,
    redis_module,
    split_url,
)
from crawldedup.redis._keys import (
    FORGET_SCRIPT,
    check_name,
    group_prefixes,
    has_tag,
    receipts_key,
)

#: Digests per script call: a call runs alone on the server, so it stays
#: short (a few ms); a batch sends all its calls in one round trip.
CHUNK = 4096

#: The metadata's format version and kind.
FORMAT_VERSION = 1
KIND = "store"

#: The layouts a store's metadata names (see the module's docstring).
BUCKETS = "buckets"
SET = "set"
LAYOUTS = (BUCKETS, SET)

#: Digests a bucket holds on average when the store holds ``capacity``:
#: the count is rounded up, so a bucket holds 50 to 100 there.  A bucket
#: stays a listpack up to the server's ``hash-max-listpack-entries`` (512
#: by Redis's default, 128 in some configurations): from about 50 digests a
#: bucket its key's own cost is under 5 bytes a digest, and a listpack's
#: insert costs the server more as it grows.
FILL = 100
#: The bucket prefix takes at most this many whole bytes off a field.
MAX_PREFIX_BYTES = 3
#: The fields of one bucket in one run of a script call: Lua's unpack()
#: hands at most about 8,000 values to a command (HSET takes two a field).
RUN = 1000
#: Slot groups a new store gets per cluster master (one on a single server).
GROUPS_PER_NODE = 4
MAX_GROUPS = 256

# ------------------------------------------------------------ scripts
#
# The bucket scripts share one body.  KEYS, after the script's own first
# ones (FIRST - 1 of them), come PER a run: the bucket in the current slot
# (the store's only one without a window), then the same bucket in the
# older live slots.  ARGV[A] is PER, ARGV[A + 1] the expiry of the current
# slot in ms since the epoch ('' without a window), ARGV[A + 2] the number
# of fields of each run (2 bytes, big-endian, a run), then the fields.  A
# field is seen when a live slot's bucket holds it, or an earlier field of
# the run is the same (a bucket's fields are in one run, or in runs one
# after the other); the others are added (HSETNX for a run of one,
# else HMGET then one HSET), and each call adds its new count to KEYS[COUNT]
# (the slot's counter, the store's len()).  The answer is one byte a field,
# 1 where the call added it.  The first command on a bucket goes through
# pcall, so that a key of another type is named in the error.
_BUCKET_BODY = """local per = tonumber(ARGV[{A}])
local expire = ARGV[{A} + 1]
local counts = ARGV[{A} + 2]
local out = {{}}
local a = {A} + 3
local o = 0
local added = 0
local function wrong(key) return redis.error_reply('WRONGTYPE crawldedup key ' .. key) end
for j = 0, (#KEYS - {FIRST} + 1) / per - 1 do
  local n = string.byte(counts, 2 * j + 1) * 256 + string.byte(counts, 2 * j + 2)
  local key = KEYS[{FIRST} + j * per]
  local seen = {{}}
  for w = 1, per - 1 do
    local older = KEYS[{FIRST} + j * per + w]
    local m = redis.pcall('HMGET', older, unpack(ARGV, a, a + n - 1))
    if m.err then return wrong(older) end
    for i = 1, n do if m[i] then seen[ARGV[a + i - 1]] = true end end
  end
  local wrote = false
  if n == 1 then
    local f = ARGV[a]
    out[o + 1] = '\\0'
    if not seen[f] then
      seen[f] = true
      local r = redis.pcall('HSETNX', key, f, '')
      if type(r) == 'table' then return wrong(key) end
      if r == 1 then out[o + 1] = '\\1' wrote = true added = added + 1 end
    end
  else
    local m = redis.pcall('HMGET', key, unpack(ARGV, a, a + n - 1))
    if m.err then return wrong(key) end
    local new = {{}}
    for i = 1, n do
      local f = ARGV[a + i - 1]
      if m[i] or seen[f] then out[o + i] = '\\0' else
        seen[f] = true
        new[#new + 1] = f
        new[#new + 1] = ''
        out[o + i] = '\\1'
      end
    end
    if #new > 0 then
      redis.call('HSET', key, unpack(new))
      wrote = true
      added = added + #new / 2
    end
  end
  if wrote and expire ~= '' then redis.call('PEXPIREAT', key, expire) end
  a = a + n
  o = o + n
end
if added > 0 then
  redis.call('INCRBY', KEYS[{COUNT}], added)
  if expire ~= '' then redis.call('PEXPIREAT', KEYS[{COUNT}], expire) end
end
local answer = table.concat(out)
"""

# add_many: KEYS[1] the counter, then the runs' buckets; ARGV as above.
ADD_BUCKETS_SCRIPT = (_BUCKET_BODY.format(A=1, FIRST=2, COUNT=1) + "return answer").encode()

# add_many_once, one call per slot group per CHUNK digests of the batch.
# KEYS[1] the group's receipts (a hash in the group's slot), KEYS[2] the
# counter, then the buckets; ARGV[1] the receipt's field for this call
# (RECEIPT:CALL), ARGV[2] the receipt, ARGV[3] the batch's digest, ARGV[4]
# the call's number, then as above.  A field that records this batch is
# the answer, and nothing is added; otherwise the call adds, and records
# its answer (the batch's digest, then the flags) and the receipt's count
# of calls, atomically with the adds.
ADD_ONCE_BUCKETS_SCRIPT = ("""local old = redis.call('HGET', KEYS[1], ARGV[1])
if old and string.sub(old, 1, 16) == ARGV[3] then return old end
""" + _BUCKET_BODY.format(A=5, FIRST=3, COUNT=2) + """answer = ARGV[3] .. answer
redis.call('HSET', KEYS[1], ARGV[1], answer)
local calls = tonumber(redis.call('HGET', KEYS[1], ARGV[2]) or '0') or 0
if calls <= tonumber(ARGV[4]) then redis.call('HSET', KEYS[1], ARGV[2], ARGV[4] + 1) end
return answer""").encode()

# contains_many: KEYS the runs' buckets, PER a run (the live slots);
# ARGV[1] PER, ARGV[2] the runs' counts, then the fields.  One byte a
# field, 1 where a live slot's bucket holds it.
CONTAINS_BUCKETS_SCRIPT = b"""local per = tonumber(ARGV[1])
local counts = ARGV[2]
local out = {}
local a = 3
for j = 0, #KEYS / per - 1 do
  local n = string.byte(counts, 2 * j + 1) * 256 + string.byte(counts, 2 * j + 2)
  for i = 1, n do out[a + i - 3] = '\\0' end
  for w = 1, per do
    local key = KEYS[j * per + w]
    local m = redis.pcall('HMGET', key, unpack(ARGV, a, a + n - 1))
    if m.err then return redis.error_reply('WRONGTYPE crawldedup key ' .. key) end
    for i = 1, n do if m[i] then out[a + i - 3] = '\\1' end end
  end
  a = a + n
end
return table.concat(out)"""

# The set layout (crawldedup 0.1.0's): one SMISMEMBER and one variadic SADD
# per call, run atomically: a digest is new when the set lacked it before
# the call and it is the first of its repeats in the call.  The reply holds
# 1 where the digest was already there.
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

# The set layout with a window: KEYS[1] the current slot's set, KEYS[2..]
# the older live ones; ARGV[1] the expiry of the current one (ms since the
# epoch), ARGV[2..] the digests.  A digest a live set holds is seen; the
# others join the current one.
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

# add_many_once on the set layout: KEYS[1] the set, KEYS[2] the receipts;
# ARGV[1] the receipt's field (RECEIPT:CALL), ARGV[2] the receipt, ARGV[3]
# the batch's digest, ARGV[4] the call's number, ARGV[5..] the digests.
ADD_ONCE_SCRIPT = b"""local old = redis.call('HGET', KEYS[2], ARGV[1])
if old and string.sub(old, 1, 16) == ARGV[3] then return old end
local m = redis.call('SMISMEMBER', KEYS[1], unpack(ARGV, 5))
redis.call('SADD', KEYS[1], unpack(ARGV, 5))
local seen = {}
local f = {}
for i = 1, #m do
  local d = ARGV[i + 4]
  if m[i] == 0 and not seen[d] then seen[d] = true f[i] = '\\1' else f[i] = '\\0' end
end
local answer = ARGV[3] .. table.concat(f)
redis.call('HSET', KEYS[2], ARGV[1], answer)
local calls = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0') or 0
if calls <= tonumber(ARGV[4]) then redis.call('HSET', KEYS[2], ARGV[2], ARGV[4] + 1) end
return answer"""


# ------------------------------------------------------------ sizing

def bucket_layout(capacity: int, digest_size: int) -> Tuple[int, int]:
    """(prefix bytes, multiplier) of the buckets for a store sized for
    ``capacity`` digests: ``256**prefix * multiplier`` buckets, at least
    capacity / FILL of them.  A digest's bucket is its first ``prefix``
    bytes times the multiplier, plus the next (up to 4) bytes scaled into
    [0, multiplier); its field is the digest without the first ``prefix``
    bytes, which the bucket's name implies."""
    target = max(1, -(-capacity // FILL))
    prefix = 0
    while prefix < min(MAX_PREFIX_BYTES, digest_size - 1) and 256 ** (prefix + 1) <= target:
        prefix += 1
    multiplier = -(-target // 256 ** prefix)
    return prefix, min(multiplier, 256 ** min(4, digest_size - prefix))


def buckets_of(digests: np.ndarray, prefix: int, multiplier: int) -> np.ndarray:
    """The bucket (int64) of each row of an (n, digest_size) uint8 array."""
    n, size = digests.shape
    high = np.zeros(n, dtype=np.int64)
    for i in range(prefix):
        high = (high << 8) | digests[:, i]
    width = min(4, size - prefix)
    low = np.zeros(n, dtype=np.uint64)
    for i in range(prefix, prefix + width):
        low = (low << np.uint64(8)) | digests[:, i].astype(np.uint64)
    scaled = (low * np.uint64(multiplier)) >> np.uint64(8 * width)
    return cast(np.ndarray, high * multiplier + scaled.astype(np.int64))


def _hex_rows(values: np.ndarray, width: int) -> np.ndarray:
    """Lower-case hex of each value, ``width`` digits, as an (n, width) uint8 array."""
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    shifts = np.arange(width - 1, -1, -1, dtype=np.int64) * 4
    return cast(np.ndarray, digits[(values[:, None] >> shifts[None, :]) & 15])


def _bulk_rows(rows: np.ndarray) -> np.ndarray:
    """``$len\\r\\nrow\\r\\n`` for each row of an (n, width) uint8 array."""
    n, width = rows.shape
    head = np.frombuffer(b"$%d\r\n" % width, dtype=np.uint8)
    out = np.empty((n, len(head) + width + 2), dtype=np.uint8)
    out[:, :len(head)] = head
    out[:, len(head):len(head) + width] = rows
    out[:, -2] = 13
    out[:, -1] = 10
    return out


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(data), data)


def _equal_to(made: int) -> Callable[[Any], bool]:
    return lambda v: type(v) is int and v == made


def _seconds(window: Any) -> float:
    return _checks.positive_seconds("window", window, "seconds (a number) or a timedelta",
                                    "a positive number of seconds")


class _Call:
    """One script call of the bucket layout: the positions of its digests
    in the batch (in the call's order), its group and its runs."""

    __slots__ = ("group", "positions", "runs", "counts")

    def __init__(self, group: int, positions: np.ndarray, runs: np.ndarray,
                 counts: np.ndarray) -> None:
        self.group = group
        self.positions = positions
        self.runs = runs
        self.counts = counts


class StoreLogic:
    """What RedisStore sends and how it reads the replies, without I/O
    (shared by :class:`RedisStore` and the asyncio one).  ``open_op`` reads
    or writes the metadata first; the layout is known after it."""

    def __init__(self, name: Any, digest_size: int, window: Any, windows: Any,
                 clock: Callable[[], float], capacity: Any = None) -> None:
        self.name = check_name(name)
        self.meta_key = self.name + b":meta"
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
        self.asked_capacity = None if capacity is None else _checks.check_capacity(capacity)
        self.layout = SET  # until open_op reads the metadata
        self.capacity: Optional[int] = None
        self.prefix = 0
        self.multiplier = 1
        self.groups = 1
        self.buckets = 1
        self.width = 1
        self.prefixes: List[bytes] = []
        self.warning: Optional[str] = None

    address = "Redis"

    # ------------------------------------------------------- metadata

    def _where(self) -> str:
        return f"Redis at {self.address}, store {self.name.decode('utf-8', 'replace')!r}"

    def _corrupt(self, reason: str) -> CorruptStateError:
        return CorruptStateError(self._where(), f"its metadata key "
                                 f"{self.meta_key.decode('utf-8', 'replace')!r} {reason}")

    def _sized(self, capacity: int) -> Tuple[int, int]:
        """bucket_layout for a time slot of a store of this capacity."""
        return bucket_layout(-(-capacity // self.windows), self.digest_size)

    def _new_meta(self, layout: str, nodes: int) -> Dict[str, Any]:
        meta: Dict[str, Any] = {"format": FORMAT_VERSION, "kind": KIND, "layout": layout,
                                "digest_size": self.digest_size, "window": self.window,
                                "windows": self.windows if self.window is not None else None}
        if layout == BUCKETS:
            capacity = self.asked_capacity or _defaults.CAPACITY
            prefix, multiplier = self._sized(capacity)
            groups = 1 if nodes <= 1 or has_tag(self.name) else \
                min(MAX_GROUPS, GROUPS_PER_NODE * nodes)
            meta.update(capacity=capacity, prefix_bytes=prefix,
                        buckets=256 ** prefix * multiplier, groups=groups)
        return meta

    def _read_meta(self, raw: bytes) -> Dict[str, Any]:
        """The stored metadata, every field checked against what this
        version writes: a hand-edited or damaged key is named, never used."""
        key = self.meta_key.decode("utf-8", "replace")
        try:
            meta = json.loads(raw)
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
        except (ValueError, RecursionError) as exc:
            raise self._corrupt(f"is not crawldedup store metadata ({exc})") from None
        if meta.get("kind") != KIND or meta.get("format") != FORMAT_VERSION:
            raise IncompatibleFilterError(
                f"Redis key {key!r} describes a {meta.get('kind')!r} of format "
                f"{meta.get('format')!r}; this crawldedup reads stores of format "
                f"{FORMAT_VERSION} (choose another name for the store)")

        def field(name: str, ok: Callable[[Any], bool], what: str) -> Any:
            if name not in meta:
                raise self._corrupt(f"has no {name!r}")
            value = meta[name]
            if not ok(value):
                raise self._corrupt(f"holds {name} {value!r}, not {what}")
            return value

        def whole(lo: int, hi: int) -> Callable[[Any], bool]:
            return lambda v: type(v) is int and lo <= v <= hi

        layout = field("layout", lambda v: v in LAYOUTS, f"one of {list(LAYOUTS)}")
        field("digest_size", whole(1, 64), "an int in [1, 64]")
        window = field("window", lambda v: v is None or (
            type(v) in (int, float) and 0 < v < math.inf), "null or a positive number")
        field("windows", (lambda v: v is None) if window is None else whole(1, 64),
              "null without a window, else an int in [1, 64]")
        known = {"format", "kind", "layout", "digest_size", "window", "windows"}
        if layout == BUCKETS:
            known |= {"capacity", "prefix_bytes", "buckets", "groups"}
            capacity = field("capacity", whole(1, 2 ** 62), "an int >= 1")
            field("groups", whole(1, 1 if has_tag(self.name) else MAX_GROUPS),
                  f"an int in [1, {MAX_GROUPS}] (1 for a name with a hash tag)")
            windows = 1 if window is None else meta["windows"]
            prefix, multiplier = bucket_layout(-(-capacity // windows), meta["digest_size"])
            for name, made in (("prefix_bytes", prefix), ("buckets", 256 ** prefix * multiplier)):
                field(name, _equal_to(made),
                      f"{made}, which capacity {capacity} makes (was capacity edited?)")
        extra = sorted(set(meta) - known)
        if extra:
            raise self._corrupt(f"holds fields this crawldedup never writes: {extra}")
        return meta

    def _adopt(self, meta: Dict[str, Any]) -> None:
        asked = {"digest_size": self.digest_size, "window": self.window,
                 "windows": self.windows if self.window is not None else None}
        diff = [f"{n} {v!r} != {meta[n]!r}" for n, v in asked.items() if meta[n] != v]
        if meta["layout"] == BUCKETS and self.asked_capacity is not None \
                and self.asked_capacity != meta["capacity"]:
            diff.append(f"capacity {self.asked_capacity} != {meta['capacity']}")
        if diff:
            raise IncompatibleFilterError(
                f"the Redis store {self.name.decode('utf-8', 'replace')!r} has other "
                f"parameters: {', '.join(diff)} (asked != stored)")
        self.layout = meta["layout"]
        if self.layout == BUCKETS:
            self.capacity = meta["capacity"]
            self.prefix, self.multiplier = self._sized(meta["capacity"])
            self.buckets = meta["buckets"]
            self.groups = meta["groups"]
            self.width = len(b"%x" % (self.buckets - 1))
            self.prefixes = group_prefixes(self.name, self.groups)
        else:
            self.capacity = None

    def open_op(self, nodes: int) -> Op:
        """Read the metadata; a name without it is either a store of the
        set layout (its set, or a live slot's set, exists: it is kept and
        the metadata says so) or a new store of the bucket layout.  The
        server's listpack limits are read on the way (warning set when they
        keep this store's buckets from staying compact)."""
        get = Request(self.meta_key, _resp.command(b"GET", self.meta_key))
        if self.window is None:
            olds = [self.name]
        else:
            olds = self._set_keys()[0]
        probes = [Request(k, _resp.command(b"TYPE", k)) for k in olds]
        # Group 0's counter (in each live time slot): a bucket store with
        # digests has it, so its presence without the metadata means the
        # metadata was lost, not that the store is new (a new mapping of
        # digests to buckets would answer "new" for stored digests).
        first = group_prefixes(self.name, 1)[0]
        counters = [first + b"count"] if self.window is None else \
            [first + b"w%d:count" % i for i in range(self._slot_now()[0],
                                                     self._slot_now()[0] - self.windows - 1, -1)]
        guards = [Request(k, _resp.command(b"EXISTS", k)) for k in counters]
        config = Request(self.meta_key, _resp.command(b"CONFIG", b"GET", b"hash-max-ziplist-*"))
        requests = [get, *probes, *guards, config]
        replies = yield requests
        raw = check_reply(replies[0][0], get, self.address)
        limits = replies[-1][0]
        if raw is None:
            held = [check_reply(r[0], req, self.address)
                    for r, req in zip(replies[1 + len(probes):-1], guards)]
            if any(held):
                raise CorruptStateError(
                    self._where(), f"its metadata key {self.meta_key.decode('utf-8', 'replace')!r} "
                    f"is missing while its buckets' keys remain: without it the digests "
                    f"cannot be found (restore the key, or clear the store's keys)")
            found = [check_reply(r[0], req, self.address)
                     for r, req in zip(replies[1:1 + len(probes)], probes)]
            types = [t.decode() if isinstance(t, bytes) else str(t) for t in found]
            if self.window is None and types[0] not in ("none", "set"):
                raise RedisKeyTypeError(self.name, f"a {types[0]}, not a set of digests")
            layout = SET if "set" in types else BUCKETS
            meta = self._new_meta(layout, nodes)
            text = json.dumps(meta, sort_keys=True)
            setnx = Request(self.meta_key, _resp.command(b"SET", self.meta_key, text, b"NX"))
            replies = yield [setnx]
            if check_reply(replies[0][0], setnx, self.address) is None:
                replies = yield [get]  # another process created it meanwhile
                raw = check_reply(replies[0][0], get, self.address)
                if raw is None:  # pragma: no cover - created and deleted between two calls
                    raise StoreUnavailableError(f"{self._where()}: the metadata key came and "
                                                f"went; try again")
            else:
                raw = text.encode()
        self._adopt(self._read_meta(raw))
        self._check_limits(limits)
        return None

    def _check_limits(self, reply: Any) -> None:
        """Sets ``warning`` when the server turns this store's buckets into
        hash tables early (CONFIG refused, as managed services do: the
        defaults, 512 entries of 64 bytes, are assumed)."""
        if self.layout != BUCKETS or not isinstance(reply, (list, dict)):
            return
        pairs = reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2]))
        try:
            entries = int(pairs.get(b"hash-max-ziplist-entries", 512))
            value = int(pairs.get(b"hash-max-ziplist-value", 64))
        except ValueError:  # pragma: no cover - a server's own config
            return
        field = self.digest_size - self.prefix
        if entries < 128 or value < field:
            self.warning = (
                f"Redis at {self.address} keeps a hash compact (a listpack) up to "
                f"hash-max-listpack-entries={entries} fields of hash-max-listpack-value="
                f"{value} bytes; store {self.name.decode('utf-8', 'replace')!r} puts about "
                f"{FILL} fields of {field} bytes in a bucket at its capacity, so its buckets "
                f"become hash tables, about 4 times the memory, early.  Answers stay exact; "
                f"set hash-max-listpack-entries to 128 or more (Redis's default is 512)")

    # ----------------------------------------------------------- keys

    def _slot_now(self) -> Tuple[int, int]:
        """(the current time slot, the expiry of its keys in ms)."""
        assert self.window is not None
        slot = self.window / self.windows
        current = int(float(self.clock()) // slot)
        return current, int(math.ceil((current + self.windows + 1) * slot * 1000))

    def _set_keys(self) -> Tuple[List[bytes], int]:
        """Set layout: (the live sets, current first; expiry of the current in ms)."""
        if self.window is None:
            return [self.name], 0
        current, expire_ms = self._slot_now()
        keys = [b"{%s}:%d" % (self.name, i) for i in range(current, current - self.windows - 1, -1)]
        return keys, expire_ms

    def live_keys(self) -> Tuple[List[bytes], int]:
        """The set layout's live sets (current first) and the current one's expiry."""
        return self._set_keys()

    def _slot_prefixes(self, group: int) -> Tuple[List[bytes], int]:
        """Bucket layout: the start of a bucket key of the group in each
        live slot (current first; one without a window), and the expiry."""
        base = self.prefixes[group]
        if self.window is None:
            return [base], 0
        current, expire_ms = self._slot_now()
        return [base + b"w%d:" % i for i in range(current, current - self.windows - 1, -1)], \
            expire_ms

    def _counters(self, group: int) -> List[bytes]:
        return [p + b"count" for p in self._slot_prefixes(group)[0]]

    @property
    def receipt_keys(self) -> List[bytes]:
        """The receipts hashes: one a slot group (its slot), or the set's."""
        if self.layout == SET:
            return [receipts_key(self.name)]
        return [p + b"receipts" for p in self.prefixes]

    @property
    def receipts_key(self) -> bytes:
        return self.receipt_keys[0]

    def bucket_key(self, bucket: int, slot: Optional[int] = None) -> bytes:
        """The key of a bucket (in time slot ``slot`` of a store with a window)."""
        base = self.prefixes[bucket % self.groups]
        if slot is not None:
            base += b"w%d:" % slot
        return base + b"%0*x" % (self.width, bucket)

    # ---------------------------------------------------- the buckets

    def _digests(self, raw: bytes, count: int) -> np.ndarray:
        return np.frombuffer(raw, dtype=np.uint8, count=count * self.digest_size).reshape(
            count, self.digest_size)

    def _calls(self, digests: np.ndarray, positions: np.ndarray, chunk: int
               ) -> Iterator[_Call]:
        """The script calls for the digests at ``positions`` (rows of
        ``digests``): grouped by slot group and sorted by bucket (a stable
        sort: repeats keep their order), at most ``chunk`` digests a call,
        a bucket's fields cut into runs of at most RUN."""
        if not len(positions):
            return
        buckets = buckets_of(digests[positions], self.prefix, self.multiplier)
        groups = buckets % self.groups
        order = np.argsort(groups * self.buckets + buckets, kind="stable")
        positions, buckets, groups = positions[order], buckets[order], groups[order]
        edges = np.flatnonzero(np.diff(groups)) + 1
        for lo, hi in zip(np.r_[0, edges], np.r_[edges, len(groups)]):
            for start in range(int(lo), int(hi), chunk):
                stop = min(start + chunk, int(hi))
                b = buckets[start:stop]
                # Runs: a bucket's consecutive fields, at most RUN a run.
                change = np.r_[True, b[1:] != b[:-1]]
                index = np.arange(len(b))
                first = np.maximum.accumulate(np.where(change, index, 0))
                change |= (index - first) % RUN == 0
                starts = np.flatnonzero(change)
                counts = np.diff(np.r_[starts, len(b)])
                yield _Call(int(groups[start]), positions[start:stop], b[starts], counts)

    def _payload(self, script: bytes, call: _Call, digests: np.ndarray, live: bool,
                 first: List[bytes], extra: List[bytes], expire: bool) -> Tuple[bytes, bytes]:
        """(the EVAL bytes of a bucket script call, its route key): KEYS
        ``first`` then the runs' buckets (every live slot's with ``live``,
        else the current one's); ARGV ``extra``, then PER, the expiry (with
        ``expire``), the runs' counts and the fields."""
        prefixes, expire_ms = self._slot_prefixes(call.group)
        if not live:
            prefixes = prefixes[:1]
        hexes = _hex_rows(call.runs, self.width)
        blocks = []
        for p in prefixes:
            head = np.broadcast_to(np.frombuffer(p, dtype=np.uint8), (len(hexes), len(p)))
            blocks.append(_bulk_rows(np.hstack([head, hexes])))
        keys = np.hstack(blocks).tobytes()
        nkeys = len(first) + len(prefixes) * len(call.runs)
        fields = digests[call.positions, self.prefix:]
        argv = [*extra, b"%d" % len(prefixes)]
        if expire:
            argv.append(b"%d" % expire_ms if self.window is not None else b"")
        argv.append(call.counts.astype(">u2").tobytes())
        command = _resp.head(3 + nkeys + len(argv) + len(fields), b"EVAL", script, nkeys,
                             *first)
        args = b"".join(_bulk(a) for a in argv)
        route = first[0] if first else self.prefixes[call.group]
        digests_part = _resp.bulk_fixed(fields.tobytes(), fields.shape[1])
        return b"".join([command, keys, args, digests_part]), route

    def _answer(self, reply: Any, req: Request, n: int) -> np.ndarray:
        value = self._check(reply, req)
        if not isinstance(value, bytes) or len(value) != n or value.strip(b"\x00\x01"):
            raise CorruptStateError(self._where(), f"a script call answered {value!r:.80} "
                                                   f"for {n} digests")
        return np.frombuffer(value, dtype=np.uint8).astype(np.bool_)

    def _check(self, reply: Any, req: Request) -> Any:
        """check_reply, with the key a bucket script names in its own
        WRONGTYPE error."""
        ex = redis_module().exceptions
        if isinstance(reply, ex.ResponseError) and str(reply).startswith(
                "WRONGTYPE crawldedup key "):
            raise RedisKeyTypeError(str(reply)[len("WRONGTYPE crawldedup key "):])
        return check_reply(reply, req, self.address)

    # ----------------------------------------------------- operations

    def _chunks(self, raw: bytes, count: int) -> Iterator[Tuple[int, bytes]]:
        """Set layout: (n, the n digests as RESP bulk strings) for each run
        of at most CHUNK of the count digests concatenated in raw."""
        ds = self.digest_size
        for start in range(0, count, CHUNK):
            n = min(CHUNK, count - start)
            yield n, _resp.bulk_fixed(raw[start * ds:(start + n) * ds], ds)

    def add_op(self, raw: bytes, count: int) -> Op:
        """Adds ``count`` digests (concatenated in ``raw``); the result is a
        bool array, True where this call added the digest."""
        if count == 0:
            return np.zeros(0, dtype=np.bool_)
        if self.layout == SET:
            return (yield from self._set_add_op(raw, count))
        return (yield from self._buckets_op(ADD_BUCKETS_SCRIPT, raw, count, True))

    def _buckets_op(self, script: bytes, raw: bytes, count: int, write: bool) -> Op:
        """Buckets layout: the script (an add, write, with the group's
        counter, or a lookup) called once per slot group per CHUNK digests;
        a bool array of the flags it answers."""
        digests = self._digests(raw, count)
        calls = list(self._calls(digests, np.arange(count), CHUNK))
        requests = []
        for call in calls:
            keys = [self._counters(call.group)[0]] if write else []
            payload, route = self._payload(script, call, digests, True, keys, [], write)
            requests.append(Request(route, payload, 1, self.prefixes[call.group]))
        replies = yield requests
        out = np.zeros(count, dtype=np.bool_)
        for call, req, reply in zip(calls, requests, replies):
            out[call.positions] = self._answer(reply[0], req, len(call.positions))
        return out

    def _set_add_op(self, raw: bytes, count: int) -> Op:
        keys, expire_ms = self._set_keys()
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
        (see RedisStore.add_many_once).  One script call per slot group
        per CHUNK digests, each under its own field of the group's receipts
        (RECEIPT:CALL, CALL the chunk's number)."""
        if self.window is not None:
            raise NotImplementedError("a RedisStore with a window keeps no receipts")
        hexed = receipt.hex().encode("ascii")
        if self.layout == SET:
            return (yield from self._set_add_once_op(raw, count, hexed, batch))
        digests = self._digests(raw, count)
        requests, calls = [], []
        for number, start in enumerate(range(0, count, CHUNK)):
            positions = np.arange(start, min(start + CHUNK, count))
            field = b"%s:%d" % (hexed, number)
            for call in self._calls(digests, positions, CHUNK):
                receipts = self.receipt_keys[call.group]
                counter = self._counters(call.group)[0]
                payload, _ = self._payload(ADD_ONCE_BUCKETS_SCRIPT, call, digests, True,
                                           [receipts, counter],
                                           [field, hexed, batch, b"%d" % number], True)
                requests.append(Request(receipts, payload, 1, receipts))
                calls.append(call)
        replies = yield requests
        out = np.zeros(count, dtype=np.bool_)
        for call, req, reply in zip(calls, requests, replies):
            out[call.positions] = self._receipt_flags(self._check(reply[0], req), batch,
                                                      len(call.positions), req.key)
        return out

    def _receipt_flags(self, answer: Any, batch: bytes, n: int, receipts: bytes) -> np.ndarray:
        """The n flags of an add-once script's answer (the batch's 16 bytes,
        then a byte a digest); CorruptStateError for anything else."""
        flags = bytes(answer)[16:] if isinstance(answer, bytes) else b""
        if not isinstance(answer, bytes) or not answer.startswith(batch) \
                or len(flags) != n or flags.strip(b"\x00\x01"):
            raise CorruptStateError(
                self._where(), f"its receipts {receipts.decode('utf-8', 'replace')!r} hold "
                f"for this batch {answer!r:.80}, not {n} flags")
        return np.frombuffer(flags, dtype=np.uint8).astype(np.bool_)

    def _set_add_once_op(self, raw: bytes, count: int, hexed: bytes, batch: bytes) -> Op:
        key = self.name
        receipts = self.receipts_key
        requests, sizes = [], []
        for call, (n, body) in enumerate(self._chunks(raw, count)):
            sizes.append(n)
            field = b"%s:%d" % (hexed, call)
            head = _resp.head(3 + 2 + 4 + n, b"EVAL", ADD_ONCE_SCRIPT, 2, key, receipts, field,
                              hexed, batch, call)
            requests.append(Request(key, [head, body], 1))
        replies = yield requests
        return np.concatenate([
            self._receipt_flags(check_reply(reply[0], req, self.address), batch, n, receipts)
            for n, req, reply in zip(sizes, requests, replies)])

    def forget_op(self, receipt: bytes) -> Op:
        requests = [Request(key, _resp.command(b"EVAL", FORGET_SCRIPT, 1, key, receipt.hex()), 1)
                    for key in self.receipt_keys]
        replies = yield requests
        self._flags(replies, requests, None)
        return None

    def contains_op(self, raw: bytes, count: int) -> Op:
        if count == 0:
            return np.zeros(0, dtype=np.bool_)
        if self.layout == SET:
            return (yield from self._set_contains_op(raw, count))
        return (yield from self._buckets_op(CONTAINS_BUCKETS_SCRIPT, raw, count, False))

    def _set_contains_op(self, raw: bytes, count: int) -> Op:
        keys, _ = self._set_keys()
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
        """The digests held: the set layout's SCARD, the bucket layout's
        counters (one a slot group and time slot, kept by the scripts)."""
        if self.layout == SET:
            keys, _ = self._set_keys()
            requests = [Request(keys[0], _resp.command(b"SCARD", key), 1, key) for key in keys]
        else:
            requests = [Request(key, _resp.command(b"GET", key), 1, key)
                        for group in range(self.groups) for key in self._counters(group)]
        replies = yield requests
        total = 0
        for req, reply in zip(requests, replies):
            value = check_reply(reply[0], req, self.address)
            try:
                n = int(value or 0)
            except ValueError:
                n = -1
            if n < 0:
                raise CorruptStateError(self._where(), f"its counter "
                                        f"{req.key.decode('utf-8', 'replace')!r} holds {value!r}")
            total += n
        return total

    def clear_op(self) -> Op:
        """Deletes the live slots' digests (every bucket key, counters and
        receipts of the bucket layout: UNLINK, CHUNK keys a command)."""
        if self.layout == SET:
            keys, _ = self._set_keys()
            requests = [Request(keys[0], _resp.command(b"DEL", *keys), 1)]
            if self.window is None:  # and the receipts of add_many_once
                requests.append(Request(self.receipts_key,
                                        _resp.command(b"DEL", self.receipts_key), 1))
        else:
            requests = list(self._clear_requests())
        replies = yield requests
        self._flags(replies, requests, None)
        return None

    def _clear_requests(self) -> Iterator[Request]:
        every = np.arange(self.buckets, dtype=np.int64)
        for group in range(self.groups):
            mine = every[every % self.groups == group]
            hexes = _hex_rows(mine, self.width)
            prefixes, _ = self._slot_prefixes(group)
            small = self._counters(group) + (self.receipt_keys[group:group + 1]
                                             if self.window is None else [])
            yield Request(small[0], _resp.command(b"UNLINK", *small), 1)
            for p in prefixes:
                head = np.broadcast_to(np.frombuffer(p, dtype=np.uint8), (len(hexes), len(p)))
                keys = _bulk_rows(np.hstack([head, hexes]))
                for start in range(0, len(keys), CHUNK):
                    part = keys[start:start + CHUNK]
                    yield Request(p, [_resp.head(1 + len(part), b"UNLINK"), part.tobytes()], 1)

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


class RedisStore(SyncHandle, FingerprintStore):
    """Fingerprints (raw digests) in Redis: ``RedisStore(url_or_client, name)``.

    ``add`` reports "new" exactly once across any number of concurrent
    writers: one script call per slot group per 4,096 digests (all of a
    batch's calls in one round trip) tests and adds them atomically.

    A new store keeps its digests in small Redis hashes, buckets chosen by
    the digest's first bytes, which Redis keeps in its compact listpack
    encoding: about 22 bytes of Redis memory a 16-byte digest while the
    store holds from about half its ``capacity`` to its capacity (default
    10,000,000).  Past the capacity the answers stay exact and memory
    grows, by the same per digest until a bucket passes the server's
    ``hash-max-listpack-entries`` (512 by Redis's default: about five times
    the capacity), then by about four times that for such a bucket.  A
    name that holds a store of crawldedup 0.1.0 (a Redis set) keeps its
    set.  ``NAME:meta`` records the layout and its parameters; opening with
    other ones raises IncompatibleFilterError.  On Redis Cluster the
    buckets are spread over four hash slots per master (a name with a hash
    tag keeps them in its slot).

    ``window=seconds`` forgets digests: they go to one time slot of
    ``window / windows`` seconds, whose keys expire by TTL, and a digest
    counts as seen while any of the last ``windows + 1`` slots holds it --
    so for at least ``window`` and at most ``window * (1 + 1/windows)``
    seconds after it was added.  Time is the client's clock (``clock``).

    A server that cannot be reached raises StoreUnavailableError naming it,
    never "not seen".  Needs ``pip install 'crawldedup[redis]'`` and Redis
    6.2 or later.
    """

    _logic: StoreLogic
    _what = "store"

    def __init__(self, client_or_url: Any, name: Any,
                 digest_size: int = 16, *, capacity: Optional[int] = None, window: Any = None,
                 windows: Optional[int] = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._open_logic(StoreLogic(name, digest_size, window, windows, clock, capacity),
                         client_or_url)
        self.digest_size = self._logic.digest_size
        if self._logic.warning:
            warnings.warn(self._logic.warning, RuntimeWarning, stacklevel=2)

    def __repr__(self) -> str:
        window = "" if self._logic.window is None else \
            f", window={self._logic.window!r}, windows={self._logic.windows}"
        return f"RedisStore({self.address!r}, {self.name!r}{window})"

    @property
    def layout(self) -> str:
        """``"buckets"`` (small hashes) or ``"set"`` (a store of 0.1.0's layout)."""
        return self._logic.layout

    @property
    def capacity(self) -> Optional[int]:
        """The digests the buckets are sized for (None for the set layout)."""
        return self._logic.capacity

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
        """One script call per slot group per CHUNK digests, each idempotent
        under its own field of the receipt (RECEIPT:CALL): a retry of the
        batch gets each call's recorded answer where that call ran, and
        runs the others.  A call of the killed client that the server runs
        late finds its answer recorded and adds nothing."""
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
        """Remove every digest (the live time slots') and the receipts."""
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
