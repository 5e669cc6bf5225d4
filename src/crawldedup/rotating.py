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

import datetime
import math
import numbers
import os
import struct
import sys
import time
from typing import (Any, Callable, Dict, Iterable, NamedTuple, Optional, Sequence,
                    Tuple, Union)

import numpy as np

from crawldedup import _files, _members
from crawldedup._mapped import MappedHandle
from crawldedup._kernel import MAX_SEED, BloomBits, check_keys, nbytes_for
from crawldedup.bloom import (VERIFY_BELOW_BYTES, BloomFilter, _check_capacity,
                              _check_error_rate, _check_layout, optimal_parameters)
from crawldedup.errors import CorruptFileError, CrawldedupError, IncompatibleFilterError

Key = Union[str, bytes, bytearray, memoryview]
PathLike = Union[str, "os.PathLike[str]"]
Clock = Callable[[], float]

MIN_GENERATIONS = 2
MAX_GENERATIONS = 64

# The payload (docs/format.md, "Rotating Bloom filter file"): a state block
# of STATE_BYTES, then one page-aligned slot of bits per generation, used as a
# ring.  The state block holds u64 / f64 words: generations, rotate_every
# (NaN for None), rotate_at_fill (NaN for None), schedule epoch, timed periods
# since the epoch, rotation count, the slot of the newest generation, a
# sequence number (odd while a rotation is being written), the rotation being
# written (epoch, periods, rotations, newest slot, slots dropped), then from
# word _W_COUNTS each slot's insert count.  The rest is zero.
STATE_BYTES = 4096
_STATE = struct.Struct("<QdddQQQQdQQQQ")
(_W_GENERATIONS, _W_EVERY, _W_FILL, _W_EPOCH, _W_PERIODS, _W_ROTATIONS, _W_NEWEST,
 _W_SEQUENCE, _W_P_EPOCH, _W_P_PERIODS, _W_P_ROTATIONS, _W_P_NEWEST, _W_DROPS) = range(13)
_W_COUNTS = 16
_COUNTS_AT = 8 * _W_COUNTS
_PAGE = 4096
# Past this many periods since the epoch, float arithmetic can no longer tell
# consecutive period boundaries apart: the schedule is re-anchored.
_MAX_PERIODS = 1 << 52
# add_many with rotate_at_fill looks this many keys ahead (at least) when the
# newest generation is nearly full; see there.
_MIN_WINDOW = 4096


# ---------------------------------------------------------------- arguments

def _check_generations(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"generations must be an integer in [{MIN_GENERATIONS}, "
                        f"{MAX_GENERATIONS}], not {type(value).__name__}")
    value = int(value)
    if not MIN_GENERATIONS <= value <= MAX_GENERATIONS:
        raise ValueError(f"generations must be an integer in [{MIN_GENERATIONS}, "
                         f"{MAX_GENERATIONS}], got {value}")
    return value


def _check_rotate_every(value: Any) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"rotate_every must be None or a positive, finite number of seconds, "
                        f"not {type(value).__name__}")
    seconds = float(value)
    if not (seconds > 0.0 and math.isfinite(seconds)):
        raise ValueError(f"rotate_every must be None or a positive, finite number of seconds, "
                         f"got {value!r}")
    return seconds


def _check_rotate_at_fill(value: Any) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"rotate_at_fill must be None or a number in (0, 1], "
                        f"not {type(value).__name__}")
    fraction = float(value)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"rotate_at_fill must be None or in the interval (0, 1], got {value!r}")
    return fraction


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    if not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    return seed


def _check_clock(clock: Any) -> Clock:
    if not callable(clock):
        raise TypeError(f"clock must be a callable returning seconds, like time.time, "
                        f"not {type(clock).__name__}")
    return clock  # type: ignore[no-any-return]


def _fill_limit(capacity: int, rotate_at_fill: Optional[float]) -> Optional[int]:
    if rotate_at_fill is None:
        return None
    return max(1, math.ceil(capacity * rotate_at_fill))


