"""RedisSimhashIndex: near-duplicate search over 64-bit SimHash fingerprints
kept in Redis, exact (the pigeonhole principle), shared by a fleet."""

from __future__ import annotations

import binascii
import json
import operator
from typing import Any, Dict, Hashable, Iterable, List, Optional, Set, Tuple, cast

import numpy as np

from crawldedup._kernel import MAX_HAMMING_K
from crawldedup.errors import CorruptStateError, IncompatibleFilterError, StoreUnavailableError
from crawldedup.near.index import _check_fp, _check_k, _fp_array
from crawldedup.redis import _resp
from crawldedup.redis._bloom_logic import shard_tags
from crawldedup.redis._conn import Op, RedisKeyTypeError, Request, SyncHandle, check_reply
from crawldedup.redis._keys import check_name

FORMAT_VERSION = 1
#: Entries per add (or remove) script call, and buckets per fetch script
#: call.  A script's calls grow dearer as its Lua heap grows (the replies
#: it holds), so calls stay small; all of a batch's calls go in one round
#: trip.
ENTRY_CHUNK = 256
QUERY_KEYS = 1024
#: The id maps of the layout without a metadata key (before format 1).
OLD_ID_MAPS = 16
#: Most shards: a query reads its k + 1 buckets in each.
MAX_SHARDS = 1024

# One shard's id map (KEYS[1]) and the buckets of a chunk of entries
# (KEYS[2..], the same number per entry, in entry order); ARGV[1] is "check"
# or "write", then each entry's id, value (what the id map holds for it: a
# SimHash fingerprint, a MinHash signature) and member (what its buckets
# hold).  Every key's type and every id is checked before anything is
# written, and the script runs alone, so a chunk is stored whole or not at
# all.  An id held with the same value is an entry stored before (a batch
# sent again after it was cut): it is left as it is.  The reply: {0, flags}
# (flag 1: stored by this call, 0: present already), {-1, i} (KEYS[i] has
# another type) or {-2, e} (entry e's id holds another value).
ADD_SCRIPT = b"""local per = (#KEYS - 1) / ((#ARGV - 1) / 3)
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'hash' and t ~= 'none' then return {-1, 1} end
for i = 2, #KEYS do
  t = redis.call('TYPE', KEYS[i]).ok
  if t ~= 'set' and t ~= 'none' then return {-1, i} end
end
local r = {0}
for e = 1, (#ARGV - 1) / 3 do
  local old = redis.call('HGET', KEYS[1], ARGV[3 * e - 1])
  if old then
    if old ~= ARGV[3 * e] then return {-2, e} end
    r[e + 1] = 0
  else
    r[e + 1] = 1
  end
end
if ARGV[1] == 'write' then
  for e = 1, #r - 1 do
    if r[e + 1] == 1 then
      redis.call('HSET', KEYS[1], ARGV[3 * e - 1], ARGV[3 * e])
      for j = 1, per do redis.call('SADD', KEYS[1 + (e - 1) * per + j], ARGV[3 * e + 1]) end
    end
  end
end
return r"""
# The same keys and arguments (no mode): each entry whose id holds its value
# is removed with its buckets, atomically; 1 for each removed.
REMOVE_SCRIPT = b"""local per = (#KEYS - 1) / (#ARGV / 3)
local r = {}
for e = 1, #ARGV / 3 do
  if redis.call('HGET', KEYS[1], ARGV[3 * e - 2]) == ARGV[3 * e - 1] then
    redis.call('HDEL', KEYS[1], ARGV[3 * e - 2])
    for j = 1, per do redis.call('SREM', KEYS[1 + (e - 1) * per + j], ARGV[3 * e]) end
    r[e] = 1
  else
    r[e] = 0
  end
end
return r"""
FETCH_SCRIPT = b"""local r = {}
for i, key in ipairs(KEYS) do r[i] = redis.call('SMEMBERS', key) end
return r"""
_U64 = (1 << 64) - 1


