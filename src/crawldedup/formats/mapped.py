"""State files used in place, through a shared memory mapping.

Several processes of one machine may map the same file and add at once: the
core sets bits with atomic ORs and counts inserts with an atomic add in the
header, so nobody loses anybody's bits.  A bit is in the page cache the moment
``add`` returns, so ``kill -9`` loses nothing; ``flush`` (msync) makes it
durable against power loss.

The checksum cannot follow every add.  A file being changed carries the
DIRTY flag, and a process never writes a valid checksum over bytes that were
not checked: the first change a process makes to a file that is not DIRTY
(``begin_write``) checks the file's checksum first, then marks it DIRTY, so
opening stays instant however large the file, and damage present before the
open is refused there (``CorruptFileError``) instead of being sealed in.  A
file that is already DIRTY was checked by the writer that marked it, and
every change since is an add.  The last writer to close the file (it can
take the file's exclusive lock) recomputes the checksum and clears the flag.
A file left DIRTY by a killed writer is sealed the same way by the next
writer that opens it alone, and ``BloomFilter.load`` reads it without the
checksum test: its bits are whole, only its checksum is not up to date.
Writers hold a shared ``flock`` on the file while it is open (POSIX; on
Windows there is no such coordination).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import stat
import sys
import zlib
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

from crawldedup.errors import IncompatibleFilterError
from crawldedup.formats import files as _files

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_H = TypeVar("_H", bound="MappedHandle")


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


def _try_exclusive_once(fd: int) -> bool:
    """Take the exclusive lock if nobody else has the file open; when
    refused, this process keeps no lock at all (it is closing)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
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
        # Set once this process found the stored checksum right.
        self._checked = False
        self._views: List[memoryview] = []
        # Called just before the checksum is computed by seal(), to bring
        # derived fields (a composite file's insert count) up to date.
        self.before_seal: Optional[Callable[[], None]] = None

    @classmethod
    def open(cls, path: str, readonly: bool) -> "MappedFile":
        fd = os.open(path, (os.O_RDONLY if readonly else os.O_RDWR) | getattr(os, "O_BINARY", 0))
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise IsADirectoryError(errno.EISDIR, "a folder, not a state file", path)
            if not stat.S_ISREG(info.st_mode):
                raise _files.CorruptFileError(path, "not a regular file (it cannot be mapped)")
            _shared(fd)
            size = os.fstat(fd).st_size
            if size == 0:
                raise _files.CorruptFileError(path, "the file is empty")
            try:
                mem = mmap.mmap(fd, size,
                                access=mmap.ACCESS_READ if readonly else mmap.ACCESS_WRITE)
            except OSError as exc:
                raise OSError(exc.errno, f"cannot map it: {exc.strerror}", path) from None
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
        head[_files.FLAGS_AT:_files.FLAGS_AT + 4] = flags.to_bytes(4, "little")
        crc = _files.header_checksum(head)
        self.mem[_files.FLAGS_AT:_files.FLAGS_AT + 4] = flags.to_bytes(4, "little")
        at = _files.HEADER_CHECKSUM_AT
        self.mem[at:at + 4] = crc.to_bytes(4, "little")

    def _flags(self) -> int:
        return int.from_bytes(self.mem[_files.FLAGS_AT:_files.FLAGS_AT + 4], "little")

    def mark_dirty(self) -> None:
        self._set_flags(self._flags() | _files.FLAG_DIRTY)
        self._marked = True

    def verify_clean(self) -> bool:
        """Check the stored checksum of a file that is not DIRTY: True when
        it matches, False when the file is DIRTY (then it was checked by the
        writer that marked it, and its checksum is not up to date).  Raises
        CorruptFileError for a mismatch.  Needs no lock: a writer marks the
        file DIRTY before its first change, so a mismatch caused by another
        process that began writing meanwhile shows as DIRTY on a second look."""
        if self.dirty:
            return False
        if self.checksum() == self.stored_checksum():
            self._checked = True
            return True
        if self.dirty:
            return False
        raise _files.CorruptFileError(self.path, "checksum mismatch (the file was damaged)")

    def check_on_open(self, verify: Optional[bool]) -> None:
        """What opening does to a file, after its header was checked:
        check the checksum when asked (by default, for files under
        VERIFY_BELOW_BYTES), and seal a file left DIRTY by a killed writer
        when this writer has it alone.  Nothing else in the file changes
        before this process first writes (begin_write)."""
        if verify is None:
            verify = self.size < VERIFY_BELOW_BYTES
        if verify:
            self.verify_clean()
        if not self.readonly:
            self.repair_if_alone()

    def repair_if_alone(self) -> None:
        """Seal a DIRTY file that no other process has open (its writer was
        killed).  Its bytes were checked by the writer that marked it DIRTY,
        and changed since only by adds."""
        if self.readonly or not self.dirty:
            return
        if self.try_exclusive():
            try:
                self.seal()
            finally:
                self.back_to_shared()

    def begin_write(self) -> None:
        """Called before this process first changes the file: check the
        file unless another writer already did (it is DIRTY), then mark it
        DIRTY.  Raises CorruptFileError, changing nothing, when the check
        fails."""
        if self._marked:
            return
        if self.closed:
            raise ValueError("the filter is closed")
        # Checked at opening (verify=True) and still clean: nobody changed it
        # since (a writer marks the file first), or a writer sealed it after
        # checking it itself.
        if not (self._checked and not self.dirty):
            self.verify_clean()
        self.mark_dirty()

    def checksum(self, header: Optional[bytes] = None) -> int:
        """CRC-32 of the file as stored now, as _files.checksum computes it
        (with ``header`` in place of the stored header, when given)."""
        head = bytearray(self.mem[:_files.HEADER_SIZE] if header is None else header)
        head[_files.CHECKSUM_AT:_files.CHECKSUM_AT + 4] = b"\0\0\0\0"
        crc = zlib.crc32(head)
        # Read through the descriptor (the same page cache as the shared
        # mapping), not the mapping: the mapping is advised MADV_RANDOM for
        # the probes, and a pass over it would fault in one page at a time.
        size = len(self.mem)
        step = 8 << 20
        buffer = bytearray(min(step, max(size - _files.HEADER_SIZE, 0)))
        view = memoryview(buffer)
        at = _files.HEADER_SIZE
        try:
            while at < size:
                n = os.preadv(self.fd, [view[:min(step, size - at)]], at) \
                    if hasattr(os, "preadv") else self._read_into(view[:min(step, size - at)], at)
                if n <= 0:
                    raise _files.CorruptFileError(self.path, "the file shrank while it was read")
                crc = zlib.crc32(view[:n], crc)
                at += n
        finally:
            view.release()
        return crc & 0xFFFFFFFF

    def _read_into(self, view: memoryview, at: int) -> int:  # pragma: no cover - no preadv
        chunk = self.mem[at:at + len(view)]
        view[:len(chunk)] = chunk
        return len(chunk)

    def stored_checksum(self) -> int:
        return int.from_bytes(self.mem[_files.CHECKSUM_AT:_files.CHECKSUM_AT + 4], "little")

    def seal(self) -> None:
        """Write the checksum, then clear DIRTY (the caller holds the file
        alone).  The checksum, a pass over the whole file, is computed for
        the sealed header and written while the file still reads DIRTY
        (whose checksum nobody reads): a kill during that pass leaves a
        DIRTY file, never a clean one with a stale checksum."""
        if self.before_seal is not None:
            self.before_seal()
        flags = self._flags() & ~_files.FLAG_DIRTY
        head = bytearray(self.mem[:_files.HEADER_SIZE])
        head[_files.FLAGS_AT:_files.FLAGS_AT + 4] = flags.to_bytes(4, "little")
        at = _files.HEADER_CHECKSUM_AT
        head[at:at + 4] = _files.header_checksum(head).to_bytes(4, "little")
        crc = self.checksum(bytes(head))
        self.mem[_files.CHECKSUM_AT:_files.CHECKSUM_AT + 4] = crc.to_bytes(4, "little")
        self._set_flags(flags)

    def flush(self) -> None:
        if not self.readonly and not self.closed:
            self.mem.flush()

    def try_exclusive(self) -> bool:
        return _try_exclusive(self.fd)

    def back_to_shared(self) -> None:
        _shared(self.fd)

    def close(self, seal: bool = True) -> None:
        """Seal the file if this is its last writer, flush, unmap, unlock.
        ``seal=False`` (an open that refused the file) writes nothing.

        The descriptor and its locks are let go of whatever happens."""
        if self.closed:
            return
        try:
            # A writer seals what it changed, and also a file another writer
            # changed and left to it (that writer closed while this one had
            # the file open).
            if seal and not self.readonly and (self._marked or self.dirty):
                # The exclusive lock is tried once, and not given back as a
                # shared one when refused: two writers closing at the same
                # instant each hold their shared lock only until their own
                # attempt, so the later attempt always succeeds and seals.
                if fcntl is None or _try_exclusive_once(self.fd):
                    self.seal()
                self.mem.flush()
        finally:
            self.closed = True
            # A view still exported elsewhere (a memoryview the caller
            # kept) keeps the memory mapped until it goes; the file itself,
            # its descriptor and its locks are let go of here all the same.
            for view in self._views:
                try:
                    view.release()
                except BufferError:
                    pass
            self._views.clear()
            try:
                self.mem.close()
            except BufferError:
                pass
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
    target = _files.resolve(path)
    header.flags |= _files.FLAG_DIRTY
    header.checksum = 0
    tmp = _files._temp_name(target)
    try:
        with open(tmp, "wb") as f:
            f.write(header.pack())
            f.write(prefix)
            size = _files.HEADER_SIZE + header.payload_size
            f.truncate(size)
            f.flush()
            reserve(f.fileno(), size, target)
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
    _files.fsync_folder(os.path.dirname(target))
    return True


