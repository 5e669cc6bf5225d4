"""FingerprintSet: an exact, compact set of fixed-size digests in memory.

The seeds keep MD5 or SHA-1 fingerprints in a Python ``set`` of ``bytes``:
about 80 bytes per 16-byte digest, one Python object each.  A
FingerprintSet keeps them in one flat table of the compiled core: about
``digest_size / load`` bytes per digest (at most 19.2 bytes for MD5 and 24
for SHA-1 once it holds 65,536 digests), no false positives, batch calls
without the GIL, and an atomic, checksummed file.

>>> import hashlib
>>> from crawldedup import FingerprintSet
>>> seen = FingerprintSet()                        # 16-byte digests (MD5)
>>> seen.add(hashlib.md5(b"https://example.com/").digest())
True
>>> hashlib.md5(b"https://example.com/").digest() in seen
True
>>> len(seen)
1

The table grows by 19/16 when it would pass 19/20 full (by 5/3 while it is
small), so its load stays between 0.84 and 0.95; single adds move the old
table over a few slots at a time, so no single ``add`` pays for a whole
rehash (batch calls finish a growth at once).  Iteration, files and
``to_bytes`` use the canonical order of docs/fpset.md, so two sets holding the
same digests write identical files.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable, Iterator, Optional, Tuple, Union

import numpy as np

from crawldedup._kernel import FP_MAX_DIGEST_SIZE, FingerprintTable, fp_hash
from crawldedup._types import PathLike
from crawldedup.errors import CorruptFileError
from crawldedup.formats import files as _files

HASH_FPSET_FMIX = _files.HASH_FPSET_FMIX


class FingerprintSet(_files.Saved, FingerprintTable):
    """An exact set of ``digest_size``-byte digests (MD5 = 16, SHA-1 = 20).

    ``add(d) -> bool`` (True when new), ``d in s``, ``add_many`` and
    ``contains_many`` (a list of bytes or a numpy ``S<digest_size>`` array;
    numpy bool results; the first of repeats within a call counts as new),
    ``len``, iteration (over a snapshot, in canonical order), ``|``, ``|=``,
    ``update``, ``==``, ``copy``, ``clear``, ``save``/``load``,
    ``to_bytes``/``from_bytes`` and pickle.  ``nbytes`` is the table memory
    (an estimate in pure-Python mode).

    A digest of another length raises ValueError, a ``str`` or other
    non-bytes-like TypeError.  Thread-safe.  The single calls are the
    compiled core's own (a subclass, so no Python layer in between).
    """

    __slots__ = ()

    def update(self, *others: Any) -> None:
        """Add the digests of each argument (a FingerprintSet, a list of
        digests or a numpy array)."""
        for other in others:
            if isinstance(other, FingerprintSet):
                self._check_peer(other)
                other = other.to_array()
            self.add_many(other)

    def _digests(self) -> bytes:
        return FingerprintTable.to_bytes(self)

    def copy(self) -> "FingerprintSet":
        new = FingerprintSet(self.digest_size)
        FingerprintTable.load(new, self._digests())
        return new

    __copy__ = copy

    def __deepcopy__(self, memo: Any) -> "FingerprintSet":
        return self.copy()

    def __iter__(self) -> Iterator[bytes]:
        """The digests as bytes, in canonical order, from a snapshot taken
        when iteration starts."""
        data = self._digests()
        ds = self.digest_size
        return (data[i:i + ds] for i in range(0, len(data), ds))

    def to_array(self) -> np.ndarray:
        """The digests as a numpy ``S<digest_size>`` array, in canonical order."""
        return np.frombuffer(self._digests(), dtype=f"S{self.digest_size}")

    def _check_peer(self, other: "FingerprintSet") -> None:
        if other.digest_size != self.digest_size:
            raise ValueError(f"cannot combine sets of {self.digest_size}-byte and "
                             f"{other.digest_size}-byte digests")

    def __or__(self, other: object) -> "FingerprintSet":
        if not isinstance(other, FingerprintSet):
            return NotImplemented
        self._check_peer(other)
        new = self.copy()
        new.update(other)
        return new

    def __ior__(self, other: object) -> "FingerprintSet":
        if not isinstance(other, FingerprintSet):
            return NotImplemented
        self.update(other)
        return self

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FingerprintSet):
            return NotImplemented
        return (self.digest_size == other.digest_size and len(self) == len(other)
                and self._digests() == other._digests())

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"FingerprintSet(digest_size={self.digest_size}, len={len(self)})"

    # ---------------------------------------------------- serialization

    def _header(self, payload: Union[bytes, bytearray]) -> _files.Header:
        header = _files.Header(
            kind=_files.KIND_FPSET, hash_algorithm=HASH_FPSET_FMIX,
            layout=_files.LAYOUT_NONE, flags=0, seed=0, num_bits=0,
            num_hashes=0, capacity=self.digest_size, error_rate=0.0,
            insert_count=len(payload) // self.digest_size, payload_size=len(payload))
        return _files.sealed(header, payload)

    def _payload(self) -> bytes:
        return self._digests()

    def to_bytes(self) -> bytes:
        """The set in the file format of :meth:`save` (docs/fpset.md)."""
        return _files.Saved.to_bytes(self)

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview]) -> "FingerprintSet":
        """The set that :meth:`to_bytes` wrote; CorruptFileError if damaged."""
        header, payload = _files.split_bytes(data, _check_header)
        return cls._from_payload(header, payload, None)

    @classmethod
    def load(cls, path: PathLike) -> "FingerprintSet":  # type: ignore[override]
        """Read a set written by :meth:`save`.

        Raises CorruptFileError (naming the file and the fault) for a
        truncated, damaged, empty or foreign file or one holding something
        else, IncompatibleFilterError for another format version, and OSError
        when it cannot be read.
        """
        header, payload = _files.read_file(path, _check_header)
        return cls._from_payload(header, payload, path)

    @classmethod
    def _from_payload(cls, header: _files.Header, payload: memoryview,
                      path: Optional[PathLike]) -> "FingerprintSet":
        if _files.checksum(header, payload) != header.checksum:
            raise CorruptFileError(path, "checksum mismatch (the file was damaged)")
        ds = header.capacity
        if len(payload) % ds or len(payload) // ds != header.insert_count:
            raise CorruptFileError(path, f"payload of {len(payload)} bytes does not hold "
                                         f"{header.insert_count} digests of {ds} bytes")
        self = cls(ds)
        try:
            FingerprintTable.load(self, payload)
        except ValueError as exc:
            raise CorruptFileError(path, str(exc)) from None
        return self

    def __reduce__(self) -> Tuple[Any, ...]:
        # The checksummed file format, so that a damaged pickle raises
        # CorruptFileError instead of quietly losing digests.
        return (_from_pickle, (self.to_bytes(),))


def _from_pickle(data: bytes) -> FingerprintSet:
    return FingerprintSet.from_bytes(data)


def _restore(digest_size: int, data: bytes) -> FingerprintSet:
    """Pickles made before they carried the file format (no checksum)."""
    new = FingerprintSet(digest_size)
    FingerprintTable.load(new, data)
    return new


def _check_header(header: _files.Header, path: Optional[PathLike]) -> None:
    """Refuse a header that is not of a fingerprint set crawldedup wrote."""
    _files.check_kind(header, path, _files.KIND_FPSET)
    if not 1 <= header.capacity <= FP_MAX_DIGEST_SIZE:
        raise CorruptFileError(path, f"digest size {header.capacity} outside 1.."
                                     f"{FP_MAX_DIGEST_SIZE}")
    if (header.layout, header.flags, header.seed, header.num_bits, header.num_hashes) \
            != (_files.LAYOUT_NONE, 0, 0, 0, 0) or not _files.zero_float(header.error_rate):
        raise CorruptFileError(path, "header fields that fingerprint sets leave at 0 are not 0")


def url_digest(url: Union[str, bytes]) -> bytes:
    """The digest ``crawldedup urls --exact`` keeps for a URL: the MD5 of its
    UTF-8 bytes (the seeds' scheme), 16 bytes."""
    return hashlib.md5(url.encode("utf-8") if isinstance(url, str) else url).digest()


def url_digests(urls: Iterable[Union[str, bytes]]) -> np.ndarray:
    """:func:`url_digest` of each URL, as a numpy ``S16`` array."""
    md5 = hashlib.md5
    return np.array([md5(u.encode("utf-8") if isinstance(u, str) else u).digest()
                     for u in urls], dtype="S16")


__all__ = ["FingerprintSet", "fp_hash", "url_digest", "url_digests"]
