"""RedisMinHashIndex: MinHash LSH in Redis, shared by a fleet, atomic and
sharded on Redis Cluster."""

from __future__ import annotations

import json
from typing import Any, Dict, Hashable, Iterable, List, Optional, Tuple

import numpy as np

from crawldedup import _kernel
from crawldedup.errors import IncompatibleFilterError, StoreUnavailableError
from crawldedup.near.lsh import (
    _check,
    _check_bands,
    check_signatures,
    lsh_parameters,
    min_agree,
)
from crawldedup.redis import _resp
from crawldedup.redis._bloom_logic import shard_tags
from crawldedup.redis._conn import Op, Request
from crawldedup.redis.simhash import (
    FETCH_SCRIPT,
    MAX_SHARDS,
    QUERY_KEYS,
    IndexHandle,
    SimhashLogic,
    decode_id,
    encode_id,
    flatten,
)

FORMAT_VERSION = 1
#: Signatures fetched per HMGET.
FETCH_IDS = 1024


class MinHashLogic(SimhashLogic):
    """Commands and replies of RedisMinHashIndex, without I/O.

    The layout of RedisSimhashIndex's (SimhashLogic) with other buckets: a
    shard is an id map (id -> the signature, num_perm uint32 little-endian)
    and one set per (band, band key) holding the ids of the entries whose
    band has that key.  ``name:meta`` (JSON) holds the format, num_perm,
    bands, rows, threshold and the shard count.  A query fetches its bands'
    buckets in every shard in one round trip, then the candidates'
    signatures in a second, and keeps those whose band values are equal
    (a collision of band keys is never a candidate), with their estimated
    Jaccard similarity.
    """

    _title = "a MinHash index"
    _value_name = "signature"

    def __init__(self, name: Any, threshold: Optional[float], num_perm: Optional[int],
                 bands: Optional[int], rows: Optional[int], weights: Tuple[float, float],
                 shards: Optional[int]) -> None:
        super().__init__(name, None, shards)
        self.asked: Optional[Dict[str, Any]] = None
        if num_perm is not None or threshold is not None:
            t, n, _, b, r = lsh_parameters(0.8 if threshold is None else threshold,
                                           128 if num_perm is None else num_perm, bands, rows,
                                           weights)
            self.asked = {"num_perm": n, "bands": b, "rows": r, "threshold": t}
        elif bands is not None or rows is not None:
            raise ValueError("bands and rows need num_perm")

    def _adopt_minhash(self, params: Dict[str, Any], shards: int) -> None:
        self.num_perm = params["num_perm"]
        self.bands = params["bands"]
        self.rows = params["rows"]
        self.threshold = params["threshold"]
        self.shards = shards
        self.prefixes = [self.name + b":{" + tag + b"}:" for tag in shard_tags(shards)]
        self.id_keys = [p + b"ids" for p in self.prefixes]

    def _derived_minhash(self, bands: int, rows: int, shards: int) -> Dict[str, Any]:
        """The metadata fields that follow from the parameters (kept beside
        them, so that an edit of one alone, which would read other buckets
        or shards, is named): the values each band covers, the id maps."""
        return {"band_values": [[j * rows, (j + 1) * rows] for j in range(bands)],
                "id_maps": [(self.name + b":{" + tag + b"}:ids").decode("utf-8",
                                                                      "surrogateescape")
                            for tag in shard_tags(shards)]}

    def _read_minhash_meta(self, raw: bytes) -> Tuple[Dict[str, Any], int]:
        key = self.meta_key.decode("utf-8", "replace")
        try:
            meta = json.loads(raw)
            if not isinstance(meta, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError) as exc:
            raise IncompatibleFilterError(f"Redis key {key!r} is not crawldedup index "
                                          f"metadata ({exc})") from None
        if meta.get("format") != FORMAT_VERSION or meta.get("kind") != "minhash":
            raise IncompatibleFilterError(
                f"Redis key {key!r} describes a {meta.get('kind')!r} of format "
                f"{meta.get('format')!r}; this crawldedup reads MinHash indexes of format "
                f"{FORMAT_VERSION}")
        fields = {"num_perm", "bands", "rows", "threshold", "shards"}
        missing = sorted(fields - set(meta))
        if missing:
            raise self._corrupt(f"has no {missing[0]!r}")
        extra = sorted(set(meta) - fields - {"format", "kind", "band_values", "id_maps"})
        if extra:
            raise self._corrupt(f"holds fields this crawldedup never writes: {extra}")
        for field in ("num_perm", "bands", "rows", "shards"):
            if type(meta[field]) is not int:
                raise self._corrupt(f"holds {field} {meta[field]!r}, not an int")
        if type(meta["threshold"]) not in (int, float):
            raise self._corrupt(f"holds threshold {meta['threshold']!r}, not a number")
        try:
            n = meta["num_perm"]
            _check(meta["threshold"], n, (0.5, 0.5))
            _check_bands(meta["bands"], meta["rows"], n)
        except (TypeError, ValueError) as exc:
            raise self._corrupt(f"holds parameters that make no index ({exc})") from None
        if not 1 <= meta["shards"] <= MAX_SHARDS:
            raise self._corrupt(f"holds shards {meta['shards']!r}, not in [1, {MAX_SHARDS}]")
        made = self._derived_minhash(meta["bands"], meta["rows"], meta["shards"])
        for field, value in made.items():
            if meta.get(field) != value:
                raise self._corrupt(f"holds {field} {meta.get(field)!r}, which bands "
                                    f"{meta['bands']}, rows {meta['rows']} and shards "
                                    f"{meta['shards']} do not make (was one of them edited?)")
        params = {f: meta[f] for f in ("num_perm", "bands", "rows", "threshold")}
        return params, meta["shards"]

    def open_op(self, nodes: int) -> Op:
        """Read the metadata key, or create it with the asked parameters."""
        get = Request(self.meta_key, _resp.command(b"GET", self.meta_key))
        raw = self._check([get], (yield [get]))[0]
        if raw is None:
            if self.asked is None:
                raise ValueError(f"no crawldedup index named "
                                 f"{self.name.decode('utf-8', 'replace')!r} at {self.address}: "
                                 f"give num_perm (and threshold) to create one")
            shards = self.asked_shards or nodes
            meta = {"format": FORMAT_VERSION, "kind": "minhash", **self.asked, "shards": shards,
                    **self._derived_minhash(self.asked["bands"], self.asked["rows"], shards)}
            setnx = Request(self.meta_key, _resp.command(b"SET", self.meta_key,
                                                         json.dumps(meta), b"NX"))
            if self._check([setnx], (yield [setnx]))[0] is None:  # created meanwhile
                raw = self._check([get], (yield [get]))[0]
            else:
                raw = json.dumps(meta).encode()
            if raw is None:  # pragma: no cover - created and deleted between two calls
                raise StoreUnavailableError(f"Redis at {self.address}: the index's metadata "
                                            f"key came and went; try again")
        params, shards = self._read_minhash_meta(raw)
        diff = [f"{k} {v!r} != {params[k]!r}" for k, v in (self.asked or {}).items()
                if v != params[k]]
        if self.asked_shards is not None and self.asked_shards != shards:
            diff.append(f"shards {self.asked_shards} != {shards}")
        if diff:
            raise IncompatibleFilterError(
                f"the Redis MinHash index {self.name.decode('utf-8', 'replace')!r} has other "
                f"parameters: {', '.join(diff)} (asked != stored)")
        self._adopt_minhash(params, shards)
        return None

    # ----------------------------------------------------------- keys

    def _band_keys(self, sigs: np.ndarray) -> np.ndarray:
        return _kernel.lsh_keys(np.ascontiguousarray(sigs, dtype=np.uint32), self.bands,
                                self.rows)

    def bucket_keys(self, shard: int, sig: Any) -> List[bytes]:
        """The bucket keys of a signature in a shard, one per band."""
        prefix = self.prefixes[shard]
        keys = self._band_keys(np.asarray(sig, dtype=np.uint32)[None, :])[0]
        return [prefix + b"%d:%x" % (j, key) for j, key in enumerate(keys.tolist())]

    def _values(self, items: np.ndarray) -> Tuple[List[Any], List[bytes]]:
        sigs = list(items)
        return sigs, [row.astype("<u4").tobytes() for row in items]

    def _member(self, enc: bytes, value: bytes) -> bytes:
        return enc

    def _item(self, value: bytes) -> Any:
        return np.frombuffer(value, dtype="<u4").astype(np.uint32)

    # ------------------------------------------------------------- search

    def query_op(self, sigs: np.ndarray, min_agree: int = 0) -> Op:
        """For each signature, [(id, estimated Jaccard)] of the entries that
        share a band's values with it, by id."""
        keys = self._band_keys(sigs)
        n, b, r = len(sigs), self.bands, self.rows
        per_query: List[List[bytes]] = [[] for _ in range(n)]
        reqs: List[Request] = []
        groups: List[List[bytes]] = []
        for shard in range(self.shards):
            prefix = self.prefixes[shard]
            distinct: Dict[bytes, None] = {}
            for q in range(n):
                mine = [prefix + b"%d:%x" % (j, key) for j, key in enumerate(keys[q].tolist())]
                per_query[q] += mine
                distinct.update(dict.fromkeys(mine))
            every = list(distinct)
            for lo in range(0, len(every), QUERY_KEYS):
                part = every[lo:lo + QUERY_KEYS]
                reqs.append(Request(part[0], _resp.command(b"EVAL", FETCH_SCRIPT, len(part),
                                                           *part)))
                groups.append(part)
        contents: Dict[bytes, List[bytes]] = {}
        for part, sets in zip(groups, self._check(reqs, (yield reqs))):
            contents.update(zip(part, (list(map(bytes, s)) for s in sets)))
        candidates: List[Dict[bytes, None]] = []
        wanted: Dict[bytes, None] = {}
        for q in range(n):
            found: Dict[bytes, None] = {}
            for key in per_query[q]:
                found.update(dict.fromkeys(contents[key]))
            candidates.append(found)
            wanted.update(found)
        # the candidates' signatures, from the id map of each one's shard
        by_shard: Dict[int, List[bytes]] = {}
        for enc in wanted:
            by_shard.setdefault(self.shard_of(enc), []).append(enc)
        reqs, order = [], []
        for shard, encs in sorted(by_shard.items()):
            for lo in range(0, len(encs), FETCH_IDS):
                part = encs[lo:lo + FETCH_IDS]
                reqs.append(Request(self.id_keys[shard], _resp.command(
                    b"HMGET", self.id_keys[shard], *part)))
                order.append(part)
        stored: Dict[bytes, np.ndarray] = {}
        width = 4 * self.num_perm
        for part, values in zip(order, self._check(reqs, (yield reqs))):
            for enc, value in zip(part, values):
                if value is not None and len(value) == width:   # removed meanwhile: gone
                    stored[enc] = np.frombuffer(value, dtype="<u4").astype(np.uint32)
        out: List[List[Tuple[Hashable, float]]] = []
        for q in range(n):
            res = []
            for enc in candidates[q]:
                sig = stored.get(enc)
                if sig is None:
                    continue
                equal = sig[:b * r].reshape(b, r) == sigs[q, :b * r].reshape(b, r)
                if not equal.all(axis=1).any():
                    continue                     # only the band keys collided
                agree = int(np.count_nonzero(sig == sigs[q]))
                if agree >= min_agree:
                    res.append((decode_id(enc), agree / self.num_perm))
            res.sort(key=lambda t: (0 if isinstance(t[0], int) else
                                    1 if isinstance(t[0], str) else 2, t[0]))
            out.append(res)
        return out


