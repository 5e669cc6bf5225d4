"""Rotating Bloom filters: remember recent keys, forget the ones not seen for a while.

A crawler wants a URL it has not met for a while to become crawlable again,
while the recent ones stay filtered.  Clearing a :class:`BloomFilter` every
so often does that, but forgets everything at once: just after the clear,
every recent URL looks new.  A :class:`RotatingBloomFilter` keeps
``generations`` filters instead.  New keys go to the newest; a rotation drops
the oldest and starts an empty newest one, so a key is forgotten only after
``generations`` rotations without being seen.

Rotations happen on a schedule (``rotate_every`` seconds, checked whenever
the filter is used, against an injectable clock: no threads, no timers), when
the newest generation has taken its share of keys (``rotate_at_fill``), or
when :meth:`RotatingBloomFilter.rotate` is called.  The schedule is part of
the saved state, so a restarted crawler rotates exactly as if it had stayed up.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from crawldedup import _checks
from crawldedup._defaults import ERROR_RATE
from crawldedup._kernel import BloomBits
from crawldedup._types import Clock, Key, PathLike
from crawldedup.bloom import rotating_file as _state
from crawldedup.bloom.filter import BloomFilter, optimal_parameters
from crawldedup.bloom.layouts import check_layout, layout_id, layout_of
from crawldedup.bloom.members import add_in_windows, any_holds, key_list, pick
from crawldedup.bloom.rotating_ring import SharedRing
from crawldedup.bloom.schedule import Schedule
from crawldedup.errors import CorruptFileError
from crawldedup.formats import files as _files

MIN_GENERATIONS = _checks.MIN_GENERATIONS
MAX_GENERATIONS = _checks.MAX_GENERATIONS

# add_many with rotate_at_fill looks this many keys ahead (at least) when the
# newest generation is nearly full; see there.


class RotatingBloomFilter(_files.Saved, Schedule, SharedRing):
    """Bloom filter generations: keys not seen for a while are forgotten.

    It holds ``generations`` :class:`BloomFilter` s, each sized for
    ``capacity`` keys at ``error_rate / generations``, so that the chance
    that at least one of them reports a key it was not given stays below
    ``error_rate`` (the union bound).  A key is seen if any generation holds
    it.  A rotation drops the oldest generation and starts an empty newest
    one; rotations happen

    * every ``rotate_every`` seconds, measured with ``clock`` (``time.time``
      by default), checked at the start of every ``add``, ``add_many``,
      ``update``, ``in`` and ``contains_many`` call.  A call that finds
      several periods elapsed (a crawler restarted after a pause) rotates
      once per period, at most ``generations`` times, and the schedule stays
      on the period boundaries: the next rotation is due one period after the
      last boundary passed, not one period after now;
    * when the newest generation has taken ``ceil(capacity * rotate_at_fill)``
      new keys (its ``insert_count``): the add that takes it there is followed
      by a rotation, so no generation ever holds more than that;
    * when :meth:`rotate` is called.

    A rotation by fill or by :meth:`rotate` restarts the schedule: the next
    timed rotation is ``rotate_every`` seconds after it.  Properties such as
    ``rotations``, ``last_rotation`` and ``filters`` tell the state as of the
    last call that read the clock; :meth:`rotate_if_due` brings it up to date.

    *Refresh on sight*: :meth:`add` (and ``add_many``, ``update``) puts a key
    into the newest generation whenever the newest does not hold it, even
    when an older one does (and then still answers False, "seen").  A key that
    keeps being added stays remembered; a key not added again during
    ``generations`` rotations is forgotten.  ``in`` and ``contains_many`` only
    look.  So a crawler that calls ``if rf.add(url): fetch(url)`` for every
    URL it meets fetches a URL again once it has not met it for a window.

    With timed rotations only, a key is remembered for at least
    ``(generations - 1) * rotate_every`` seconds after it was last added and
    forgotten after at most ``generations * rotate_every`` seconds.  The error
    bound holds while each generation takes at most ``capacity`` keys: choose
    ``capacity`` for the keys one period brings, or set ``rotate_at_fill``.

    >>> now = [0.0]
    >>> rf = RotatingBloomFilter(1000, 0.01, generations=2, rotate_every=3600,
    ...                          clock=lambda: now[0])
    >>> rf.add("https://example.com/a")
    True
    >>> now[0] = 3600.0  # one rotation: the key is in the older generation
    >>> "https://example.com/a" in rf, rf.rotations
    (True, 1)
    >>> now[0] = 7200.0  # two: forgotten
    >>> "https://example.com/a" in rf, rf.rotations, rf.next_rotation
    (False, 2, 10800.0)

    Not safe to use from several threads at once without a lock: two threads
    could both rotate.
    """

    __slots__ = ("_capacity", "_error_rate", "_generations", "_rotate_every",
                 "_rotate_at_fill", "_fill_limit", "_seed", "_layout", "_clock", "_gens",
                 "_epoch", "_periods", "_rotations", "_due_at",
                 # Mapped filters only (see open).
                 "_mapping", "_words", "_slots", "_seq", "_drops")
    _gens: List[BloomFilter]  # the others are typed where they are used (_schedule.Ring)

    def __init__(self, capacity: int, error_rate: float = ERROR_RATE, generations: int = 2,
                 rotate_every: Optional[float] = None, rotate_at_fill: Optional[float] = None,
                 *, seed: int = 0, layout: str = "standard",
                 clock: Clock = time.time) -> None:
        capacity = _checks.check_capacity(capacity)
        error_rate = _checks.check_error_rate(error_rate)
        generations = _checks.check_generations(generations)
        rotate_every = _checks.check_rotate_every(rotate_every)
        rotate_at_fill = _checks.check_rotate_at_fill(rotate_at_fill)
        seed = _checks.check_seed(seed)
        layout = check_layout(layout)
        clock = _checks.check_clock(clock)
        member_rate = error_rate / generations
        try:
            optimal_parameters(capacity, member_rate, layout)
        except ValueError as exc:
            raise ValueError(
                f"each of the {generations} generations is sized for error_rate / generations "
                f"= {member_rate:.3g}: {exc}") from None
        self._set_params(capacity, error_rate, generations, rotate_every, rotate_at_fill, seed,
                         layout, clock)
        self._gens = [BloomFilter(capacity, member_rate, seed=seed, layout=layout)
                      for _ in range(generations)]
        self._set_schedule(self._read_clock(), 0, 0)

    def _set_params(self, capacity: int, error_rate: float, generations: int,
                    rotate_every: Optional[float], rotate_at_fill: Optional[float], seed: int,
                    layout: str, clock: Clock) -> None:
        self._capacity = capacity
        self._error_rate = error_rate
        self._generations = generations
        self._rotate_every = rotate_every
        self._rotate_at_fill = rotate_at_fill
        self._fill_limit = _checks.fill_limit(capacity, rotate_at_fill)
        self._seed = seed
        self._layout = layout
        self._clock = clock

    # ----------------------------------------------------------- parameters

    @property
    def capacity(self) -> int:
        """The number of keys each generation is sized for."""
        return self._capacity

    @property
    def error_rate(self) -> float:
        """The bound on the false-positive rate over all generations, while
        each holds at most ``capacity`` keys.  Each generation is sized for
        ``error_rate / generations``."""
        return self._error_rate

    @property
    def generations(self) -> int:
        """How many generations there are (always all of them, some maybe empty)."""
        return self._generations

    @property
    def rotate_every(self) -> Optional[float]:
        """Seconds between timed rotations, or None."""
        return self._rotate_every

    @property
    def rotate_at_fill(self) -> Optional[float]:
        """The newest generation rotates out once it has taken
        ``ceil(capacity * rotate_at_fill)`` new keys; None: never for fill."""
        return self._rotate_at_fill

    @property
    def fill_limit(self) -> Optional[int]:
        """``ceil(capacity * rotate_at_fill)`` (at least 1), or None."""
        return self._fill_limit

    @property
    def seed(self) -> int:
        """Seed of the MurmurHash3 used for keys (the same in every generation)."""
        return self._seed

    @property
    def layout(self) -> str:
        """'standard' or 'blocked', the bit layout of every generation."""
        return self._layout

    @property
    def clock(self) -> Clock:
        """The callable that tells the time, in seconds."""
        return self._clock

    @property
    def last_rotation(self) -> float:
        """Clock time of the last rotation (a period boundary for a timed
        one), or of the creation of the filter before any rotation."""
        if self._rotate_every is None:
            return self._epoch
        return self._boundary(self._periods)

    @property
    def next_rotation(self) -> Optional[float]:
        """Clock time at which the next timed rotation is due, or None."""
        return None if self._rotate_every is None else self._due_at

    @property
    def rotations(self) -> int:
        """How many rotations there have been, of every kind."""
        return self._rotations

    @property
    def filters(self) -> Tuple[BloomFilter, ...]:
        """The generations, oldest first.  Read them, do not change or keep
        them: rotation reuses the oldest filter as the new newest one."""
        return tuple(self._gens)

    @property
    def nbytes(self) -> int:
        """Bytes of memory taken by the bits of all the generations."""
        return sum(f.nbytes for f in self._gens)

    @property
    def fill_ratio(self) -> float:
        """Fraction of the bits of the newest generation that are set."""
        return self._gens[-1].fill_ratio

    @property
    def insert_count(self) -> int:
        """Sum of the generations' insert counts: a key refreshed into a
        newer generation counts once in each."""
        return sum(f.insert_count for f in self._gens)

    def estimated_count(self) -> int:
        """Estimate of the number of distinct keys remembered, from the bits
        of the union of the generations (a refreshed key counts once)."""
        union = self._gens[0].copy()
        for f in self._gens[1:]:
            union |= f
        return union.estimated_count()

    @property
    def estimated_error_rate(self) -> float:
        """The false-positive rate now: the chance that at least one
        generation reports a key it was not given, ``1 - prod(1 - p_i)``."""
        miss = 1.0
        for f in self._gens:
            miss *= 1.0 - f.estimated_error_rate
        return 1.0 - miss

    def _params(self) -> Tuple[int, float, int, Optional[float], Optional[float], int, str]:
        return (self._capacity, self._error_rate, self._generations, self._rotate_every,
                self._rotate_at_fill, self._seed, self._layout)

    def __repr__(self) -> str:
        layout = ", layout='blocked'" if self._layout == "blocked" else ""
        return (f"{type(self).__name__}(capacity={self._capacity}, "
                f"error_rate={self._error_rate!r}, generations={self._generations}, "
                f"rotate_every={self._rotate_every!r}, "
                f"rotate_at_fill={self._rotate_at_fill!r}{layout}, "
                f"rotations={self._rotations}, last_rotation={self.last_rotation!r})")

    # ---------------------------------------------------------------- keys

    def add(self, key: Key) -> bool:
        """Add key to the newest generation; True when no generation had it.

        A key only an older generation holds is added to the newest too
        (refresh on sight), and False is returned."""
        self._refresh()
        now = self._tick() if self._rotate_every is not None else None
        gens = self._gens
        newest = gens[-1]
        if not newest.add(key):
            return False
        seen = False
        for f in gens[-2::-1]:
            if key in f:
                seen = True
                break
        limit = self._fill_limit
        if limit is not None and newest.insert_count >= limit:
            self._rotate_at(now, by_fill=True)
        return not seen

    def __contains__(self, key: object) -> bool:
        self._refresh()
        if self._rotate_every is not None:
            self._tick()
        for f in reversed(self._gens):
            if key in f:
                return True
        return False

    def add_many(self, keys: Iterable[Key]) -> np.ndarray:
        """Add every key in order; a numpy bool array, True where no
        generation had the key.  The answers, the refreshes and the rotations
        by fill are exactly those of calling :meth:`add` for each key in turn
        (the clock is read once, at the start).  Every key is checked first:
        a batch with a bad key raises TypeError naming its position and adds
        nothing.
        """
        keys = key_list(keys)
        self._refresh()
        now = self._tick() if self._rotate_every is not None else None
        n = len(keys)
        out = np.zeros(n, dtype=np.bool_)
        if n == 0:
            return out
        limit = self._fill_limit

        def took(index: np.ndarray, flags: np.ndarray) -> None:
            self._settle(keys, index[flags], out)

        def filled(member: BloomFilter) -> None:
            nonlocal now
            if limit is not None and member.insert_count >= limit:
                now = self._rotate_at(now, by_fill=True)

        # Without a fill limit the newest generation always has room (at
        # least 1 even if someone added to it directly).
        add_in_windows(keys, np.arange(n), newest=lambda: self._gens[-1],
                       room=lambda member: n + 1 if limit is None
                       else max(1, limit - member.insert_count),
                       took=took, grow=lambda: None, filled=filled, eager=True, checked=False)
        return out

    def _settle(self, keys: Sequence[Key], fresh: np.ndarray, out: np.ndarray) -> None:
        """The keys at `fresh` were just put into the newest generation: they
        are new unless an older one holds them (they were then refreshed)."""
        if fresh.size:
            out[fresh] = ~any_holds(self._gens[:-1], pick(keys, fresh))

    def contains_many(self, keys: Iterable[Key]) -> np.ndarray:
        """A numpy bool array, True where a generation (probably) holds the key."""
        keys = key_list(keys)
        self._refresh()
        if self._rotate_every is not None:
            self._tick()
        return any_holds(self._gens, keys)

    def update(self, *iterables: Iterable[Key]) -> None:
        """Add every key of each iterable, in order (as :meth:`add_many`)."""
        for keys in iterables:
            if isinstance(keys, (BloomBits, RotatingBloomFilter)):
                raise TypeError(
                    f"update takes iterables of keys; a {type(keys).__name__} cannot be "
                    f"merged into a RotatingBloomFilter")
            self.add_many(keys)

    def copy(self) -> "RotatingBloomFilter":
        """An independent filter with the same parameters, clock, rotation
        state and keys."""
        clone = type(self).__new__(type(self))
        clone._set_params(*self._params(), self._clock)
        clone._gens = [f.copy() for f in self._gens]
        clone._set_schedule(self._epoch, self._periods, self._rotations)
        return clone

    def __copy__(self) -> "RotatingBloomFilter":
        return self.copy()

    def __deepcopy__(self, memo: Any) -> "RotatingBloomFilter":
        return self.copy()

    def clear(self) -> None:
        """Forget every key.  The rotation schedule and count are kept."""
        for f in self._gens:
            f.clear()

    def _state(self) -> Tuple[float, int, int, Tuple[int, ...]]:
        return (self._epoch, self._periods, self._rotations,
                tuple(f.insert_count for f in self._gens))

    def __eq__(self, other: object) -> bool:
        """Equal parameters, rotation state (schedule, rotation count,
        generations' insert counts) and bits, generation by generation.  The
        clocks are not compared.  Comparison never raises."""
        if not isinstance(other, RotatingBloomFilter):
            return NotImplemented
        return (other._params() == self._params() and other._state() == self._state()
                and all(a == b for a, b in zip(self._gens, other._gens)))

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]  # mutable

    # ---------------------------------------------------- serialization

    def _payload(self) -> bytearray:
        return _state.pack_payload(self._gens, self._rotate_every, self._rotate_at_fill,
                                   self._epoch, self._periods, self._rotations)

    def _header(self, payload: Union[bytes, bytearray]) -> _files.Header:
        newest = self._gens[-1]
        header = _files.Header(
            kind=_files.KIND_ROTATING, hash_algorithm=_files.HASH_MURMUR3_EDH,
            layout=layout_id(self._layout), flags=0, seed=self._seed,
            num_bits=newest.num_bits, num_hashes=newest.num_hashes, capacity=self._capacity,
            error_rate=self._error_rate, insert_count=self.insert_count,
            payload_size=len(payload))
        return _files.sealed(header, payload)

    def to_bytes(self) -> bytes:
        """The filter in the file format of :meth:`save` (docs/format.md),
        rotation state included; the clock is not."""
        return super().to_bytes()

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview], *,
                   clock: Clock = time.time) -> "RotatingBloomFilter":
        """The filter that :meth:`to_bytes` wrote, telling the time with
        clock; CorruptFileError if damaged.  Rotations that fell due since it
        was written happen at its first use."""
        clock = _checks.check_clock(clock)
        header, payload = _files.split_bytes(data, _state.check_header)
        return cls._from_payload(header, payload, None, clock)

    def save(self, path: PathLike) -> None:
        """Write the filter and its rotation state to path atomically: a
        crash at any moment leaves the previous file or the new one."""
        super().save(path)

    @classmethod
    def load(cls, path: PathLike, *, clock: Clock = time.time) -> "RotatingBloomFilter":
        """Read a filter written by :meth:`save` (or a file used through
        :meth:`open`) into memory, telling the time with clock.

        The rotation schedule is restored, so rotations that fell due while
        the file was on disk happen at the first use, exactly as if the filter
        had stayed in memory.  Raises CorruptFileError (naming the file and
        the fault) for a truncated, damaged, empty or foreign file, or one that
        holds another kind of filter, IncompatibleFilterError for a file of
        another format version, and OSError if it cannot be read.
        """
        clock = _checks.check_clock(clock)
        header, payload = _files.read_file(path, _state.check_header)
        return cls._from_payload(header, payload, path, clock)

    @classmethod
    def _from_payload(cls, header: _files.Header, payload: memoryview,
                      path: Optional[PathLike], clock: Clock) -> "RotatingBloomFilter":
        """The filter of a checked header and its payload, after checking the
        checksum, the state block and every generation.  A file left DIRTY
        by a killed writer of a mapped filter has no up-to-date checksum:
        its structure is checked, and a rotation it was killed in the middle
        of is completed."""
        def bad(reason: str) -> CorruptFileError:
            return CorruptFileError(path, reason)
        dirty = bool(header.flags & _files.FLAG_DIRTY)
        if not dirty and _files.checksum(header, payload) != header.checksum:
            raise bad("checksum mismatch (the file was damaged)")
        state = _state.parse_state(header, payload, bad)
        count = state.generations
        counts = _state.insert_counts(payload, count)
        if not dirty and sum(counts) != header.insert_count:
            raise bad(f"insert count {header.insert_count} in the header, the generations "
                      f"hold {sum(counts)}")
        layout = layout_of(header.layout, path).name
        gens = _state.unpack_generations(header, payload, state, counts, path, bad)
        self = cls.__new__(cls)
        self._set_params(header.capacity, header.error_rate, count, state.rotate_every,
                         state.rotate_at_fill, header.seed, layout, clock)
        self._gens = gens
        if state.sequence & 1:
            self._set_schedule(state.pending_epoch, state.pending_periods,
                               state.pending_rotations)
        else:
            self._set_schedule(state.epoch, state.periods, state.rotations)
        return self

    def __reduce__(self) -> Tuple[Any, ...]:
        # The clock is not pickled: the copy tells the time with time.time.
        return (_files.restore, (type(self), self.to_bytes()))


# Pickles made before _files.restore name this.
_restore = _files.restore


__all__ = ["RotatingBloomFilter"]
