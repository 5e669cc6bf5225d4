"""The parts of ``crawldedup urls``'s loop: stopping on signals without
losing a URL, the state's lock, the pending journal, chunks of input lines,
canonical keys, keys computed ahead on a worker thread, and output written
whole."""

from __future__ import annotations

import array
import hashlib
import os
import re
import secrets
import select
import signal
import stat
import struct
import sys
from concurrent.futures import ThreadPoolExecutor
from itertools import chain, compress
from types import FrameType
from typing import Any, BinaryIO, Callable, Dict, Iterator, List, Optional, Set, Tuple, cast

import numpy as np

import crawldedup

try:
    import fcntl
    import termios
except ImportError:  # Windows: no pipe sizes (Output writes PIPE_BUF pieces)
    fcntl = termios = None  # type: ignore[assignment]

from crawldedup._kernel import (
    canonicalize_urls_fast,
    gather_spans,
    line_hashes,
    line_spans,
    span_hashes,
    split_lines,
    url_digests_packed,
)
from crawldedup.cli._url_state import UrlState, fill_missing, reserve_room
from crawldedup.errors import CrawldedupError
from crawldedup.exact.fpset import FingerprintSet
from crawldedup.formats.files import try_lock


class Stopped(Exception):
    """Raised by the signal handler while the command waits for input."""


class SignalGuard:
    """SIGINT/SIGTERM handling that never loses a URL.

    While the command blocks reading input, a signal stops it at once.  While
    it records and prints a chunk, a signal only sets ``signum``; the loop
    stops after the chunk is printed, so that a URL is never recorded as seen
    without having been printed.
    """

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self.reading = False
        self._saved: List[Any] = []

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        if self.signum is None:
            self.signum = signum
        if self.reading:
            self.reading = False
            raise Stopped()

    def __enter__(self) -> "SignalGuard":
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._saved.append((sig, signal.signal(sig, self._handle)))
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._saved:
            signal.signal(sig, previous)


def _names_file(fd: int, path: str) -> bool:
    """Whether path still names the open file fd (not removed or replaced)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


class StateLock:
    """An exclusive lock on ``PATH.lock``, held while a command uses PATH.

    The lock file is removed when the command ends.  A process that opened
    the lock file just before its holder removed it would lock a file no
    longer at that path: after locking, each process checks that the path
    still names the file it locked, and otherwise tries again."""

    def __init__(self, state_path: str) -> None:
        self.path = state_path + ".lock"
        self._fd: Optional[int] = None

    def __enter__(self) -> "StateLock":
        for _ in range(100):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if not try_lock(fd):
                os.close(fd)
                raise CrawldedupError(
                    f"the state file {self.path[:-5]!r} is in use by another crawldedup "
                    f"process (lock {self.path!r}); a local state file takes one writer at "
                    f"a time: give each process its own --state, or share a Redis state or "
                    f"a --db between them")
            if _names_file(fd, self.path):
                self._fd = fd
                return self
            os.close(fd)  # removed by its last holder meanwhile: lock the new one
        raise CrawldedupError(f"cannot lock {self.path!r}: it keeps being replaced")

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            if sys.platform != "win32":  # Windows cannot remove an open file
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
            os.close(self._fd)  # closing releases the lock
            self._fd = None
            if sys.platform == "win32":
                try:
                    os.unlink(self.path)
                except OSError:
                    pass


def read_lines(source: BinaryIO, read_size: int) -> Iterator[List[bytes]]:
    """Chunks of stripped, non-blank lines, as soon as input is available:
    the lines of read_blocks' blocks."""
    for data, final in read_blocks(source, read_size):
        chunk, _ = split_lines(data, final)
        if chunk:
            yield chunk


def read_blocks(source: BinaryIO, read_size: int) -> Iterator[Tuple[bytes, bool]]:
    """Blocks of input as read, without an object per line: (data, False)
    whose complete lines are this block's (``line_spans(data, False)``: the
    unended tail comes again at the start of the next block), and last (the
    rest of the input, True) when there is one."""
    pending = b""
    read = getattr(source, "read1", source.read)
    while True:
        data = read(read_size)
        if not data:
            break
        if pending:
            data = pending + data
        cut = data.rfind(b"\n") + 1
        pending = data[cut:]
        if cut:
            yield data, False
    if pending:
        yield pending, True


class OutputFailed(Exception):
    pass


def _ended(lines: List[bytes]) -> bytes:
    """The lines, each followed by a newline, in one bytes object (one copy)."""
    return b"\n".join(chain(lines, _LAST))


_LAST = (b"",)


#: The pending journal's header: a signature, the length of the candidates
#: block that follows it, where the answer block starts in the file (0: not
#: known yet) and its length, how many bytes of the answer block were
#: written to the output, how many candidates a piece of the recording
#: takes (0: all at once), and how many candidates' answers (one byte each,
#: after the candidates) are recorded.
_JOURNAL_MAGIC = b"\x89CDPEND\n"
_JOURNAL_HEADER = struct.Struct("<8sQQQQQQ")
_ANSWER_AT = 16  # offset of (answer start, answer length, printed) in the header
_PRINTED_AT = 32  # offset of the bytes printed
_ANSWERED_AT = 48  # offset of the answers recorded


