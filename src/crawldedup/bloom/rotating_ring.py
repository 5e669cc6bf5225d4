"""A rotating Bloom filter used in place in a memory-mapped state file, its
rotation schedule shared by the processes that open it: the ``open`` of
:class:`~crawldedup.RotatingBloomFilter` and what keeps the processes in step.

Generations live in the file's slots (a ring, see ``_rotating_state``); a
rotation is written by one process at a time, under a lock on the file, into
the state block's "pending" words first, with an odd sequence number, and
then applied, so that a writer killed in the middle of one leaves it to be
finished by the next.  Every process follows the sequence number at its next
call.
"""

from __future__ import annotations

import math
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple, Type, TypeVar, cast

from crawldedup import _checks
from crawldedup._defaults import ERROR_RATE
from crawldedup._kernel import nbytes_for
from crawldedup._types import Clock, PathLike
from crawldedup.bloom import rotating_file as _state
from crawldedup.bloom.filter import BloomFilter, check_padding, mapped_member, optimal_parameters
from crawldedup.bloom.layouts import check_layout, layout_id, layout_of
from crawldedup.errors import CorruptFileError, CrawldedupError
from crawldedup.formats import files as _files
from crawldedup.formats import mapped as _mapped

if TYPE_CHECKING:
    from crawldedup.bloom.schedule import Ring


_R = TypeVar("_R", bound="SharedRing")


