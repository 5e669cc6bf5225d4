"""What RedisBloomFilter sends and how it reads the replies, without I/O
(shared by the blocking filter and the asyncio one): the shard layout, the
metadata key, the commands and their checks.  See docs/redis.md."""

from __future__ import annotations

import json
import math
import secrets
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np

from crawldedup import _checks
from crawldedup._kernel import check_keys, impl, nbytes_for
from crawldedup.bloom.filter import optimal_parameters
from crawldedup.bloom.layouts import check_layout
from crawldedup.errors import CorruptStateError, IncompatibleFilterError, StoreUnavailableError
from crawldedup.redis import _resp
from crawldedup.redis._conn import Op, Request, check_reply
from crawldedup.redis._keys import CLUSTER_SLOTS, FORGET_SCRIPT, check_name, key_slot, receipts_key

FORMAT_VERSION = 1
#: Keys per BITFIELD command (per shard): about 250 bytes of command per key
#: at k = 7, so a command stays near 2 MB and runs alone for a few ms.
COMMAND_KEYS = 8192
#: Default largest shard: Redis strings stop at 512 MB; smaller shards spread
#: a big filter over more keys (and cluster nodes) and keep GETRANGE short.
SHARD_BYTES = 64 << 20

#: Adds of at most this many keys, all in one shard (an add() of one key),
#: run as GUARDED_SET: the guard is checked and the bits set by one script
#: (its arguments stay far below Lua's limit of about 8,000 for unpack).
#: Other adds read the guards in a round trip of their own first, then send
#: plain BITFIELD commands (a script would cost the server more per key).
SCRIPT_KEYS = 64
#: How long an open waits, polling every CREATION_POLL seconds, for the
#: shards of a filter whose metadata key it found without them: a creator
#: writes the metadata key first (SET NX decides who creates), then the
#: shards, so an opener racing it sees the key a moment before the shards.
#: Shards still missing after that have lost their data.
CREATION_WAIT = 1.0
CREATION_POLL = 0.02
# KEYS[1] a shard; ARGV[1] the guard's offset, ARGV[2] its value, the rest
# the BITFIELD operations (GET of the guard first).  A shard whose guard is
# not there answers {guard} and is not written.
GUARDED_SET = b"""local g = redis.call('BITFIELD_RO', KEYS[1], 'GET', 'u32', ARGV[1])
if g[1] ~= tonumber(ARGV[2]) then return g end
return redis.call('BITFIELD', KEYS[1], unpack(ARGV, 3))"""


#: add_many_once: the most arguments of the BITFIELD operations one script
#: call unpacks (Lua's stack takes about 8,000), so a call holds
#: (OPS_PER_CALL - 3) // (4 k) keys.
OPS_PER_CALL = 7800
# add_many_once, one call per shard per run of keys.  KEYS[1] a shard, KEYS[2]
# its receipts (a hash in its slot); ARGV[1] the guard's offset, ARGV[2] its
# value, ARGV[3] the receipt's field for this call (RECEIPT:CALL), ARGV[4]
# the receipt, ARGV[5] the batch's digest, ARGV[6] the call's number, ARGV[7]
# k, ARGV[8..] the BITFIELD operations (GET of the guard first).  A field
# that records this batch is the answer; a shard whose guard is not there
# answers {guard} and is not written; otherwise the bits are set and the
# answer (the batch's digest, then one byte a key: 1 where one of its bits
# was unset) is recorded, and the receipt's field count.
ADD_ONCE_SCRIPT = b"""local old = redis.call('HGET', KEYS[2], ARGV[3])
if old and string.sub(old, 1, 16) == ARGV[5] then return old end
local g = redis.call('BITFIELD_RO', KEYS[1], 'GET', 'u32', ARGV[1])
if g[1] ~= tonumber(ARGV[2]) then return g end
local r = redis.call('BITFIELD', KEYS[1], unpack(ARGV, 8))
local k = tonumber(ARGV[7])
local f = {}
for i = 0, (#r - 1) / k - 1 do
  local new = '\0'
  for j = 2 + i * k, 1 + (i + 1) * k do if r[j] == 0 then new = '\1' break end end
  f[i + 1] = new
end
local answer = ARGV[5] .. table.concat(f)
redis.call('HSET', KEYS[2], ARGV[3], answer)
local calls = tonumber(redis.call('HGET', KEYS[2], ARGV[4]) or '0') or 0
if calls <= tonumber(ARGV[6]) then redis.call('HSET', KEYS[2], ARGV[4], ARGV[6] + 1) end
return answer"""