class Pending:
    """What a journal holds: the candidates of a chunk (lines the state did
    not hold when the chunk was looked up, recorded or being recorded), or,
    once the state answered, the lines to print (``answer``: one block of
    lines, each ended by a newline), of which the output got
    ``answer[:resume]`` whole."""

    def __init__(self, candidates: List[bytes], answer: Optional[bytes] = None,
                 resume: int = 0, piece: int = 0, answered: bytes = b"") -> None:
        self.candidates = candidates  # in the order held (a repeat is held twice)
        self.answer = answer
        self.resume = resume
        # Recorded in pieces of this many candidates (0: at once), the
        # answers of the first pieces recorded (1: added by that run).
        self.piece = piece
        self.answered = answered

    def count(self) -> int:
        """How many URLs are left to print."""
        if self.answer is not None:
            return self.answer.count(b"\n", self.resume)
        return len(set(self.candidates))


class Journal:
    """The delivery of the chunk in flight, kept in a file until it is
    printed: a run killed in between (or whose output failed) leaves it, and
    the next run finishes the delivery first.  Written without fsync: it
    guards against a killed process, whose writes the OS keeps, not against
    power loss.

    Each chunk goes through these steps, each one write: ``hold_data`` (the
    candidates: the lines that the state did not hold when looked up, before
    they are recorded), ``answer`` / ``answer_all`` (after the state
    recorded them: which of them to print), ``progress`` (after each write
    to the output: how much of the answer was printed), then ``release``
    truncates the file: empty while nothing is pending.  The next run prints
    the rest of a known answer from the last line the output got whole, and
    records and prints the candidates of a chunk whose answer was not
    known (see Deliverer.replay).  A journal is only ever written past what
    it holds, or in its header, until it is released, so that a kill at
    any moment leaves what it held readable.  A journal of the earlier
    format (the lines alone) is read as candidates."""

    def __init__(self, path: str, fd: Optional[int] = None) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644) \
            if fd is None else fd
        self.dirty = True  # what an earlier run left: truncated before the first hold
        # The receipt under which a state that keeps receipts records this
        # journal's pieces (UrlState.receipts): the token of its name.
        self.receipt = receipt_of(path)
        self._size = 0  # the bytes written: an answer goes after them
        self._held = 0  # the bytes of the candidates held

    def _damaged(self, size: int) -> CrawldedupError:
        return CrawldedupError(
            f"the pending journal {self.path!r} is damaged (its header does not match its "
            f"{size:,} bytes); it may hold URLs recorded but not printed: read them in it, "
            f"then remove it")

    def pending(self) -> Optional[Pending]:
        """What an earlier run left, or None.  CrawldedupError for a journal
        whose header makes no sense (damage is never taken for "nothing")."""
        size = os.fstat(self.fd).st_size
        self._size = size
        if not size:
            return None
        data = _read_at(self.fd, size, 0)
        if not data.startswith(_JOURNAL_MAGIC):
            if _JOURNAL_MAGIC.startswith(data):
                return None  # killed while writing the header: nothing recorded yet
            lines = _lines_of(data)  # the earlier format
            self._rewrite(_ended(lines))
            return Pending(lines)
        if len(data) < _JOURNAL_HEADER.size:
            return None  # killed while writing the header: nothing recorded yet
        _, held, start, length, printed, piece, answered = _JOURNAL_HEADER.unpack_from(data)
        end = _JOURNAL_HEADER.size + held
        if start == 0:
            lines = _held_lines(data[_JOURNAL_HEADER.size:end])
            if length or printed or (answered and (end + answered > size
                                                   or answered > len(lines))):
                raise self._damaged(size)
            # A cut write leaves a tail that the lines' end drops; its lines
            # were not recorded (the state is written after the hold).  The
            # answers of pieces go on after those recorded (a kill between
            # a piece's flags and its count leaves flags that count for
            # nothing: written over).
            self._size = end + answered
            self._held = held
            return Pending(lines, piece=piece, answered=data[end:end + answered])
        if (end > size or (start != _JOURNAL_HEADER.size and start < end)
                or start + length > size or printed > length
                or (start == _JOURNAL_HEADER.size and length != held)):
            raise self._damaged(size)
        answer = data[start:start + length]
        return Pending([], answer, answer.rfind(b"\n", 0, printed) + 1)

    def _rewrite(self, block: bytes) -> None:
        """Replace the journal, all or nothing, by one in this format that
        holds block as its candidates (the new file locked before it takes
        the journal's name, when the journal is locked)."""
        tmp = f"{self.path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o644)
        try:
            try_lock(fd)
            head = _JOURNAL_HEADER.pack(_JOURNAL_MAGIC, len(block), 0, 0, 0, 0, 0)
            _write_at(fd, head + block, 0)
            os.replace(tmp, self.path)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        os.close(self.fd)
        self.fd = fd
        self._size = len(head) + len(block)

    def hold(self, urls: List[bytes]) -> None:
        self.hold_data(_ended(urls))

    def hold_data(self, data: bytes, piece: int = 0) -> None:
        """Hold the candidates, given as one block of lines, each ended by a
        newline, to be recorded in pieces of piece lines (0: at once)."""
        if self.dirty:
            os.ftruncate(self.fd, 0)
        self.dirty = True
        head = _JOURNAL_HEADER.pack(_JOURNAL_MAGIC, len(data), 0, 0, 0, piece, 0)
        if hasattr(os, "pwritev"):
            _writev_at(self.fd, [head, data], 0)
        else:  # pragma: no cover (Windows)
            _write_at(self.fd, head + data, 0)
        self._size = len(head) + len(data)
        self._held = len(data)

    def answered(self, flags: bytes, total: int) -> None:
        """A piece of the candidates is recorded: flags (one byte a line,
        1 where the state added it) follow the answers recorded before,
        total in all."""
        _write_at(self.fd, flags, self._size)
        self._size += len(flags)
        _write_at(self.fd, struct.pack("<Q", total), _ANSWERED_AT)

    def answer_all(self) -> None:
        """The state recorded every candidate held: all of them are printed."""
        _write_at(self.fd, struct.pack("<QQQ", _JOURNAL_HEADER.size, self._held, 0),
                  _ANSWER_AT)

    def answer(self, data: bytes) -> None:
        """The lines to print (one block, each ended by a newline), held
        after what the journal holds, and then named in the header."""
        at = self._size
        _write_at(self.fd, data, at)
        self._size = at + len(data)
        _write_at(self.fd, struct.pack("<QQQ", at, len(data), 0), _ANSWER_AT)

    def progress(self, printed: int) -> None:
        """printed bytes of the answer are in the output."""
        _write_at(self.fd, struct.pack("<Q", printed), _PRINTED_AT)

    def release(self) -> None:
        os.ftruncate(self.fd, 0)
        self.dirty = False

    def close(self) -> None:
        try:
            empty = os.fstat(self.fd).st_size == 0
            if empty:
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
        finally:
            os.close(self.fd)  # after the unlink: closing releases a lock