def _blocks(k: int) -> List[Tuple[int, int]]:
    """(shift, width) of the k + 1 blocks that split 64 bits: two
    fingerprints within distance k agree on at least one block."""
    n = k + 1
    widths = [64 // n + (1 if i < 64 % n else 0) for i in range(n)]
    out, shift = [], 0
    for w in widths:
        out.append((shift, w))
        shift += w
    return out


def encode_id(id: Any) -> bytes:
    """An id as bytes: ints in [0, 2**64), str and bytes are accepted."""
    if isinstance(id, (int, np.integer)) and not isinstance(id, bool):
        v = operator.index(id)
        if 0 <= v <= _U64:
            return b"i" + v.to_bytes(8, "big")
        raise ValueError(f"an int id must be in [0, 2**64), got {v}")
    if isinstance(id, str):
        return b"s" + id.encode("utf-8")
    if isinstance(id, bytes):
        return b"b" + id
    raise TypeError(f"an id must be an int, str or bytes, not {type(id).__name__}")


def decode_id(data: bytes) -> Hashable:
    tag, rest = data[:1], data[1:]
    if tag == b"i":
        return int.from_bytes(rest, "big")
    if tag == b"s":
        return rest.decode("utf-8")
    return bytes(rest)


def _sort_key(item: Tuple[Hashable, int]) -> Tuple[int, int, Any]:
    id, d = item
    return (d, 0 if isinstance(id, int) else 1 if isinstance(id, str) else 2, id)


def id_batch(ids: Iterable[Hashable], fps: Any) -> Tuple[List[bytes], np.ndarray]:
    """The encoded ids and the fingerprints of an add_many, checked."""
    if isinstance(ids, (str, bytes)):
        raise TypeError("ids must be an iterable of ids, not a single str or bytes")
    encs = [encode_id(i) for i in (ids.tolist() if isinstance(ids, np.ndarray) else ids)]
    f = _fp_array(fps)
    if len(encs) != len(f):
        raise ValueError(f"ids and fps differ in length: {len(encs)} and {len(f)}")
    return encs, f


class SimhashLogic:
    """Commands and replies of RedisSimhashIndex, without I/O.

    The index is cut into shards by the CRC32 of the id.  A shard is an id
    map (a hash: id -> fingerprint) and one set per (block, block value)
    holding ``fp + id`` of its entries; all of a shard's keys share a hash
    tag, so one script stores or removes an entry with its buckets
    atomically, on a cluster too.  A query reads its buckets in every
    shard.  ``name:meta`` (JSON) holds the format, k and the shard count.
    """

    #: What the index is called in messages, and what an id holds.
    _title = "a SimHash index"
    _value_name = "fingerprint"

    def __init__(self, name: Any, k: Optional[int], shards: Optional[int] = None) -> None:
        self.name = check_name(name)
        self.meta_key = self.name + b":meta"
        self.asked_k = None if k is None else _check_k(k)
        if self.asked_k is not None and self.asked_k > MAX_HAMMING_K:  # pragma: no cover
            raise ValueError(f"k must be at most {MAX_HAMMING_K}")
        if shards is not None:
            if isinstance(shards, bool) or not isinstance(shards, int):
                raise TypeError(f"shards must be an int, not {type(shards).__name__}")
            if not 1 <= shards <= MAX_SHARDS:
                raise ValueError(f"shards must be between 1 and {MAX_SHARDS}, got {shards}")
        self.asked_shards = shards
        self.address = "Redis"

    # ---------------------------------------------------------- opening

    def _adopt(self, k: int, shards: int) -> None:
        self.k = k
        self.shards = shards
        self.blocks = _blocks(k)
        self.prefixes = [self.name + b":{" + tag + b"}:" for tag in shard_tags(shards)]
        self.id_keys = [p + b"ids" for p in self.prefixes]

    def _corrupt(self, reason: str) -> CorruptStateError:
        return CorruptStateError(f"Redis at {self.address}",
                                 f"the index metadata key "
                                 f"{self.meta_key.decode('utf-8', 'replace')!r} {reason}")

    def _read_meta(self, raw: bytes) -> Tuple[int, int]:
        """(k, shards) of stored metadata, every field checked."""
        key = self.meta_key.decode("utf-8", "replace")
        try:
            meta = json.loads(raw)
            if not isinstance(meta, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError) as exc:
            raise IncompatibleFilterError(f"Redis key {key!r} is not crawldedup index "
                                          f"metadata ({exc})") from None
        if meta.get("format") != FORMAT_VERSION or meta.get("kind") != "simhash":
            raise IncompatibleFilterError(
                f"Redis key {key!r} describes a {meta.get('kind')!r} of format "
                f"{meta.get('format')!r}; this crawldedup reads SimHash indexes of format "
                f"{FORMAT_VERSION}")
        out = []
        for field, hi in (("k", MAX_HAMMING_K), ("shards", MAX_SHARDS)):
            lo = 0 if field == "k" else 1
            if field not in meta:
                raise self._corrupt(f"has no {field!r}")
            v = meta[field]
            if type(v) is not int or not lo <= v <= hi:
                raise self._corrupt(f"holds {field} {v!r}, not an int in [{lo}, {hi}]")
            out.append(v)
        extra = sorted(set(meta) - {"format", "kind", "k", "shards", "blocks", "id_maps"})
        if extra:
            raise self._corrupt(f"holds fields this crawldedup never writes: {extra}")
        # What k and shards make, kept beside them (as a Bloom filter keeps
        # its bits and shard keys): an edit of k or shards alone, which
        # would look up other buckets and shards, is named, not answered.
        for field, made in self._derived(out[0], out[1]).items():
            if field not in meta:
                raise self._corrupt(f"has no {field!r}")
            if meta[field] != made:
                raise self._corrupt(f"holds {field} {meta[field]!r}, which k {out[0]} and "
                                    f"shards {out[1]} do not make (was k or shards edited?)")
        return out[0], out[1]

    def _derived(self, k: int, shards: int) -> Dict[str, Any]:
        """The metadata fields that follow from k and shards: the blocks the
        64 bits are cut into, and the id maps' key names."""
        return {"blocks": [list(b) for b in _blocks(k)],
                "id_maps": [(self.name + b":{" + tag + b"}:ids").decode("utf-8",
                                                                      "surrogateescape")
                            for tag in shard_tags(shards)]}

    def open_op(self, nodes: int) -> Op:
        """Read the metadata key (k and the shards), or create it: a name
        without one that holds an index of the earlier layout is refused."""
        get = Request(self.meta_key, _resp.command(b"GET", self.meta_key))
        raw = self._check([get], (yield [get]))[0]
        if raw is None:
            if self.asked_k is None:
                raise ValueError(f"no crawldedup index named "
                                 f"{self.name.decode('utf-8', 'replace')!r} at {self.address}: "
                                 f"give k to create one")
            old = [self.name + b":ids:%d" % i for i in range(OLD_ID_MAPS)]
            reqs = [Request(key, _resp.command(b"EXISTS", key)) for key in old]
            if any(self._check(reqs, (yield reqs))):
                raise IncompatibleFilterError(
                    f"Redis at {self.address}: {self.name.decode('utf-8', 'replace')!r} holds "
                    f"a SimHash index of the layout without a metadata key (its keys "
                    f"{self.name.decode('utf-8', 'replace')}:ids:* and :k*); rebuild it "
                    f"under another name, or delete those keys")
            shards = self.asked_shards or nodes
            meta = {"format": FORMAT_VERSION, "kind": "simhash", "k": self.asked_k,
                    "shards": shards, **self._derived(self.asked_k, shards)}
            setnx = Request(self.meta_key, _resp.command(b"SET", self.meta_key,
                                                         json.dumps(meta), b"NX"))
            if self._check([setnx], (yield [setnx]))[0] is None:  # created meanwhile
                raw = self._check([get], (yield [get]))[0]
            else:
                raw = json.dumps(meta).encode()
            if raw is None:  # pragma: no cover - created and deleted between two calls
                raise StoreUnavailableError(f"Redis at {self.address}: the index's metadata "
                                            f"key came and went; try again")
        k, shards = self._read_meta(raw)
        diff = []
        if self.asked_k is not None and self.asked_k != k:
            diff.append(f"k {self.asked_k} != {k}")
        if self.asked_shards is not None and self.asked_shards != shards:
            diff.append(f"shards {self.asked_shards} != {shards}")
        if diff:
            raise IncompatibleFilterError(
                f"the Redis SimHash index {self.name.decode('utf-8', 'replace')!r} has other "
                f"parameters: {', '.join(diff)} (asked != stored)")
        self._adopt(k, shards)
        return None

    # ----------------------------------------------------------- keys

    def shard_of(self, enc: bytes) -> int:
        return binascii.crc32(enc) % self.shards

    def bucket_keys(self, shard: int, fp: int) -> List[bytes]:
        """The k + 1 bucket keys of fp in a shard."""
        prefix = self.prefixes[shard]
        return [prefix + b"%d:%x" % (j, (fp >> shift) & ((1 << w) - 1))
                for j, (shift, w) in enumerate(self.blocks)]

    # What an entry stores: its value in the id map, its member in its
    # buckets, and the item (fingerprint) a value stands for.
    def _values(self, items: np.ndarray) -> Tuple[List[Any], List[bytes]]:
        fps = [int(f) for f in items.tolist()]
        return fps, [f.to_bytes(8, "big") for f in fps]

    def _member(self, enc: bytes, value: bytes) -> bytes:
        return value + enc

    def _item(self, value: bytes) -> Any:
        return int.from_bytes(value, "big")

    def _check(self, reqs: List[Request], replies: List[List[Any]]) -> List[Any]:
        return [check_reply(r[0], q, self.address) for q, r in zip(reqs, replies)]

    def _entry_requests(self, script: bytes, mode: Optional[bytes], encs: List[bytes],
                        values: List[bytes], items: List[Any]
                        ) -> Tuple[List[Request], List[Tuple[List[int], List[bytes]]]]:
        """One script call per shard per ENTRY_CHUNK entries: the calls, and
        the entries (indices) and the keys of each."""
        by_shard: Dict[int, List[int]] = {}
        for i, e in enumerate(encs):
            by_shard.setdefault(self.shard_of(e), []).append(i)
        reqs, where = [], []
        for shard, idx in sorted(by_shard.items()):
            for lo in range(0, len(idx), ENTRY_CHUNK):
                part = idx[lo:lo + ENTRY_CHUNK]
                keys = [self.id_keys[shard]]
                args: List[bytes] = [] if mode is None else [mode]
                for i in part:
                    keys.extend(self.bucket_keys(shard, items[i]))
                    args += [encs[i], values[i], self._member(encs[i], values[i])]
                reqs.append(Request(keys[0], _resp.command(b"EVAL", script, len(keys),
                                                           *keys, *args)))
                where.append((part, keys))
        return reqs, where

    def _refusal(self, reply: List[Any], where: Tuple[List[int], List[bytes]],
                 encs: List[bytes]) -> Exception:
        """The error an ADD_SCRIPT refusal ({-1, i} or {-2, e}) stands for."""
        code, at = int(reply[0]), int(reply[1])
        part, keys = where
        if code == -1:
            return RedisKeyTypeError(keys[at - 1], f"{self._title} keeps hashes and sets there")
        return ValueError(f"id {decode_id(encs[part[at - 1]])!r} is already in the index "
                          f"(with another {self._value_name})")

    # ------------------------------------------------------------ changes

    def add_op(self, encs: List[bytes], fps: np.ndarray) -> Op:
        """Store every (id, fp) (for a MinHash index: (id, signature)), all
        or nothing.

        A first round trip checks every shard (key types, ids held with
        another fingerprint: RedisKeyTypeError, ValueError) and writes
        nothing; the second writes, each script call whole or not at all.
        A call cut between its writes (a server or client killed) leaves
        whole entries: sent again, the batch stores the rest and gives the
        same answer.  An id that holds the same fingerprint already is left
        as it is (not an error), which is what makes that retry possible."""
        if len(set(encs)) != len(encs):
            seen: Set[bytes] = set()
            for e in encs:
                if e in seen:
                    raise ValueError(f"id {decode_id(e)!r} is repeated")
                seen.add(e)
        fp_list, values = self._values(fps)
        checks, where = self._entry_requests(ADD_SCRIPT, b"check", encs, values, fp_list)
        for reply, at in zip(self._check(checks, (yield checks)), where):
            if int(reply[0]) != 0:
                raise self._refusal(reply, at, encs)
        writes, _ = self._entry_requests(ADD_SCRIPT, b"write", encs, values, fp_list)
        replies = yield writes
        failure: Optional[Exception] = None
        stored: List[int] = []
        for req, reply, at in zip(writes, replies, where):
            try:
                value = check_reply(reply[0], req, self.address)
            except Exception as exc:  # raised below, after the undo
                failure = failure or exc
                continue
            if int(value[0]) != 0:  # changed since the check (a concurrent writer)
                failure = failure or self._refusal(value, at, encs)
                continue
            stored += [i for i, new in zip(at[0], value[1:]) if int(new) == 1]
        if failure is not None:
            if stored:  # what this call stored is removed again
                undo, _ = self._entry_requests(REMOVE_SCRIPT, None, [encs[i] for i in stored],
                                               [values[i] for i in stored],
                                               [fp_list[i] for i in stored])
                self._check(undo, (yield undo))
            raise failure
        return None

    def remove_op(self, enc: bytes, id: Any) -> Op:
        """Remove id with its buckets (one script call); KeyError if absent."""
        shard = self.shard_of(enc)
        key = self.id_keys[shard]
        get = Request(key, _resp.command(b"HGET", key, enc))
        value = self._check([get], (yield [get]))[0]
        if value is None:
            raise KeyError(id)
        reqs, _ = self._entry_requests(REMOVE_SCRIPT, None, [enc], [bytes(value)],
                                       [self._item(bytes(value))])
        if not int(self._check(reqs, (yield reqs))[0][0]):
            raise KeyError(id)  # removed (or replaced) by another client meanwhile
        return None

    def contains_op(self, enc: bytes) -> Op:
        key = self.id_keys[self.shard_of(enc)]
        req = Request(key, _resp.command(b"HEXISTS", key, enc))
        return bool(self._check([req], (yield [req]))[0])

    def len_op(self) -> Op:
        reqs = [Request(key, _resp.command(b"HLEN", key)) for key in self.id_keys]
        return sum(int(v) for v in self._check(reqs, (yield reqs)))

    def clear_op(self) -> Op:
        """Remove every entry (the metadata stays): the id maps are read,
        then the entries removed with their buckets, a chunk at a time and
        each chunk atomically, so a cut clear leaves whole entries."""
        reqs = [Request(key, _resp.command(b"HGETALL", key)) for key in self.id_keys]
        maps = self._check(reqs, (yield reqs))
        encs: List[bytes] = []
        values: List[bytes] = []
        for m in maps:
            pairs = list(m.items()) if isinstance(m, dict) else list(zip(m[::2], m[1::2]))
            for e, v in pairs:
                encs.append(bytes(e))
                values.append(bytes(v))
        if encs:
            dels, _ = self._entry_requests(REMOVE_SCRIPT, None, encs, values,
                                           [self._item(v) for v in values])
            self._check(dels, (yield dels))
        return None

    def drop_op(self) -> Op:
        """Every entry removed, then the metadata key deleted."""
        yield from self.clear_op()
        req = Request(self.meta_key, _resp.command(b"DEL", self.meta_key))
        self._check([req], (yield [req]))
        return None

    # ------------------------------------------------------------- search

    def query_op(self, fps: np.ndarray) -> Op:
        """For each fp, [(id, distance)] within k: its k + 1 buckets in every
        shard, the batch's distinct buckets fetched in one round trip (one
        script call per QUERY_KEYS of a shard), distances checked here."""
        fp_list = fps.tolist()
        per_fp: List[List[bytes]] = [[] for _ in fp_list]
        reqs: List[Request] = []
        groups: List[List[bytes]] = []
        for shard in range(self.shards):
            distinct: Dict[bytes, None] = {}
            for q, fp in enumerate(fp_list):
                keys = self.bucket_keys(shard, fp)
                per_fp[q] += keys
                distinct.update(dict.fromkeys(keys))
            every = list(distinct)
            for lo in range(0, len(every), QUERY_KEYS):
                keys = every[lo:lo + QUERY_KEYS]
                reqs.append(Request(keys[0], _resp.command(b"EVAL", FETCH_SCRIPT, len(keys),
                                                           *keys)))
                groups.append(keys)
        contents: Dict[bytes, List[bytes]] = {}
        for keys, sets in zip(groups, self._check(reqs, (yield reqs))):
            contents.update(zip(keys, sets))
        # every (query, member) pair at once: distances by a byte popcount table
        owner: List[int] = []
        members: List[bytes] = []
        for q, keys in enumerate(per_fp):
            for key in keys:
                got = contents[key]
                if got:
                    members.extend(got)
                    owner.extend([q] * len(got))
        out: List[List[Tuple[Hashable, int]]] = [[] for _ in fp_list]
        if members:
            cand = np.frombuffer(b"".join(m[:8] for m in members), dtype=">u8").astype(np.uint64)
            x = cand ^ fps[np.array(owner, dtype=np.int64)]
            dist = _POPCOUNT8[x.view(np.uint8)].reshape(-1, 8).sum(axis=1)
            hits = np.flatnonzero(dist <= self.k)
            found: List[Dict[bytes, int]] = [{} for _ in fp_list]
            for h, d in zip(hits.tolist(), dist[hits].tolist()):
                found[owner[h]][members[h][8:]] = d
            for q, f in enumerate(found):
                if f:
                    res = [(decode_id(e), d) for e, d in f.items()]
                    res.sort(key=_sort_key)
                    out[q] = res
        return out


_POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


class IndexHandle(SyncHandle):
    """What the blocking Redis indexes (SimHash, MinHash LSH) share over
    their logic object: remove, ``in``, ``len``, clear and drop."""

    _logic: SimhashLogic
    _what = "index"

    @property
    def shards(self) -> int:
        return self._logic.shards

    def remove(self, id: Hashable) -> None:
        """Remove id and its entry; KeyError if it is not present."""
        self._run(self._logic.remove_op(encode_id(id), id))

    def __contains__(self, id: object) -> bool:
        try:
            enc = encode_id(id)
        except (TypeError, ValueError):
            return False
        return bool(self._run(self._logic.contains_op(enc)))

    def __len__(self) -> int:
        return int(self._run(self._logic.len_op()))

    def clear(self) -> None:
        """Remove every entry (the parameters stay)."""
        self._run(self._logic.clear_op())

    def drop(self) -> None:
        """Delete the index's keys from Redis, its metadata too (the object
        is unusable after)."""
        self._run(self._logic.drop_op())
        self.close()


class RedisSimhashIndex(IndexHandle):
    """The :class:`crawldedup.SimhashIndex` interface over Redis:
    ``RedisSimhashIndex(url_or_client, name, k=3, *, shards=None)``.

    Fingerprints (64-bit ints) within Hamming distance ``k`` of a query are
    found exactly: the 64 bits are cut into ``k + 1`` blocks, and two
    fingerprints within ``k`` agree on at least one block (the pigeonhole
    principle).  Entries are cut into ``shards`` shards by their id (by
    default one on a single server, one per master on a cluster); in a
    shard each block value is a Redis set holding ``fp + id`` of the
    entries with that block, and an id map holds id -> fp.  A shard's keys
    share a hash tag, so an entry is stored or removed with its buckets by
    one script, atomically.  A query fetches its ``k + 1`` buckets in each
    shard in one round trip -- ``query_many`` all the buckets of the batch
    -- and checks the distances here.  Ids are ints in [0, 2**64), str or
    bytes; an id holds one fingerprint.

    ``name:meta`` holds k and the shard count: opening with another k (or
    shards) raises IncompatibleFilterError; ``k=None`` opens an existing
    index with its own.
    """

    def __init__(self, client_or_url: Any, name: Any, k: Optional[int] = 3, *,
                 shards: Optional[int] = None) -> None:
        self._open_logic(SimhashLogic(name, k, shards), client_or_url)

    @property
    def k(self) -> int:
        return self._logic.k

    def __repr__(self) -> str:
        return (f"RedisSimhashIndex({self._transport.address!r}, {self.name!r}, k={self.k}, "
                f"shards={self.shards})")

    def add(self, id: Hashable, fp: int) -> None:
        """Store fingerprint fp under id.  ValueError if id holds another
        fingerprint (the same one: nothing to do)."""
        enc = encode_id(id)
        f = _check_fp(fp)
        self._run(self._logic.add_op([enc], np.array([f], dtype=np.uint64)))

    def add_many(self, ids: Iterable[Hashable], fps: Any) -> None:
        """Store fps[i] under ids[i], all or nothing: ValueError if an id is
        repeated or holds another fingerprint, RedisKeyTypeError if a key of
        the index holds another Redis type (nothing stored then).  An id
        that holds the same fingerprint is left as it is, so a batch cut
        by an error can be sent again."""
        encs, f = id_batch(ids, fps)
        if encs:
            self._run(self._logic.add_op(encs, f))

    def query(self, fp: int) -> List[Tuple[Hashable, int]]:
        """[(id, distance)] within k of fp, by distance then id."""
        f = _check_fp(fp)
        return cast("List[Tuple[Hashable, int]]",
                    self._run(self._logic.query_op(np.array([f], dtype=np.uint64)))[0])

    def near_dup(self, fp: int) -> bool:
        return bool(self.query(fp))

    def query_many(self, fps: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets, ids, distances) in CSR layout, as SimhashIndex.query_many."""
        results = self._run(self._logic.query_op(_fp_array(fps)))
        return csr(results)


def flatten(results: List[List[Tuple[Hashable, Any]]]
            ) -> Tuple[np.ndarray, List[Any], List[Any]]:
    """(offsets, ids, values) of per-query [(id, value)] lists, in CSR
    layout: query i's are ids[offsets[i]:offsets[i + 1]]."""
    offsets = np.zeros(len(results) + 1, dtype=np.int64)
    flat_ids: List[Any] = []
    values: List[Any] = []
    for i, res in enumerate(results):
        offsets[i + 1] = offsets[i] + len(res)
        for id, v in res:
            flat_ids.append(id)
            values.append(v)
    return offsets, flat_ids, values


def csr(results: List[List[Tuple[Hashable, int]]]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    offsets, flat_ids, dists = flatten(results)
    if all(isinstance(i, int) for i in flat_ids):
        ids: np.ndarray = np.array(flat_ids, dtype=np.uint64)
    else:
        ids = np.empty(len(flat_ids), dtype=object)
        ids[:] = flat_ids
    return offsets, ids, np.array(dists, dtype=np.uint8)


