"""Scalable Bloom filters: keep the false-positive bound however many keys come.

A :class:`BloomFilter` is sized for a capacity; past it, its false-positive
rate climbs quickly.  A :class:`ScalableBloomFilter` (Almeida, Baquero,
Preguiça and Hutchison, "Scalable Bloom Filters", 2007) starts with one
filter and appends a larger one each time the newest is full.  Filter ``i``
holds ``initial_capacity * growth**i`` keys at error rate
``error_rate * (1 - tightening) * tightening**i``; the rates form a geometric
series whose sum stays below ``error_rate``, so a key that was never added is
reported present with probability below ``error_rate`` at any size.
"""

from __future__ import annotations

import struct
from typing import Any, Iterable, List, Optional, Tuple, Union

import numpy as np

from crawldedup import _checks
from crawldedup._defaults import ERROR_RATE
from crawldedup._kernel import BloomBits
from crawldedup._types import Key, PathLike
from crawldedup.bloom import members as _members
from crawldedup.bloom.filter import BloomFilter, optimal_parameters
from crawldedup.bloom.layouts import STANDARD
from crawldedup.bloom.members import add_in_windows, any_holds, key_list
from crawldedup.errors import CorruptFileError
from crawldedup.formats import files as _files

# The payload's parameter block: growth (u64), tightening (f64), number of
# filters (u64).  Each member filter follows as a u64 length and its bytes.
_PARAMS = struct.Struct("<QdQ")
# add_many looks this many keys ahead (at least) when the newest filter is
# nearly full; see there.


