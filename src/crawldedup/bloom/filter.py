"""Bloom filters: "have I seen this URL?" in a few bits per key.

A :class:`BloomFilter` never forgets a key it was given (no false negatives)
and answers "seen" for a key it was not given with probability about
``error_rate`` while it holds at most ``capacity`` keys.  Its hash is
MurmurHash3, stable across processes, machines and versions, so filters can be
saved, loaded, merged and shared.
"""

from __future__ import annotations

import math
import os
from typing import Any, BinaryIO, Dict, Iterable, Optional, Tuple, Type, TypeVar, Union

from crawldedup import _checks
from crawldedup._defaults import ERROR_RATE
from crawldedup._kernel import MAX_NUM_HASHES, MAX_SEED, BloomBits, nbytes_for
from crawldedup._types import Key, PathLike
from crawldedup.bloom.layouts import check_layout, layout_id, layout_of
from crawldedup.bloom.sizing import MAX_NUM_BITS, check_memory, max_insert_count
from crawldedup.bloom.sizing import format_size as format_size
from crawldedup.bloom.sizing import optimal_parameters as optimal_parameters
from crawldedup.errors import CorruptFileError, IncompatibleFilterError
from crawldedup.formats import files as _files
from crawldedup.formats import mapped as _mapped


class BloomFilter(BloomBits, _mapped.MappedHandle):
    """A Bloom filter for ``capacity`` keys at false-positive rate ``error_rate``.

    Keys are ``str`` (hashed as UTF-8) or bytes-like.  ``add`` returns True
    when the key was new (like Redis ``BF.ADD``); ``key in bf`` tests.  Batch
    calls take any iterable of keys and return numpy bool arrays; they hash and
    probe without the GIL.

    >>> bf = BloomFilter(1000, 0.01)
    >>> bf.add("https://example.com/a")
    True
    >>> bf.add("https://example.com/a")
    False
    >>> "https://example.com/a" in bf, "https://example.com/b" in bf
    (True, False)
    >>> bf.add_many(["https://example.com/a", "https://example.com/c"]).tolist()
    [False, True]

    Adding from several threads at once is safe, and so is adding from
    several processes to one file (:meth:`open`): no bit is lost, and of
    those adding one key at the same moment exactly one is told it is new.
    """

    __slots__ = ("_capacity", "_error_rate", "_mapping")
    _mapping: Optional[_mapped.MappedFile]

    def __init__(self, capacity: int, error_rate: float = ERROR_RATE, *, seed: int = 0,
                 layout: str = "standard") -> None:
        capacity = _checks.check_capacity(capacity)
        error_rate = _checks.check_error_rate(error_rate)
        seed = _checks.check_seed(seed)
        num_bits, num_hashes = optimal_parameters(capacity, error_rate, layout)
        check_memory(capacity, error_rate, num_bits)
        self._capacity = capacity
        self._error_rate = error_rate
        self._init_bits(num_bits, num_hashes, seed, None, layout)

    # ----------------------------------------------------------- parameters

    @property
    def capacity(self) -> int:
        """The number of keys the filter was sized for."""
        return self._capacity

    @property
    def error_rate(self) -> float:
        """The false-positive rate the filter was sized for, at capacity."""
        return self._error_rate

    @property
    def nbytes(self) -> int:
        """Bytes of memory taken by the bits."""
        return nbytes_for(self.num_bits)

    @property
    def fill_ratio(self) -> float:
        """Fraction of the bits that are set (0.5 is the optimum at capacity)."""
        return self._popcount() / self.num_bits

    def estimated_count(self) -> int:
        """Estimate of the number of distinct keys added, from the set bits.

        ``n* = -(m / k) ln(1 - X / m)`` (Swamidass & Baldi), X the set bits.
        It counts keys in filters merged with ``|`` too, where ``insert_count``
        cannot.  A saturated filter (every bit set) returns the largest
        estimate its size allows.
        """
        m, k = self.num_bits, self.num_hashes
        x = min(self._popcount(), m - 0.5)
        return int(round(-(m / k) * math.log1p(-x / m)))

    @property
    def estimated_error_rate(self) -> float:
        """The false-positive rate now: the fill ratio to the power k."""
        return self.fill_ratio ** self.num_hashes

    def _params(self) -> Tuple[int, float, int, int, int, str]:
        return (self._capacity, self._error_rate, self.seed, self.num_bits, self.num_hashes,
                self.layout)

    def __repr__(self) -> str:
        layout = ", layout='blocked'" if self.layout == "blocked" else ""
        return (f"{type(self).__name__}(capacity={self._capacity}, "
                f"error_rate={self._error_rate!r}{layout}, num_bits={self.num_bits}, "
                f"num_hashes={self.num_hashes}, insert_count={self.insert_count})")

    # -------------------------------------------------------- set algebra

    def _require_compatible(self, other: Any, op: str) -> "BloomFilter":
        if not isinstance(other, BloomFilter):
            raise TypeError(f"{op} needs a BloomFilter, not {type(other).__name__}")
        if other._params() != self._params():
            names = ("capacity", "error_rate", "seed", "num_bits", "num_hashes", "layout")
            diff = ", ".join(f"{name} {a!r} != {b!r}" for name, a, b in
                             zip(names, self._params(), other._params()) if a != b)
            raise IncompatibleFilterError(f"{op} needs filters with equal parameters: {diff}")
        return other

    def copy(self) -> "BloomFilter":
        """An independent filter with the same parameters and bits."""
        clone = type(self)._blank(self._params(), self.insert_count)
        clone._bits_view()[:] = self._bits_view()
        return clone

    def clear(self) -> None:
        """Forget every key."""
        self._clear()

    def update(self, *others: Union["BloomFilter", Iterable[Key]]) -> None:
        """Add every key of each argument: a BloomFilter (merged bit by bit,
        it must have equal parameters) or an iterable of keys."""
        for other in others:
            if isinstance(other, BloomFilter):
                self._require_compatible(other, "update")
                self._merge(other, union=True)
            else:
                self.add_many(other)

    def _merge(self, other: "BloomFilter", union: bool) -> None:
        if union:
            self._or_from(other)
        else:
            self._and_from(other)
        # After a merge the number of keys is only known approximately.
        self._set_insert_count(self.estimated_count())

    def __ior__(self, other: "BloomFilter") -> "BloomFilter":
        if not isinstance(other, BloomFilter):
            return NotImplemented
        self._merge(self._require_compatible(other, "|="), union=True)
        return self

    def __iand__(self, other: "BloomFilter") -> "BloomFilter":
        if not isinstance(other, BloomFilter):
            return NotImplemented
        self._merge(self._require_compatible(other, "&="), union=False)
        return self

    def __or__(self, other: "BloomFilter") -> "BloomFilter":
        if not isinstance(other, BloomFilter):
            return NotImplemented
        return self._combined(other, "|", union=True)

    def __and__(self, other: "BloomFilter") -> "BloomFilter":
        if not isinstance(other, BloomFilter):
            return NotImplemented
        return self._combined(other, "&", union=False)

    def _combined(self, other: "BloomFilter", op: str, union: bool) -> "BloomFilter":
        """A new filter: self | other, or self & other."""
        self._require_compatible(other, op)
        out = self.copy()
        out._merge(other, union=union)
        return out

    def __eq__(self, other: object) -> bool:
        """Equal parameters and equal bits.  Filters with other parameters are
        simply unequal (comparison never raises)."""
        if not isinstance(other, BloomFilter):
            return NotImplemented
        return other._params() == self._params() and self._bits_equal(other)

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]  # mutable

    # ---------------------------------------------------- serialization

    @classmethod
    def _blank(cls, params: Tuple[int, float, int, int, int, str], insert_count: int,
               buffer: Any = None) -> "BloomFilter":
        capacity, error_rate, seed, num_bits, num_hashes, layout = params
        self = cls.__new__(cls)
        self._capacity = capacity
        self._error_rate = error_rate
        self._init_bits(num_bits, num_hashes, seed, buffer, layout)
        self._set_insert_count(insert_count)
        return self

    def _header(self) -> _files.Header:
        return _files.Header(
            kind=_files.KIND_BLOOM, hash_algorithm=_files.HASH_MURMUR3_EDH,
            layout=layout_id(self.layout), flags=0, seed=self.seed,
            num_bits=self.num_bits, num_hashes=self.num_hashes, capacity=self._capacity,
            error_rate=self._error_rate, insert_count=self.insert_count,
            payload_size=nbytes_for(self.num_bits))

    def _write(self, f: BinaryIO) -> None:
        header = self._header()
        bits = self._bits_view()
        header.checksum = _files.checksum(header, bits)
        f.write(header.pack())
        f.write(bits)

    def to_bytes(self) -> bytes:
        """The filter in the file format of :meth:`save` (docs/format.md)."""
        header = self._header()
        bits = self._bits_view()
        header.checksum = _files.checksum(header, bits)
        return bytes(header.pack()) + bits.tobytes()

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview]) -> "BloomFilter":
        """The filter that :meth:`to_bytes` wrote; CorruptFileError if damaged."""
        return cls._from_data(data, None)

    @classmethod
    def _from_data(cls, data: Union[bytes, bytearray, memoryview],
                   path: Optional[PathLike]) -> "BloomFilter":
        view = memoryview(data).cast("B")
        header = _files.parse_header(view[:_files.HEADER_SIZE], len(view), path)
        self = cls._from_header(header, path)
        bits = self._bits_view()
        bits[:] = view[_files.HEADER_SIZE:]
        self._verify(header, path)
        return self

    def save(self, path: PathLike) -> None:
        """Write the filter to path atomically: a crash at any moment leaves
        the previous file or the new one, never a damaged one."""
        _files.atomic_write(path, self._write)

    @classmethod
    def load(cls, path: PathLike) -> "BloomFilter":
        """Read a filter written by :meth:`save`.

        Raises CorruptFileError (naming the file and the fault) for a
        truncated, damaged, empty or foreign file, IncompatibleFilterError for
        a file of another format version, and OSError if it cannot be read.
        """
        if _files.is_file_object(path):
            data, name = _files.read_object(path)
            return cls._from_data(data, name)
        path = _files.check_path(path)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(_files.HEADER_SIZE)
            header = _files.parse_header(head, size, path)
            self = cls._from_header(header, path)
            _files.read_exactly(f, self._bits_view(), path)
        self._verify(header, path)
        return self

    @classmethod
    def _from_header(cls, header: _files.Header, path: Optional[PathLike]) -> "BloomFilter":
        """A zeroed filter with the parameters of a parsed header, after
        checking that they are consistent."""
        return cls._blank(cls._header_params(header, path), header.insert_count)

    @staticmethod
    def _header_params(header: _files.Header,
                       path: Optional[PathLike]) -> Tuple[int, float, int, int, int, str]:
        def bad(reason: str) -> CorruptFileError:
            return CorruptFileError(path, reason)
        _files.check_kind(header, path, _files.KIND_BLOOM)
        found = layout_of(header.layout, path)
        layout = found.name
        if found.block_bits and header.num_bits % found.block_bits:
            raise bad(f"{layout} layout with {header.num_bits} bits, not whole "
                      f"{found.block_bits}-bit blocks")
        if not 1 <= header.num_hashes <= MAX_NUM_HASHES:
            raise bad(f"num_hashes {header.num_hashes} outside [1, {MAX_NUM_HASHES}]")
        if not 1 <= header.num_bits <= MAX_NUM_BITS:
            raise bad(f"num_bits {header.num_bits} outside [1, 2**62]")
        if header.payload_size != nbytes_for(header.num_bits):
            raise bad(f"payload of {header.payload_size} bytes for {header.num_bits} bits")
        if header.seed > MAX_SEED:
            raise bad(f"seed {header.seed} does not fit in 32 bits")
        if header.capacity < 1 or not 0.0 < header.error_rate < 1.0:
            raise bad(f"capacity {header.capacity} / error_rate {header.error_rate!r} out of range")
        if header.insert_count > max_insert_count(header.num_bits):
            raise bad(f"insert count {header.insert_count} out of range for {header.num_bits} "
                      f"bits (at most {max_insert_count(header.num_bits)})")
        # m and k are what the capacity, error rate and layout size: other
        # ones would look for the stored keys at other bits.
        try:
            sizing = optimal_parameters(header.capacity, header.error_rate, layout)
        except ValueError as exc:  # it names the capacity or the error rate
            raise bad(str(exc)) from None
        if (header.num_bits, header.num_hashes) != sizing:
            raise bad(f"num_bits {header.num_bits} / num_hashes {header.num_hashes} do not "
                      f"match the capacity, error rate and layout ({sizing[0]} / {sizing[1]})")
        return (header.capacity, header.error_rate, header.seed, header.num_bits,
                header.num_hashes, layout)

    def _verify(self, header: _files.Header, path: Optional[PathLike]) -> None:
        bits = self._bits_view()
        # A DIRTY file was mapped by a writer that has not closed it (or was
        # killed): its bits are good but its checksum is not up to date.
        if not header.flags & _files.FLAG_DIRTY:
            saved = header.flags
            if _files.checksum(header, bits) != header.checksum:
                raise CorruptFileError(path, "checksum mismatch (the file was damaged)")
            header.flags = saved
        self._check_padding(bits, path)

    def _check_padding(self, bits: memoryview, path: Optional[PathLike]) -> None:
        check_padding(self.num_bits, bits[-8:], path)

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_files.restore, (type(self), self.to_bytes()))

    # ------------------------------------------------------------ mapped files

    @classmethod
    def open(cls, path: PathLike, capacity: Optional[int] = None,
             error_rate: Optional[float] = None, *, mode: str = "c",
             seed: Optional[int] = None, layout: Optional[str] = None,
             verify: Optional[bool] = None) -> "BloomFilter":
        """A filter used in place in a memory-mapped state file.

        ``mode``: ``"r"`` read-only, ``"w"`` create (replacing any file),
        ``"c"`` (default) open, or create when missing.  Creating needs
        ``capacity``; the other parameters default as for ``BloomFilter``.
        When the file exists, parameters that are given must match it
        (``IncompatibleFilterError``), and those omitted are taken from it.

        Several processes may open one file and add at once; every bit is in
        the page cache as ``add`` returns, so ``kill -9`` loses nothing, and
        ``flush()`` makes the bits durable.  ``close()`` (or a ``with`` block)
        unmaps the file; the last writer to close it refreshes its checksum.
        ``verify`` checks the checksum on opening: the default does for files
        under 64 MiB, which are read whole for it; larger ones open without
        reading their bits.  A file whose writer was killed is repaired (its
        checksum recomputed) by the next process that opens it alone.

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "seen.bloom")
        >>> with BloomFilter.open(path, capacity=1000) as bf:
        ...     bf.add("https://example.com/")
        True
        >>> with BloomFilter.open(path, mode="r") as bf:
        ...     "https://example.com/" in bf, bf.insert_count
        (True, 1)
        """
        asked = cls._asked(capacity, error_rate, seed, layout)
        if verify is not None:
            verify = _checks.check_flag("verify", verify)
        return _mapped.open_state(path, mode, asked, lambda: (cls._blank_header(asked), b""),
                                  lambda mapping: cls._attach(mapping, asked, verify))

    @staticmethod
    def _asked(capacity: Optional[int], error_rate: Optional[float], seed: Optional[int],
               layout: Optional[str]) -> Dict[str, Any]:
        asked: Dict[str, Any] = {}
        if capacity is not None:
            asked["capacity"] = _checks.check_capacity(capacity)
        if error_rate is not None:
            asked["error_rate"] = _checks.check_error_rate(error_rate)
        if seed is not None:
            asked["seed"] = _checks.check_seed(seed)
        if layout is not None:
            asked["layout"] = check_layout(layout)
        return asked

    @classmethod
    def _blank_header(cls, asked: Dict[str, Any]) -> _files.Header:
        capacity = asked["capacity"]
        error_rate = asked.get("error_rate", ERROR_RATE)
        layout = asked.get("layout", "standard")
        num_bits, num_hashes = optimal_parameters(capacity, error_rate, layout)
        return _files.Header(
            kind=_files.KIND_BLOOM, hash_algorithm=_files.HASH_MURMUR3_EDH,
            layout=layout_id(layout), flags=0, seed=asked.get("seed", 0),
            num_bits=num_bits, num_hashes=num_hashes, capacity=capacity,
            error_rate=error_rate, insert_count=0, payload_size=nbytes_for(num_bits))

    @classmethod
    def _attach(cls, mapping: Any, asked: Dict[str, Any],
                verify: Optional[bool]) -> "BloomFilter":
        """The filter of an open mapping, after every check; nothing in the
        file changes here (the first add checks and marks it: see
        ``MappedFile.begin_write``), except that a file left DIRTY by a
        killed writer is sealed by a writer that has it alone."""
        path = mapping.path
        header = _files.parse_header(mapping.mem[:_files.HEADER_SIZE], mapping.size, path)
        params = cls._header_params(header, path)
        names = ("capacity", "error_rate", "seed", "num_bits", "num_hashes", "layout")
        _mapped.check_asked(path, asked, dict(zip(names, params)))
        end = _files.HEADER_SIZE + header.payload_size
        check_padding(params[3], mapping.mem[end - 8:end], path)
        self = mapped_member(cls, mapping, _files.HEADER_SIZE, _files.COUNT_AT, params)
        try:
            # Last: it may seal a file a killed writer left DIRTY, and only a
            # file accepted in every other respect may be written.
            mapping.check_on_open(verify)
        except BaseException:
            self._release()
            raise
        self._mapping = mapping
        return self

    def _release_storage(self) -> None:
        self._release()  # refused while a batch call runs in another thread


