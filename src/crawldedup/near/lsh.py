"""Locality-sensitive hashing of MinHash signatures: bands and rows.

A signature of ``num_perm`` values is cut into ``b`` bands of ``r`` rows; two
documents become candidates when all r values of at least one band agree.
With Jaccard similarity s, that happens with probability
``1 - (1 - s**r)**b``: an S-curve whose steepest part sits near
``(1/b)**(1/r)``.  :func:`optimal_bands` chooses b and r for a threshold the
way datasketch's ``MinHashLSH`` does: the pair (b * r <= num_perm) that
minimizes the weighted sum of the false-positive probability (the area under
the curve below the threshold) and the false-negative probability (the area
above the curve over the threshold).

>>> from crawldedup.near.lsh import optimal_bands, candidate_probability
>>> optimal_bands(0.8, 128)
(9, 13)
>>> round(candidate_probability(0.9, 9, 13), 3)
0.929
"""

from __future__ import annotations

import functools
import struct
import sys
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
)

import numpy as np

from crawldedup import _kernel
from crawldedup.errors import CorruptFileError
from crawldedup.formats import files as _files
from crawldedup.formats import ids as _ids
from crawldedup.formats.files import PathLike

__all__ = ["optimal_bands", "optimal_bands_as_datasketch", "candidate_probability",
           "MinHashIndex"]


def candidate_probability(similarity: float, bands: int, rows: int) -> float:
    """The probability that two documents of this Jaccard similarity share
    at least one band: ``1 - (1 - s**rows)**bands``."""
    return float(1.0 - (1.0 - float(similarity) ** rows) ** bands)


def _check(threshold: object, num_perm: object, weights: object) -> Tuple[float, int,
                                                                          Tuple[float, float]]:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise TypeError(f"threshold must be a number, not {type(threshold).__name__}")
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0.0, 1.0], got {threshold}")
    if isinstance(num_perm, bool) or not isinstance(num_perm, int):
        raise TypeError(f"num_perm must be an int, not {type(num_perm).__name__}")
    if num_perm < 2:
        raise ValueError(f"num_perm must be at least 2, got {num_perm}")
    try:
        fp_weight, fn_weight = (float(w) for w in weights)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise TypeError("weights must be a pair of numbers (false positive, false negative)"
                        ) from None
    if not (0.0 <= fp_weight <= 1.0 and 0.0 <= fn_weight <= 1.0):
        raise ValueError(f"weights must be in [0.0, 1.0], got {weights}")
    if fp_weight + fn_weight != 1.0:
        raise ValueError(f"weights must sum to 1.0, got {weights}")
    return float(threshold), num_perm, (fp_weight, fn_weight)


def _pairs(num_perm: int) -> Tuple[np.ndarray, np.ndarray]:
    """Every (b, r) with b * r <= num_perm, b then r ascending."""
    bs, rs = [], []
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            bs.append(b)
            rs.append(r)
    return np.array(bs, dtype=np.float64), np.array(rs, dtype=np.float64)


