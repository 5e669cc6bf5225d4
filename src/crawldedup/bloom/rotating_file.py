"""The state block of a rotating Bloom filter file (docs/format.md,
"Rotating Bloom filter file"): its layout, its words, and its checks.

The payload is a state block of STATE_BYTES, then one page-aligned slot of
bits per generation, used as a ring.  The state block holds u64 / f64 words:
generations, rotate_every (NaN for None), rotate_at_fill (NaN for None),
schedule epoch, timed periods since the epoch, rotation count, the slot of
the newest generation, a sequence number (odd while a rotation is being
written), the rotation being written (epoch, periods, rotations, newest slot,
slots dropped), then from word W_COUNTS each slot's insert count.  The rest
is zero.
"""

from __future__ import annotations

import math
import struct
from typing import Callable, List, NamedTuple, Optional, Sequence

from crawldedup._checks import MAX_GENERATIONS, MIN_GENERATIONS
from crawldedup._kernel import nbytes_for
from crawldedup._types import PathLike
from crawldedup.bloom import members as _members
from crawldedup.bloom.filter import BloomFilter, check_padding, optimal_parameters
from crawldedup.bloom.layouts import layout_of
from crawldedup.bloom.sizing import max_insert_count
from crawldedup.errors import CorruptFileError
from crawldedup.formats import files as _files

STATE_BYTES = 4096
STATE = struct.Struct("<QdddQQQQdQQQQ")
(W_GENERATIONS, W_EVERY, W_FILL, W_EPOCH, W_PERIODS, W_ROTATIONS, W_NEWEST,
 W_SEQUENCE, W_P_EPOCH, W_P_PERIODS, W_P_ROTATIONS, W_P_NEWEST, W_DROPS) = range(13)
W_COUNTS = 16
COUNTS_AT = 8 * W_COUNTS
_PAGE = 4096
# Past this many periods since the epoch, float arithmetic can no longer tell
# consecutive period boundaries apart: the schedule is re-anchored.
MAX_PERIODS = 1 << 52
# A clock time (an epoch) is within this many seconds of 0: beyond it a float
# no longer counts whole seconds, and no clock gives such times (time.time is
# near 2**31).  The filter's clock is held to the same range.
MAX_TIME = 2.0 ** 53
# A rotation adds at most MAX_GENERATIONS to the rotation count and 2 to the
# sequence number, so no writer takes either to 2**63; a word at or past it
# is not one crawldedup wrote (and its next rotation would overflow the u64).
MAX_COUNTER = 1 << 63


