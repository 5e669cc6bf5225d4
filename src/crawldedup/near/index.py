"""SimhashIndex: exact near-duplicate search over 64-bit fingerprints.

"Which stored fingerprints are within k bits of this one?"  The answer is
exact (never misses one, never reports a farther one) for k from 0 to 8, by
the pigeonhole principle over the compiled core's ``HammingIndex``; see
docs/simhash-index.md for the data structure, its costs and the file format.

>>> from crawldedup import SimhashIndex
>>> index = SimhashIndex(k=3)
>>> index.add("page-1", 0x0123456789ABCDEF)
>>> index.add("page-2", 0x0123456789ABCDEE)     # one bit away
>>> index.query(0x0123456789ABCDEF)
[('page-1', 0), ('page-2', 1)]
>>> index.near_dup(0xFEDCBA9876543210)
False
"""

from __future__ import annotations

import operator
from typing import (
    Any,
    BinaryIO,
    Dict,
    Hashable,
    Iterable,
    Iterator,
    List,
    Optional,
    Tuple,
    Union,
    cast,
)

import numpy as np

from crawldedup._kernel import MAX_HAMMING_K, HammingIndex
from crawldedup.errors import CorruptFileError
from crawldedup.formats import files as _files
from crawldedup.formats import ids as _ids
from crawldedup.formats.files import PathLike

__all__ = ["SimhashIndex"]

_U64_MAX = (1 << 64) - 1

# Header "layout" field of an index file: how ids are stored.
IDS_UINT64 = 0  # ids[n] as uint64 after the fingerprints
IDS_KEYS = 1  # one tagged record per entry (int, str or bytes) after the fingerprints


def _u64_int(v: object) -> Optional[int]:
    """v as an int if it is an integer (not bool) in [0, 2**64), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        return None
    i = operator.index(v)
    return i if 0 <= i <= _U64_MAX else None


def _int_in(value: object, name: str, kind: str, top: int, shown: str) -> int:
    """value as an int in [0, top]: TypeError unless an integer (not bool),
    ValueError out of range."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be {kind}, not {type(value).__name__}")
    v = operator.index(value)
    if not 0 <= v <= top:
        raise ValueError(f"{name} must be in {shown}, got {v}")
    return v


def _check_k(k: object) -> int:
    return _int_in(k, "k", "an int", MAX_HAMMING_K, f"[0, {MAX_HAMMING_K}]")


def _check_fp(fp: object) -> int:
    return _int_in(fp, "fp", "an int (a 64-bit fingerprint)", _U64_MAX, "[0, 2**64)")