@functools.lru_cache(maxsize=256)
def _errors_gauss(threshold: float, num_perm: int) -> Tuple[np.ndarray, np.ndarray,
                                                            np.ndarray, np.ndarray]:
    """(b, r, false-positive area, false-negative area) of every pair.  The
    integrands are polynomials of degree b * r <= num_perm, so Gauss-Legendre
    with num_perm // 2 + 1 nodes integrates them exactly (up to rounding)."""
    b, r = _pairs(num_perm)
    nodes, w = np.polynomial.legendre.leggauss(min(num_perm // 2 + 1, 1024))
    fp = np.empty_like(b)
    fn = np.empty_like(b)
    # [0, t] and [t, 1] mapped from [-1, 1]
    lo = (nodes + 1.0) * (threshold / 2.0)
    hi = threshold + (nodes + 1.0) * ((1.0 - threshold) / 2.0)
    for start in range(0, len(b), 4096):
        sl = slice(start, start + 4096)
        br, rr = b[sl, None], r[sl, None]
        fp[sl] = (1.0 - (1.0 - lo[None, :] ** rr) ** br) @ w * (threshold / 2.0)
        fn[sl] = ((1.0 - hi[None, :] ** rr) ** br) @ w * ((1.0 - threshold) / 2.0)
    return b, r, fp, fn


def optimal_bands(threshold: float, num_perm: int,
                  weights: Tuple[float, float] = (0.5, 0.5)) -> Tuple[int, int]:
    """The (bands, rows) for a Jaccard threshold, as datasketch chooses them:
    b * r <= num_perm minimizing ``weights[0] * false positives + weights[1] *
    false negatives`` (the first such pair, b then r ascending).  The areas
    are integrated exactly (Gauss-Legendre: the integrands are polynomials),
    where datasketch integrates numerically with scipy's ``quad``: the tests
    hold the two to the same choice whenever both weights are positive.  With
    a weight of 0 the best pairs differ by less than ``quad``'s error, which
    then decides datasketch's choice; :func:`optimal_bands_as_datasketch`
    repeats that computation.
    """
    t, n, (fp_weight, fn_weight) = _check(threshold, num_perm, weights)
    b, r, fp, fn = _errors_gauss(t, n)
    i = int(np.argmin(fp * fp_weight + fn * fn_weight))
    return int(b[i]), int(r[i])


@functools.lru_cache(maxsize=64)
def _bands_quad(threshold: float, num_perm: int, fp_weight: float,
                fn_weight: float) -> Tuple[int, int]:
    from scipy.integrate import quad  # type: ignore[import-untyped]  # noqa: PLC0415
    best, chosen = float("inf"), (0, 0)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = quad(lambda s, b=b, r=r: 1 - (1 - s ** float(r)) ** float(b), 0.0,
                      threshold)[0]
            fn = quad(lambda s, b=b, r=r: 1 - (1 - (1 - s ** float(r)) ** float(b)),
                      threshold, 1.0)[0]
            error = fp * fp_weight + fn * fn_weight
            if error < best:
                best, chosen = error, (b, r)
    return chosen


def optimal_bands_as_datasketch(threshold: float, num_perm: int,
                                weights: Tuple[float, float] = (0.5, 0.5)) -> Tuple[int, int]:
    """:func:`optimal_bands` computed as datasketch computes it, pair by pair
    with scipy's ``quad`` (when scipy is installed; otherwise
    :func:`optimal_bands`), so that the choice is datasketch's even where
    the integration's error decides it.  ``crawldedup.compat.datasketch``
    uses it."""
    t, n, (fp_weight, fn_weight) = _check(threshold, num_perm, weights)
    try:
        import scipy.integrate  # type: ignore[import-untyped]  # noqa: F401, PLC0415
    except ImportError:
        return optimal_bands(t, n, (fp_weight, fn_weight))
    return _bands_quad(t, n, fp_weight, fn_weight)


# The parameters at the start of an index file's payload: num_perm, bands,
# rows, the threshold, the two weights, and the length of the recipe's
# UTF-8, which follows them.
_PARAMS = struct.Struct("<IIIdddI")
_MAX_RECIPE = 1 << 16


def _check_kind(header: _files.Header, path: Optional[PathLike]) -> None:
    _files.check_kind(header, path, _files.KIND_MINHASH)


def _check_bands(bands: object, rows: object, num_perm: int) -> Tuple[int, int]:
    for name, value in (("bands", bands), ("rows", rows)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    assert isinstance(bands, int) and isinstance(rows, int)
    if bands * rows > num_perm:
        raise ValueError(f"bands * rows must be at most num_perm ({num_perm}), got "
                         f"{bands} * {rows} = {bands * rows}")
    return bands, rows


def lsh_parameters(threshold: object, num_perm: object, bands: object, rows: object,
                   weights: object) -> Tuple[float, int, Tuple[float, float], int, int]:
    """(threshold, num_perm, weights, bands, rows), checked: the bands and
    rows given together, or chosen for the threshold (:func:`optimal_bands`).
    MinHashIndex, the Redis index and the Spark job take their parameters so."""
    t, n, w = _check(threshold, num_perm, weights)
    if (bands is None) != (rows is None):
        raise ValueError("give both bands and rows, or neither (to choose them from "
                         "the threshold)")
    b, r = optimal_bands(t, n, w) if bands is None else _check_bands(bands, rows, n)
    return t, n, w, b, r


def check_signatures(signatures: Any, num_perm: int, name: str) -> np.ndarray:
    """signatures (one, or an (n, num_perm) array of values in [0, 2**32)) as
    a contiguous (n, num_perm) uint32 array; TypeError or ValueError naming
    them otherwise."""
    sigs = np.asarray(signatures)
    if sigs.ndim == 1:
        sigs = sigs[None, :]
    if sigs.ndim != 2 or sigs.shape[1] != num_perm:
        raise ValueError(f"{name} must be signatures of {num_perm} values, got "
                         f"shape {np.shape(signatures)}")
    if sigs.dtype != np.uint32:
        if sigs.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers, not {sigs.dtype}")
        if sigs.size and (sigs.min() < 0 or sigs.max() > 0xFFFFFFFF):
            raise ValueError(f"{name} must hold values in [0, 2**32)")
    return np.ascontiguousarray(sigs, dtype=np.uint32)


def min_agree(min_jaccard: Optional[float], num_perm: int) -> int:
    """The fewest equal values of a candidate kept by ``min_jaccard`` (None:
    every candidate)."""
    if min_jaccard is None:
        return 0
    if isinstance(min_jaccard, bool) or not isinstance(min_jaccard, (int, float)):
        raise TypeError(f"min_jaccard must be a number, not {type(min_jaccard).__name__}")
    if not 0.0 <= min_jaccard <= 1.0:
        raise ValueError(f"min_jaccard must be in [0.0, 1.0], got {min_jaccard}")
    return int(np.ceil(min_jaccard * num_perm - 1e-9))


class MinHashIndex:
    """Near duplicates among MinHash signatures by LSH banding.

    ``MinHashIndex(threshold=0.8, num_perm=128)`` chooses the bands and rows
    for the threshold as datasketch does (:func:`optimal_bands`, with
    ``weights`` for false positives and false negatives);
    ``MinHashIndex(num_perm=128, bands=16, rows=8)`` takes them as given.
    Two signatures are candidates when all values of one band are equal
    (exactly: the band's 64-bit key only finds them).  ``min_jaccard`` in
    :meth:`query`, :meth:`query_many` and :meth:`pairs` keeps only the
    candidates whose estimated Jaccard similarity reaches it.

    Ids may be any hashable (int, str and bytes ids can be saved).  Each id
    holds one signature; the index keeps the signatures (4 bytes a value)
    to verify bands and estimate similarities.  ``recipe`` is free text
    saved with the index, for saying how its signatures were made.

    >>> from crawldedup.near.minhash import minhash_many
    >>> from crawldedup.near.lsh import MinHashIndex
    >>> docs = ["the cat sat on the mat with another cat nearby",
    ...         "the cat sat on the mat with another cat close by",
    ...         "an entirely different sentence about dogs"]
    >>> sigs = minhash_many(docs, shingle=2)
    >>> index = MinHashIndex(threshold=0.5)
    >>> index.add_many(["a", "b", "c"], sigs)
    >>> [(a, b) for a, b, _ in index.pairs()]
    [('a', 'b')]
    >>> [id for id, _ in index.query(sigs[1])]
    ['a', 'b']
    """

    def __init__(self, threshold: float = 0.8, num_perm: int = 128, *,
                 bands: Optional[int] = None, rows: Optional[int] = None,
                 weights: Tuple[float, float] = (0.5, 0.5), recipe: str = "") -> None:
        t, n, w, self._bands, self._rows = lsh_parameters(threshold, num_perm, bands, rows,
                                                          weights)
        if not isinstance(recipe, str):
            raise TypeError(f"recipe must be a str, not {type(recipe).__name__}")
        if len(recipe.encode("utf-8")) > _MAX_RECIPE:
            raise ValueError(f"recipe must be at most {_MAX_RECIPE} bytes of UTF-8")
        self._recipe = recipe
        self._threshold = t
        self._num_perm = n
        self._weights = w
        self._table = _kernel.BandTable(self._bands, self._rows, n)
        self._sigs = np.empty((0, n), dtype=np.uint32)
        self._alive = np.empty(0, dtype=np.uint8)
        # Row r holds the signature _sigs[r] of id _names[r] (an object
        # array, so that query results are one numpy take); _where maps the
        # ids present to their rows; rows of removed ids have _alive 0.
        self._n = 0
        self._names = np.empty(0, dtype=object)
        self._where: Dict[Hashable, int] = {}

    # ------------------------------------------------------------ basics

    @property
    def threshold(self) -> float:
        return self._threshold

    @property
    def recipe(self) -> str:
        """How the signatures were made, in words (saved with the index):
        ``crawldedup near-dups`` writes its shingling and num_perm there and
        refuses to add signatures made another way."""
        return self._recipe

    @property
    def num_perm(self) -> int:
        return self._num_perm

    @property
    def bands(self) -> int:
        return self._bands

    @property
    def rows(self) -> int:
        return self._rows

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, id: object) -> bool:
        try:
            return id in self._where
        except TypeError:
            return False

    def __repr__(self) -> str:
        recipe = f", recipe={self._recipe!r}" if self._recipe else ""
        return (f"MinHashIndex(threshold={self._threshold}, num_perm={self._num_perm}, "
                f"bands={self._bands}, rows={self._rows}{recipe}, len={len(self)})")

    @property
    def nbytes(self) -> int:
        """Bytes of memory of the signatures, band tables and id maps (the
        ids' own objects aside)."""
        n = self._n
        return int(self._sigs[:n].nbytes + n + self._table.nbytes + self._names[:n].nbytes
                   + sys.getsizeof(self._where))

    def _reserve(self, extra: int) -> None:
        n = self._n
        if n + extra <= len(self._alive):
            return
        cap = max(n + extra, 2 * len(self._alive), 1024)
        sigs = np.empty((cap, self._num_perm), dtype=np.uint32)
        sigs[:n] = self._sigs[:n]
        alive = np.zeros(cap, dtype=np.uint8)
        alive[:n] = self._alive[:n]
        names = np.empty(cap, dtype=object)
        names[:n] = self._names[:n]
        self._sigs, self._alive, self._names = sigs, alive, names

    def add(self, id: Hashable, signature: Any) -> None:
        """Store signature under id; ValueError if id is present."""
        self.add_many([id], check_signatures(signature, self._num_perm, "signature"))

    def add_many(self, ids: Iterable[Hashable], signatures: Any) -> None:
        """Store signatures[i] (an (n, num_perm) array) under ids[i], all or
        nothing: ValueError if an id repeats or is present."""
        if isinstance(ids, (str, bytes)):
            raise TypeError("ids must be an iterable of ids, not a single str or bytes")
        keys = (list(ids) if type(ids) is range else
                [int(v) if isinstance(v, np.integer) else v
                 for v in (ids.tolist() if isinstance(ids, np.ndarray) else list(ids))])
        sigs = check_signatures(signatures, self._num_perm, "signatures")
        if len(keys) != len(sigs):
            raise ValueError(f"ids and signatures differ in length: {len(keys)} and "
                             f"{len(sigs)}")
        fresh = dict.fromkeys(keys)
        if len(fresh) != len(keys) or not self._where.keys().isdisjoint(fresh):
            seen: Dict[Hashable, None] = {}
            for v in keys:
                if v in self._where or v in seen:
                    raise ValueError(f"id {v!r} is repeated or already in the index")
                seen[v] = None
        self._reserve(len(keys))
        first, n = self._n, len(keys)
        self._table.add_many(sigs)
        self._sigs[first:first + n] = sigs
        self._alive[first:first + n] = 1
        # (through fromiter: a tuple id stays one object)
        self._names[first:first + n] = np.fromiter(keys, dtype=object, count=n)
        self._where.update(zip(keys, range(first, first + n)))
        self._n = first + n

    def remove(self, id: Hashable) -> None:
        """Remove id and its signature; KeyError if it is not present."""
        row = self._where.pop(id)
        self._alive[row] = 0

    def compact(self) -> None:
        """Rebuild the band tables without the removed signatures (their
        rows are skipped until then, and take memory)."""
        n = self._n
        live = np.flatnonzero(self._alive[:n])
        if len(live) == n:
            return
        names = self._names[live].tolist()
        sigs = self._sigs[live]
        self._table = _kernel.BandTable(self._bands, self._rows, self._num_perm)
        self._sigs = np.empty((0, self._num_perm), dtype=np.uint32)
        self._alive = np.empty(0, dtype=np.uint8)
        self._names = np.empty(0, dtype=object)
        self._n, self._where = 0, {}
        self.add_many(names, sigs)

    # ------------------------------------------------------------ search

    def query(self, signature: Any,
              min_jaccard: Optional[float] = None) -> List[Tuple[Hashable, float]]:
        """[(id, estimated Jaccard)] of the candidates of signature, in the
        order they were added."""
        offsets, ids, jaccards = self.query_many(
            check_signatures(signature, self._num_perm, "signature"), min_jaccard)
        return list(zip(ids.tolist(), jaccards.tolist()))

    def query_many(self, signatures: Any, min_jaccard: Optional[float] = None
                   ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The candidates of many signatures at once (without the GIL).

        Returns (offsets, ids, jaccards), a CSR layout: the candidates of
        signatures[i] are ids[offsets[i]:offsets[i + 1]] (an object array,
        in the order they were added) with their estimated Jaccard
        similarities (float64).
        """
        sigs = check_signatures(signatures, self._num_perm, "signatures")
        floor = min_agree(min_jaccard, self._num_perm)
        n = self._n
        offsets, rows, agree = self._table.query_many(sigs, self._sigs[:n], self._alive[:n])
        if floor:
            keep = agree >= floor
            owner = np.repeat(np.arange(len(sigs)), np.diff(offsets))
            counts = np.bincount(owner[keep], minlength=len(sigs))
            offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            rows, agree = rows[keep], agree[keep]
        return offsets, self._names[rows], agree / self._num_perm

    def pairs(self, min_jaccard: Optional[float] = None
              ) -> Iterator[Tuple[Hashable, Hashable, float]]:
        """Every candidate pair once: (id_a, id_b, estimated Jaccard), id_a
        added before id_b, in the order of (id_a, id_b)."""
        floor = min_agree(min_jaccard, self._num_perm)
        n = self._n
        a, b = self._table.pairs(self._sigs[:n], self._alive[:n])
        agree = _kernel.lsh_agree(self._sigs[a], self._sigs[b]) if len(a) else \
            np.zeros(0, dtype=np.uint32)
        if floor:
            keep = agree >= floor
            a, b, agree = a[keep], b[keep], agree[keep]
        k = self._num_perm
        return ((x, y, c / k) for x, y, c in zip(self._names[a].tolist(),
                                                  self._names[b].tolist(), agree.tolist()))

    # ------------------------------------------------------------ files

    def to_bytes(self) -> bytes:
        """The index in the file format of :meth:`save` (docs/minhash.md):
        the shared header, then the parameters, the signatures of the ids
        present (uint32 little-endian, in the order they were added) and
        one record per id.  TypeError if an id is not an int, str or bytes."""
        live = np.flatnonzero(self._alive[:self._n])
        keys = self._names[live].tolist()
        recipe = self._recipe.encode("utf-8")
        parts = [_PARAMS.pack(self._num_perm, self._bands, self._rows, self._threshold,
                              self._weights[0], self._weights[1], len(recipe)), recipe,
                 self._sigs[live].astype("<u4").tobytes()]
        parts += _ids.pack_ids(keys)
        payload = b"".join(parts)
        header = _files.sealed(_files.Header(
            kind=_files.KIND_MINHASH, hash_algorithm=0, layout=_files.LAYOUT_NONE, flags=0,
            seed=0, num_bits=32, num_hashes=self._num_perm, capacity=0, error_rate=0.0,
            insert_count=len(keys), payload_size=len(payload)), payload)
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
    def load(cls, path: PathLike) -> "MinHashIndex":
        """Read an index written by :meth:`save`.  CorruptFileError for a
        truncated, damaged, empty or foreign file.  ``path`` may also be a
        binary file object."""
        header, payload = _files.read_file(path, _check_kind)
        return cls._from_payload(header, payload, path)

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview]) -> "MinHashIndex":
        """The index that :meth:`to_bytes` wrote; CorruptFileError if damaged."""
        header, payload = _files.split_bytes(data, _check_kind)
        return cls._from_payload(header, payload, None)

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_files.restore, (type(self), self.to_bytes()))

    @classmethod
    def _from_payload(cls, header: _files.Header, payload: memoryview,
                      path: Optional[PathLike]) -> "MinHashIndex":
        def bad(reason: str) -> CorruptFileError:
            return CorruptFileError(path, reason)
        if _files.checksum(header, payload) != header.checksum:
            raise bad("checksum mismatch (the file was damaged)")
        if header.flags:
            raise bad(f"unknown flags {header.flags:#x}")
        if header.hash_algorithm != 0 or header.seed != 0 or header.capacity != 0 \
                or header.layout != _files.LAYOUT_NONE or not _files.zero_float(header.error_rate):
            raise bad("fields unused by a MinHash index are not zero")
        if header.num_bits != 32:
            raise bad(f"signature values of {header.num_bits} bits, expected 32")
        if len(payload) < _PARAMS.size:
            raise bad("the payload ends before the parameters")
        k, b, r, threshold, fp_w, fn_w, recipe_size = _PARAMS.unpack_from(payload, 0)
        if k != header.num_hashes:
            raise bad("the parameters do not match the header")
        start = _PARAMS.size + recipe_size
        if recipe_size > _MAX_RECIPE or start > len(payload):
            raise bad(f"a recipe of {recipe_size} bytes does not fit")
        try:
            recipe = bytes(payload[_PARAMS.size:start]).decode("utf-8")
        except UnicodeDecodeError:
            raise bad("the recipe is not valid UTF-8") from None
        try:
            self = cls(threshold, k, bands=b, rows=r, weights=(fp_w, fn_w), recipe=recipe)
        except (TypeError, ValueError) as exc:
            raise bad(f"bad parameters: {exc}") from None
        n = header.insert_count
        if n * k * 4 > len(payload) - start:
            raise bad(f"{n} signatures do not fit in a payload of {len(payload)} bytes")
        sigs = np.frombuffer(payload[start:start + n * k * 4], dtype="<u4").astype(
            np.uint32).reshape(n, k)
        keys, pos = _ids.unpack_ids(payload, start + n * k * 4, n, bad)
        if pos != len(payload):
            raise bad(f"{len(payload) - pos} bytes after the last id record")
        if len(set(keys)) != n:
            raise bad("an id appears twice")
        self.add_many(keys, sigs)
        return self