def slot_bytes(num_bits: int) -> int:
    """A generation's slot: its bits, rounded up to whole pages."""
    return -(-nbytes_for(num_bits) // _PAGE) * _PAGE


def as_float(word: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", word))[0])


def as_word(value: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", value))[0])


class State(NamedTuple):
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


def dropped_slots(new_newest: int, drops: int, generations: int) -> List[int]:
    """The slots a rotation clears: the ``drops`` slots up to and including
    its new newest one (all of them when drops >= generations)."""
    drops = min(drops, generations)
    return [(new_newest - drops + step) % generations for step in range(1, drops + 1)]


def check_schedule(every: Optional[float], epoch: float, periods: int, what: str,
                    bad: Callable[[str], CorruptFileError]) -> None:
    if not math.isfinite(epoch):
        raise bad(f"{what}epoch {epoch!r} is not a finite time")
    if every is None and periods != 0:
        raise bad(f"{what}{periods} timed rotation periods without rotate_every")
    if periods >= MAX_PERIODS:
        raise bad(f"{what}{periods} rotation periods since the epoch, more than 2**52")
    if every is not None and not math.isfinite(epoch + (periods + 1) * every):
        raise bad(f"{what}the next rotation after epoch {epoch!r} and {periods} periods of "
                  f"{every!r} s is not a finite time")
    if not -MAX_TIME < epoch < MAX_TIME:
        raise bad(f"{what}epoch {epoch!r} outside (-2**53, 2**53) seconds")


def parse_state(header: _files.Header, payload: memoryview,
                 bad: Callable[[str], CorruptFileError]) -> State:
    """The checked state block of a checked header's payload, after checking
    that the header's sizing and the payload's size fit it."""
    size = len(payload)
    if size < STATE_BYTES:
        raise bad(f"payload of {size} bytes, shorter than the {STATE_BYTES}-byte state block")
    (generations, every, fill, epoch, periods, rotations, newest, sequence, p_epoch, p_periods,
     p_rotations, p_newest, drops) = STATE.unpack_from(payload, 0)
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
    check_schedule(rotate_every, epoch, periods, "rotation schedule ", bad)
    if newest >= generations:
        raise bad(f"newest generation slot {newest}, not below {generations}")
    if rotations >= MAX_COUNTER:
        raise bad(f"rotation count {rotations} not below 2**63")
    if sequence >= MAX_COUNTER:
        raise bad(f"sequence number {sequence} not below 2**63")
    if sequence & 1:  # a rotation was being written: it must be one that can be finished
        if not 1 <= drops <= generations:
            raise bad(f"a rotation in progress drops {drops} generations, not 1 to "
                      f"{generations}")
        # The live words are those before the rotation or, when its writer
        # was killed while publishing it (epoch, periods, rotations, then the
        # newest slot), partly the rotation's own already.  A rotation of
        # more generations than there are writes drops = generations, and its
        # new newest slot can be any.
        follows = (p_newest == (newest + drops) % generations or drops == generations)
        published = p_newest == newest and p_rotations == rotations
        counted = p_rotations == rotations or p_rotations >= rotations + drops
        if p_newest >= generations or not counted or not (follows or published):
            raise bad(f"the rotation in progress (newest slot {p_newest}, rotation "
                      f"{p_rotations}) does not follow from slot {newest}, rotation "
                      f"{rotations} and {drops} dropped")
        check_schedule(rotate_every, p_epoch, p_periods, "the rotation in progress: ", bad)
        if p_rotations >= MAX_COUNTER:
            raise bad(f"the rotation in progress: rotation count {p_rotations} not below "
                      f"2**63")
    if any(payload[8 * 13:COUNTS_AT]) or any(payload[COUNTS_AT + 8 * generations:STATE_BYTES]):
        raise bad("unused bytes of the state block are set")
    layout = layout_of(header.layout, None).name  # its id checked by check_header
    member_rate = header.error_rate / generations
    try:
        sizing = optimal_parameters(header.capacity, member_rate, layout)
    except ValueError as exc:
        raise bad(f"capacity {header.capacity} / error rate {header.error_rate!r} cannot "
                  f"be split in {generations} generations: {exc}") from None
    if (header.num_bits, header.num_hashes) != sizing:
        raise bad(f"num_bits {header.num_bits} / num_hashes {header.num_hashes} do not "
                  f"match the capacity, error rate and generations")
    expected = STATE_BYTES + generations * slot_bytes(header.num_bits)
    if size != expected:
        raise bad(f"payload of {size} bytes; {generations} generations of "
                  f"{header.num_bits} bits take {expected}")
    most = max_insert_count(header.num_bits)
    for slot, count in enumerate(insert_counts(payload, generations)):
        if count > most:
            raise bad(f"slot {slot}: insert count {count} out of range for "
                      f"{header.num_bits} bits (at most {most})")
    if header.insert_count > min(generations * most, 2 ** 63 - 1):
        raise bad(f"insert count {header.insert_count} in the header out of range for "
                  f"{generations} generations of {header.num_bits} bits")
    return State(generations, rotate_every, rotate_at_fill, epoch, periods, rotations, newest,
                  sequence, p_epoch, p_periods, p_rotations, p_newest, drops)


def insert_counts(payload: memoryview, generations: int) -> List[int]:
    """The slots' insert counts, from the state block."""
    return list(struct.unpack_from(f"<{generations}Q", payload, COUNTS_AT))


def pack_payload(gens: Sequence[BloomFilter], rotate_every: Optional[float],
                 rotate_at_fill: Optional[float], epoch: float, periods: int,
                 rotations: int) -> bytearray:
    """The state block and the generations' slots (docs/format.md): the
    newest generation in the last slot, the oldest in the first."""
    count = len(gens)
    slot = slot_bytes(gens[0].num_bits)
    payload = bytearray(STATE_BYTES + count * slot)
    nan = math.nan
    STATE.pack_into(payload, 0, count, nan if rotate_every is None else rotate_every,
                    nan if rotate_at_fill is None else rotate_at_fill,
                    epoch, periods, rotations, count - 1, 0, 0.0, 0, 0, 0, 0)
    for index, f in enumerate(gens):
        struct.pack_into("<Q", payload, COUNTS_AT + 8 * index, f.insert_count)
        at = STATE_BYTES + index * slot
        bits = f._bits_view()
        payload[at:at + len(bits)] = bits
    return payload


def unpack_generations(header: _files.Header, payload: memoryview, state: State,
                       counts: List[int], path: Optional[PathLike],
                       bad: Callable[[str], CorruptFileError]) -> List[BloomFilter]:
    """The generations of a checked state block's payload, oldest first,
    after checking each slot (its padding, and nothing set past its bits).
    A rotation that a killed writer left in the middle is finished."""
    count = state.generations
    slot = slot_bytes(header.num_bits)
    nbytes = nbytes_for(header.num_bits)
    params = (header.capacity, header.error_rate / count, header.seed, header.num_bits,
              header.num_hashes, layout_of(header.layout, None).name)
    slots = []
    for index in range(count):
        at = STATE_BYTES + index * slot
        if any(payload[at + nbytes:at + slot]):
            raise bad(f"slot {index}: bytes past its bits are set")
        try:
            check_padding(header.num_bits, payload[at + nbytes - 8:at + nbytes], path)
        except CorruptFileError as exc:
            raise bad(f"slot {index}: {exc.reason}") from None
        member = BloomFilter._blank(params, counts[index])
        member._bits_view()[:] = payload[at:at + nbytes]
        slots.append(member)
    newest = state.newest
    if state.sequence & 1:  # killed while rotating: finish the rotation
        for dropped in dropped_slots(state.pending_newest, state.drops, count):
            slots[dropped].clear()
        newest = state.pending_newest
    return [slots[(newest + 1 + i) % count] for i in range(count)]


def check_header(header: _files.Header, path: Optional[PathLike]) -> None:
    """Refuse a header that is not of a rotating Bloom filter crawldedup wrote."""
    _members.check_header(header, path, _files.KIND_ROTATING)
    layout_of(header.layout, path)