def _fp_array(fps: object, name: str = "fps") -> np.ndarray:
    """fps as a contiguous 1-D uint64 array (ints in [0, 2**64) only)."""
    if isinstance(fps, np.ndarray):
        arr = fps
    else:
        items = list(fps)  # type: ignore[call-overload]
        for v in items:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{name} must hold ints (64-bit fingerprints), "
                                f"not {type(v).__name__}")
            if not 0 <= operator.index(v) <= _U64_MAX:
                raise ValueError(f"{name} values must be in [0, 2**64), got {v}")
        arr = np.array([operator.index(v) for v in items], dtype=np.uint64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.dtype != np.uint64:
        if arr.dtype.kind == "i" and arr.size and (arr < 0).any():
            raise ValueError(f"{name} values must be in [0, 2**64), got a negative one")
        if arr.dtype.kind not in "ui" and arr.size:
            raise TypeError(f"{name} must be an array of unsigned 64-bit integers, "
                            f"got dtype {arr.dtype}")
        arr = arr.astype(np.uint64)
    return np.ascontiguousarray(arr)


def _check_kind(header: _files.Header, path: Optional[PathLike]) -> None:
    """Refuse a state file that holds something other than an index."""
    _files.check_kind(header, path, _files.KIND_INDEX)


class SimhashIndex:
    """Exact index of fingerprints within Hamming distance ``k`` (0..8).

    Ids may be any hashable.  While every id is an int in [0, 2**64) they go
    to the core unchanged (no per-entry Python object); the first other id
    switches the index to a mapping from ids to internal numbers (costs a
    dict entry per id).  Each id holds one fingerprint: adding an id that is
    already present raises ValueError (remove it first).
    """

    def __init__(self, k: int = 3) -> None:
        self._k = _check_k(k)
        self._core = HammingIndex(self._k)
        # Object-id mode: id -> internal int and back; None while ids are ints.
        self._ids: Optional[Dict[Hashable, int]] = None
        self._names: Dict[int, Hashable] = {}
        self._next = 0

    # ------------------------------------------------------------ basics

    @property
    def k(self) -> int:
        """The largest Hamming distance reported."""
        return self._k

    @property
    def nbytes(self) -> int:
        """Bytes held by the compiled index (not the id mapping of object ids)."""
        return int(self._core.nbytes)

    def __len__(self) -> int:
        return len(self._core)

    def __repr__(self) -> str:
        return f"SimhashIndex(k={self._k}, entries={len(self)})"

    def __contains__(self, id: object) -> bool:
        c = self._internal(id)
        return c is not None and c in self._core

    def _internal(self, id: object) -> Optional[int]:
        if self._ids is None:
            return _u64_int(id)
        try:
            return self._ids.get(id)
        except TypeError:  # unhashable
            return None

    def _to_object_ids(self) -> None:
        """Switch to object-id mode: number the present int ids 0..n-1."""
        fps, ids = self._core.items()
        order = np.argsort(ids, kind="stable")  # internal numbers in id order
        fps, ids = fps[order], ids[order]
        core = HammingIndex(self._k)
        n = len(ids)
        core.add_many(np.arange(n, dtype=np.uint64), fps)
        names = ids.tolist()
        self._ids = {name: i for i, name in enumerate(names)}
        self._names = dict(enumerate(names))
        self._next = n
        self._core = core

    def _name(self, c: int) -> Hashable:
        return c if self._ids is None else self._names[c]

    # ------------------------------------------------------------ changes

    def add(self, id: Hashable, fp: int) -> None:
        """Store fingerprint fp under id.  ValueError if id is present."""
        f = _check_fp(fp)
        c = _u64_int(id) if self._ids is None else None
        if c is not None:
            if c in self._core:
                raise ValueError(f"id {id!r} is already in the index")
            self._core.add(c, f)
            return
        hash(id)  # TypeError for an unhashable id, before anything changes
        if self._ids is None:
            self._to_object_ids()
        assert self._ids is not None
        if isinstance(id, np.integer):
            id = int(id)
        if id in self._ids:
            raise ValueError(f"id {id!r} is already in the index")
        c = self._next
        self._core.add(c, f)
        self._ids[id] = c
        self._names[c] = id
        self._next += 1

    def add_many(self, ids: Iterable[Hashable], fps: Any) -> None:
        """Store fps[i] under ids[i] for every i, all or nothing.

        ids: an iterable or numpy array of ids; fps: a numpy uint64 array (or
        an iterable of ints) of the same length.  ValueError if an id is
        repeated or already present (nothing is added then).
        """
        f = _fp_array(fps)
        int_ids: Optional[np.ndarray] = None
        keys: Optional[List[Hashable]] = None
        if isinstance(ids, np.ndarray) and ids.dtype.kind in "ui" and ids.ndim == 1:
            if ids.dtype.kind == "u" or not ids.size or (ids >= 0).all():
                int_ids = np.ascontiguousarray(ids, dtype=np.uint64)
            else:
                keys = ids.tolist()
        else:
            if isinstance(ids, (str, bytes)):
                raise TypeError("ids must be an iterable of ids, not a single str or bytes")
            keys = list(ids.tolist() if isinstance(ids, np.ndarray) else ids)
            if self._ids is None and all(_u64_int(v) is not None for v in keys):
                int_ids = np.array([operator.index(v) for v in cast(List[Any], keys)],
                                   dtype=np.uint64)
                keys = None
        n = len(int_ids) if int_ids is not None else len(keys)  # type: ignore[arg-type]
        if n != len(f):
            raise ValueError(f"ids and fps differ in length: {n} and {len(f)}")
        if int_ids is not None and self._ids is None:
            try:
                self._core.add_many(int_ids, f)
            except ValueError as exc:
                raise ValueError(str(exc).replace("is already in the index",
                                                  "is repeated or already in the index")) from None
            return
        if keys is None:
            assert int_ids is not None
            keys = int_ids.tolist()
        keys = [int(v) if isinstance(v, np.integer) else v for v in keys]
        seen = set()
        for v in keys:
            hash(v)
            if v in seen:
                raise ValueError(f"id {v!r} is repeated")
            seen.add(v)
        if self._ids is None:
            present = [v for v in keys if _u64_int(v) is not None and v in self._core]
            if present:
                raise ValueError(f"id {present[0]!r} is already in the index")
            self._to_object_ids()
        assert self._ids is not None
        for v in keys:
            if v in self._ids:
                raise ValueError(f"id {v!r} is already in the index")
        start = self._next
        self._core.add_many(np.arange(start, start + n, dtype=np.uint64), f)
        for i, v in enumerate(keys):
            self._ids[v] = start + i
            self._names[start + i] = v
        self._next = start + n

    def remove(self, id: Hashable) -> None:
        """Remove id and its fingerprint; KeyError if it is not present."""
        c = self._internal(id)
        if c is None or not self._core.remove(c):
            raise KeyError(id)
        if self._ids is not None:
            del self._ids[self._names.pop(c)]

    def compact(self) -> None:
        """Fold pending additions and removals into one sorted segment (queries
        are fastest after this; pairs() and save() do it themselves)."""
        self._core.compact()

    # ------------------------------------------------------------ search

    def query(self, fp: int) -> List[Tuple[Hashable, int]]:
        """[(id, distance)] of every stored fingerprint within k of fp, by
        distance, then id (for object ids: the order they were added; int ids
        present when the first object id arrived come first, by value)."""
        res = self._core.query(fp)  # checks fp: TypeError / ValueError naming it
        if self._ids is None:
            return cast(List[Tuple[Hashable, int]], res)
        names = self._names
        return [(names[c], d) for c, d in res]

    def near_dup(self, fp: int) -> bool:
        """True if some stored fingerprint is within k of fp."""
        return bool(self._core.query(fp))

    def query_many(self, fps: Any,
                   threads: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Search many fingerprints at once (without the GIL).

        Returns (offsets, ids, distances), a CSR layout: the results of
        fps[i] are ids[offsets[i]:offsets[i+1]] with their distances, in the
        order of :meth:`query`.  ids is uint64 while every id is an int,
        otherwise an object array; distances is uint8, offsets int64.

        A large batch is searched by several threads, each over a slice of
        fps: by default one per 4,096 queries, up to the CPUs this process
        may use; ``threads=1`` keeps the search on the calling thread, and
        ``threads=n`` asks for n.  The results do not depend on it.
        """
        offsets, ids, dists = self._core.query_many(_fp_array(fps), threads)
        if self._ids is None:
            return offsets, ids, dists
        out = np.empty(len(ids), dtype=object)
        names = self._names
        for i, c in enumerate(ids.tolist()):
            out[i] = names[c]
        return offsets, out, dists

    def pairs(self) -> Iterator[Tuple[Hashable, Hashable, int]]:
        """Every pair of stored entries within k of each other, once:
        (id_a, id_b, distance) with id_a < id_b for int ids (for object ids:
        id_a added before id_b), in the order of (id_a, id_b)."""
        a, b, d = self._core.pairs()
        if self._ids is None:
            return iter(zip(a.tolist(), b.tolist(), d.tolist()))
        names = self._names
        return ((names[x], names[y], z) for x, y, z in zip(a.tolist(), b.tolist(), d.tolist()))

    # ------------------------------------------------------------ files

    def _payload(self) -> Tuple[int, List[bytes]]:
        fps, ids = self._core.items()
        if self._ids is None:
            return IDS_UINT64, [fps.astype("<u8").tobytes(), ids.astype("<u8").tobytes()]
        # Object ids: entries in the order of their internal numbers (the
        # order they were added), which loading gives back.
        order = np.argsort(ids, kind="stable")
        fps, ids = fps[order], ids[order]
        parts = [fps.astype("<u8").tobytes()]
        parts += _ids.pack_ids([self._names[c] for c in ids.tolist()])
        return IDS_KEYS, parts

    def _header(self, layout: int, payload_size: int) -> _files.Header:
        return _files.Header(
            kind=_files.KIND_INDEX, hash_algorithm=0, layout=layout, flags=0, seed=0,
            num_bits=64, num_hashes=self._k, capacity=0, error_rate=0.0,
            insert_count=len(self), payload_size=payload_size)

    def to_bytes(self) -> bytes:
        """The index in the file format of :meth:`save` (docs/simhash-index.md)."""
        layout, parts = self._payload()
        payload = b"".join(parts)
        header = _files.sealed(self._header(layout, len(payload)), payload)
        return bytes(header.pack()) + payload

    def save(self, path: PathLike) -> None:
        """Write the index to path atomically (the old file or the new one
        survives a crash, never a mix).  TypeError if an id is not an int,
        str or bytes (checked before anything is written)."""
        data = self.to_bytes()

        def write(f: BinaryIO) -> None:
            f.write(data)
        _files.atomic_write(path, write)

    @classmethod
    def load(cls, path: PathLike) -> "SimhashIndex":
        """Read an index written by :meth:`save`.  CorruptFileError for a
        truncated, damaged, empty or foreign file.  ``path`` may also be a
        binary file object."""
        header, payload = _files.read_file(path, _check_kind)
        return cls._from_payload(header, payload, path)

    def __reduce__(self) -> Tuple[Any, ...]:
        # Pickles carry the checksummed file format (TypeError for ids that
        # are not int, str or bytes, as save() raises).
        return (_files.restore, (type(self), self.to_bytes()))

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview]) -> "SimhashIndex":
        """The index that :meth:`to_bytes` wrote; CorruptFileError if damaged."""
        header, payload = _files.split_bytes(data, _check_kind)
        return cls._from_payload(header, payload, None)

    @classmethod
    def _from_payload(cls, header: _files.Header, payload: memoryview,
                      path: Optional[PathLike]) -> "SimhashIndex":
        def bad(reason: str) -> CorruptFileError:
            return CorruptFileError(path, reason)
        if _files.checksum(header, payload) != header.checksum:
            raise bad("checksum mismatch (the file was damaged)")
        if header.flags:
            raise bad(f"unknown flags {header.flags:#x}")
        if header.hash_algorithm != 0 or header.seed != 0 or header.capacity != 0 \
                or not _files.zero_float(header.error_rate):
            raise bad("fields unused by an index are not zero")
        if header.num_bits != 64:
            raise bad(f"fingerprints of {header.num_bits} bits, expected 64")
        if not 0 <= header.num_hashes <= MAX_HAMMING_K:
            raise bad(f"k = {header.num_hashes} outside [0, {MAX_HAMMING_K}]")
        n = header.insert_count
        if header.layout not in (IDS_UINT64, IDS_KEYS):
            raise bad(f"unknown id layout {header.layout}")
        if n * 8 > len(payload):
            raise bad(f"{n} entries do not fit in a payload of {len(payload)} bytes")
        fps = np.frombuffer(payload[:n * 8], dtype="<u8").astype(np.uint64)
        self = cls(header.num_hashes)
        if header.layout == IDS_UINT64:
            if n > 1 and (fps[1:] < fps[:-1]).any():
                raise bad("fingerprints are not in ascending order")
            if len(payload) != 16 * n:
                raise bad(f"payload of {len(payload)} bytes for {n} entries with uint64 ids")
            ids = np.frombuffer(payload[n * 8:], dtype="<u8").astype(np.uint64)
            if n > 1:
                same = fps[1:] == fps[:-1]
                if (same & (ids[1:] <= ids[:-1])).any():
                    raise bad("entries are not in (fingerprint, id) order")
            try:
                self._core.add_many(ids, fps)
            except ValueError:
                raise bad("an id appears twice") from None
            return self
        keys, pos = _ids.unpack_ids(payload, n * 8, n, bad)
        end = len(payload)
        if pos != end:
            raise bad(f"{end - pos} bytes after the last id record")
        ids_map = {key: i for i, key in enumerate(keys)}
        if len(ids_map) != n:
            raise bad("an id appears twice")
        self._core.add_many(np.arange(n, dtype=np.uint64), fps)
        self._ids = ids_map
        self._names = dict(enumerate(keys))
        self._next = n
        return self
