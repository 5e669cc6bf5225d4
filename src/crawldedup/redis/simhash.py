"""RedisSimhashIndex: near-duplicate search over 64-bit SimHash fingerprints
kept in Redis, exact (the pigeonhole principle), shared by a fleet."""

from __future__ import annotations

import binascii
import operator
from typing import Any, Dict, Hashable, Iterable, List, Set, Tuple, cast

import numpy as np

from crawldedup._kernel import MAX_HAMMING_K
from crawldedup.index import _check_fp, _check_k, _fp_array
from crawldedup.redis import _resp
from crawldedup.redis._conn import Op, Request, SyncHandle, check_reply
from crawldedup.redis.store import check_name

#: Keys of the id -> fingerprint map (ids spread over them by CRC32).
ID_SHARDS = 16
#: Bucket keys share a hash tag per block and top GROUP_BITS bits of the value.
GROUP_BITS = 6

# Scripts run on one slot's keys: HSETNX each (field, value) pair; SADD
# each member to its key; SMEMBERS of each key.
CLAIM_SCRIPT = b"""local r = {}
for i = 1, #ARGV, 2 do r[#r + 1] = redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
return r"""
SADD_SCRIPT = b"""for i, key in ipairs(KEYS) do redis.call('SADD', key, ARGV[i]) end
return #KEYS"""
FETCH_SCRIPT = b"""local r = {}
for i, key in ipairs(KEYS) do r[i] = redis.call('SMEMBERS', key) end
return r"""


def _tag(key: bytes) -> bytes:
    return key[key.index(b"{"):key.index(b"}") + 1] if b"{" in key else key
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
    """Commands and replies of RedisSimhashIndex, without I/O."""

    def __init__(self, name: Any, k: int) -> None:
        self.name = check_name(name)
        self.k = _check_k(k)
        if self.k > MAX_HAMMING_K:  # pragma: no cover - _check_k bounds it
            raise ValueError(f"k must be at most {MAX_HAMMING_K}")
        self.blocks = _blocks(self.k)
        self.address = "Redis"

    def id_key(self, enc: bytes) -> bytes:
        return self.name + b":ids:%d" % (binascii.crc32(enc) % ID_SHARDS)

    def bucket_keys(self, fp: int) -> List[bytes]:
        """The k + 1 bucket keys of fp.  A bucket's hash tag holds its block
        and the top GROUP_BITS bits of the block value, so the buckets fall
        in 2**GROUP_BITS slots per block: one script call per group fetches
        or fills many buckets on any cluster node."""
        out = []
        for j, (shift, w) in enumerate(self.blocks):
            v = (fp >> shift) & ((1 << w) - 1)
            out.append(self.name + b":k%d:{b%d.%x}:%x" % (self.k, j, v >> (w - GROUP_BITS), v))
        return out

    def _check(self, reqs: List[Request], replies: List[List[Any]]) -> List[Any]:
        return [check_reply(r[0], q, self.address) for q, r in zip(reqs, replies)]

    # ------------------------------------------------------------ changes

    def add_op(self, encs: List[bytes], fps: np.ndarray) -> Op:
        """Store every (id, fp), all or nothing: ValueError when an id is
        present already (the ids this call claimed are released again)."""
        if len(set(encs)) != len(encs):
            seen: Set[bytes] = set()
            for e in encs:
                if e in seen:
                    raise ValueError(f"id {decode_id(e)!r} is repeated")
                seen.add(e)
        values = [int(f).to_bytes(8, "big") for f in fps.tolist()]
        by_map: Dict[bytes, List[int]] = {}
        for i, e in enumerate(encs):
            by_map.setdefault(self.id_key(e), []).append(i)
        claims = []
        for key, idx in by_map.items():
            args = [x for i in idx for x in (encs[i], values[i])]
            claims.append(Request(key, _resp.command(b"EVAL", CLAIM_SCRIPT, 1, key, *args)))
        replies = yield claims
        done = [False] * len(encs)
        for idx, flags in zip(by_map.values(), self._check(claims, replies)):
            for i, ok in zip(idx, flags):
                done[i] = bool(ok)
        if not all(done):
            taken = [e for e, ok in zip(encs, done) if ok]
            if taken:
                undo = [Request(self.id_key(e), _resp.command(b"HDEL", self.id_key(e), e))
                        for e in taken]
                self._check(undo, (yield undo))
            bad = next(e for e, ok in zip(encs, done) if not ok)
            raise ValueError(f"id {decode_id(bad)!r} is already in the index")
        groups: Dict[bytes, Tuple[List[bytes], List[bytes]]] = {}
        for e, v, fp in zip(encs, values, fps.tolist()):
            for key in self.bucket_keys(fp):
                keys, members = groups.setdefault(_tag(key), ([], []))
                keys.append(key)
                members.append(v + e)
        adds = [Request(keys[0], _resp.command(b"EVAL", SADD_SCRIPT, len(keys), *keys, *members))
                for keys, members in groups.values()]
        self._check(adds, (yield adds))
        return None

    def remove_op(self, enc: bytes, id: Any) -> Op:
        key = self.id_key(enc)
        get = Request(key, _resp.command(b"HGET", key, enc))
        value = self._check([get], (yield [get]))[0]
        if value is None:
            raise KeyError(id)
        fp = int.from_bytes(value, "big")
        reqs = [Request(key, _resp.command(b"HDEL", key, enc))]
        reqs += [Request(b, _resp.command(b"SREM", b, value + enc)) for b in self.bucket_keys(fp)]
        self._check(reqs, (yield reqs))
        return None

    def contains_op(self, enc: bytes) -> Op:
        key = self.id_key(enc)
        req = Request(key, _resp.command(b"HEXISTS", key, enc))
        return bool(self._check([req], (yield [req]))[0])

    def len_op(self) -> Op:
        keys = [self.name + b":ids:%d" % i for i in range(ID_SHARDS)]
        reqs = [Request(key, _resp.command(b"HLEN", key)) for key in keys]
        return sum(int(v) for v in self._check(reqs, (yield reqs)))

    def clear_op(self) -> Op:
        """Every key of the index: the id maps, then the buckets they name."""
        keys = [self.name + b":ids:%d" % i for i in range(ID_SHARDS)]
        reqs = [Request(key, _resp.command(b"HGETALL", key)) for key in keys]
        maps = self._check(reqs, (yield reqs))
        buckets = set()
        for m in maps:
            for value in (m.values() if isinstance(m, dict) else m[1::2]):
                buckets.update(self.bucket_keys(int.from_bytes(value, "big")))
        dels = [Request(key, _resp.command(b"DEL", key)) for key in list(buckets) + keys]
        self._check(dels, (yield dels))
        return None

    # ------------------------------------------------------------- search

    def query_op(self, fps: np.ndarray) -> Op:
        """For each fp, [(id, distance)] within k: every bucket of the batch
        fetched in one round trip, distances checked here."""
        fp_list = fps.tolist()
        per_fp = [self.bucket_keys(fp) for fp in fp_list]
        groups: Dict[bytes, Dict[bytes, None]] = {}
        for keys in per_fp:
            for key in keys:
                groups.setdefault(_tag(key), {})[key] = None
        reqs = [Request(next(iter(group)), _resp.command(b"EVAL", FETCH_SCRIPT, len(group),
                                                          *group))
                for group in groups.values()]
        contents: Dict[bytes, List[bytes]] = {}
        for group, sets in zip(groups.values(), self._check(reqs, (yield reqs))):
            contents.update(zip(group, sets))
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