class RedisDataLostError(StoreUnavailableError):
    """A Redis key of a filter lost its contents (the server restarted
    without persistence, or the key was deleted): the filter cannot answer
    "not seen" honestly any more.  ``clear()`` starts it afresh."""


def shard_tags(shards: int) -> List[bytes]:
    """A hash tag per shard, all in different cluster slots (so that the
    shards spread over a cluster's nodes)."""
    tags: List[bytes] = []
    used: Set[int] = set()
    for i in range(shards):
        j = 0
        while True:
            tag = b"%d" % i if j == 0 else b"%d.%d" % (i, j)
            slot = key_slot(tag)
            if slot not in used or len(used) >= CLUSTER_SLOTS:
                break
            j += 1
        used.add(slot)
        tags.append(tag)
    return tags


def shard_keys(name: bytes, shards: int) -> List[bytes]:
    """One key per shard, each with a hash tag of its own."""
    return [name + b":bits:{" + tag + b"}" for tag in shard_tags(shards)]


def key_batch(keys: Any) -> List[Any]:
    """The keys as a list, every one checked before anything is sent: its
    type, a str's encoding and a buffer's layout, as the local BloomFilter
    checks them (the first bad key raises TypeError naming its position)."""
    if isinstance(keys, (str, bytes, bytearray, memoryview)):
        raise TypeError(f"keys must be an iterable of keys, not a single "
                        f"{type(keys).__name__}; use add()/`in` for one")
    try:
        items = keys if isinstance(keys, list) else list(keys)
    except TypeError:
        raise TypeError(f"keys must be an iterable, not {type(keys).__name__}") from None
    check_keys(items)
    return items


def _equal(value: Any, expected: Any) -> Any:
    """value when it is expected (an int never a bool), else ValueError."""
    if type(value) is not type(expected) or value != expected:
        raise ValueError(f"this filter's other parameters make it {expected!r}")
    return value