class ScalableBloomFilter(_files.Saved):
    """A Bloom filter that grows past any capacity and keeps its error bound.

    It starts as one :class:`BloomFilter` of ``initial_capacity`` keys.  When
    the newest filter has taken its capacity in new keys, the next new key
    opens a filter ``growth`` times larger with an error rate ``tightening``
    times smaller; the false-positive rate over all of them stays below
    ``error_rate``.  ``growth`` is an integer (2 or more), so every capacity
    is an exact integer.

    >>> sbf = ScalableBloomFilter(1000, 0.01)
    >>> sbf.add("https://example.com/a")
    True
    >>> "https://example.com/a" in sbf
    True
    >>> new = sbf.add_many(f"https://example.com/{i}" for i in range(2500))
    >>> sbf.num_filters, sbf.capacity, sbf.insert_count == 1 + int(new.sum())
    (2, 3000, True)
    >>> sbf.contains_many(["https://example.com/7", "https://example.com/x"]).tolist()
    [True, False]

    ``add`` reports True when the key is in none of the filters (above, 9 of
    the 2500 new keys were false positives, taken for keys already added);
    new keys go to the newest.  Adding from several threads at once needs a
    lock: two threads could both decide to grow.

    The bound adds up the filters' nominal error rates, which small Bloom
    filters exceed (one for 100 keys by about 8%, one for 10 keys by half,
    one for a single key several times over): keep ``initial_capacity`` in
    the hundreds or more where the bound matters.
    """

    __slots__ = ("_initial_capacity", "_error_rate", "_growth", "_tightening", "_seed",
                 "_filters")

    def __init__(self, initial_capacity: int, error_rate: float = ERROR_RATE, growth: int = 2,
                 tightening: float = 0.5, *, seed: int = 0) -> None:
        self._initial_capacity = _checks.check_initial_capacity(initial_capacity)
        self._error_rate = _checks.check_open_unit("error_rate", error_rate)
        self._growth = _checks.check_growth(growth)
        self._tightening = _checks.check_open_unit("tightening", tightening)
        self._seed = _checks.check_seed(seed)
        self._filters: List[BloomFilter] = []
        self._grow()

    # ----------------------------------------------------------- parameters

    @property
    def initial_capacity(self) -> int:
        """The capacity of the first filter."""
        return self._initial_capacity

    @property
    def error_rate(self) -> float:
        """The bound on the false-positive rate, at any number of keys."""
        return self._error_rate

    @property
    def growth(self) -> int:
        """How many times larger each new filter is than the one before."""
        return self._growth

    @property
    def tightening(self) -> float:
        """How many times smaller each new filter's error rate is."""
        return self._tightening

    @property
    def seed(self) -> int:
        """Seed of the MurmurHash3 used for keys (the same in every filter)."""
        return self._seed

    @property
    def num_filters(self) -> int:
        """How many filters there are now (at least 1)."""
        return len(self._filters)

    @property
    def filters(self) -> Tuple[BloomFilter, ...]:
        """The filters, oldest first.  Read them, do not change them: keys
        added to them directly upset the growth schedule."""
        return tuple(self._filters)

    @property
    def capacity(self) -> int:
        """The sum of the capacities of the filters there are now."""
        return sum(f.capacity for f in self._filters)

    @property
    def nbytes(self) -> int:
        """Bytes of memory taken by the bits of all the filters."""
        return sum(f.nbytes for f in self._filters)

    @property
    def fill_ratio(self) -> float:
        """Fraction of the bits of the newest filter that are set."""
        return self._filters[-1].fill_ratio

    @property
    def insert_count(self) -> int:
        """Number of adds that reported a new key."""
        return sum(f.insert_count for f in self._filters)

    def estimated_count(self) -> int:
        """Estimate of the number of distinct keys added: the sum of the
        filters' estimates (see :meth:`BloomFilter.estimated_count`)."""
        return sum(f.estimated_count() for f in self._filters)

    @property
    def estimated_error_rate(self) -> float:
        """The false-positive rate now: the chance that at least one filter
        reports a key it was not given, ``1 - prod(1 - p_i)``."""
        miss = 1.0
        for f in self._filters:
            miss *= 1.0 - f.estimated_error_rate
        return 1.0 - miss

    def _params(self) -> Tuple[int, float, int, float, int]:
        return (self._initial_capacity, self._error_rate, self._growth, self._tightening,
                self._seed)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(initial_capacity={self._initial_capacity}, "
                f"error_rate={self._error_rate!r}, growth={self._growth}, "
                f"tightening={self._tightening!r}, num_filters={len(self._filters)}, "
                f"capacity={self.capacity}, insert_count={self.insert_count})")

    # -------------------------------------------------------------- growth

    def _next_member(self) -> Tuple[int, float]:
        """(capacity, error_rate) of the filter that comes next.

        The error rate is computed by one multiplication per filter (never
        ``pow``), so that every platform finds the same bits; loading checks
        the members against exactly this schedule."""
        if not self._filters:
            return self._initial_capacity, self._error_rate * (1.0 - self._tightening)
        last = self._filters[-1]
        return last.capacity * self._growth, last.error_rate * self._tightening

    def _grow(self) -> BloomFilter:
        index = len(self._filters)
        capacity, error_rate = self._next_member()
        why = ("" if index == 0 else
               "; a larger initial_capacity or growth needs fewer filters, a tightening "
               "closer to 1 shrinks the error rates more slowly")
        try:
            optimal_parameters(capacity, error_rate)  # the sizing BloomFilter will use
        except ValueError as exc:
            formula = "error_rate * (1 - tightening)" + (
                f" * tightening**{index}" if index else "")
            raise ValueError(
                f"cannot add filter {index} (capacity {capacity}, error rate "
                f"{formula} = {error_rate:.3g}): {exc}{why}") from None
        member = BloomFilter(capacity, error_rate, seed=self._seed)
        self._filters.append(member)
        return member

    # ---------------------------------------------------------------- keys

    def add(self, key: Key) -> bool:
        """Add key; True when it was in none of the filters."""
        filters = self._filters
        for f in filters[:-1]:
            if key in f:
                return False
        newest = filters[-1]
        if newest.insert_count >= newest.capacity:
            if key in newest:
                return False
            newest = self._grow()
        return newest.add(key)

    def __contains__(self, key: object) -> bool:
        # Newest first: the largest filter holds the most keys.
        return any(key in f for f in reversed(self._filters))

    def add_many(self, keys: Iterable[Key]) -> np.ndarray:
        """Add every key in order; a numpy bool array, True where the key was
        new.  The answers, and the moments new filters open, are exactly those
        of calling :meth:`add` for each key in turn.

        A ValueError because no further filter can be made leaves the keys
        before the one that needed it added, as :meth:`add` would have.
        """
        keys = key_list(keys)
        n = len(keys)
        out = np.zeros(n, dtype=np.bool_)
        if n == 0:
            return out
        filters = self._filters
        checked = len(filters) > 1
        if checked:
            # The full filters never change: a key in one of them is not new.
            todo = np.flatnonzero(~any_holds(filters[:-1], keys))
        else:
            todo = np.arange(n)

        def took(index: np.ndarray, flags: np.ndarray) -> None:
            out[index] = flags

        add_in_windows(keys, todo, newest=lambda: filters[-1],
                       room=lambda member: member.capacity - member.insert_count,
                       took=took, grow=self._grow, filled=lambda member: None,
                       eager=False, checked=checked)
        return out

    def contains_many(self, keys: Iterable[Key]) -> np.ndarray:
        """A numpy bool array, True where the key is (probably) present."""
        return any_holds(self._filters, key_list(keys))

    def update(self, *iterables: Iterable[Key]) -> None:
        """Add every key of each iterable, in order."""
        for keys in iterables:
            if isinstance(keys, (BloomBits, ScalableBloomFilter)):
                raise TypeError(
                    f"update takes iterables of keys; a {type(keys).__name__} cannot be "
                    f"merged into a ScalableBloomFilter")
            self.add_many(keys)

    def copy(self) -> "ScalableBloomFilter":
        """An independent filter with the same parameters and keys."""
        clone = type(self).__new__(type(self))
        clone._set_state(self._params(), [f.copy() for f in self._filters])
        return clone

    def clear(self) -> None:
        """Forget every key, and go back to the single first filter."""
        del self._filters[1:]
        self._filters[0].clear()

    def _set_state(self, params: Tuple[int, float, int, float, int],
                   filters: List[BloomFilter]) -> None:
        (self._initial_capacity, self._error_rate, self._growth, self._tightening,
         self._seed) = params
        self._filters = filters

    def __eq__(self, other: object) -> bool:
        """Equal parameters and equal filters.  Filters with other parameters
        are simply unequal (comparison never raises)."""
        if not isinstance(other, ScalableBloomFilter):
            return NotImplemented
        return (other._params() == self._params()
                and len(other._filters) == len(self._filters)
                and all(a == b for a, b in zip(self._filters, other._filters)))

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]  # mutable

    # ---------------------------------------------------- serialization

    def _payload(self) -> bytearray:
        payload = bytearray(_PARAMS.pack(self._growth, self._tightening, len(self._filters)))
        return _members.pack(payload, self._filters)

    def _header(self, payload: Union[bytes, bytearray]) -> _files.Header:
        header = _files.Header(
            kind=_files.KIND_SCALABLE, hash_algorithm=_files.HASH_MURMUR3_EDH,
            layout=STANDARD.id, flags=0, seed=self._seed, num_bits=0,
            num_hashes=0, capacity=self._initial_capacity, error_rate=self._error_rate,
            insert_count=self.insert_count, payload_size=len(payload))
        return _files.sealed(header, payload)

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview]) -> "ScalableBloomFilter":
        """The filter that :meth:`to_bytes` wrote; CorruptFileError if damaged."""
        header, payload = _files.split_bytes(data, _check_header)
        return cls._from_payload(header, payload, None)

    @classmethod
    def load(cls, path: PathLike) -> "ScalableBloomFilter":
        """Read a filter written by :meth:`save`.

        Raises CorruptFileError (naming the file and the fault) for a
        truncated, damaged, empty or foreign file, or one that holds another
        kind of filter, IncompatibleFilterError for a file of another format
        version, and OSError if it cannot be read.
        """
        header, payload = _files.read_file(path, _check_header)
        return cls._from_payload(header, payload, path)

    @classmethod
    def _from_payload(cls, header: _files.Header, payload: memoryview,
                      path: Optional[PathLike]) -> "ScalableBloomFilter":
        """The filter of a checked header and its payload, after checking the
        checksum and that every member follows the growth schedule."""
        def bad(reason: str) -> CorruptFileError:
            return CorruptFileError(path, reason)
        if _files.checksum(header, payload) != header.checksum:
            raise bad("checksum mismatch (the file was damaged)")
        size = len(payload)
        if size < _PARAMS.size:
            raise bad(f"payload of {size} bytes, shorter than the {_PARAMS.size}-byte "
                      f"parameter block")
        growth, tightening, count = _PARAMS.unpack_from(payload, 0)
        if growth < 2:
            raise bad(f"growth {growth} is below 2")
        if not 0.0 < tightening < 1.0:
            raise bad(f"tightening {tightening!r} outside (0, 1)")
        if not 1 <= count <= (size - _PARAMS.size) // _members.MIN_MEMBER:
            raise bad(f"{count} filters cannot fit in a payload of {size} bytes")
        self = cls.__new__(cls)
        self._set_state((header.capacity, header.error_rate, growth, tightening, header.seed),
                        [])
        members = _members.read(payload, _PARAMS.size, count, "filter",
                                lambda index: f"filter {index} of {count}", bad)
        for index, (where, member) in enumerate(members):
            capacity, error_rate = self._next_member()
            if member.layout != "standard":
                raise bad(f"{where}: bit layout {member.layout!r}, not 'standard'")
            if member.seed != header.seed:
                raise bad(f"{where}: seed {member.seed}, not {header.seed}")
            if (member.capacity, member.error_rate) != (capacity, error_rate):
                raise bad(f"{where}: capacity {member.capacity} / error rate "
                          f"{member.error_rate!r}, the growth schedule says {capacity} / "
                          f"{error_rate!r}")
            try:
                sizing = optimal_parameters(capacity, error_rate)
            except ValueError as exc:
                raise bad(f"{where}: {exc}") from None
            if (member.num_bits, member.num_hashes) != sizing:
                raise bad(f"{where}: {member.num_bits} bits / {member.num_hashes} hashes do "
                          f"not match its capacity and error rate")
            full = index < count - 1
            if member.insert_count > capacity or (full and member.insert_count != capacity):
                raise bad(f"{where}: insert count {member.insert_count} with capacity "
                          f"{capacity}" + (" (a full filter must hold exactly its capacity)"
                                           if full else ""))
            self._filters.append(member)
        if self.insert_count != header.insert_count:
            raise bad(f"insert count {header.insert_count} in the header, the filters hold "
                      f"{self.insert_count}")
        return self

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_files.restore, (type(self), self.to_bytes()))


def _check_header(header: _files.Header, path: Optional[PathLike]) -> None:
    """Refuse a header that is not of a scalable Bloom filter crawldedup wrote."""
    _members.check_header(header, path, _files.KIND_SCALABLE, "initial capacity")
    if header.layout != STANDARD.id:
        raise CorruptFileError(path, f"bit layout id {header.layout}; scalable filters use "
                                     f"the standard layout, 0")
    if header.num_bits != 0 or header.num_hashes != 0:
        raise CorruptFileError(path, f"num_bits {header.num_bits} / num_hashes "
                                     f"{header.num_hashes} are not 0")


# Pickles made before _files.restore name this.
_restore = _files.restore


__all__ = ["ScalableBloomFilter"]