class RedisSimhashIndex(SyncHandle):
    """The :class:`crawldedup.SimhashIndex` interface over Redis:
    ``RedisSimhashIndex(url_or_client, name, k=3)``.

    Fingerprints (64-bit ints) within Hamming distance ``k`` of a query are
    found exactly: the 64 bits are cut into ``k + 1`` blocks, and two
    fingerprints within ``k`` agree on at least one block (the pigeonhole
    principle).  Each block value is a Redis set (a key of its own, spread
    over a cluster's nodes) holding ``fp + id`` of the entries with that
    block.  A query fetches all its ``k + 1`` buckets in one round trip --
    ``query_many`` all the buckets of the batch -- and checks the distances
    here.  Ids are ints in [0, 2**64), str or bytes; an id holds one
    fingerprint (the id -> fp map is a few Redis hashes).
    """

    _logic: SimhashLogic
    _what = "index"

    def __init__(self, client_or_url: Any, name: Any, k: int = 3) -> None:
        self._logic = SimhashLogic(name, k)
        self._attach(client_or_url)

    @property
    def k(self) -> int:
        return self._logic.k

    def __repr__(self) -> str:
        return f"RedisSimhashIndex({self._transport.address!r}, {self.name!r}, k={self.k})"

    def add(self, id: Hashable, fp: int) -> None:
        """Store fingerprint fp under id.  ValueError if id is present."""
        enc = encode_id(id)
        f = _check_fp(fp)
        self._run(self._logic.add_op([enc], np.array([f], dtype=np.uint64)))

    def add_many(self, ids: Iterable[Hashable], fps: Any) -> None:
        """Store fps[i] under ids[i], all or nothing (ValueError if an id is
        repeated or present)."""
        encs, f = id_batch(ids, fps)
        if encs:
            self._run(self._logic.add_op(encs, f))

    def remove(self, id: Hashable) -> None:
        """Remove id and its fingerprint; KeyError if it is not present."""
        self._run(self._logic.remove_op(encode_id(id), id))

    def __contains__(self, id: object) -> bool:
        try:
            enc = encode_id(id)
        except (TypeError, ValueError):
            return False
        return bool(self._run(self._logic.contains_op(enc)))

    def __len__(self) -> int:
        return int(self._run(self._logic.len_op()))

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

    def clear(self) -> None:
        """Delete every key of the index."""
        self._run(self._logic.clear_op())


def csr(results: List[List[Tuple[Hashable, int]]]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    offsets = np.zeros(len(results) + 1, dtype=np.int64)
    flat_ids: List[Any] = []
    dists: List[int] = []
    for i, res in enumerate(results):
        offsets[i + 1] = offsets[i] + len(res)
        for id, d in res:
            flat_ids.append(id)
            dists.append(d)
    if all(isinstance(i, int) for i in flat_ids):
        ids: np.ndarray = np.array(flat_ids, dtype=np.uint64)
    else:
        ids = np.empty(len(flat_ids), dtype=object)
        ids[:] = flat_ids
    return offsets, ids, np.array(dists, dtype=np.uint8)