class SharedRing(_mapped.MappedHandle):
    """The mapped-file half of RotatingBloomFilter (a mixin: it uses the
    filter's schedule and generations, ``_set_params``, ``_set_schedule``,
    ``_gens``, ``_generations``)."""

    __slots__ = ()

    # Given by RotatingBloomFilter's slots; set by _attach.
    _mapping: Any
    _words: Any
    _slots: Any
    _seq: int

    @classmethod
    def open(cls: Type[_R], path: PathLike, capacity: Optional[int] = None,
             error_rate: Optional[float] = None, generations: Optional[int] = None,
             rotate_every: Optional[float] = None, rotate_at_fill: Optional[float] = None, *,
             mode: str = "c", seed: Optional[int] = None, layout: Optional[str] = None,
             clock: Clock = time.time, verify: Optional[bool] = None) -> _R:
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
        >>> from crawldedup import RotatingBloomFilter
        >>> path = os.path.join(tempfile.mkdtemp(), "seen.rbf")
        >>> with RotatingBloomFilter.open(path, 1000, rotate_every=86400) as rf:
        ...     rf.add("https://example.com/")
        True
        >>> with RotatingBloomFilter.open(path, mode="r") as rf:
        ...     "https://example.com/" in rf, rf.generations
        (True, 2)
        """
        clock = _checks.check_clock(clock)
        checks = (("capacity", capacity, _checks.check_capacity),
                  ("error_rate", error_rate, _checks.check_error_rate),
                  ("generations", generations, _checks.check_generations),
                  ("rotate_every", rotate_every, _checks.check_rotate_every),
                  ("rotate_at_fill", rotate_at_fill, _checks.check_rotate_at_fill),
                  ("seed", seed, _checks.check_seed), ("layout", layout, check_layout))
        asked: Dict[str, Any] = {name: check(value) for name, value, check in checks
                                 if value is not None}
        if verify is not None:
            verify = _checks.check_flag("verify", verify)
        return _mapped.open_state(path, mode, asked, lambda: cls._blank_file(asked, clock),
                                  lambda mapping: cls._attach(mapping, asked, verify, clock))

    @classmethod
    def _blank_file(cls, asked: Dict[str, Any], clock: Clock) -> Tuple[_files.Header, bytes]:
        """The header and state block of a new file (its slots are zero)."""
        capacity = asked["capacity"]
        error_rate = asked.get("error_rate", ERROR_RATE)
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
        prefix = _state.STATE.pack(generations, math.nan if every is None else every,
                             math.nan if fill is None else fill, now, 0, 0,
                             generations - 1, 0, 0.0, 0, 0, 0, 0)
        header = _files.Header(
            kind=_files.KIND_ROTATING, hash_algorithm=_files.HASH_MURMUR3_EDH,
            layout=layout_id(layout), flags=0, seed=asked.get("seed", 0),
            num_bits=num_bits, num_hashes=num_hashes, capacity=capacity,
            error_rate=error_rate, insert_count=0,
            payload_size=_state.STATE_BYTES + generations * _state.slot_bytes(num_bits))
        return header, prefix

    @classmethod
    def _attach(cls: Type[_R], mapping: Any, asked: Dict[str, Any], verify: Optional[bool],
                clock: Clock) -> _R:
        path = mapping.path
        if sys.byteorder != "little":  # pragma: no cover - no such machine here
            raise CrawldedupError("mapped rotating filters need a little-endian machine; "
                                  "use RotatingBloomFilter.load")
        header = _files.parse_header(mapping.mem[:_files.HEADER_SIZE], mapping.size, path)
        _state.check_header(header, path)

        def bad(reason: str) -> CorruptFileError:
            return CorruptFileError(path, reason)
        # A view the mapping releases when it closes: a bare memoryview held
        # by a traceback would keep the mapping from closing.
        state = _state.parse_state(header, mapping.view(_files.HEADER_SIZE), bad)
        found: Dict[str, Any] = {
            "capacity": header.capacity, "error_rate": header.error_rate,
            "generations": state.generations, "rotate_every": state.rotate_every,
            "rotate_at_fill": state.rotate_at_fill, "seed": header.seed,
            "layout": layout_of(header.layout, path).name}
        _mapped.check_asked(path, asked, found)
        count = state.generations
        # A sealed file's header holds the sum of the slots' counts, as load
        # checks; a writer that began meanwhile marked the file DIRTY first.
        block = memoryview(mapping.mem[_files.HEADER_SIZE:_files.HEADER_SIZE + _state.STATE_BYTES])
        total = sum(_state.insert_counts(block, count))
        if not header.flags & _files.FLAG_DIRTY and total != header.insert_count \
                and not mapping.dirty:
            raise bad(f"insert count {header.insert_count} in the header, the generations "
                      f"hold {total}")
        layout = found["layout"]
        made = cls.__new__(cls)
        self = cast("Ring", made)  # the whole filter, as its mixins see it
        self._set_params(header.capacity, header.error_rate, count, state.rotate_every,
                         state.rotate_at_fill, header.seed, layout, clock)
        self._mapping = mapping
        base = _files.HEADER_SIZE
        self._words = mapping.words(base, base + _state.STATE_BYTES)
        slot = _state.slot_bytes(header.num_bits)
        nbytes = nbytes_for(header.num_bits)
        params = (header.capacity, header.error_rate / count, header.seed, header.num_bits,
                  header.num_hashes, layout)
        self._slots = []
        try:
            for index in range(count):
                at = base + _state.STATE_BYTES + index * slot
                try:
                    check_padding(header.num_bits, mapping.mem[at + nbytes - 8:at + nbytes], path)
                except CorruptFileError as exc:
                    raise bad(f"slot {index}: {exc.reason}") from None
                if any(mapping.mem[at + nbytes:at + slot]):  # as load checks it
                    raise bad(f"slot {index}: bytes past its bits are set")
                where = base + _state.COUNTS_AT + 8 * index
                self._slots.append(mapped_member(BloomFilter, mapping, at, where, params))
            self._seq = -1
            mapping.before_seal = self._before_seal
            mapping.check_on_open(verify)
            if not mapping.readonly:
                with mapping.writer_section():
                    self._sync(locked=True)
            else:
                self._sync(first=True)
        except BaseException:
            mapping.before_seal = None
            for member in self._slots:
                member._release()
            raise
        return made

    def _before_seal(self: Ring) -> None:
        """Bring the header up to date before the checksum is computed (the
        caller holds the file alone): finish a rotation a killed writer left
        half done, and store the insert count."""
        words = self._words
        if words[_state.W_SEQUENCE] & 1:
            self._apply_pending()
        total = sum(words[_state.W_COUNTS + i] for i in range(self._generations))
        at = _files.COUNT_AT
        self._mapping.mem[at:at + 8] = (total & (2 ** 64 - 1)).to_bytes(8, "little")

    def _sync(self: Ring, locked: bool = False, first: bool = False) -> None:
        """Follow the rotations other processes made (seen through the state
        block's sequence number; odd while a rotation is being written)."""
        words = self._words
        seq = words[_state.W_SEQUENCE]
        if seq == self._seq:
            return
        if seq & 1:
            if locked:  # its writer died (we hold the rotation lock): finish it
                self._apply_pending()
                seq = words[_state.W_SEQUENCE]
            elif not first:
                return  # being written: keep the current view until it is done
        epoch, periods = _state.as_float(words[_state.W_EPOCH]), words[_state.W_PERIODS]
        rotations, newest = words[_state.W_ROTATIONS], words[_state.W_NEWEST]
        if not first and words[_state.W_SEQUENCE] != seq:
            return
        count = self._generations
        if newest >= count:
            raise CorruptFileError(self._mapping.path,
                                   f"newest generation slot {newest}, not below {count}")
        slots = self._slots
        self._gens = [slots[(newest + 1 + i) % count] for i in range(count)]
        self._set_schedule(epoch, periods, rotations)
        self._seq = seq

    def _apply_pending(self: Ring) -> None:
        """Do the rotation written in the state block's pending fields: clear
        the dropped slots, then publish the new schedule and newest slot."""
        self._mapping.begin_write()
        words = self._words
        count = self._generations
        # The dropped slots are the `drops` slots up to the new newest one,
        # found from the pending words alone: a writer killed while copying
        # them to the live words leaves those half updated, and finishing the
        # rotation again must clear the same slots.
        for slot in _state.dropped_slots(words[_state.W_P_NEWEST], words[_state.W_DROPS], count):
            self._slots[slot].clear()
        for live, pending in ((_state.W_EPOCH, _state.W_P_EPOCH),
                              (_state.W_PERIODS, _state.W_P_PERIODS),
                              (_state.W_ROTATIONS, _state.W_P_ROTATIONS),
                              (_state.W_NEWEST, _state.W_P_NEWEST)):
            words[live] = words[pending]
        words[_state.W_SEQUENCE] = words[_state.W_SEQUENCE] + 1

    def _shared_rotation(self: Ring, action: Callable[[], None]) -> None:
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
                newest = (words[_state.W_NEWEST] + drops) % count
                words[_state.W_P_EPOCH] = _state.as_word(self._epoch)
                words[_state.W_P_PERIODS] = self._periods
                words[_state.W_P_ROTATIONS] = self._rotations
                words[_state.W_P_NEWEST] = newest
                # Dropping more generations than there are clears them all.
                words[_state.W_DROPS] = min(drops, count)
                words[_state.W_SEQUENCE] = words[_state.W_SEQUENCE] + 1
                self._apply_pending()
                self._seq = words[_state.W_SEQUENCE]

    def _release_storage(self: Ring) -> None:
        for member in self._slots:
            member._release()  # refused while a batch call runs in another thread