def reserve(fd: int, size: int, path: str) -> None:
    """Allocate the blocks of a new file of size bytes, so that a full disk
    is an OSError (ENOSPC) naming the file now, not a SIGBUS inside a later
    add to the mapping.  Where the file system cannot reserve (posix_fallocate
    answers EOPNOTSUPP/EINVAL, or the platform lacks it), every page is
    written once instead."""
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is not None:
        try:
            fallocate(fd, 0, size)
            return
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise OSError(errno.ENOSPC,
                              f"no space left on the device for a state file of {size:,} bytes",
                              path) from None
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise OSError(exc.errno, exc.strerror, path) from None
    _write_every_page(fd, size, path)


def _write_every_page(fd: int, size: int, path: str) -> None:
    """Allocate by writing one zero byte a page where the file reads zero
    (where no fallocate exists): a sparse page becomes a real one."""
    page = mmap.PAGESIZE
    if not hasattr(os, "pwrite"):  # pragma: no cover - Windows files are not sparse
        return
    try:
        for at in range(_files.HEADER_SIZE, size, page):
            if os.pread(fd, 1, at) == b"\0":
                os.pwrite(fd, b"\0", at)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, path) from None


# open(verify=None) reads files smaller than this whole to check them.
VERIFY_BELOW_BYTES = 64 << 20