def _key_list(keys: Iterable[Key]) -> Sequence[Key]:
    if isinstance(keys, (str, bytes, bytearray, memoryview)):
        raise TypeError(
            f"keys must be an iterable of keys, not a single {type(keys).__name__}; "
            f"use add()/`in` for one key")
    seq = keys if type(keys) is list or type(keys) is tuple else list(keys)
    check_keys(seq)  # a batch is added whole or not at all
    return seq


def _pick(keys: Sequence[Key], index: np.ndarray) -> Sequence[Key]:
    if len(index) == len(keys):  # index is increasing: it is every key
        return keys
    return [keys[i] for i in index.tolist()]


def _any_holds(filters: Sequence[BloomFilter], keys: Sequence[Key]) -> np.ndarray:
    """True where one of the filters holds the key.  The last (newest)
    filter is asked about every key (so a bad key raises with its index);
    each earlier one only about the keys not found yet."""
    found = np.zeros(len(keys), dtype=np.bool_)
    todo = np.arange(len(keys))
    for f in reversed(filters):
        if not todo.size:
            break
        hit = f.contains_many(_pick(keys, todo))
        found[todo[hit]] = True
        todo = todo[~hit]
    return found


# ---------------------------------------------------------------- the filter

def _slot_bytes(num_bits: int) -> int:
    """A generation's slot: its bits, rounded up to whole pages."""
    return -(-nbytes_for(num_bits) // _PAGE) * _PAGE


def _as_float(word: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", word))[0])


def _as_word(value: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", value))[0])


class _State(NamedTuple):
    generations: int
    rotate_every: Optional[float]
    rotate_at_fill: Optional[float]
    epoch: float
    periods: int
    rotations: int
    newest: int
    sequence: int
    pending_epoch: float
    pending_periods: int
    pending_rotations: int
    pending_newest: int
    drops: int


def _check_schedule(every: Optional[float], epoch: float, periods: int, what: str,
                    bad: Callable[[str], CorruptFileError]) -> None:
    if not math.isfinite(epoch):
        raise bad(f"{what}epoch {epoch!r} is not a finite time")
    if every is None and periods != 0:
        raise bad(f"{what}{periods} timed rotation periods without rotate_every")
    if periods >= _MAX_PERIODS:
        raise bad(f"{what}{periods} rotation periods since the epoch, more than 2**52")
    if every is not None and not math.isfinite(epoch + (periods + 1) * every):
        raise bad(f"{what}the next rotation after epoch {epoch!r} and {periods} periods of "
                  f"{every!r} s is not a finite time")


def _parse_state(header: _files.Header, payload: memoryview,
                 bad: Callable[[str], CorruptFileError]) -> _State:
    """The checked state block of a checked header's payload, after checking
    that the header's sizing and the payload's size fit it."""
    size = len(payload)
    if size < STATE_BYTES:
        raise bad(f"payload of {size} bytes, shorter than the {STATE_BYTES}-byte state block")
    (generations, every, fill, epoch, periods, rotations, newest, sequence, p_epoch, p_periods,
     p_rotations, p_newest, drops) = _STATE.unpack_from(payload, 0)
    if not MIN_GENERATIONS <= generations <= MAX_GENERATIONS:
        raise bad(f"generations {generations} outside [{MIN_GENERATIONS}, {MAX_GENERATIONS}]")
    rotate_every: Optional[float] = None
    if not math.isnan(every):
        if not (every > 0.0 and math.isfinite(every)):
            raise bad(f"rotate_every {every!r} is not a positive, finite number")
        rotate_every = every
    rotate_at_fill: Optional[float] = None
    if not math.isnan(fill):
        if not 0.0 < fill <= 1.0:
            raise bad(f"rotate_at_fill {fill!r} outside (0, 1]")
        rotate_at_fill = fill
    _check_schedule(rotate_every, epoch, periods, "rotation schedule ", bad)
    if newest >= generations:
        raise bad(f"newest generation slot {newest}, not below {generations}")
    if sequence & 1:  # a rotation was being written: it must be one that can be finished
        if not 1 <= drops <= generations:
            raise bad(f"a rotation in progress drops {drops} generations, not 1 to "
                      f"{generations}")
        if p_newest != (newest + drops) % generations or p_rotations != rotations + drops:
            raise bad(f"the rotation in progress (newest slot {p_newest}, rotation "
                      f"{p_rotations}) does not follow from slot {newest}, rotation "
                      f"{rotations} and {drops} dropped")
        _check_schedule(rotate_every, p_epoch, p_periods, "the rotation in progress: ", bad)
    if any(payload[8 * 13:_COUNTS_AT]) or any(payload[_COUNTS_AT + 8 * generations:STATE_BYTES]):
        raise bad("unused bytes of the state block are set")
    layout = _files.LAYOUT_NAMES[header.layout]
    member_rate = header.error_rate / generations
    try:
        sizing = optimal_parameters(header.capacity, member_rate, layout)
    except ValueError as exc:
        raise bad(f"capacity {header.capacity} / error rate {header.error_rate!r} cannot "
                  f"be split in {generations} generations: {exc}") from None
    if (header.num_bits, header.num_hashes) != sizing:
        raise bad(f"num_bits {header.num_bits} / num_hashes {header.num_hashes} do not "
                  f"match the capacity, error rate and generations")
    expected = STATE_BYTES + generations * _slot_bytes(header.num_bits)
    if size != expected:
        raise bad(f"payload of {size} bytes; {generations} generations of "
                  f"{header.num_bits} bits take {expected}")
    return _State(generations, rotate_every, rotate_at_fill, epoch, periods, rotations, newest,
                  sequence, p_epoch, p_periods, p_rotations, p_newest, drops)


class RotatingBloomFilter(_files.Saved, MappedHandle):
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

    def __init__(self, capacity: int, error_rate: float = 0.01, generations: int = 2,
                 rotate_every: Optional[float] = None, rotate_at_fill: Optional[float] = None,
                 *, seed: int = 0, layout: str = "standard",
                 clock: Clock = time.time) -> None:
        capacity = _check_capacity(capacity)
        error_rate = _check_error_rate(error_rate)
        generations = _check_generations(generations)
        rotate_every = _check_rotate_every(rotate_every)
        rotate_at_fill = _check_rotate_at_fill(rotate_at_fill)
        seed = _check_seed(seed)
        layout = _check_layout(layout)
        clock = _check_clock(clock)
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
        self._fill_limit = _fill_limit(capacity, rotate_at_fill)
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

    # ------------------------------------------------------------ rotation

    def _read_clock(self) -> float:
        now = self._clock()
        if isinstance(now, bool) or not isinstance(now, numbers.Real):
            raise TypeError(f"clock() must return a number of seconds, not {type(now).__name__}")
        now = float(now)
        if not math.isfinite(now):
            raise ValueError(f"clock() returned {now!r}, not a finite number of seconds")
        return now

    def _boundary(self, periods: int) -> float:
        # Every period boundary is computed from the epoch by one multiply
        # and one add, so a filter that rotated at each boundary and one that
        # caught up on many at once agree to the last bit.
        return self._epoch + periods * self._rotate_every  # type: ignore[operator]

    def _set_schedule(self, epoch: float, periods: int, rotations: int) -> None:
        self._epoch = epoch
        self._periods = periods
        self._rotations = rotations
        self._due_at = math.inf if self._rotate_every is None else self._boundary(periods + 1)

    def _drop_oldest(self, times: int = 1) -> None:
        gens = self._gens
        drops = min(times, len(gens))
        mapped = getattr(self, "_mapping", None) is not None
        for _ in range(drops):
            # Reuse the oldest filter's memory for the new newest one.  A
            # mapped filter's slots are cleared when the rotation is
            # published (_shared_rotation).
            oldest = gens.pop(0)
            if not mapped:
                oldest.clear()
            gens.append(oldest)
        if mapped:
            self._drops += drops
        self._rotations += times

    def _refresh(self) -> None:
        """A mapped filter: follow the rotations other processes made."""
        if getattr(self, "_mapping", None) is not None:
            if self._mapping.closed:
                raise ValueError("the filter is closed")
            self._sync()

    def _tick(self) -> float:
        """Read the clock; do the timed rotations that are due; the time."""
        now = self._read_clock()
        if now >= self._due_at:
            mapping = getattr(self, "_mapping", None)
            if mapping is None:
                self._catch_up(now)
            elif not mapping.readonly:
                self._shared_rotation(
                    lambda: self._catch_up(now) if now >= self._due_at else None)
        return now

    def _catch_up(self, now: float) -> None:
        # The largest n with boundary(n) <= now, n > periods (boundary(periods
        # + 1) <= now is known).  A guess from one division, then a doubling
        # and a bisection on the exact test, since boundaries are monotone
        # in n but the division may be off by a little.
        every = self._rotate_every
        assert every is not None
        lo = self._periods + 1
        guess = (now - self._epoch) / every
        hi = int(min(max(guess, 0.0), float(_MAX_PERIODS))) + 2
        hi = max(hi, lo + 1)
        while hi < _MAX_PERIODS and self._boundary(hi) <= now:
            lo, hi = hi, min(2 * hi, _MAX_PERIODS)
        if self._boundary(hi) <= now:
            # Absurdly many periods (a tiny rotate_every): forget everything
            # and start the schedule afresh.
            self._drop_oldest(self._generations)
            self._set_schedule(now, 0, self._rotations)
            return
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._boundary(mid) <= now:
                lo = mid
            else:
                hi = mid
        self._drop_oldest(min(lo - self._periods, self._generations))
        if lo >= _MAX_PERIODS // 2:
            self._set_schedule(self._boundary(lo), 0, self._rotations)
        else:
            self._set_schedule(self._epoch, lo, self._rotations)

    def _rotate_at(self, now: Optional[float], by_fill: bool = False) -> float:
        """Rotate once, by fill or on request, and restart the schedule.  A
        mapped filter rotates by fill only if no other process did first."""
        if now is None:
            now = self._read_clock()
        when = now

        def rotate() -> None:
            if by_fill and self._gens[-1].insert_count < self._fill_limit:  # type: ignore
                return
            self._drop_oldest()
            self._set_schedule(when, 0, self._rotations)
        if getattr(self, "_mapping", None) is None:
            rotate()
        else:
            self._shared_rotation(rotate)
        return now

    def rotate(self) -> None:
        """Drop the oldest generation and start an empty newest one, now.

        Timed rotations already due are done first; the next timed one is
        ``rotate_every`` seconds after this one."""
        self._refresh()
        self._rotate_at(self._tick() if self._rotate_every is not None else None)

    def rotate_if_due(self) -> int:
        """Do the timed rotations that are due now (every call that reads or
        adds keys does this first); the number done since the filter last
        looked (for a mapped filter, those of other processes included)."""
        before = self._rotations
        self._refresh()
        if self._rotate_every is not None:
            self._tick()
        return self._rotations - before

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
        (the clock is read once, at the start).

        A TypeError for a bad key may leave some of the keys before it added,
        as a loop of :meth:`add` would.
        """
        keys = _key_list(keys)
        self._refresh()
        now = self._tick() if self._rotate_every is not None else None
        n = len(keys)
        out = np.zeros(n, dtype=np.bool_)
        if n == 0:
            return out
        limit = self._fill_limit
        todo = np.arange(n)
        first = True
        while todo.size:
            newest = self._gens[-1]
            # At least 1 even if someone added to the newest filter directly.
            room = n + 1 if limit is None else max(1, limit - newest.insert_count)
            if todo.size < room:
                # Fewer keys than room: no rotation before the end.
                self._settle(keys, todo[newest.add_many(_pick(keys, todo))], out)
                break
            # Only `room` more keys fit.  Keys the newest holds now stay held
            # (False, nothing to do), so skip them; of the others, add the
            # first `room`: the generation cannot fill before the last of
            # them.  The first look covers every key, so a bad key raises
            # before anything changes; later ones a window, so that a nearly
            # full generation does not rescan the whole batch for each key.
            window = todo if first else todo[:max(4 * room, _MIN_WINDOW)]
            first = False
            absent = window[~newest.contains_many(_pick(keys, window))]
            if absent.size < room:
                if absent.size:
                    self._settle(keys, absent[newest.add_many(_pick(keys, absent))], out)
                todo = todo[window.size:]
                continue
            take = absent[:room]
            self._settle(keys, take[newest.add_many(_pick(keys, take))], out)
            todo = todo[int(np.searchsorted(todo, take[-1])) + 1:]
            if newest.insert_count >= limit:  # type: ignore[operator]
                now = self._rotate_at(now, by_fill=True)
        return out

    def _settle(self, keys: Sequence[Key], fresh: np.ndarray, out: np.ndarray) -> None:
        """The keys at `fresh` were just put into the newest generation: they
        are new unless an older one holds them (they were then refreshed)."""
        if fresh.size:
            out[fresh] = ~_any_holds(self._gens[:-1], _pick(keys, fresh))

    def contains_many(self, keys: Iterable[Key]) -> np.ndarray:
        """A numpy bool array, True where a generation (probably) holds the key."""
        keys = _key_list(keys)
        self._refresh()
        if self._rotate_every is not None:
            self._tick()
        return _any_holds(self._gens, keys)

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
        """The state block and the generations' slots (docs/format.md): the
        newest generation in the last slot, the oldest in the first."""
        gens = self._gens
        count = len(gens)
        slot = _slot_bytes(gens[0].num_bits)
        payload = bytearray(STATE_BYTES + count * slot)
        nan = math.nan
        _STATE.pack_into(
            payload, 0, count,
            nan if self._rotate_every is None else self._rotate_every,
            nan if self._rotate_at_fill is None else self._rotate_at_fill,
            self._epoch, self._periods, self._rotations, count - 1, 0, 0.0, 0, 0, 0, 0)
        for index, f in enumerate(gens):
            struct.pack_into("<Q", payload, _COUNTS_AT + 8 * index, f.insert_count)
            at = STATE_BYTES + index * slot
            bits = f._bits_view()
            payload[at:at + len(bits)] = bits
        return payload

    def _header(self, payload: bytearray) -> _files.Header:
        newest = self._gens[-1]
        header = _files.Header(
            kind=_files.KIND_ROTATING, hash_algorithm=_files.HASH_MURMUR3_EDH,
            layout=_files.LAYOUT_IDS[self._layout], flags=0, seed=self._seed,
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
        clock = _check_clock(clock)
        header, payload = _files.split_bytes(data, _check_header)
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
        clock = _check_clock(clock)
        header, payload = _files.read_file(path, _check_header)
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
        state = _parse_state(header, payload, bad)
        count = state.generations
        slot = _slot_bytes(header.num_bits)
        nbytes = nbytes_for(header.num_bits)
        counts = list(struct.unpack_from(f"<{count}Q", payload, _COUNTS_AT))
        if not dirty and sum(counts) != header.insert_count:
            raise bad(f"insert count {header.insert_count} in the header, the generations "
                      f"hold {sum(counts)}")
        layout = _files.LAYOUT_NAMES[header.layout]
        member_rate = header.error_rate / count
        params = (header.capacity, member_rate, header.seed, header.num_bits,
                  header.num_hashes, layout)
        slots = []
        for index in range(count):
            at = STATE_BYTES + index * slot
            if any(payload[at + nbytes:at + slot]):
                raise bad(f"slot {index}: bytes past its bits are set")
            member = BloomFilter._blank(params, counts[index])
            member._bits_view()[:] = payload[at:at + nbytes]
            try:
                member._check_padding(member._bits_view(), path)
            except CorruptFileError as exc:
                raise bad(f"slot {index}: {exc.reason}") from None
            slots.append(member)
        newest = state.newest
        if state.sequence & 1:  # killed while rotating: finish the rotation
            for step in range(1, state.drops + 1):
                slots[(newest + step) % count].clear()
            newest = state.pending_newest
        self = cls.__new__(cls)
        self._set_params(header.capacity, header.error_rate, count, state.rotate_every,
                         state.rotate_at_fill, header.seed, layout, clock)
        self._gens = [slots[(newest + 1 + i) % count] for i in range(count)]
        if state.sequence & 1:
            self._set_schedule(state.pending_epoch, state.pending_periods,
                               state.pending_rotations)
        else:
            self._set_schedule(state.epoch, state.periods, state.rotations)
        return self

    # ------------------------------------------------------------ mapped files

    @classmethod
    def open(cls, path: PathLike, capacity: Optional[int] = None,
             error_rate: Optional[float] = None, generations: Optional[int] = None,
             rotate_every: Optional[float] = None, rotate_at_fill: Optional[float] = None, *,
             mode: str = "c", seed: Optional[int] = None, layout: Optional[str] = None,
             clock: Clock = time.time, verify: Optional[bool] = None) -> "RotatingBloomFilter":
        """A rotating filter used in place in a memory-mapped state file, the
        rotation schedule included, shared by the processes that open it.

        ``mode``: ``"r"`` read-only, ``"w"`` create (replacing any file),
        ``"c"`` (default) open, or create when missing.  Creating needs
        ``capacity``; the other parameters default as for the constructor,
        and the schedule starts at the creation.  When the file exists,
        parameters that are given must match it (``IncompatibleFilterError``)
        and those omitted are taken from it.

        Keys are added with atomic ORs, as in :meth:`BloomFilter.open`: every
        bit is in the page cache as ``add`` returns, ``flush()`` makes it
        durable, ``close()`` (or a ``with`` block) unmaps; the last writer to
        close refreshes the checksum, and a file whose writer was killed is
        repaired by the next process that opens it alone.  A rotation is
        done by one process at a time, under a lock on the file, and written
        so that a writer killed in the middle of one leaves it to be finished
        by the next: every process sees it at its next call.  With several
        writers, a generation may take a few keys more than the fill limit
        (the adds in flight when it is reached).  A read-only filter follows
        the rotations its writers make, and makes none itself.

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "seen.rbf")
        >>> with RotatingBloomFilter.open(path, 1000, rotate_every=86400) as rf:
        ...     rf.add("https://example.com/")
        True
        >>> with RotatingBloomFilter.open(path, mode="r") as rf:
        ...     "https://example.com/" in rf, rf.generations
        (True, 2)
        """
        from crawldedup import _mapped

        if mode not in ("r", "w", "c"):
            raise ValueError(f"mode must be 'r', 'w' or 'c', got {mode!r}")
        clock = _check_clock(clock)
        target = _files.resolve(_files.check_path(path))
        checks = (("capacity", capacity, _check_capacity),
                  ("error_rate", error_rate, _check_error_rate),
                  ("generations", generations, _check_generations),
                  ("rotate_every", rotate_every, _check_rotate_every),
                  ("rotate_at_fill", rotate_at_fill, _check_rotate_at_fill),
                  ("seed", seed, _check_seed), ("layout", layout, _check_layout))
        asked: Dict[str, Any] = {name: check(value) for name, value, check in checks
                                 if value is not None}
        if mode == "w" or (mode == "c" and not os.path.exists(target)):
            if capacity is None:
                raise ValueError(f"capacity is needed to create {target!r}")
            header, prefix = cls._blank_file(asked, clock)
            if not _mapped.create(target, header, exclusive=(mode == "c"), prefix=prefix):
                mode = "c"  # another process created it first: open theirs
        mapping = _mapped.MappedFile.open(target, readonly=(mode == "r"))
        try:
            return cls._attach(mapping, asked, verify, clock)
        except BaseException:
            mapping.close()
            raise

    @classmethod
    def _blank_file(cls, asked: Dict[str, Any], clock: Clock) -> Tuple[_files.Header, bytes]:
        """The header and state block of a new file (its slots are zero)."""
        capacity = asked["capacity"]
        error_rate = asked.get("error_rate", 0.01)
        generations = asked.get("generations", 2)
        layout = asked.get("layout", "standard")
        every, fill = asked.get("rotate_every"), asked.get("rotate_at_fill")
        member_rate = error_rate / generations
        try:
            num_bits, num_hashes = optimal_parameters(capacity, member_rate, layout)
        except ValueError as exc:
            raise ValueError(
                f"each of the {generations} generations is sized for error_rate / generations "
                f"= {member_rate:.3g}: {exc}") from None
        now = float(clock())
        if not math.isfinite(now):
            raise ValueError(f"clock() returned {now!r}, not a finite number of seconds")
        prefix = _STATE.pack(generations, math.nan if every is None else every,
                             math.nan if fill is None else fill, now, 0, 0,
                             generations - 1, 0, 0.0, 0, 0, 0, 0)
        header = _files.Header(
            kind=_files.KIND_ROTATING, hash_algorithm=_files.HASH_MURMUR3_EDH,
            layout=_files.LAYOUT_IDS[layout], flags=0, seed=asked.get("seed", 0),
            num_bits=num_bits, num_hashes=num_hashes, capacity=capacity,
            error_rate=error_rate, insert_count=0,
            payload_size=STATE_BYTES + generations * _slot_bytes(num_bits))
        return header, prefix

    @classmethod
    def _attach(cls, mapping: Any, asked: Dict[str, Any], verify: Optional[bool],
                clock: Clock) -> "RotatingBloomFilter":
        path = mapping.path
        if sys.byteorder != "little":  # pragma: no cover - no such machine here
            raise CrawldedupError("mapped rotating filters need a little-endian machine; "
                                  "use RotatingBloomFilter.load")
        header = _files.parse_header(mapping.mem[:_files.HEADER_SIZE], mapping.size, path)
        _check_header(header, path)

        def bad(reason: str) -> CorruptFileError:
            return CorruptFileError(path, reason)
        # A view the mapping releases when it closes: a bare memoryview held
        # by a traceback would keep the mapping from closing.
        state = _parse_state(header, mapping.view(_files.HEADER_SIZE), bad)
        found = {"capacity": header.capacity, "error_rate": header.error_rate,
                 "generations": state.generations, "rotate_every": state.rotate_every,
                 "rotate_at_fill": state.rotate_at_fill, "seed": header.seed,
                 "layout": _files.LAYOUT_NAMES[header.layout]}
        diff = [f"{name} {value!r} (the file has {found[name]!r})"
                for name, value in asked.items() if found[name] != value]
        if diff:
            raise IncompatibleFilterError(f"{path!r} was made with other parameters: "
                                          + ", ".join(diff))
        count = state.generations
        layout = found["layout"]
        self = cls.__new__(cls)
        self._set_params(header.capacity, header.error_rate, count, state.rotate_every,
                         state.rotate_at_fill, header.seed, layout, clock)
        self._mapping = mapping
        base = _files.HEADER_SIZE
        self._words = mapping.words(base, base + STATE_BYTES)
        slot = _slot_bytes(header.num_bits)
        nbytes = nbytes_for(header.num_bits)
        params = (header.capacity, header.error_rate / count, header.seed, header.num_bits,
                  header.num_hashes, layout)
        self._slots = []
        try:
            for index in range(count):
                at = base + STATE_BYTES + index * slot
                member = BloomFilter.__new__(BloomFilter)
                member._capacity, member._error_rate = params[0], params[1]
                member._init_bits(params[3], params[4], params[2], mapping.view(at, at + nbytes),
                                  layout, mapping.readonly)
                where = base + _COUNTS_AT + 8 * index
                member._attach_counter(mapping.view(where, where + 8))
                try:
                    member._check_padding(member._bits_view(), path)
                except CorruptFileError as exc:
                    raise bad(f"slot {index}: {exc.reason}") from None
                self._slots.append(member)
            self._seq = -1
            if verify is None:
                verify = mapping.size < VERIFY_BELOW_BYTES
            if verify:
                mapping.verify_clean()
            # Nothing in the file changes before this process first writes
            # (MappedFile.begin_write checks the file there), except that a
            # file left DIRTY by a killed writer is sealed by a writer that
            # has it alone.
            mapping.before_seal = self._before_seal
            if not mapping.readonly:
                mapping.repair_if_alone()
                for member in self._slots:
                    member._set_write_hook(mapping.begin_write)
                with mapping.writer_section():
                    self._sync(locked=True)
            else:
                self._sync(first=True)
        except BaseException:
            mapping.before_seal = None
            for member in self._slots:
                member._release()
            raise
        return self

    def _before_seal(self) -> None:
        """Bring the header up to date before the checksum is computed (the
        caller holds the file alone): finish a rotation a killed writer left
        half done, and store the insert count."""
        words = self._words
        if words[_W_SEQUENCE] & 1:
            self._apply_pending()
        total = sum(words[_W_COUNTS + i] for i in range(self._generations))
        at = _files.COUNT_AT
        self._mapping.mem[at:at + 8] = (total & (2 ** 64 - 1)).to_bytes(8, "little")

    def _sync(self, locked: bool = False, first: bool = False) -> None:
        """Follow the rotations other processes made (seen through the state
        block's sequence number; odd while a rotation is being written)."""
        words = self._words
        seq = words[_W_SEQUENCE]
        if seq == self._seq:
            return
        if seq & 1:
            if locked:  # its writer died (we hold the rotation lock): finish it
                self._apply_pending()
                seq = words[_W_SEQUENCE]
            elif not first:
                return  # being written: keep the current view until it is done
        epoch, periods = _as_float(words[_W_EPOCH]), words[_W_PERIODS]
        rotations, newest = words[_W_ROTATIONS], words[_W_NEWEST]
        if not first and words[_W_SEQUENCE] != seq:
            return
        count = self._generations
        if newest >= count:
            raise CorruptFileError(self._mapping.path,
                                   f"newest generation slot {newest}, not below {count}")
        slots = self._slots
        self._gens = [slots[(newest + 1 + i) % count] for i in range(count)]
        self._set_schedule(epoch, periods, rotations)
        self._seq = seq

    def _apply_pending(self) -> None:
        """Do the rotation written in the state block's pending fields: clear
        the dropped slots, then publish the new schedule and newest slot."""
        self._mapping.begin_write()
        words = self._words
        count = self._generations
        old, drops = words[_W_NEWEST], words[_W_DROPS]
        for step in range(1, min(drops, count) + 1):
            self._slots[(old + step) % count].clear()
        for live, pending in ((_W_EPOCH, _W_P_EPOCH), (_W_PERIODS, _W_P_PERIODS),
                              (_W_ROTATIONS, _W_P_ROTATIONS), (_W_NEWEST, _W_P_NEWEST)):
            words[live] = words[pending]
        words[_W_SEQUENCE] = words[_W_SEQUENCE] + 1

    def _shared_rotation(self, action: Callable[[], None]) -> None:
        """Run action (which may rotate) as the only process rotating this
        file, on its current state; publish the rotations it made."""
        mapping = self._mapping
        if mapping.readonly:
            raise ValueError(f"{mapping.path!r} is open read-only: it cannot rotate")
        with mapping.writer_section():
            self._sync(locked=True)
            self._drops = 0
            action()
            drops = self._drops
            if drops:
                mapping.begin_write()
                words = self._words
                count = self._generations
                newest = (words[_W_NEWEST] + drops) % count
                words[_W_P_EPOCH] = _as_word(self._epoch)
                words[_W_P_PERIODS] = self._periods
                words[_W_P_ROTATIONS] = self._rotations
                words[_W_P_NEWEST] = newest
                words[_W_DROPS] = drops
                words[_W_SEQUENCE] = words[_W_SEQUENCE] + 1
                self._apply_pending()
                self._seq = words[_W_SEQUENCE]

    def _release_storage(self) -> None:
        for member in self._slots:
            member._release()  # refused while a batch call runs in another thread

    def __reduce__(self) -> Tuple[Any, ...]:
        # The clock is not pickled: the copy tells the time with time.time.
        return (_restore, (type(self), self.to_bytes()))


def _check_header(header: _files.Header, path: Optional[PathLike]) -> None:
    """Refuse a header that is not of a rotating Bloom filter crawldedup wrote."""
    _members.check_header(header, path, _files.KIND_ROTATING,
                          allowed_flags=_files.FLAG_DIRTY)
    if header.layout not in _files.LAYOUT_NAMES:
        raise CorruptFileError(path, f"unknown bit layout id {header.layout}")


def _restore(cls: type, data: bytes) -> RotatingBloomFilter:
    return cls.from_bytes(data)  # type: ignore[attr-defined, no-any-return]


__all__ = ["RotatingBloomFilter"]