def _int_in(value: Any, lo: int, hi: int) -> int:
    if type(value) is not int:
        raise TypeError(f"not an int but a {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"not in [{lo}, {hi}]")
    return value


class BloomLogic:
    """What RedisBloomFilter sends and how it reads the replies, without I/O
    (shared by the blocking and the asyncio filters)."""

    def __init__(self, name: Any, capacity: Optional[int], error_rate: float,
                 shards: Optional[int], layout: str, seed: int) -> None:
        #: whether this object's open created the filter (won the SET NX)
        self.created = False
        self.name = check_name(name)
        self.meta_key = self.name + b":meta"
        self.asked: Dict[str, Any] = {}
        if capacity is not None:
            self.asked["capacity"] = _checks.check_capacity(capacity)
            self.asked["error_rate"] = _checks.check_error_rate(error_rate)
            self.asked["layout"] = check_layout(layout)
            self.asked["seed"] = _checks.check_seed(seed)
            m, k = optimal_parameters(self.asked["capacity"], self.asked["error_rate"],
                                      self.asked["layout"])
            self.asked["num_bits"], self.asked["num_hashes"] = m, k
        if shards is not None:
            if isinstance(shards, bool) or not isinstance(shards, int):
                raise TypeError(f"shards must be an int, not {type(shards).__name__}")
            if not 1 <= shards <= 65536:
                raise ValueError(f"shards must be between 1 and 65536, got {shards}")
        self.asked_shards = shards
        self.meta: Dict[str, Any] = {}
        self.address = "Redis"

    # ----------------------------------------------------------- layout

    def _new_meta(self, nodes: int) -> Dict[str, Any]:
        a = self.asked
        m, layout = a["num_bits"], a["layout"]
        if layout == "standard":
            if self.asked_shards not in (None, 1):
                raise ValueError("shards: the standard layout keeps a key's bits anywhere "
                                 "in the filter, so it cannot be sharded; use "
                                 "layout='blocked' (the default)")
            shards = 1
            if nbytes_for(m) > 512 << 20:
                raise ValueError(f"capacity: {nbytes_for(m)} bytes do not fit in one Redis "
                                 f"string (512 MB); use layout='blocked' to shard")
            shard_bits = nbytes_for(m) * 8
        else:
            blocks = m // 512
            shards = self.asked_shards or max(math.ceil(nbytes_for(m) / SHARD_BYTES),
                                              4 * nodes if nodes > 1 else 1)
            shards = min(shards, blocks)
            per = math.ceil(blocks / shards)
            shards = math.ceil(blocks / per)
            shard_bits = per * 512
            if shard_bits // 8 > 500 << 20:
                raise ValueError(f"shards: {shards} shards of {shard_bits // 8} bytes exceed "
                                 f"a Redis string (512 MB); ask for more shards")
        return {"format": FORMAT_VERSION, "kind": "bloom", "capacity": a["capacity"],
                "error_rate": a["error_rate"], "seed": a["seed"], "num_bits": m,
                "num_hashes": a["num_hashes"], "layout": layout, "shards": shards,
                "shard_bits": shard_bits,
                "keys": [k.decode("utf-8", "surrogateescape")
                         for k in shard_keys(self.name, shards)],
                "guard": secrets.randbelow(2 ** 31 - 1) + 1}

    def _corrupt(self, reason: str) -> CorruptStateError:
        return CorruptStateError(f"Redis at {self.address}",
                                 f"the filter metadata key "
                                 f"{self.meta_key.decode('utf-8', 'replace')!r} {reason}")

    def _field(self, meta: Dict[str, Any], name: str, check: Callable[[Any], Any]) -> Any:
        """meta[name] passed through check; CorruptStateError naming the key
        and the field when it is missing or out of range."""
        if name not in meta:
            raise self._corrupt(f"has no {name!r}")
        try:
            return check(meta[name])
        except (TypeError, ValueError, OverflowError) as exc:
            raise self._corrupt(f"holds {name} {meta[name]!r}: {exc}") from None

    def _checked_meta(self, meta: Dict[str, Any]) -> Dict[str, Any]:
        """Every field of stored metadata checked against what this version
        writes, so that a hand-edited key is reported instead of answering
        with other bit positions."""
        f = self._field
        out = {n: f(meta, n, c) for n, c in (
            ("capacity", _checks.check_capacity), ("error_rate", _checks.check_error_rate),
            ("seed", _checks.check_seed), ("layout", check_layout))}
        try:
            m, k = optimal_parameters(out["capacity"], out["error_rate"], out["layout"])
        except ValueError as exc:  # each is in range, but not the filter they size
            raise self._corrupt(f"holds capacity {out['capacity']!r} and error_rate "
                                f"{out['error_rate']!r}: {exc}") from None
        out["num_bits"] = f(meta, "num_bits", lambda v: _equal(v, m))
        out["num_hashes"] = f(meta, "num_hashes", lambda v: _equal(v, k))
        if out["layout"] == "standard":
            shards = f(meta, "shards", lambda v: _equal(v, 1))
            f(meta, "shard_bits", lambda v: _equal(v, nbytes_for(m) * 8))
        else:
            shards = f(meta, "shards", lambda v: _int_in(v, 1, min(65536, m // 512)))
            per = math.ceil((m // 512) / shards)
            f(meta, "shard_bits", lambda v: _equal(v, per * 512))
            if math.ceil((m // 512) / per) != shards:
                raise self._corrupt(f"holds shards {shards}, which does not cut "
                                    f"{m // 512} blocks into whole shards")
        out["shards"] = shards
        out["shard_bits"] = meta["shard_bits"]
        names = [key.decode("utf-8", "surrogateescape") for key in shard_keys(self.name, shards)]
        out["keys"] = f(meta, "keys", lambda v: _equal(v, names))
        out["guard"] = f(meta, "guard", lambda v: _int_in(v, 1, 2 ** 31 - 1))
        return out

    def _adopt(self, raw_meta: Dict[str, Any]) -> None:
        if raw_meta.get("format") != FORMAT_VERSION or raw_meta.get("kind") != "bloom":
            raise IncompatibleFilterError(
                f"Redis key {self.meta_key.decode('utf-8', 'replace')!r} describes a "
                f"{raw_meta.get('kind')!r} of format {raw_meta.get('format')!r}; this "
                f"crawldedup reads Bloom filters of format {FORMAT_VERSION}")
        meta = self._checked_meta(raw_meta)
        names = ("capacity", "error_rate", "seed", "layout")
        diff = [f"{n} {self.asked[n]!r} != {meta[n]!r}" for n in names
                if n in self.asked and self.asked[n] != meta[n]]
        if self.asked_shards is not None and self.asked_shards != meta["shards"]:
            diff.append(f"shards {self.asked_shards} != {meta['shards']}")
        if diff:
            raise IncompatibleFilterError(
                f"the Redis filter {self.name.decode('utf-8', 'replace')!r} has other "
                f"parameters: {', '.join(diff)} (asked != stored)")
        self.meta = meta
        self.m = int(meta["num_bits"])
        self.k = int(meta["num_hashes"])
        self.seed = int(meta["seed"])
        self.layout = str(meta["layout"])
        self.shards = int(meta["shards"])
        self.shard_bits = int(meta["shard_bits"])
        self.keys = [k.encode("utf-8", "surrogateescape") for k in meta["keys"]]
        # add_many_once's receipts: a hash per shard, in the shard's slot.
        self.receipt_keys = [receipts_key(key) for key in self.keys]
        self.guard = int(meta["guard"])
        self.shard_bytes = self.shard_bits // 8
        self._guard_op = _resp.command(b"GET", b"u32", self.shard_bits)[4:]  # no array head
        self._guard_bytes = self.guard.to_bytes(4, "big")

    def _guard_ok(self, value: Any, key: bytes) -> None:
        if value != self.guard:
            raise RedisDataLostError(
                f"Redis at {self.address}: the shard key {key.decode('utf-8', 'replace')!r} "
                f"of filter {self.name.decode('utf-8', 'replace')!r} lost its data (a server "
                f"restarted without persistence, or the key was deleted); clear() starts "
                f"the filter afresh")

    # ---------------------------------------------------------- opening

    def open_op(self, nodes: int) -> Op:
        """Read or create the metadata key, then check the shards."""
        get = Request(self.meta_key, _resp.command(b"GET", self.meta_key))
        replies = yield [get]
        raw = check_reply(replies[0][0], get, self.address)
        if raw is None:
            if "capacity" not in self.asked:
                raise ValueError(f"no crawldedup filter named "
                                 f"{self.name.decode('utf-8', 'replace')!r} at {self.address}: "
                                 f"give capacity (and error_rate) to create one")
            meta = self._new_meta(nodes)
            setnx = Request(self.meta_key, _resp.command(b"SET", self.meta_key,
                                                         json.dumps(meta), b"NX"))
            replies = yield [setnx]
            if check_reply(replies[0][0], setnx, self.address) is not None:
                self.created = True
                self._adopt(meta)
                yield from self._init_shards()
                return None
            replies = yield [get]  # another process created it meanwhile
            raw = check_reply(replies[0][0], get, self.address)
            if raw is None:  # pragma: no cover - created and deleted between two calls
                raise StoreUnavailableError(f"Redis at {self.address}: the filter's metadata "
                                            f"key came and went; try again")
        try:
            meta = json.loads(raw)
            if not isinstance(meta, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError) as exc:
            raise IncompatibleFilterError(
                f"Redis key {self.meta_key.decode('utf-8', 'replace')!r} is not crawldedup "
                f"filter metadata ({exc})") from None
        self._adopt(meta)
        yield from self._check_shards()
        return None

    def _init_shards(self) -> Op:
        # SETRANGE past the bits allocates the whole string zeroed and writes
        # the guard that every later command reads back.
        reqs = [Request(key, _resp.command(b"SETRANGE", key, self.shard_bytes,
                                           self._guard_bytes)) for key in self.keys]
        yield from self._send_all(reqs)

    def _send_all(self, reqs: List[Request]) -> Op:
        """Send reqs, every reply checked (an error reply raises)."""
        replies = yield reqs
        for req, reply in zip(reqs, replies):
            check_reply(reply[0], req, self.address)
        return None

    def check_shards_op(self) -> Op:
        """Read every shard's guard: RedisDataLostError for one that lost it
        (or, just after another process created the filter, has not been
        written yet: see CREATION_WAIT)."""
        return self._check_shards()

    def _check_shards(self, keys: Optional[List[bytes]] = None) -> Op:
        """Read the guard of the shards keys (all by default): RedisDataLostError
        for one that lost it."""
        reqs = [Request(key, _resp.command(b"BITFIELD_RO", key, b"GET", b"u32",
                                           self.shard_bits))
                for key in (self.keys if keys is None else keys)]
        replies = yield reqs
        for req, reply in zip(reqs, replies):
            self._guard_ok(check_reply(reply[0], req, self.address)[0], req.key)
        return None

    # ------------------------------------------------------- key batches

    def batch_op(self, keys: List[Any], setting: bool) -> Op:
        """add (setting) or contains for checked keys: a numpy bool array.

        One request per shard per COMMAND_KEYS keys, yielded as a stream:
        the transport sends each as soon as it is built, so the server runs
        a command while the next is being hashed and packed.  A shard that
        lost its data raises RedisDataLostError before any bit is set: an
        add of at most SCRIPT_KEYS keys of one shard checks the guard in the
        script that sets the bits; any other first reads the guard of every
        shard it will write (those of its keys in a batch of one command per
        shard, else all)."""
        n = len(keys)
        out = np.zeros(n, dtype=np.bool_)
        k = self.k
        where: List[np.ndarray] = []
        requests: List[Request] = []

        def chunk(lo: int) -> Tuple[Any, List[Tuple[int, np.ndarray]]]:
            hi = min(n, lo + COMMAND_KEYS)
            ops, shard_of = impl.bloom_resp(keys[lo:hi], k, self.m, self.seed, self.layout,
                                            self.shard_bits, self.shards, setting)
            if self.shards == 1:
                return ops, [(0, np.arange(lo, hi))]
            order = np.argsort(shard_of, kind="stable")
            bounds = np.searchsorted(shard_of[order], np.arange(self.shards + 1))
            return ops, [(s, lo + order[bounds[s]:bounds[s + 1]])
                         for s in range(self.shards) if bounds[s + 1] > bounds[s]]

        first = chunk(0) if n else None
        # one shard: its script checks and sets together; several: a script
        # per shard would set the bits of the others when one is lost
        scripted = setting and n <= SCRIPT_KEYS and first is not None and len(first[1]) == 1
        if setting and not scripted and first is not None:
            touched = [s for s, _ in first[1]] if n <= COMMAND_KEYS else range(self.shards)
            yield from self._check_shards([self.keys[s] for s in touched])

        def stream() -> Any:
            command = b"BITFIELD" if setting else b"BITFIELD_RO"
            per_op = 4 if setting else 3
            for lo in range(0, n, COMMAND_KEYS):
                ops, groups = first if lo == 0 and first is not None else chunk(lo)
                for s, idx in groups:
                    key = self.keys[s]
                    count = 3 + per_op * k * len(idx)
                    if scripted:
                        head = _resp.head(6 + count, b"EVAL", GUARDED_SET, 1, key,
                                          self.shard_bits, self.guard)
                    else:
                        head = _resp.head(2 + count, command, key)
                    req = Request(key, [head, self._guard_op, ops[s]], 1)
                    requests.append(req)
                    where.append(idx)
                    yield req

        replies = yield stream()
        for req, reply, idx in zip(requests, replies, where):
            values = check_reply(reply[0], req, self.address)
            self._guard_ok(values[0], req.key)
            values[0] = 0  # (the guard does not fit the uint8 array of bits)
            bits = np.array(values, dtype=np.uint8)[1:].reshape(len(idx), k)
            if setting:
                out[idx] = bits.min(axis=1) == 0  # a bit was unset: the key is new
            else:
                out[idx] = bits.min(axis=1) == 1
        return out

    # ------------------------------------------------------ whole filter

    def _shards_of(self, keys: List[Any]) -> np.ndarray:
        if self.shards == 1:
            return np.zeros(len(keys), dtype=np.int64)
        shard_of = np.empty(len(keys), dtype=np.int64)
        for lo in range(0, len(keys), COMMAND_KEYS):
            _, part = impl.bloom_resp(keys[lo:lo + COMMAND_KEYS], self.k, self.m, self.seed,
                                      self.layout, self.shard_bits, self.shards, True)
            shard_of[lo:lo + len(part)] = part
        return shard_of

    def batch_once_op(self, keys: List[Any], receipt: bytes, batch: bytes) -> Op:
        """add_many_once for checked keys: a numpy bool array.  The guards
        of the shards it writes are read first (as batch_op does); then one
        ADD_ONCE_SCRIPT call per shard per run of keys, each idempotent
        under its own field of the receipt in that shard's receipts hash."""
        n = len(keys)
        out = np.zeros(n, dtype=np.bool_)
        if not n:
            return out
        k = self.k
        per_call = max(1, (OPS_PER_CALL - 3) // (4 * k))
        shard_of = self._shards_of(keys)
        touched = np.unique(shard_of).tolist()
        yield from self._check_shards([self.keys[s] for s in touched])
        hexed = receipt.hex().encode("ascii")
        requests: List[Request] = []
        where: List[np.ndarray] = []
        for s in touched:
            idx = np.flatnonzero(shard_of == s)
            key, receipts = self.keys[s], self.receipt_keys[s]
            for call, lo in enumerate(range(0, len(idx), per_call)):
                part = idx[lo:lo + per_call]
                ops, _ = impl.bloom_resp([keys[i] for i in part.tolist()], k, self.m,
                                         self.seed, self.layout, self.shard_bits,
                                         self.shards, True)
                count = 3 + 4 * k * len(part)
                head = _resp.head(12 + count, b"EVAL", ADD_ONCE_SCRIPT, 2, key, receipts,
                                  self.shard_bits, self.guard, b"%s:%d" % (hexed, call),
                                  hexed, batch, call, k)
                requests.append(Request(key, [head, self._guard_op, ops[s]], 1))
                where.append(part)
        replies = yield requests
        for req, reply, part in zip(requests, replies, where):
            answer = check_reply(reply[0], req, self.address)
            if isinstance(answer, list):
                self._guard_ok(answer[0] if answer else None, req.key)
            flags = bytes(answer)[16:] if isinstance(answer, bytes) else b""
            if not isinstance(answer, bytes) or not answer.startswith(batch) \
                    or len(flags) != len(part) or flags.strip(b"\x00\x01"):
                raise self._corrupt(f"the receipts of shard {req.key!r} hold for this batch "
                                    f"{answer!r:.80}, not {len(part)} flags")
            out[part] = np.frombuffer(flags, dtype=np.uint8).astype(np.bool_)
        return out

    def forget_op(self, receipt: bytes) -> Op:
        reqs = [Request(key, _resp.command(b"EVAL", FORGET_SCRIPT, 1, key, receipt.hex()))
                for key in self.receipt_keys]
        yield from self._send_all(reqs)

    def popcount_op(self) -> Op:
        reqs = [Request(key, _resp.command(b"BITCOUNT", key, 0, self.shard_bytes - 1))
                for key in self.keys]
        guards = [Request(key, _resp.command(b"BITFIELD_RO", key, b"GET", b"u32",
                                             self.shard_bits)) for key in self.keys]
        replies = yield reqs + guards
        for req, reply in zip(guards, replies[len(reqs):]):
            self._guard_ok(check_reply(reply[0], req, self.address)[0], req.key)
        return sum(int(check_reply(r[0], q, self.address)) for q, r in zip(reqs, replies))

    def clear_op(self) -> Op:
        """Every shard zeroed and its guard written back, atomically per shard."""
        script = (b"redis.call('DEL', KEYS[1]) "
                  b"return redis.call('SETRANGE', KEYS[1], ARGV[1], ARGV[2])")
        reqs = [Request(key, _resp.command(b"EVAL", script, 1, key, self.shard_bytes,
                                           self._guard_bytes)) for key in self.keys]
        reqs += [Request(key, _resp.command(b"DEL", key)) for key in self.receipt_keys]
        yield from self._send_all(reqs)

    def drop_op(self) -> Op:
        reqs = [Request(key, _resp.command(b"DEL", key))
                for key in self.keys + self.receipt_keys + [self.meta_key]]
        yield from self._send_all(reqs)

    def read_bits_op(self) -> Op:
        """The filter's storage bytes (the local BloomFilter's), shard by shard."""
        reqs = [Request(key, _resp.command(b"GETRANGE", key, 0, self.shard_bytes + 3))
                for key in self.keys]
        replies = yield reqs
        parts = []
        for req, reply in zip(reqs, replies):
            data = check_reply(reply[0], req, self.address)
            if len(data) != self.shard_bytes + 4:
                self._guard_ok(0, req.key)
            self._guard_ok(int.from_bytes(data[self.shard_bytes:], "big"), req.key)
            parts.append(data[:self.shard_bytes])
        return b"".join(parts)[:nbytes_for(self.m)]

    def write_bits_op(self, data: bytes) -> Op:
        """Upload storage bytes (an import): each shard's bytes and guard."""
        reqs = []
        for s, key in enumerate(self.keys):
            part = data[s * self.shard_bytes:(s + 1) * self.shard_bytes]
            part = part + bytes(self.shard_bytes - len(part)) + self._guard_bytes
            reqs.append(Request(key, _resp.command(b"SET", key, part)))
        yield from self._send_all(reqs)

    # -------------------------------------------------------- estimates

    def params(self) -> Tuple[int, float, int, int, int, str]:
        meta = self.meta
        return (int(meta["capacity"]), float(meta["error_rate"]), self.seed, self.m, self.k,
                self.layout)

    def estimate(self, popcount: int) -> int:
        x = min(popcount, self.m - 0.5)
        return int(round(-(self.m / self.k) * math.log1p(-x / self.m)))