def _held_lines(data: bytes) -> List[bytes]:
    """The lines of a held block, in order, without a last line not ended
    by a newline (cut short by a kill: not recorded yet)."""
    return data[:data.rfind(b"\n") + 1].split(b"\n")[:-1]


def _lines_of(data: bytes) -> List[bytes]:
    """The distinct lines of a block, without a last line not ended by a
    newline (cut short by a kill: not recorded yet)."""
    data = data[:data.rfind(b"\n") + 1]
    # Unique: a chunk may hold a URL twice (the first one counted).
    return list(dict.fromkeys(line for line in data.split(b"\n") if line))


_TOKEN_HEX = 32  # the token of a journal's name: 16 random bytes, its receipt


def receipt_of(path: str) -> Optional[bytes]:
    """The receipt of a journal named BASE.pending-PID-TOKEN: TOKEN's bytes
    (None for a shorter token, of a crawldedup that kept no receipts, and
    for other names)."""
    token = path.rsplit("-", 1)[-1]
    if ".pending-" in os.path.basename(path) and len(token) == _TOKEN_HEX:
        try:
            return bytes.fromhex(token)
        except ValueError:
            return None
    return None


def own_journal(base: str) -> Journal:
    """This process's journal for a state it shares with other processes
    (Redis, a database): ``BASE.pending-PID-TOKEN``, created and locked
    (the lock is held until it is closed, and dies with the process), so
    that several processes on one machine run at once and a later one can
    tell a killed process's journal from a live one's (see orphans)."""
    for _ in range(100):
        path = f"{base}.pending-{os.getpid()}-{secrets.token_hex(_TOKEN_HEX // 2)}"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                         0o644)
        except FileExistsError:
            continue
        # Between the creation and the lock, another process may have taken
        # the empty file for an orphan and removed it: try another name.
        if try_lock(fd) and _names_file(fd, path):
            journal = Journal(path, fd)
            journal.dirty = False
            return journal
        os.close(fd)
    raise CrawldedupError(f"cannot create a pending journal beside {base!r}")


def orphans(base: str) -> Iterator[Journal]:
    """The journals beside base that no live process holds: those of killed
    processes (and ``BASE.pending``, the name every process used before
    journals were per process), each locked by this process while it is
    handled, so that exactly one process takes each.  The caller finishes
    the delivery and closes it (which removes it once it is empty)."""
    folder, name = os.path.split(base)
    own = re.compile(re.escape(name) + r"\.pending(-\d+-([0-9a-f]{8}|[0-9a-f]{32}))?")
    try:
        entries = sorted(os.listdir(folder or "."))
    except OSError:
        return
    for entry in entries:
        if not own.fullmatch(entry):
            continue
        path = os.path.join(folder, entry)
        try:
            fd = os.open(path, os.O_RDWR | getattr(os, "O_BINARY", 0))
        except OSError:
            continue  # removed by the process that took it
        if not (try_lock(fd) and _names_file(fd, path)):
            os.close(fd)  # a live process's, or taken and removed meanwhile
            continue
        yield Journal(path, fd)


