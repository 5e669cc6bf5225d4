"""State files used in place, through a shared memory mapping.

Several processes of one machine may map the same file and add at once: the
core sets bits with atomic ORs and counts inserts with an atomic add in the
header, so nobody loses anybody's bits.  A bit is in the page cache the moment
``add`` returns, so ``kill -9`` loses nothing; ``flush`` (msync) makes it
durable against power loss.

The checksum cannot follow every add.  A file mapped for writing carries the
DIRTY flag; the last writer to close it (it can take the file's exclusive
lock) recomputes the checksum and clears the flag.  A file left DIRTY by a
killed writer, or by writers that closed at the same instant (each saw the
other still there), is sealed the same way by the next process that opens it
alone, and ``BloomFilter.load`` reads it without the checksum test: its bits
are whole, only its checksum is not up to date.  Writers hold a shared ``flock`` on the file while it is
open (POSIX; on Windows there is no such coordination).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sys
import zlib
from typing import Callable, Iterator, List, Optional, TypeVar

from crawldedup import _files

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_H = TypeVar("_H", bound="MappedHandle")

_FLAGS_AT = 20
_COUNT_AT = 64
_CHECKSUM_AT = 88
_HEADER_CHECKSUM_AT = 92


def _try_exclusive(fd: int) -> bool:
    """Take the file's exclusive lock if nobody else has it open."""
    if fcntl is None:  # pragma: no cover - Windows
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        # Linux converts a lock by dropping the old one first: a refused
        # conversion leaves none, so take the shared lock again.
        fcntl.flock(fd, fcntl.LOCK_SH)
        return False
    return True


def _shared(fd: int) -> None:
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_SH)


class MappedFile:
    """An open, mapped state file: the mapping, its lock and its views."""

    def __init__(self, path: str, fd: int, mem: mmap.mmap, readonly: bool) -> None:
        self.path = path
        self.fd = fd
        self.mem = mem
        self.readonly = readonly
        self.closed = False
        # Set once this process marked the file DIRTY: only then does close()
        # seal it (a file refused at opening is left exactly as it was).
        self._marked = False
        self._views: List[memoryview] = []
        # Called just before the checksum is computed by seal(), to bring
        # derived fields (a composite file's insert count) up to date.
        self.before_seal: Optional[Callable[[], None]] = None

    @classmethod
    def open(cls, path: str, readonly: bool) -> "MappedFile":
        fd = os.open(path, (os.O_RDONLY if readonly else os.O_RDWR) | getattr(os, "O_BINARY", 0))
        try:
            _shared(fd)
            size = os.fstat(fd).st_size
            if size == 0:
                raise _files.CorruptFileError(path, "the file is empty")
            mem = mmap.mmap(fd, size, access=mmap.ACCESS_READ if readonly else mmap.ACCESS_WRITE)
        except BaseException:
            os.close(fd)
            raise
        if hasattr(mem, "madvise") and hasattr(mmap, "MADV_RANDOM"):
            try:  # probes are random: read-ahead would only waste memory and I/O
                mem.madvise(mmap.MADV_RANDOM)
            except OSError:  # pragma: no cover
                pass
        return cls(path, fd, mem, readonly)

    def view(self, start: int, stop: Optional[int] = None) -> memoryview:
        """A view of the mapping, released when the file is closed."""
        view = memoryview(self.mem)[start:stop]
        self._views.append(view)
        return view

    def words(self, start: int, stop: int) -> memoryview:
        """The mapping from start to stop as native unsigned 64-bit words
        (the file is little-endian; callers check the byte order), released
        when the file is closed."""
        view = self.view(start, stop).cast("Q")
        self._views.insert(0, view)  # released before the view it is cast from
        return view

    @contextlib.contextmanager
    def writer_section(self) -> Iterator[None]:
        """Exclusion between the processes that change shared state beyond
        single bits (a rotation): a POSIX record lock on the file's first
        byte, independent of the flock that tracks who has the file open."""
        if fcntl is None:  # pragma: no cover - Windows: one process per file
            yield
            return
        fcntl.lockf(self.fd, fcntl.LOCK_EX, 1, 0, os.SEEK_SET)
        try:
            yield
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, 0, os.SEEK_SET)

    @property
    def size(self) -> int:
        return len(self.mem)

    @property
    def dirty(self) -> bool:
        return bool(self._flags() & _files.FLAG_DIRTY)

    def _set_flags(self, flags: int) -> None:
        """Write the flags and the header checksum that covers them."""
        head = bytearray(self.mem[:_files.HEADER_SIZE])
        head[_FLAGS_AT:_FLAGS_AT + 4] = flags.to_bytes(4, "little")
        crc = _files.header_checksum(head)
        self.mem[_FLAGS_AT:_FLAGS_AT + 4] = flags.to_bytes(4, "little")
        self.mem[_HEADER_CHECKSUM_AT:_HEADER_CHECKSUM_AT + 4] = crc.to_bytes(4, "little")

    def _flags(self) -> int:
        return int.from_bytes(self.mem[_FLAGS_AT:_FLAGS_AT + 4], "little")

    def mark_dirty(self) -> None:
        self._set_flags(self._flags() | _files.FLAG_DIRTY)
        self._marked = True

    def checksum(self) -> int:
        """CRC-32 of the file as stored now, as _files.checksum computes it."""
        head = bytearray(self.mem[:_files.HEADER_SIZE])
        head[_CHECKSUM_AT:_CHECKSUM_AT + 4] = b"\0\0\0\0"
        crc = zlib.crc32(head)
        payload = memoryview(self.mem)[_files.HEADER_SIZE:]
        try:
            step = 1 << 30
            for start in range(0, len(payload), step):
                crc = zlib.crc32(payload[start:start + step], crc)
        finally:
            payload.release()
        return crc & 0xFFFFFFFF

    def stored_checksum(self) -> int:
        return int.from_bytes(self.mem[_CHECKSUM_AT:_CHECKSUM_AT + 4], "little")

    def seal(self) -> None:
        """Clear DIRTY and write the checksum (the caller holds the file alone)."""
        if self.before_seal is not None:
            self.before_seal()
        self._set_flags(self._flags() & ~_files.FLAG_DIRTY)
        crc = self.checksum()
        self.mem[_CHECKSUM_AT:_CHECKSUM_AT + 4] = crc.to_bytes(4, "little")

    def flush(self) -> None:
        if not self.readonly and not self.closed:
            self.mem.flush()

    def try_exclusive(self) -> bool:
        return _try_exclusive(self.fd)

    def back_to_shared(self) -> None:
        _shared(self.fd)

    def close(self) -> None:
        """Seal the file if this is its last writer, flush, unmap, unlock."""
        if self.closed:
            return
        try:
            if not self.readonly and self._marked:
                if self.try_exclusive():
                    self.seal()
                self.mem.flush()
        finally:
            self.closed = True
            for view in self._views:
                view.release()
            self._views.clear()
            try:
                self.mem.close()
            finally:
                os.close(self.fd)  # also releases the lock