def check_padding(num_bits: int, last_word: Union[bytes, memoryview],
                  path: Optional[PathLike]) -> None:
    """Padding bits past num_bits (in the last 8-byte word of the bits) are
    never set by add(); a file with one set was not written by crawldedup."""
    tail_bits = num_bits % 64
    if tail_bits and int.from_bytes(last_word, "little") >> tail_bits:
        raise CorruptFileError(path, "padding bits past num_bits are set")


_B = TypeVar("_B", bound=BloomFilter)


def mapped_member(cls: Type[_B], mapping: _mapped.MappedFile, bits_at: int, count_at: int,
                  params: Tuple[int, float, int, int, int, str]) -> _B:
    """A filter used in place in an open mapping, its file already checked:
    its bits at ``bits_at``, its insert count the u64 at ``count_at``, adds
    marking the file (``MappedFile.begin_write``) unless it is read-only.
    ``params``: (capacity, error_rate, seed, num_bits, num_hashes, layout).
    The mapping stays the caller's (BloomFilter.open's, or a rotating
    filter's, whose generations these are)."""
    self = cls.__new__(cls)
    capacity, error_rate, seed, num_bits, num_hashes, layout = params
    try:
        self._capacity, self._error_rate = capacity, error_rate
        self._init_bits(num_bits, num_hashes, seed,
                        mapping.view(bits_at, bits_at + nbytes_for(num_bits)), layout,
                        mapping.readonly)
        self._attach_counter(mapping.view(count_at, count_at + 8))
        if not mapping.readonly:
            self._set_write_hook(mapping.begin_write)
    except BaseException:
        self._release()
        raise
    return self


__all__ = ["BloomFilter", "optimal_parameters"]