_T = TypeVar("_T")


def open_state(path: object, mode: str, asked: Dict[str, Any],
               blank: Callable[[], Tuple[_files.Header, bytes]],
               attach: Callable[[MappedFile], _T]) -> _T:
    """The ``open`` of every class used in place in a mapped file.

    ``mode``: "r" read-only, "w" create (replacing any file), "c" open, or
    create when missing (which needs ``capacity`` in ``asked``, the checked
    arguments); ``blank()`` gives a new file's header and payload prefix,
    ``attach(mapping)`` the object, after its checks (see ``check_on_open``).
    A refused attach releases the lock, descriptor and mapping it took and
    writes nothing: the flags word of a refused file is not to be trusted
    (a foreign file, a damaged header), so a file that reads DIRTY is not
    sealed, and a second open refuses it again.  A symbolic link is followed
    to its target."""
    if mode not in ("r", "w", "c"):
        raise ValueError(f"mode must be 'r', 'w' or 'c', got {mode!r}")
    target = _files.resolve(_files.check_path(path))
    if mode == "w" or (mode == "c" and not os.path.exists(target)):
        if "capacity" not in asked:
            raise ValueError(f"capacity is needed to create {target!r}")
        header, prefix = blank()
        if not create(target, header, exclusive=(mode == "c"), prefix=prefix):
            mode = "c"  # another process created it first: open theirs
    mapping = MappedFile.open(target, readonly=(mode == "r"))
    try:
        return attach(mapping)
    except BaseException:
        mapping.close(seal=False)
        raise


def check_asked(path: Optional[str], asked: Dict[str, Any], found: Dict[str, Any]) -> None:
    """IncompatibleFilterError naming every parameter the caller gave that
    the file (``found``) does not have."""
    diff = [f"{name} {value!r} (the file has {found[name]!r})"
            for name, value in asked.items() if found[name] != value]
    if diff:
        raise IncompatibleFilterError(f"{path!r} was made with other parameters: "
                                      + ", ".join(diff))


def supports_locking() -> bool:
    return fcntl is not None and sys.platform != "win32"


__all__ = ["VERIFY_BELOW_BYTES", "MappedFile", "MappedHandle", "check_asked", "create",
           "open_state", "supports_locking"]