def id_signatures(ids: Iterable[Hashable], signatures: Any,
                  num_perm: int) -> Tuple[List[bytes], np.ndarray]:
    """The encoded ids and the signatures of an add_many, checked."""
    if isinstance(ids, (str, bytes)):
        raise TypeError("ids must be an iterable of ids, not a single str or bytes")
    encs = [encode_id(i) for i in (ids.tolist() if isinstance(ids, np.ndarray) else ids)]
    sigs = check_signatures(signatures, num_perm, "signatures")
    if len(encs) != len(sigs):
        raise ValueError(f"ids and signatures differ in length: {len(encs)} and {len(sigs)}")
    return encs, sigs


def jaccard_csr(results: List[List[Tuple[Hashable, float]]]
                ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, ids, jaccards) of per-query results, as MinHashIndex.query_many."""
    offsets, flat, jac = flatten(results)
    ids = np.empty(len(flat), dtype=object)
    for i, v in enumerate(flat):
        ids[i] = v
    return offsets, ids, np.array(jac, dtype=np.float64)


class MinHashParams:
    """The LSH parameters of a Redis MinHash index (blocking or asyncio),
    read from its logic object."""

    _logic: MinHashLogic

    @property
    def num_perm(self) -> int:
        return int(self._logic.num_perm)

    @property
    def bands(self) -> int:
        return int(self._logic.bands)

    @property
    def rows(self) -> int:
        return int(self._logic.rows)


class RedisMinHashIndex(MinHashParams, IndexHandle):
    """MinHash LSH over Redis, the :class:`crawldedup.MinHashIndex`
    interface: ``RedisMinHashIndex(url_or_client, name, threshold=0.8,
    num_perm=128, *, bands=None, rows=None, weights=(0.5, 0.5),
    shards=None)``.

    Bands and rows are chosen for the threshold as MinHashIndex chooses
    them (or given).  Entries are cut into ``shards`` shards by their id
    (by default one on a single server, one per master on a cluster); in a
    shard, each (band, band key) is a Redis set of the ids whose band has
    that key, and an id map holds id -> signature.  A shard's keys share a
    hash tag, so an entry is stored or removed with its buckets by one
    script, atomically, on a cluster too; a batch's check runs before its
    first write, and a batch cut by a failure can be sent again.  A query
    reads its bands' buckets in every shard and its candidates' signatures
    (two round trips for a whole batch), and keeps the candidates whose
    band values are equal.  Ids are ints in [0, 2**64), str or bytes.

    ``name:meta`` holds the parameters: opening with others raises
    IncompatibleFilterError; ``num_perm=None, threshold=None`` opens an
    existing index with its own.
    """

    _logic: MinHashLogic

    def __init__(self, client_or_url: Any, name: Any, threshold: Optional[float] = 0.8,
                 num_perm: Optional[int] = 128, *, bands: Optional[int] = None,
                 rows: Optional[int] = None, weights: Tuple[float, float] = (0.5, 0.5),
                 shards: Optional[int] = None) -> None:
        self._open_logic(MinHashLogic(name, threshold, num_perm, bands, rows, weights, shards),
                         client_or_url)

    @property
    def threshold(self) -> float:
        return float(self._logic.threshold)

    def __repr__(self) -> str:
        return (f"RedisMinHashIndex({self._transport.address!r}, {self.name!r}, "
                f"threshold={self.threshold}, num_perm={self.num_perm}, bands={self.bands}, "
                f"rows={self.rows}, shards={self.shards})")

    def add(self, id: Hashable, signature: Any) -> None:
        """Store signature under id.  ValueError if id holds another
        signature (the same one: nothing to do)."""
        self.add_many([id], check_signatures(signature, self.num_perm, "signature"))

    def add_many(self, ids: Iterable[Hashable], signatures: Any) -> None:
        """Store signatures[i] under ids[i], all or nothing: ValueError if an
        id is repeated or holds another signature, RedisKeyTypeError if a key
        of the index holds another Redis type (nothing stored then).  An id
        that holds the same signature is left as it is, so a batch cut by an
        error can be sent again."""
        encs, sigs = id_signatures(ids, signatures, self.num_perm)
        if encs:
            self._run(self._logic.add_op(encs, sigs))

    def query(self, signature: Any,
              min_jaccard: Optional[float] = None) -> List[Tuple[Hashable, float]]:
        """[(id, estimated Jaccard)] of the entries sharing a band's values
        with signature (ints, then str, then bytes ids, each in order)."""
        floor = min_agree(min_jaccard, self.num_perm)
        res: List[Tuple[Hashable, float]] = self._run(self._logic.query_op(
            check_signatures(signature, self.num_perm, "signature"), floor))[0]
        return res

    def query_many(self, signatures: Any, min_jaccard: Optional[float] = None
                   ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets, ids, jaccards) in CSR layout, as MinHashIndex.query_many
        (ids an object array)."""
        floor = min_agree(min_jaccard, self.num_perm)
        return jaccard_csr(self._run(self._logic.query_op(
            check_signatures(signatures, self.num_perm, "signatures"), floor)))
