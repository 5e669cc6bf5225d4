"""The rotation schedule of a rotating Bloom filter: when generations turn
over (every ``rotate_every`` seconds against an injectable clock, when the
newest has taken its share of keys, or on demand), and how a filter catches
up on the rotations that fell due while it was not used.

A mixin of :class:`~crawldedup.RotatingBloomFilter`: it works on the filter's
``_gens`` (oldest first), ``_epoch``, ``_periods``, ``_rotations``,
``_due_at``, ``_rotate_every``, ``_clock`` and, for a mapped filter, on the
shared state through ``_shared_rotation`` (``_rotating_ring``).
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any, Callable, List, Optional, cast

from crawldedup.bloom import rotating_file as _state

if TYPE_CHECKING:
    from typing import Protocol

    from crawldedup._types import Clock
    from crawldedup.bloom.filter import BloomFilter

    class Ring(Protocol):
        """The rotating filter as its two mixins (Schedule, SharedRing) see
        it: mypy checks their methods against this instead of the mixin
        classes, whose empty ``__slots__`` hold none of these names."""

        _gens: List[BloomFilter]
        _epoch: float
        _periods: int
        _rotations: int
        _due_at: float
        _rotate_every: Optional[float]
        _fill_limit: Optional[int]
        _clock: Clock
        _drops: int
        _generations: int
        _mapping: Any
        _words: Any
        _slots: Any
        _seq: int

        def _set_params(self, capacity: int, error_rate: float, generations: int,
                        rotate_every: Optional[float], rotate_at_fill: Optional[float],
                        seed: int, layout: str, clock: Clock) -> None: ...
        def _read_clock(self) -> float: ...
        def _boundary(self, periods: int) -> float: ...
        def _set_schedule(self, epoch: float, periods: int, rotations: int) -> None: ...
        def _drop_oldest(self, times: int = 1) -> None: ...
        def _refresh(self) -> None: ...
        def _tick(self) -> float: ...
        def _catch_up(self, now: float) -> None: ...
        def _rotate_at(self, now: Optional[float], by_fill: bool = False) -> float: ...
        def _sync(self, locked: bool = False, first: bool = False) -> None: ...
        def _apply_pending(self) -> None: ...
        def _before_seal(self) -> None: ...
        def _shared_rotation(self, action: Callable[[], None]) -> None: ...


class Schedule:
    """Generations and their rotation schedule (see the module)."""

    __slots__ = ()

    # Its methods take self as a Ring: the fields are RotatingBloomFilter's.

    def _read_clock(self: Ring) -> float:
        now = self._clock()
        if isinstance(now, bool) or not isinstance(now, numbers.Real):
            raise TypeError(f"clock() must return a number of seconds, not {type(now).__name__}")
        now = float(now)
        if not -_state.MAX_TIME < now < _state.MAX_TIME:
            raise ValueError(f"clock() returned {now!r}, not a finite number of seconds "
                             f"in (-2**53, 2**53)")
        return now

    def _boundary(self: Ring, periods: int) -> float:
        # Every period boundary is computed from the epoch by one multiply
        # and one add, so a filter that rotated at each boundary and one that
        # caught up on many at once agree to the last bit.
        return self._epoch + periods * self._rotate_every  # type: ignore[operator]

    def _set_schedule(self: Ring, epoch: float, periods: int, rotations: int) -> None:
        self._epoch = epoch
        self._periods = periods
        self._rotations = rotations
        self._due_at = math.inf if self._rotate_every is None else self._boundary(periods + 1)

    def _drop_oldest(self: Ring, times: int = 1) -> None:
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

    def _refresh(self: Ring) -> None:
        """A mapped filter: follow the rotations other processes made."""
        if getattr(self, "_mapping", None) is not None:
            if self._mapping.closed:
                raise ValueError("the filter is closed")
            self._sync()

    def _tick(self: Ring) -> float:
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

    def _catch_up(self: Ring, now: float) -> None:
        # The largest n with boundary(n) <= now, n > periods (boundary(periods
        # + 1) <= now is known).  A guess from one division, then a doubling
        # and a bisection on the exact test, since boundaries are monotone
        # in n but the division may be off by a little.
        every = self._rotate_every
        assert every is not None
        lo = self._periods + 1
        guess = (now - self._epoch) / every
        hi = int(min(max(guess, 0.0), float(_state.MAX_PERIODS))) + 2
        hi = max(hi, lo + 1)
        while hi < _state.MAX_PERIODS and self._boundary(hi) <= now:
            lo, hi = hi, min(2 * hi, _state.MAX_PERIODS)
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
        if lo >= _state.MAX_PERIODS // 2:
            self._set_schedule(self._boundary(lo), 0, self._rotations)
        else:
            self._set_schedule(self._epoch, lo, self._rotations)

    def _rotate_at(self: Ring, now: Optional[float], by_fill: bool = False) -> float:
        """Rotate once, by fill or on request, and restart the schedule.  A
        mapped filter rotates by fill only if no other process did first."""
        if now is None:
            now = self._read_clock()
        when = now

        def rotate() -> None:
            if by_fill and self._gens[-1].insert_count < cast(int, self._fill_limit):
                return
            self._drop_oldest()
            self._set_schedule(when, 0, self._rotations)
        if getattr(self, "_mapping", None) is None:
            rotate()
        else:
            self._shared_rotation(rotate)
        return now

    def rotate(self: Ring) -> None:
        """Drop the oldest generation and start an empty newest one, now.

        Timed rotations already due are done first; the next timed one is
        ``rotate_every`` seconds after this one."""
        self._refresh()
        self._rotate_at(self._tick() if self._rotate_every is not None else None)

    def rotate_if_due(self: Ring) -> int:
        """Do the timed rotations that are due now (every call that reads or
        adds keys does this first); the number done since the filter last
        looked (for a mapped filter, those of other processes included)."""
        before = self._rotations
        self._refresh()
        if self._rotate_every is not None:
            self._tick()
        return self._rotations - before