def _read_at(fd: int, size: int, offset: int) -> bytes:
    os.lseek(fd, offset, os.SEEK_SET)
    parts = []
    while size > 0:
        part = os.read(fd, size)
        if not part:
            break
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def _write_at(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        if hasattr(os, "pwrite"):
            done = os.pwrite(fd, view, offset)
        else:  # pragma: no cover (Windows)
            os.lseek(fd, offset, os.SEEK_SET)
            done = os.write(fd, view)
        view = view[done:]
        offset += done


def _writev_at(fd: int, parts: List[bytes], offset: int) -> None:
    total = sum(len(part) for part in parts)
    done = os.pwritev(fd, parts, offset)
    if done < total:  # rare: finish what one call did not write
        _write_at(fd, b"".join(parts)[done:], offset + done)


#: The most a write to a regular file (or a terminal, a socket) takes at a
#: time: a kill -9 during a write can leave part of it written without the
#: journal knowing, which the next run prints again, so a write is small.
FILE_PIECE = 1 << 16
_PAGE = 4096
#: A write to a pipe of at most this many bytes is atomic.
_PIPE_BUF = int(getattr(select, "PIPE_BUF", 512))


class Output:
    """The command's output, written whole in pieces whose progress the
    journal records after each write: a run killed while it prints a chunk
    leaves the journal saying how far the output got, and the next run
    prints the rest, from the last line the output got whole.

    The pieces go to the file descriptor with os.write, which returns how
    much it wrote, until all is written (the buffered writer flushed
    first): a buffered writer's write() of a big block into a full pipe
    drops the rest of the block when a signal arrives meanwhile and its
    handler returns (CPython 3.9-3.13: 1.6 MB written, 128 KiB read at the
    other end), and the command would have recorded URLs it never printed.

    Into a pipe, the writes go through a description of its own opened
    non-blocking (``/proc/self/fd/N``, on Linux; the output's own stays as
    it is, for the processes that share it): a write takes what the pipe
    has room for and returns at once, and the command waits for room in
    ``select``, so that a kill lands between two writes (or in the wait),
    never within one.  Where that cannot be opened: into an empty pipe, a
    write is at most its size (``F_GETPIPE_SZ``) less a page, copied whole
    before a signal is looked at; into one that holds data (``FIONREAD``)
    or whose size cannot be seen, at most ``PIPE_BUF`` bytes, all or
    nothing.  What is left is the moment between a write's return and the
    journal's record of it.
    """

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.fd: Optional[int] = None
        self.nonblocking: Optional[int] = None  # a pipe's own non-blocking description
        # > 0: a pipe of that size whose room can be seen; -1: a pipe whose
        # room cannot be seen; 0: not a pipe.
        self.pipe_size = 0
        try:
            self.fd = out.fileno()
            if not stat.S_ISFIFO(os.fstat(self.fd).st_mode):
                return
        except (AttributeError, OSError, ValueError):
            return
        self.pipe_size = -1
        try:
            self.nonblocking = os.open(f"/proc/self/fd/{self.fd}", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            pass
        try:
            size = int(fcntl.fcntl(self.fd, fcntl.F_GETPIPE_SZ))
            _unread(self.fd)
        except (AttributeError, OSError):  # not Linux (or no fcntl: Windows)
            return
        self.pipe_size = size

    def _limit(self) -> int:
        """The most the next write takes."""
        if self.pipe_size > 0:
            assert self.fd is not None
            try:
                empty = not _unread(self.fd)
            except OSError:
                empty = False
            return self.pipe_size - _PAGE if empty else _PIPE_BUF
        if self.pipe_size < 0:
            return _PIPE_BUF
        return FILE_PIECE

    def write(self, data: bytes, journal: Journal, start: int = 0) -> None:
        """Write data[start:] whole, recording in the journal how much of
        data is in the output after each write."""
        out = self.out
        try:
            out.flush()
            if self.fd is None:  # not a file: an in-memory stream
                out.write(data[start:])
                out.flush()
                journal.progress(len(data))
                return
            view = memoryview(data)
            at = start
            if self.nonblocking is not None:
                while at < len(data):
                    try:
                        at += os.write(self.nonblocking, view[at:])
                    except BlockingIOError:
                        select.select([], [self.nonblocking], [])
                        continue
                    journal.progress(at)
                return
            while at < len(data):
                end = at + self._limit()
                if end < len(data):
                    cut = data.rfind(b"\n", at, end) + 1
                    end = cut if cut > at else data.find(b"\n", end) + 1 or len(data)
                at += os.write(self.fd, view[at:end])
                journal.progress(at)
        except (OSError, ValueError) as exc:
            raise OutputFailed(str(exc)) from None

    def close(self) -> None:
        if self.nonblocking is not None:
            os.close(self.nonblocking)
            self.nonblocking = None


def _unread(fd: int) -> int:
    """The bytes a pipe holds, not read yet (``FIONREAD``, either end)."""
    buf = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf, True)
    return buf[0]


SLOW_CACHE = 1 << 16
#: Repeats remembers this many distinct lines at most (190 MB).
REPEATS_LIMIT = 10_000_000


#: A state whose keys cost a pass of their own (--canonical, --exact) reads at
#: least this much input per chunk: a chunk's keys are computed on a worker
#: thread while the chunk before is recorded (KeysAhead), and a chunk of more
#: than 2 x 4,096 URLs is canonicalized or hashed on several threads.
AHEAD_READ_SIZE = 1 << 20


class Canonical:
    """--canonical: each URL's key is its canonical form (w3lib's rules, and
    without tracking parameters with --strip-tracking), as UTF-8 bytes.  The
    URLs of the compiled fast path are canonicalized in one batch without the
    GIL (on several threads for big chunks); the others one by one by w3lib.
    A line that has no canonical form (``http://[::1``, a port above 65535)
    is its own key, as read; ``raw`` counts them.  An exact state takes the
    MD5 digests of the canonical forms (:meth:`digests`), computed in the
    same compiled pass, without the canonical forms as Python objects."""

    def __init__(self, strip_tracking: bool) -> None:
        self.strip_params = True if strip_tracking else None
        self.raw = 0
        # The lines counted in raw (some of them: a bounded set), so that a
        # repeat that the command skips (Deliverer.chunk_keys) counts too.
        self.raw_lines: Set[bytes] = set()
        # Keys of recent lines outside the fast path (w3lib takes 30 times
        # longer than the kernel, and crawls repeat URLs): line -> (key,
        # whether the line had no canonical form).
        self.slow: Dict[bytes, Tuple[bytes, bool]] = {}

    def _count_raw(self, line: bytes) -> None:
        self.raw += 1
        if len(self.raw_lines) < SLOW_CACHE:
            self.raw_lines.add(line)

    def slow_digests(self, lines: List[bytes]) -> List[bytes]:
        """The MD5s of the keys of lines outside the compiled fast path."""
        return [hashlib.md5(key).digest() for key in self.slow_keys(lines)]

    def slow_keys(self, lines: List[bytes]) -> List[bytes]:
        """The keys of lines outside the compiled fast path."""
        return [self._slow(line) for line in lines]

    def count_raw_repeats(self, lines: List[bytes]) -> None:
        """Count the repeats of lines counted in raw (skipped without a
        canonical form: see Deliverer.chunk_keys)."""
        if self.raw_lines:
            self.raw += sum(1 for line in lines if line in self.raw_lines)

    def _slow(self, url: bytes) -> bytes:
        """w3lib's canonical form as UTF-8, or the line itself when it has none."""
        found = self.slow.get(url)
        if found is None:
            try:
                found = (crawldedup.canonicalize_url(url).encode("utf-8"), False)
            except ValueError:
                found = (url, True)
            if len(self.slow) >= SLOW_CACHE:
                self.slow.clear()
            self.slow[url] = found
        if found[1]:
            self._count_raw(url)
        return found[0]

    def fast(self) -> bool:
        # w3lib's version decides the fast path: loaded for --canonical only.
        from crawldedup import fingerprint  # noqa: PLC0415
        return self.strip_params is None and fingerprint.FAST_PATH

    def __call__(self, urls: List[bytes]) -> List[bytes]:
        keys: List[Any]
        if self.fast():
            # The batch kernel itself: canonicalize_urls adds two Python
            # loops over the batch, a third of this mode's time (profiled).
            keys = cast(List[Any], canonicalize_urls_fast(urls, False, True, True))
            if None in keys:
                for i, key in enumerate(keys):
                    if key is None:
                        keys[i] = self._slow(urls[i])
            return keys
        keys = cast(List[Any], crawldedup.canonicalize_urls(
            urls, strip_params=self.strip_params, errors="none"))
        for i, key in enumerate(keys):
            if key is None:
                keys[i] = urls[i]
                self._count_raw(urls[i])
            else:
                keys[i] = key.encode("utf-8")
        return keys

    def digests(self, urls: List[bytes]) -> np.ndarray:
        """The MD5 digests of the keys (numpy ``S16``)."""
        if self.fast():
            blob, missing = url_digests_packed(urls, True)
            if missing:
                return fill_missing(blob, missing, self.slow_digests([urls[i] for i in missing]))
            return np.frombuffer(blob, dtype="S16")
        blob, missing = url_digests_packed(self(urls))
        assert not missing  # canonical forms as UTF-8 bytes
        return np.frombuffer(blob, dtype="S16")


def _take(keys: Any, mask: np.ndarray, as_list: List[bool]) -> Any:
    """The keys where mask is True (keys: a list, or a numpy array)."""
    if isinstance(keys, np.ndarray):
        return keys[mask]
    return list(compress(keys, as_list))


def _rows(array: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """array[mask] for a 2-D array: take() is 15 times faster than numpy's
    indexing of rows by a mask or by indexes (15,000 rows: 72 us, not 1.1 ms)."""
    return array.take(np.flatnonzero(mask), axis=0)


class Repeats:
    """The lines met in this run, as 128-bit hashes (``line_hashes``) in a
    fingerprint set: 19 bytes of memory a distinct line, emptied past
    REPEATS_LIMIT lines (it only saves work).  A 128-bit collision between
    two different lines of one run, which would take the second for a
    repeat, has a chance below 10**-24 in 10**7 lines."""

    def __init__(self) -> None:
        self.seen = FingerprintSet(16)

    def fresh(self, lines: List[bytes]) -> np.ndarray:
        """True for each line not met before (the first of repeats in lines
        counting as not met), which is then met."""
        return self.fresh_hashes(line_hashes(lines))

    def expect(self, lines: int) -> None:
        """Room for this many lines (at most REPEATS_LIMIT) taken at once."""
        if lines > 0:
            reserve_room(self.seen, min(lines, REPEATS_LIMIT))

    def fresh_hashes(self, hashes: bytes) -> np.ndarray:
        """fresh, given the lines' line_hashes."""
        if len(self.seen) > REPEATS_LIMIT:
            self.seen.clear()
        return self.seen.add_many(np.frombuffer(hashes, dtype="S16"))


class Deliverer:
    """Records chunks of URLs in the state and prints the new ones, in the
    order that loses none: in the journal first, in the state next, printed
    then, released from the journal last.  Killed anywhere, no URL is lost,
    and none printed as new is forgotten."""

    def __init__(self, state: UrlState, journal: Journal, canonical: Optional[Canonical],
                 out: BinaryIO) -> None:
        self.state = state
        self.journal = journal
        self.canonical = canonical
        self.output = Output(out)
        # Canonical forms cost 20 times a line's hash: a line met before in
        # this run is a duplicate without one (not for a state that refreshes
        # the keys it meets again, nor in the block mode of a state that says
        # the skip costs more than it saves there: see UrlState.block_repeats).
        self.repeats = Repeats() if (canonical is not None and not state.refresh and (
            state.block_repeats or not self.uses_blocks())) else None

    def expect(self, lines: int) -> None:
        """About this many lines of input are coming: the state and the
        repeats set make room for them."""
        self.state.expect(lines)
        if self.repeats is not None:
            self.repeats.expect(lines)

    def keys(self, lines: List[bytes]) -> Any:
        if self.canonical is None:
            return self.state.keys(lines)
        return self.state.canonical_keys(self.canonical, lines)

    def computes_keys(self) -> bool:
        """Whether the keys cost a pass of their own (not the lines as read,
        or hashes of the lines of a block)."""
        return self.canonical is not None or not self.state.keys_are_lines or self.uses_blocks()

    def chunk_keys(self, lines: List[bytes]) -> Tuple[List[bytes], Any]:
        """(the lines of a chunk of input that may be new, their keys): with
        --canonical, the lines that repeat one met before in this run are
        duplicates already."""
        if self.repeats is not None:
            assert self.canonical is not None
            fresh = self.repeats.fresh(lines)
            if not fresh.all():
                fresh_list = fresh.tolist()
                kept = list(compress(lines, fresh_list))
                keys = self.keys(kept)
                if self.canonical.raw_lines:  # known once the kept ones have keys
                    self.canonical.count_raw_repeats(
                        [line for line, new in zip(lines, fresh_list) if not new])
                return kept, keys
        return lines, self.keys(lines)

    def chunk(self, lines: List[bytes],
              prepared: Optional[Tuple[List[bytes], Any]] = None) -> int:
        """Deliver the new URLs of a chunk of input (given ``chunk_keys(lines)``
        when computed ahead); returns how many."""
        state = self.state
        lines, keys = self.chunk_keys(lines) if prepared is None else prepared
        if not lines:
            return 0
        seen = state.contains_many(keys)
        absent = ~seen
        absent_list = absent.tolist()
        if all(absent_list):
            printed = self._deliver(lines, keys)
        elif any(absent_list):
            printed = self._deliver(list(compress(lines, absent_list)),
                                    _take(keys, absent, absent_list))
        else:
            printed = 0
        if state.refresh and printed < len(lines):
            # Refresh on sight: a URL that keeps coming stays remembered; one
            # not met for a whole window is forgotten and printed again when
            # it comes back.
            state.add_many(keys)
        return printed

    def uses_blocks(self) -> bool:
        """Whether the state takes a chunk as one block and its lines' spans
        (an exact state: its keys are MD5s, computed from the block; a Bloom
        filter that does not rotate: the lines' hashes; with --canonical, in
        the compiled canonicalization's pass, which --strip-tracking leaves
        to Python)."""
        return (self.state.takes_spans and not self.state.refresh
                and (self.canonical is None or self.canonical.fast()))

    def chunk_counted(self, lines: List[bytes],
                      prepared: Optional[Tuple[List[bytes], Any]] = None) -> Tuple[int, int]:
        """(lines read, lines printed) of chunk(lines, prepared)."""
        return len(lines), self.chunk(lines, prepared)

    def block_keys(self, block: Tuple[bytes, bool]) -> Tuple[int, np.ndarray, np.ndarray,
                                                             Optional[np.ndarray]]:
        """(how many lines the block has, the spans of those that may be new
        (not repeats of a line met before, with --canonical), their keys,
        which of them the state holds already or None: see _seen_ahead)."""
        data, final = block
        spans, _ = line_spans(data, final)
        n = len(spans)
        if self.repeats is not None and n:
            fresh = self.repeats.fresh_hashes(span_hashes(data, spans))
            if not fresh.all():
                kept = _rows(spans, fresh)
                keys = self.state.span_keys(self.canonical, data, kept)
                if self.canonical is not None and self.canonical.raw_lines:
                    # known once the kept ones have keys
                    self.canonical.count_raw_repeats(
                        [data[a:b] for a, b in spans[~fresh].tolist()])
                return n, kept, keys, None
        keys = self.state.span_keys(self.canonical, data, spans)
        return n, spans, keys, self._seen_ahead(keys)

    def _seen_ahead(self, keys: np.ndarray) -> Optional[np.ndarray]:
        """The keys that the state holds already, looked up on the worker
        thread while the chunk before is recorded (block() looks up again
        only those not found), for a state whose keys stay once added (a
        Bloom filter that does not rotate, ``UrlState.lookup_ahead``) and
        when the worker has time to spare (not with --canonical, whose
        canonical forms keep it busier than the recording thread).  None
        otherwise."""
        if self.canonical is not None or not self.state.lookup_ahead or not len(keys):
            return None
        return self.state.contains_many(keys)

    def block(self, block: Tuple[bytes, bool],
              prepared: Tuple[int, np.ndarray, np.ndarray, Optional[np.ndarray]]
              ) -> Tuple[int, int]:
        """Deliver the new lines of a block given block_keys(block), in the
        order of chunk(); (lines read, lines printed)."""
        data = block[0]
        n, spans, keys, seen = prepared
        if not len(spans):
            return n, 0
        if seen is None:
            absent = np.flatnonzero(~self.state.contains_many(keys))
        else:  # found then, found now: only the others are looked up again
            absent = np.flatnonzero(~seen)
            absent = absent[~self.state.contains_many(keys.take(absent, axis=0))]
        if not len(absent):
            return n, 0
        if len(absent) < n:
            spans, keys = spans.take(absent, axis=0), keys.take(absent, axis=0)
        held = gather_spans(data, spans)
        added = self._record(held, keys)
        if added.all():
            self.journal.answer_all()
            out, printed = held, len(spans)
        else:
            out, printed = gather_spans(data, _rows(spans, added)), int(added.sum())
            if printed:
                self.journal.answer(out)
        if printed:
            self.output.write(out, self.journal)
        self.journal.release()
        return n, printed

    def replay(self, journal: Journal, pending: Pending) -> int:
        """Finish the delivery that an interrupted run left in a journal
        (this process's own, or a killed process's): print the rest of its
        answer; or, when that run did not learn the state's whole answer,
        print the candidates it knows it added, record the others again and
        print those of the piece that was being recorded (each was absent
        from the state when the chunk was looked up: with one writer, the
        state holds it now only because that run recorded it; see
        docs/cli.md for a state shared by several) and those that this
        recording adds (the pieces after it were never sent).  Returns how
        many URLs it printed.

        The others are recorded in the journal's pieces, each piece's
        answer journaled as it comes (the piece that was cut: all of it),
        as the interrupted run did: a kill during this recording leaves
        the next run the same promise, not a state holding pieces that the
        journal does not answer for."""
        if pending.answer is not None:
            data, resume = pending.answer, pending.resume
        else:
            lines, flags = pending.candidates, pending.answered
            known = len(flags)
            chosen = [line for line, flag in zip(lines, flags) if flag]
            rest = lines[known:]
            if rest:
                keys = self.keys(rest)
                piece = pending.piece or len(rest)
                for at in range(0, len(rest), piece):
                    part = self._add_piece(keys[at:at + piece], journal)
                    if at == 0 and not self._receipted(journal):
                        # The piece being recorded when the run stopped, whose
                        # answer no receipt keeps: all of it.
                        part = np.ones(len(part), dtype=np.bool_)
                    if pending.piece:
                        journal.answered(part.astype(np.uint8).tobytes(),
                                         known + at + len(part))
                    chosen += compress(rest[at:at + piece], part.tolist())
            data, resume = _ended(list(dict.fromkeys(chosen))), 0
            if data:
                journal.answer(data)  # written after what it holds
        if resume < len(data):
            self.output.write(data, journal, resume)
        journal.release()
        return data.count(b"\n", resume)

    def _record(self, held: bytes, keys: Any) -> np.ndarray:
        """Hold the candidates in the journal and record their keys in the
        state; which ones the state added.  A state shared with other
        processes (``UrlState.record_piece``) records them in pieces, the
        answer of each journaled as it comes: a kill then leaves the answer
        of one piece unknown, not of the whole chunk."""
        piece = self.state.record_piece
        self.journal.hold_data(held, piece)
        if not piece or len(keys) <= piece:
            return self._add_piece(keys, self.journal)
        parts = []
        for at in range(0, len(keys), piece):
            part = self._add_piece(keys[at:at + piece], self.journal)
            parts.append(part)
            self.journal.answered(part.astype(np.uint8).tobytes(), min(at + piece, len(keys)))
        return np.concatenate(parts)

    def _receipted(self, journal: Journal) -> bool:
        """Whether the state records journal's pieces under its receipt."""
        return self.state.receipts and journal.receipt is not None

    def _add_piece(self, keys: Any, journal: Journal) -> np.ndarray:
        """Record one piece: under the journal's receipt where the state
        keeps receipts (its answer recorded with the adds, so that a kill
        loses it not: the run that finishes the journal asks again under
        the same receipt), else add_many."""
        if self.state.receipts and journal.receipt is not None:
            return self.state.add_many_once(keys, journal.receipt)
        return self.state.add_many(keys)

    def forget_receipt(self, journal: Journal) -> None:
        """The journal is empty: its receipt is not needed any more."""
        if self.state.receipts and journal.receipt is not None:
            self.state.forget_receipt(journal.receipt)

    def _deliver(self, lines: List[bytes], keys: Any) -> int:
        held = _ended(lines)
        added = self._record(held, keys).tolist()
        if all(added):
            self.journal.answer_all()
        else:
            lines = list(compress(lines, added))
            held = _ended(lines)
            if lines:
                self.journal.answer(held)
        if lines:
            self.output.write(held, self.journal)
        self.journal.release()
        return len(lines)


class KeysAhead:
    """The read loop of a state whose keys cost a pass of their own (MD5
    digests, canonical forms): the next chunk's keys are computed on a
    worker thread (by kernels that run without the GIL) while this chunk is
    recorded and printed, so that the two cores share the work.

    A chunk is read ahead only when reading cannot block (a regular file,
    or a pipe with data waiting): a URL that a crawler writes to the pipe is
    printed without waiting for the next one.  When a signal stops the loop,
    the chunk read ahead is delivered too: no line read is dropped."""

    def __init__(self, deliver: "Deliverer") -> None:
        self.deliver = deliver
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="crawldedup-keys")

    @staticmethod
    def _never_blocks(source: BinaryIO) -> Any:
        """A callable telling whether a read would return at once."""
        try:
            fd = source.fileno()
            if stat.S_ISREG(os.fstat(fd).st_mode):
                return lambda: True
        except (OSError, ValueError, AttributeError):
            return lambda: False
        if sys.platform == "win32":
            return lambda: False

        def ready() -> bool:
            try:
                return bool(select.select([fd], [], [], 0)[0])
            except (OSError, ValueError):
                return False
        return ready

    def run(self, source: BinaryIO, units: Iterator[Any], guard: SignalGuard,
            prepare: Callable[[Any], Any],
            deliver: Callable[[Any, Any], Tuple[int, int]]) -> Tuple[int, int]:
        """(lines read, lines printed) of one source, read in units (chunks
        of lines, or blocks): prepare(unit) runs on the worker thread,
        deliver(unit, what prepare gave) on this one and says (lines read,
        lines printed)."""
        ready = self._never_blocks(source)
        read = printed = 0
        pending: Optional[Tuple[Any, Any]] = None
        eof = False
        try:
            while True:
                following = None
                if not eof and guard.signum is None and (pending is None or ready()):
                    guard.reading = True
                    try:
                        unit = next(units, None)
                    except Stopped:
                        unit = None
                    finally:
                        guard.reading = False
                    if unit is None:
                        eof = True
                    else:
                        following = (unit, self.pool.submit(prepare, unit))
                if pending is not None:
                    got, new = deliver(pending[0], pending[1].result())
                    read += got
                    printed += new
                pending = following
                if pending is None and (eof or guard.signum is not None):
                    return read, printed
        finally:
            if pending is not None:
                pending[1].cancel()

    def close(self) -> None:
        self.pool.shutdown(wait=True)


class Reader:
    """The command's read loop, chosen once for the run from the state's
    declared capabilities (``UrlState.takes_spans``, ``keys_are_lines``,
    ``refresh``) and the options:

    * blocks: the input read as blocks of bytes whose lines' keys are
      computed from their spans on a worker thread (``Deliverer.uses_blocks``);
    * chunks ahead: chunks of lines whose keys cost a pass of their own,
      computed on a worker thread (:class:`KeysAhead`);
    * chunks: chunks of lines whose keys are the lines, delivered as read.

    ``run(source, guard)`` reads one source to its end or to a signal and
    says (lines read, lines printed)."""

    def __init__(self, deliver: Deliverer) -> None:
        self.deliver = deliver
        self.ahead = KeysAhead(deliver) if deliver.computes_keys() else None
        self.read_size = deliver.state.read_size
        if deliver.canonical is not None or self.ahead is not None:
            self.read_size = max(self.read_size, AHEAD_READ_SIZE)
        self.run: Callable[[BinaryIO, SignalGuard], Tuple[int, int]]
        if self.ahead is None:
            self.run = self._chunks
        elif deliver.uses_blocks():
            self.run = self._blocks
        else:
            self.run = self._chunks_ahead

    def _blocks(self, source: BinaryIO, guard: SignalGuard) -> Tuple[int, int]:
        assert self.ahead is not None
        return self.ahead.run(source, read_blocks(source, self.read_size), guard,
                              self.deliver.block_keys, self.deliver.block)

    def _chunks_ahead(self, source: BinaryIO, guard: SignalGuard) -> Tuple[int, int]:
        assert self.ahead is not None
        return self.ahead.run(source, read_lines(source, self.read_size), guard,
                              self.deliver.chunk_keys, self.deliver.chunk_counted)

    def _chunks(self, source: BinaryIO, guard: SignalGuard) -> Tuple[int, int]:
        chunks = read_lines(source, self.read_size)
        read = printed = 0
        while guard.signum is None:
            guard.reading = True
            try:
                chunk = next(chunks, None)
            except Stopped:
                break
            finally:
                guard.reading = False
            if chunk is None:
                break
            read += len(chunk)
            printed += self.deliver.chunk(chunk)
        return read, printed

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
