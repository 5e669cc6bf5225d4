"""What filters made of several Bloom filters (scalable, rotating) share:
their batches of keys over a stack of member filters, the checks of their
file header, and their member filters in files, each stored as a u64 length
and the member's complete BloomFilter bytes (docs/format.md)."""

from __future__ import annotations

import struct
from typing import Callable, Iterable, Iterator, Optional, Sequence, Tuple

import numpy as np

from crawldedup._kernel import MAX_SEED, check_keys
from crawldedup._types import Key, PathLike
from crawldedup.bloom.filter import BloomFilter
from crawldedup.errors import CorruptFileError, IncompatibleFilterError
from crawldedup.formats import files as _files

LENGTH = struct.Struct("<Q")
# The smallest member: a length field and a BloomFilter file of one word.
MIN_MEMBER = LENGTH.size + _files.HEADER_SIZE + 8


# ------------------------------------------------------- batches over members

def key_list(keys: Iterable[Key]) -> Sequence[Key]:
    """The keys of a batch as a list or tuple, every key checked: a batch
    is added whole or not at all."""
    if isinstance(keys, (str, bytes, bytearray, memoryview)):
        raise TypeError(
            f"keys must be an iterable of keys, not a single {type(keys).__name__}; "
            f"use add()/`in` for one key")
    seq = keys if type(keys) is list or type(keys) is tuple else list(keys)
    check_keys(seq)  # a batch is added whole or not at all
    return seq


def pick(keys: Sequence[Key], index: np.ndarray) -> Sequence[Key]:
    """The keys at an increasing index array."""
    if len(index) == len(keys):  # index is increasing: it is every key
        return keys
    return [keys[i] for i in index.tolist()]


def any_holds(filters: Sequence[BloomFilter], keys: Sequence[Key]) -> np.ndarray:
    """True where one of the filters holds the key.  The last (newest)
    filter is asked about every key (so a bad key raises with its index);
    each earlier one only about the keys not found yet."""
    found = np.zeros(len(keys), dtype=np.bool_)
    todo = np.arange(len(keys))
    for f in reversed(filters):
        if not todo.size:
            break
        hit = f.contains_many(pick(keys, todo))
        found[todo[hit]] = True
        todo = todo[~hit]
    return found


#: The smallest window of keys looked at once while the newest member is
#: nearly full (see add_in_windows).
MIN_WINDOW = 4096


def add_in_windows(keys: Sequence[Key], todo: np.ndarray, *,
                   newest: Callable[[], BloomFilter], room: Callable[[BloomFilter], int],
                   took: Callable[[np.ndarray, np.ndarray], None],
                   grow: Callable[[], object], filled: Callable[[BloomFilter], None],
                   eager: bool, checked: bool) -> None:
    """Adds ``keys[todo]`` (todo increasing) to the newest member of a stack
    with the answers and member changes of adding them one by one.

    ``room(member)``: how many more adds the newest member takes; ``eager``:
    the stack acts (``filled``, a rotation) as soon as the member has taken
    them all, else only when the next key comes (``grow``, once ``room`` is
    0 or less).  ``took(index, flags)`` receives the newest member's answers
    for the keys at index.  ``checked``: every key was looked at already
    (bad keys raise before anything changes), so windows may be short.
    """
    while todo.size:
        member = newest()
        space = room(member)
        if todo.size < space or (not eager and todo.size == space):
            # At most `space` of them can be new: the member does not fill
            # before the end.
            took(todo, member.add_many(pick(keys, todo)))
            return
        if space <= 0:
            # Keys the full member holds are not new; the first one it does
            # not hold opens the next member.
            todo = todo[~member.contains_many(pick(keys, todo))]
            if todo.size:
                grow()
            checked = True
            continue
        # Only `space` more keys fit.  Keys held now stay held, so skip them;
        # of the others, add the first `space`: the member cannot fill before
        # the last of them.  The first look covers every key (so a bad key
        # raises, with its index, before anything changes); later looks a
        # window, so that a member near full does not rescan the whole batch
        # for each key it takes.
        window = todo if not checked else todo[:max(4 * space, MIN_WINDOW)]
        checked = True
        absent = window[~member.contains_many(pick(keys, window))]
        if absent.size < space or (not eager and absent.size == space):
            if absent.size:
                took(absent, member.add_many(pick(keys, absent)))
            todo = todo[window.size:]
            continue
        take = absent[:space]
        took(take, member.add_many(pick(keys, take)))
        todo = todo[int(np.searchsorted(todo, take[-1])) + 1:]
        filled(member)


# ------------------------------------------------------------------- files

def pack(payload: bytearray, members: Iterable[BloomFilter]) -> bytearray:
    """Append each member, length-prefixed, to payload."""
    for member in members:
        data = member.to_bytes()
        payload += LENGTH.pack(len(data))
        payload += data
    return payload


def check_header(header: _files.Header, path: Optional[PathLike], kind: int,
                 capacity_name: str = "capacity") -> None:
    """The checks every composite header needs: its kind (with its hash
    algorithm and flags: formats.files.check_kind), seed and sizing ranges."""
    def bad(reason: str) -> CorruptFileError:
        return CorruptFileError(path, reason)
    _files.check_kind(header, path, kind)
    if header.seed > MAX_SEED:
        raise bad(f"seed {header.seed} does not fit in 32 bits")
    if header.capacity < 1 or not 0.0 < header.error_rate < 1.0:
        raise bad(f"{capacity_name} {header.capacity} / error_rate {header.error_rate!r} "
                  f"out of range")


def read(payload: memoryview, offset: int, count: int, noun: str, where: Callable[[int], str],
         bad: Callable[[str], CorruptFileError]) -> Iterator[Tuple[str, BloomFilter]]:
    """The count members stored from offset, each with a description of where
    it is for error messages; then that nothing follows the last one."""
    size = len(payload)
    for index in range(count):
        here = where(index)
        if size - offset < LENGTH.size:
            raise bad(f"{here}: the payload ends before its length")
        (length,) = LENGTH.unpack_from(payload, offset)
        offset += LENGTH.size
        if length > size - offset:
            raise bad(f"{here}: {length} bytes announced, {size - offset} left")
        data = payload[offset:offset + length]
        offset += length
        try:
            header = _files.parse_header(data[:_files.HEADER_SIZE], length, None)
            if header.flags != 0:
                # to_bytes() writes none; DIRTY would skip the member's checksum.
                raise CorruptFileError(None, f"flags {header.flags:#x}, not 0")
            member = BloomFilter.from_bytes(data)
        except (CorruptFileError, IncompatibleFilterError) as exc:
            reason = exc.reason if isinstance(exc, CorruptFileError) else str(exc)
            raise bad(f"{here}: {reason}") from None
        yield here, member
    if offset != size:
        raise bad(f"{size - offset} unexpected bytes after the last {noun}")