class MappedHandle:
    """What a filter that may live in a mapped file (its ``_mapping``) offers:
    ``path``, ``closed``, ``flush``, ``close`` and the context manager.
    Subclasses let go of their views of the mapping in ``_release_storage``."""

    __slots__ = ()

    # Given by every subclass: let go of the views of the mapping.
    _release_storage: Callable[[], None]

    @property
    def path(self) -> Optional[str]:
        """The mapped file, or None for a filter in memory."""
        mapping = getattr(self, "_mapping", None)
        return None if mapping is None else mapping.path

    @property
    def closed(self) -> bool:
        """True once a mapped filter has been closed."""
        mapping = getattr(self, "_mapping", None)
        return mapping is not None and mapping.closed

    def flush(self) -> None:
        """Make the adds to a mapped file durable (msync); nothing to do in memory."""
        mapping = getattr(self, "_mapping", None)
        if mapping is not None:
            if mapping.closed:
                raise ValueError("the filter is closed")
            mapping.flush()

    def close(self) -> None:
        """Unmap a mapped filter (the last writer seals the file's checksum).
        Later use raises ValueError.  Nothing to do for a filter in memory."""
        mapping = getattr(self, "_mapping", None)
        if mapping is None or mapping.closed:
            return
        self._release_storage()
        mapping.close()

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create(path: str, header: _files.Header, exclusive: bool, prefix: bytes = b"") -> bool:
    """Write a new state file of zero bits (sparse where the file system
    allows), DIRTY since it has no checksum yet.  ``exclusive``: never replace
    an existing file (False is returned when one appeared meanwhile);
    otherwise replace it atomically, so that processes still mapping the old
    one keep a valid mapping (of the old file).  ``prefix``: the first bytes
    of the payload (a composite file's state block); the rest is zero."""
    target = os.path.abspath(path)
    header.flags |= _files.FLAG_DIRTY
    header.checksum = 0
    tmp = _files._temp_name(target)
    try:
        with open(tmp, "wb") as f:
            f.write(header.pack())
            f.write(prefix)
            f.truncate(_files.HEADER_SIZE + header.payload_size)
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            try:
                os.link(tmp, target)
            except FileExistsError:
                return False
            except OSError:  # pragma: no cover - no hard links here
                if os.path.exists(target):
                    return False
                os.replace(tmp, target)
        else:
            os.replace(tmp, target)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    _files._fsync_folder(os.path.dirname(target))
    return True


def supports_locking() -> bool:
    return fcntl is not None and sys.platform != "win32"


__all__ = ["MappedFile", "MappedHandle", "create", "supports_locking"]
