"""The ``crawldedup`` command line.

``crawldedup urls`` is the main job: filter a stream of URLs (one per line)
against a persistent state file, printing each URL that no earlier line of this
run, and no earlier run with the same state, has seen.

Guarantees:

* The state is a memory-mapped file, updated in place as URLs are printed: a
  URL printed as new is recorded before it is printed, so no later run prints
  it as new again, even after ``kill -9``.
* Every new URL is written to the output: the URLs of the chunk being
  recorded and written are kept in ``STATE.pending`` until they are written;
  a run that was killed, or whose output was closed early, leaves them there
  and the next run writes them first (at-least-once delivery for that
  chunk).  URLs already written into a pipe whose reader exits before
  reading them (``| head``) are lost with the pipe, up to one pipe buffer:
  a consumer that needs every URL reads the output to its end or writes it
  to a file (README, "The command line").
* Ctrl-C and SIGTERM stop after the current chunk is printed.
* One ``crawldedup urls`` at a time uses a state file (``STATE.lock`` beside
  it while the command runs); a second one exits with an error.

The loop reads chunks, computes each chunk's keys once, and talks to its state
through the small interface of ``crawldedup._url_state`` (docs/cli.md).

``crawldedup info PATH`` describes any crawldedup state file.

``crawldedup near-dups FILE.jsonl`` prints the near-duplicate documents of a
stream of JSON lines (see ``_near_dups``).

Exit status: 0 on success, 1 on an error, 2 on a usage error, 130/143 when
stopped by SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import stat
import sys
from itertools import compress
from types import FrameType
from typing import IO, Any, BinaryIO, Dict, Iterator, List, Optional, Sequence, Tuple, cast

import numpy as np

from crawldedup import _files
from crawldedup._kernel import canonicalize_urls_fast, split_lines, url_digests_packed
from crawldedup._url_state import BloomState, UrlState
from crawldedup._version import __version__
from crawldedup.bloom import LAYOUTS, BloomFilter
from crawldedup.errors import CrawldedupError

DEFAULT_CAPACITY = 10_000_000
DEFAULT_ERROR_RATE = 0.01


class UsageError(Exception):
    """Bad command-line arguments, found after parsing (exit status 2)."""


class _Stopped(Exception):
    """Raised by the signal handler while the command waits for input."""


class _SignalGuard:
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
            raise _Stopped()

    def __enter__(self) -> "_SignalGuard":
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._saved.append((sig, signal.signal(sig, self._handle)))
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._saved:
            signal.signal(sig, previous)


class _StateLock:
    """An exclusive lock on ``PATH.lock``, held while a command uses PATH.

    The lock file is removed when the command ends.  A process that opened
    the lock file just before its holder removed it would lock a file no
    longer at that path: after locking, each process checks that the path
    still names the file it locked, and otherwise tries again."""

    def __init__(self, state_path: str) -> None:
        self.path = state_path + ".lock"
        self._fd: Optional[int] = None

    def __enter__(self) -> "_StateLock":
        for _ in range(100):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if sys.platform == "win32":
                    import msvcrt
                    msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
                else:
                    import fcntl
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise CrawldedupError(
                    f"the state file {self.path[:-5]!r} is in use by another crawldedup "
                    f"process (lock {self.path!r})") from None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except OSError:
                same = False
            if same:
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


def _lines(source: BinaryIO, read_size: int) -> Iterator[List[bytes]]:
    """Chunks of stripped, non-blank lines, as soon as input is available."""
    pending = b""
    read = getattr(source, "read1", source.read)
    while True:
        data = read(read_size)
        if not data:
            break
        if pending:
            data = pending + data
        chunk, used = split_lines(data, False)
        pending = data[used:]
        if chunk:
            yield chunk
    last, _ = split_lines(pending, True)
    if last:
        yield last


class _OutputFailed(Exception):
    pass


def file_kind(path: str) -> int:
    """The kind of crawldedup file at path (``_files.KIND_*``); CorruptFileError
    for a file that is not one."""
    with open(path, "rb") as f:
        head = f.read(_files.HEADER_SIZE)
    return _files.parse_header(head, os.path.getsize(path), path).kind


def _kind_name(kind: int) -> str:
    return _files.KIND_NAMES.get(kind, f"file of unknown kind {kind}")


def _open_state(path: str, args: argparse.Namespace, err: IO[str]) -> Any:
    """The state file, mapped in place (created with the options when missing):
    a BloomFilter, or a RotatingBloomFilter with --rotate-every/--generations
    or when the file holds one."""
    rotating_asked = args.rotate_every is not None or args.generations is not None
    header = None
    if os.path.exists(path):
        with open(path, "rb") as f:
            head = f.read(_files.HEADER_SIZE)
        header = _files.parse_header(head, os.path.getsize(path), path)
    if header is not None and header.kind not in (_files.KIND_BLOOM, _files.KIND_ROTATING):
        raise CrawldedupError(
            f"{path!r} holds a {_kind_name(header.kind)}; crawldedup urls keeps a Bloom filter "
            f"there (with --exact, a fingerprint set): use another --state path")
    if rotating_asked or (header is not None and header.kind == _files.KIND_ROTATING):
        return _open_rotating(path, header, args, err)
    if header is not None:
        found = BloomFilter._header_params(header, path)
        asked = []
        if args.capacity is not None and args.capacity != found[0]:
            asked.append(f"--capacity {args.capacity}")
        if args.error_rate is not None and args.error_rate != found[1]:
            asked.append(f"--error-rate {args.error_rate}")
        if args.layout is not None and args.layout != found[5]:
            asked.append(f"--layout {args.layout}")
        if asked:
            err.write(f"crawldedup: note: {path} was created with capacity {found[0]}, error "
                      f"rate {found[1]} and the {found[5]} layout; using those, not "
                      f"{' '.join(asked)}\n")
        return BloomFilter.open(path, mode="c")
    return BloomFilter.open(
        path, DEFAULT_CAPACITY if args.capacity is None else args.capacity,
        DEFAULT_ERROR_RATE if args.error_rate is None else args.error_rate,
        layout=args.layout or "standard", mode="c")


def _open_rotating(path: str, header: Optional[_files.Header], args: argparse.Namespace,
                   err: IO[str]) -> Any:
    from crawldedup.rotating import RotatingBloomFilter

    if header is None:
        return RotatingBloomFilter.open(
            path, DEFAULT_CAPACITY if args.capacity is None else args.capacity,
            DEFAULT_ERROR_RATE if args.error_rate is None else args.error_rate,
            2 if args.generations is None else args.generations,
            rotate_every=args.rotate_every, layout=args.layout or "standard", mode="c")
    if header.kind != _files.KIND_ROTATING:
        kind = _files.KIND_NAMES.get(header.kind, f"kind {header.kind}")
        raise CrawldedupError(
            f"the state file {path!r} holds a {kind}, which cannot rotate; give a new --state "
            f"path for a rotating state (--rotate-every/--generations)")
    rf = RotatingBloomFilter.open(path, mode="c")
    wanted = [("--capacity", args.capacity, rf.capacity),
              ("--error-rate", args.error_rate, rf.error_rate),
              ("--layout", args.layout, rf.layout),
              ("--generations", args.generations, rf.generations),
              ("--rotate-every", args.rotate_every, rf.rotate_every)]
    asked = [f"{flag} {_show(value, flag)}" for flag, value, found in wanted
             if value is not None and value != found]
    if asked:
        err.write(f"crawldedup: note: {path} was created with capacity {rf.capacity}, error "
                  f"rate {rf.error_rate}, the {rf.layout} layout, {rf.generations} "
                  f"generations and rotation every {_show(rf.rotate_every, '--rotate-every')}"
                  f"; using those, not {' '.join(asked)}\n")
    return rf


def _show(value: Any, flag: str) -> str:
    if flag == "--rotate-every":
        return "never (by hand only)" if value is None else _format_duration(value)
    return str(value)


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def _duration(text: str) -> float:
    """Seconds in '3600', '90s', '15m', '12h', '7d', '2w' or a sum like '1d12h'."""
    import re
    spec = text.strip().lower()
    if spec.startswith("-"):
        raise argparse.ArgumentTypeError(f"must be a positive duration, got {text!r}")
    try:
        seconds = float(spec)
    except ValueError:
        parts = re.findall(r"(\d+(?:\.\d+)?)\s*([smhdw])", spec)
        if not parts or re.sub(r"(\d+(?:\.\d+)?)\s*([smhdw])", "", spec).strip():
            raise argparse.ArgumentTypeError(
                f"not a duration: {text!r} (use seconds, or a number with a unit s, m, h, d "
                f"or w, e.g. 12h or 1d12h)") from None
        seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
    if not (seconds > 0 and seconds < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive duration, got {text!r}")
    return seconds


def _format_duration(seconds: float) -> str:
    for unit, size in (("w", 604800.0), ("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def _generations(text: str) -> int:
    from crawldedup.rotating import MAX_GENERATIONS, MIN_GENERATIONS
    value = _integer(text)
    if not MIN_GENERATIONS <= value <= MAX_GENERATIONS:
        raise argparse.ArgumentTypeError(
            f"must be in [{MIN_GENERATIONS}, {MAX_GENERATIONS}], got {value}")
    return value


class _Journal:
    """The URLs of the chunk being recorded and printed, kept in
    ``STATE.pending`` until they are printed.  A run killed in between (or
    whose output failed) left them recorded as seen but maybe not printed: the
    next run prints them first.  Written without fsync: it guards against a
    killed process, whose writes the OS keeps, not against power loss.

    The file is empty while nothing is pending: ``hold`` writes a chunk at
    its start, ``release`` truncates it (one system call each)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o644)
        self.dirty = True  # what an earlier run left: truncated before the first hold

    def pending(self) -> List[bytes]:
        size = os.fstat(self.fd).st_size
        data = _read_at(self.fd, size, 0)
        if not data.endswith(b"\n"):  # killed while writing it: nothing recorded yet
            data = data[:data.rfind(b"\n") + 1]
        # Unique: a chunk may hold a URL twice (the first one counted).
        return list(dict.fromkeys(line for line in data.split(b"\n") if line))

    def hold(self, urls: List[bytes]) -> None:
        if self.dirty:
            os.ftruncate(self.fd, 0)
        data = b"\n".join(urls) + b"\n"
        self.dirty = True
        _write_at(self.fd, data, 0)

    def release(self) -> None:
        os.ftruncate(self.fd, 0)
        self.dirty = False

    def close(self) -> None:
        try:
            empty = os.fstat(self.fd).st_size == 0
        finally:
            os.close(self.fd)
        if empty:
            try:
                os.unlink(self.path)
            except OSError:
                pass


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


def _write_all(out: BinaryIO, data: bytes) -> None:
    """Write data to out whole, and flush it.

    A buffered writer's write() of a big block into a full pipe drops the
    rest of the block when a signal arrives meanwhile and its handler
    returns (CPython 3.9-3.13: 1.6 MB written, 128 KiB read at the other
    end): the command would have recorded URLs it never printed.  So the
    block goes to the file descriptor with os.write, which returns how much
    it wrote, until all is written; the buffered writer is flushed first."""
    out.flush()
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):  # not a file: an in-memory stream
        out.write(data)
        out.flush()
        return
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


SLOW_CACHE = 1 << 16
#: A state whose keys cost a pass of their own (--canonical, --exact) reads at
#: least this much input per chunk: a chunk's keys are computed on a worker
#: thread while the chunk before is recorded (_KeysAhead), and a chunk of more
#: than 2 x 4,096 URLs is canonicalized or hashed on several threads.
AHEAD_READ_SIZE = 1 << 20


class _Canonical:
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
        # Keys of recent lines outside the fast path (w3lib takes 30 times
        # longer than the kernel, and crawls repeat URLs): line -> (key,
        # whether the line had no canonical form).
        self.slow: Dict[bytes, Tuple[bytes, bool]] = {}

    def _slow(self, url: bytes) -> bytes:
        """w3lib's canonical form as UTF-8, or the line itself when it has none."""
        found = self.slow.get(url)
        if found is None:
            from crawldedup.fingerprint import canonicalize_url
            try:
                found = (canonicalize_url(url).encode("utf-8"), False)
            except ValueError:
                found = (url, True)
            if len(self.slow) >= SLOW_CACHE:
                self.slow.clear()
            self.slow[url] = found
        if found[1]:
            self.raw += 1
        return found[0]

    def _fast(self) -> bool:
        from crawldedup import fingerprint
        return self.strip_params is None and fingerprint.FAST_PATH

    def __call__(self, urls: List[bytes]) -> List[bytes]:
        keys: List[Any]
        if self._fast():
            # The batch kernel itself: canonicalize_urls adds two Python
            # loops over the batch, a third of this mode's time (profiled).
            keys = cast(List[Any], canonicalize_urls_fast(urls, False, True, True))
            if None in keys:
                for i, key in enumerate(keys):
                    if key is None:
                        keys[i] = self._slow(urls[i])
            return keys
        from crawldedup import fingerprint
        keys = cast(List[Any], fingerprint.canonicalize_urls(
            urls, strip_params=self.strip_params, errors="none"))
        for i, key in enumerate(keys):
            if key is None:
                keys[i] = urls[i]
                self.raw += 1
            else:
                keys[i] = key.encode("utf-8")
        return keys

    def digests(self, urls: List[bytes]) -> np.ndarray:
        """The MD5 digests of the keys (numpy ``S16``)."""
        from crawldedup._exact_state import fill_missing
        if self._fast():
            blob, missing = url_digests_packed(urls, True)
            if missing:
                return fill_missing(blob, missing, [hashlib.md5(self._slow(urls[i])).digest()
                                                    for i in missing])
            return np.frombuffer(blob, dtype="S16")
        blob, missing = url_digests_packed(self(urls))
        assert not missing  # canonical forms as UTF-8 bytes
        return np.frombuffer(blob, dtype="S16")


def _take(keys: Any, mask: np.ndarray, as_list: List[bool]) -> Any:
    """The keys where mask is True (keys: a list, or a numpy array)."""
    if isinstance(keys, np.ndarray):
        return keys[mask]
    return list(compress(keys, as_list))


class _Deliverer:
    """Records chunks of URLs in the state and prints the new ones, in the
    order that loses none: in the journal first, in the state next, printed
    then, released from the journal last.  Killed anywhere, no URL is lost,
    and none printed as new is forgotten."""

    def __init__(self, state: Any, journal: _Journal, canonical: Optional[_Canonical],
                 out: BinaryIO) -> None:
        self.state = state
        self.journal = journal
        self.canonical = canonical
        self.out = out

    def keys(self, lines: List[bytes]) -> Any:
        if self.canonical is None:
            return self.state.keys(lines)
        return self.state.canonical_keys(self.canonical, lines)

    def computes_keys(self) -> bool:
        """Whether the keys cost a pass of their own (not the lines as read)."""
        return self.canonical is not None or type(self.state).keys is not UrlState.keys

    def chunk(self, lines: List[bytes], keys: Any = None) -> int:
        """Deliver the new URLs of a chunk of input (whose keys may be given);
        returns how many."""
        state = self.state
        if keys is None:
            keys = self.keys(lines)
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

    def replay(self, lines: List[bytes]) -> int:
        """Print the URLs an interrupted run held (recording them again)."""
        return self._deliver(lines, self.keys(lines), everything=True)

    def _deliver(self, lines: List[bytes], keys: Any, everything: bool = False) -> int:
        self.journal.hold(lines)
        added = self.state.add_many(keys).tolist()
        if not everything and not all(added):
            lines = list(compress(lines, added))
        try:
            if lines:
                _write_all(self.out, b"\n".join(lines) + b"\n")
        except (OSError, ValueError) as exc:
            raise _OutputFailed(str(exc)) from None
        self.journal.release()
        return len(lines)


class _KeysAhead:
    """The read loop of a state whose keys cost a pass of their own (MD5
    digests, canonical forms): the next chunk's keys are computed on a
    worker thread (by kernels that run without the GIL) while this chunk is
    recorded and printed, so that the two cores share the work.

    A chunk is read ahead only when reading cannot block (a regular file,
    or a pipe with data waiting): a URL that a crawler writes to the pipe is
    printed without waiting for the next one.  When a signal stops the loop,
    the chunk read ahead is delivered too: no line read is dropped."""

    def __init__(self, deliver: "_Deliverer") -> None:
        from concurrent.futures import ThreadPoolExecutor
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
        import select

        def ready() -> bool:
            try:
                return bool(select.select([fd], [], [], 0)[0])
            except (OSError, ValueError):
                return False
        return ready

    def run(self, source: BinaryIO, chunks: Iterator[List[bytes]],
            guard: _SignalGuard) -> Tuple[int, int]:
        """(lines read, lines printed) of one source."""
        ready = self._never_blocks(source)
        read = printed = 0
        pending: Optional[Tuple[List[bytes], Any]] = None
        eof = False
        try:
            while True:
                following = None
                if not eof and guard.signum is None and (pending is None or ready()):
                    guard.reading = True
                    try:
                        chunk = next(chunks, None)
                    except _Stopped:
                        chunk = None
                    finally:
                        guard.reading = False
                    if chunk is None:
                        eof = True
                    else:
                        following = (chunk, self.pool.submit(self.deliver.keys, chunk))
                if pending is not None:
                    read += len(pending[0])
                    printed += self.deliver.chunk(pending[0], pending[1].result())
                pending = following
                if pending is None and (eof or guard.signum is not None):
                    return read, printed
        finally:
            if pending is not None:
                pending[1].cancel()

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def _check_writable(path: str) -> None:
    """Refuse a state file that is read-only (no write permission bit, or
    not writable by this user): every mode updates or replaces it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if os.path.isdir(path):
        raise CrawldedupError(f"the state {path!r} is a directory; --state names a file")
    if not (st.st_mode & 0o222) or not os.access(path, os.W_OK):
        raise CrawldedupError(f"the state file {path!r} is read-only; crawldedup urls "
                              f"updates its state: make it writable or give another --state")


def _open_urls_state(state: str, args: argparse.Namespace, err: IO[str]) -> Any:
    """The UrlState (see crawldedup._url_state) that --state/--db/--exact ask for."""
    from crawldedup.redis import cli as redis_cli
    if redis_cli.is_redis_url(args.state) and not (args.exact or args.db):
        return redis_cli.RedisState(args.state, args, err)
    if args.exact or args.db:
        from crawldedup._exact_state import open_exact
        return open_exact(state, args, err)
    return BloomState(_open_state(state, args, err))


def _run_urls(args: argparse.Namespace, out: BinaryIO, err: IO[str], stdin: BinaryIO) -> int:
    _check_urls_args(args)
    from crawldedup.redis import cli as redis_cli
    in_redis = redis_cli.is_redis_url(args.state)  # its lock and journal stay local
    state_path = redis_cli.local_state_path(args.state) if in_redis else \
        os.path.abspath(args.state)
    if not args.db and not in_redis:
        _check_writable(state_path)
    if not (args.exact or args.db or in_redis) and not os.path.exists(state_path):
        _check_new_state_size(state_path, args)
    canonical = _Canonical(args.strip_tracking) if args.canonical else None
    sources: List[BinaryIO] = []
    try:
        for name in args.files or ["-"]:
            sources.append(stdin if name == "-" else open(name, "rb"))
    except OSError as exc:
        for f in sources:
            if f is not stdin:
                f.close()
        raise CrawldedupError(f"cannot read {exc.filename!r}: {exc.strerror}") from None

    read = new = replayed = 0
    with _StateLock(state_path), _SignalGuard() as guard:
        state = _open_urls_state(state_path, args, err)
        journal = _Journal(state_path + ".pending")
        deliver = _Deliverer(state, journal, canonical, out)
        ahead: Optional[_KeysAhead] = None
        try:
            replay = journal.pending()
            if replay:
                err.write(f"crawldedup: note: printing {_count(len(replay), 'URL')} that an "
                          f"interrupted run recorded but may not have printed\n")
                deliver.replay(replay)
                replayed = len(replay)
            if deliver.computes_keys():
                ahead = _KeysAhead(deliver)
            for source in sources:
                read_size = state.read_size
                if canonical is not None or ahead is not None:
                    read_size = max(read_size, AHEAD_READ_SIZE)
                chunks = _lines(source, read_size)
                if ahead is None:
                    while guard.signum is None:
                        guard.reading = True
                        try:
                            chunk = next(chunks, None)
                        except _Stopped:
                            break
                        finally:
                            guard.reading = False
                        if chunk is None:
                            break
                        read += len(chunk)
                        new += deliver.chunk(chunk)
                else:
                    done, printed = ahead.run(source, chunks, guard)
                    read += done
                    new += printed
                if guard.signum is not None:
                    break
        except _OutputFailed as exc:
            # Point stdout at /dev/null so that Python's own flush at exit
            # does not fail a second time on the closed pipe.
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, out.fileno())
                os.close(devnull)
            except (OSError, ValueError, AttributeError):
                pass
            err.write(f"crawldedup: error: cannot write the output ({exc}); the URLs not "
                      f"delivered are kept, and the next run prints them\n")
            return 1
        finally:
            if ahead is not None:
                ahead.close()
            for f in sources:
                if f is not stdin:
                    f.close()
            try:
                detail = state.describe()
                warnings = state.warnings()
            finally:
                state.close()
                journal.close()

    again = f" (and {replayed} from an interrupted run)" if replayed else ""
    raw = ""
    if canonical is not None and canonical.raw:
        raw = (f", {_count(canonical.raw, 'line')} not canonicalizable (no URL "
               f"canonicalize_url accepts) compared as read")
    err.write(f"crawldedup: read {read}, new {new}{again}, duplicates {read - new}{raw}, "
              f"{detail}, state {args.state}\n")
    for warning in warnings:
        err.write(f"crawldedup: warning: {warning}\n")
    if guard.signum is not None:
        err.write(f"crawldedup: stopped by signal {guard.signum}; the state was saved\n")
        return 128 + guard.signum
    return 0


def _check_new_state_size(path: str, args: argparse.Namespace) -> None:
    """Usage errors, before anything is created, for a new Bloom state that
    the options cannot size (too many hash functions or bits) or that would
    not fit on the file system that would hold it."""
    from crawldedup._kernel import nbytes_for
    from crawldedup.bloom import format_size, optimal_parameters

    capacity = DEFAULT_CAPACITY if args.capacity is None else args.capacity
    error_rate = DEFAULT_ERROR_RATE if args.error_rate is None else args.error_rate
    rotating = args.rotate_every is not None
    generations = (2 if args.generations is None else args.generations) if rotating else 1
    try:
        num_bits, _ = optimal_parameters(capacity, error_rate / generations,
                                         args.layout or "standard")
    except ValueError as exc:
        flag = "--error-rate" if "hash functions" in str(exc) else "--capacity"
        value = error_rate if flag == "--error-rate" else capacity
        raise UsageError(f"{flag} {value}: {exc}") from None
    need = generations * nbytes_for(num_bits)
    try:
        free = shutil.disk_usage(os.path.dirname(path)).free
    except OSError:
        return  # a missing folder: opening the state says so
    if need > free:
        raise UsageError(
            f"--capacity {capacity:,} at --error-rate {error_rate:g} needs a "
            f"{format_size(need)} state file" + (f" ({generations} generations)" if rotating
                                                  else "")
            + f"; {os.path.dirname(path)} has {format_size(free)} free")


def _count(n: int, noun: str) -> str:
    """'1 URL', '2 URLs'."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _check_urls_args(args: argparse.Namespace) -> None:
    """Usage errors that argparse cannot see (exit status 2)."""
    if (args.exact or args.db) and (args.rotate_every is not None or args.generations is not None):
        raise UsageError("--exact/--db keep every URL forever: they cannot be combined with "
                         "--rotate-every/--generations")
    if args.strip_tracking and not args.canonical:
        raise UsageError("--strip-tracking needs --canonical")
    if args.generations is not None and args.rotate_every is None:
        raise UsageError("--generations needs --rotate-every: a rotating state forgets a URL "
                         "after GENERATIONS rotations, and rotates every DURATION")


def _run_info(args: argparse.Namespace, out: IO[str]) -> int:
    from crawldedup.redis import cli as redis_cli
    if redis_cli.is_redis_url(args.path):
        out.write(redis_cli.describe(args.path))
        return 0
    path = os.path.abspath(args.path)
    if not os.path.lexists(path):
        raise CrawldedupError(
            f"no state file at {path!r} (a crawldedup urls --db state keeps its URLs in the "
            f"database: its --state path only names a lock and a journal while it runs)")
    with open(path, "rb") as f:
        head = f.read(_files.HEADER_SIZE)
    size = os.path.getsize(path)
    header = _files.parse_header(head, size, path)
    kind = _files.KIND_NAMES.get(header.kind, f"unknown kind {header.kind}")
    lines = [f"file: {path} ({size:,} bytes, format version {header.version})", f"kind: {kind}"]
    if header.kind == _files.KIND_BLOOM:
        mode = "c" if args.repair else "r"
        with BloomFilter.open(path, mode=mode, verify=args.verify) as bf:
            dirty = bool(header.flags & _files.FLAG_DIRTY)
            lines += [
                f"capacity: {bf.capacity:,}",
                f"error rate (target): {bf.error_rate:g}",
                f"layout: {bf.layout}",
                f"bits: {bf.num_bits:,} ({bf.nbytes / 2**20:,.2f} MiB), hash functions: "
                f"{bf.num_hashes}, seed: {bf.seed}",
                f"inserted: {bf.insert_count:,}",
                f"estimated count: {bf.estimated_count():,}",
                f"fill ratio: {bf.fill_ratio:.4f}",
                f"estimated false-positive rate now: {bf.estimated_error_rate:.4g}",
                _checksum_note(dirty, args, size),
            ]
    elif header.kind == _files.KIND_ROTATING:
        lines += _describe_rotating(path, header, size, args)
    else:
        loader = _composite_loader(header.kind)
        if loader is None:
            lines.append("(this crawldedup cannot describe this kind)")
        else:
            obj = loader(path)
            lines.append(repr(obj))
    out.write("\n".join(lines) + "\n")
    return 0


def _checksum_note(dirty: bool, args: argparse.Namespace, size: int) -> str:
    if dirty and not args.repair:
        return ("checksum: not up to date (open for writing, or its writer was killed; "
                "--repair seals it)")
    if args.verify or args.repair or size < 64 << 20:
        return "checksum: verified"
    return "checksum: not checked (large file; --verify checks it)"


def _when(seconds: Optional[float]) -> str:
    import datetime
    if seconds is None:
        return "never"
    try:
        moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"{seconds:g} s"
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _describe_rotating(path: str, header: _files.Header, size: int,
                       args: argparse.Namespace) -> List[str]:
    from crawldedup.rotating import RotatingBloomFilter
    dirty = bool(header.flags & _files.FLAG_DIRTY)
    # Read-only: it shows the state its writers left, and rotates nothing.
    with RotatingBloomFilter.open(path, mode="c" if args.repair else "r",
                                  verify=args.verify) as rf:
        first = rf.filters[0]
        every = rf.rotate_every
        due = rf.next_rotation
        lines = [
            f"capacity: {rf.capacity:,} per generation",
            f"error rate (target): {rf.error_rate:g} "
            f"(each generation {rf.error_rate / rf.generations:.3g})",
            f"layout: {rf.layout}",
            f"generations: {rf.generations}, each {first.num_bits:,} bits "
            f"({first.nbytes / 2**20:,.2f} MiB), hash functions: {first.num_hashes}, "
            f"seed: {rf.seed}",
            "rotation: " + ("by hand only" if every is None else f"every {_format_duration(every)}")
            + ("" if rf.rotate_at_fill is None else f", and when the newest generation is "
               f"{rf.rotate_at_fill:g} full"),
            f"rotations: {rf.rotations:,}, last {_when(rf.last_rotation)}, next "
            f"{_when(due)}",
            "inserted per generation (oldest first): "
            + ", ".join(f"{f.insert_count:,}" for f in rf.filters),
            f"estimated count: {rf.estimated_count():,}",
            f"fill ratio: {rf.fill_ratio:.4f}",
            f"estimated false-positive rate now: {rf.estimated_error_rate:.4g}",
            _checksum_note(dirty, args, size),
        ]
    return lines


def _composite_loader(kind: int) -> Optional[Any]:
    if kind == _files.KIND_SCALABLE:
        from crawldedup.scalable import ScalableBloomFilter
        return ScalableBloomFilter.load
    if kind == _files.KIND_ROTATING:
        from crawldedup.rotating import RotatingBloomFilter
        return RotatingBloomFilter.load
    if kind == _files.KIND_FPSET:
        from crawldedup.fpset import FingerprintSet
        return FingerprintSet.load
    if kind == _files.KIND_INDEX:
        from crawldedup.index import SimhashIndex
        return SimhashIndex.load
    return None


def _positive_int(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _integer(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        try:
            as_float = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not as_float.is_integer():
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        value = int(as_float)
    return value


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in the open interval (0, 1), got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crawldedup",
        description="Have I seen this before? Deduplicate URLs against persistent state.")
    parser.add_argument("--version", action="version", version=f"crawldedup {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    urls = commands.add_parser(
        "urls", help="print the URLs not seen before",
        description="Read URLs, one per line, from FILEs (or standard input) and print each "
                    "one not seen before in this run or in earlier runs with the same state "
                    "file. Blank lines and surrounding whitespace are ignored.")
    urls.add_argument("files", nargs="*", metavar="FILE", help="input files ('-' = stdin)")
    urls.add_argument("--state", required=True, metavar="PATH",
                      help="state file (a Bloom filter), created when missing; or "
                           "redis://HOST:PORT/DB/NAME, a Bloom filter in Redis shared by "
                           "crawlers on several machines (pip install 'crawldedup[redis]')")
    urls.add_argument("--capacity", type=_positive_int, metavar="N",
                      help=f"URLs the new state is sized for (default {DEFAULT_CAPACITY:,})")
    urls.add_argument("--error-rate", type=_probability, metavar="P",
                      help=f"false-positive rate at capacity (default {DEFAULT_ERROR_RATE})")
    urls.add_argument("--layout", choices=LAYOUTS,
                      help="bit layout of a new state: 'blocked' keeps each URL's bits in one "
                           "cache line (faster for big states, a few %% more memory)")
    urls.add_argument("--rotate-every", type=_duration, metavar="DURATION",
                      help="a rotating state: forget a URL not met for about GENERATIONS x "
                           "DURATION (e.g. 1d, 12h, 3600), so it is printed again; the "
                           "capacity is per DURATION")
    urls.add_argument("--generations", type=_generations, metavar="N",
                      help="generations of a new rotating state (default 2): a URL is "
                           "remembered for N-1 to N rotation periods after it was last met")
    urls.add_argument("--canonical", action="store_true",
                      help="compare URLs by their canonical form (w3lib's canonicalize_url: "
                           "sorted query, normalized escapes, no fragment); the URL as read "
                           "is printed")
    urls.add_argument("--strip-tracking", action="store_true",
                      help="with --canonical, also drop tracking parameters (utm_*, gclid, "
                           "fbclid, spm, ...: crawldedup.DEFAULT_TRACKING_PARAMS)")
    urls.add_argument("--exact", action="store_true",
                      help="no false positives: keep each URL's MD5 (16 bytes) in a "
                           "fingerprint set saved in the state file (or in --db)")
    urls.add_argument("--db", metavar="URL",
                      help="keep the MD5s in a database instead (implies --exact): "
                           "sqlite:///PATH, redis://HOST:PORT/DB/NAME, or any SQLAlchemy URL "
                           "(PostgreSQL, MySQL/MariaDB; pip install 'crawldedup[sql]'); "
                           "--state then names the local lock "
                           "and journal; crawlers sharing the database print each URL once")

    from crawldedup import _near_dups
    _near_dups.add_parser(commands)

    from crawldedup.recrawl import cli as recrawl_cli
    recrawl_cli.add_parsers(commands)

    info = commands.add_parser(
        "info", help="describe a state file",
        description="Print the parameters, layout, fill ratio, estimated count and current "
                    "estimated false-positive rate of a crawldedup state file.")
    info.add_argument("path", metavar="PATH")
    info.add_argument("--verify", action="store_true", default=None,
                      help="check the checksum even of a large file (reads it whole)")
    info.add_argument("--repair", action="store_true",
                      help="seal the checksum of a file left open by a killed writer")
    for command in commands.choices.values():
        # A usage error found after parsing shows the usage of its command.
        command.set_defaults(command_parser=command)
    return parser


# Options whose value may start with "-" ("--rotate-every -1d"): argparse
# would take such a value for an option and say "expected one argument".
_VALUE_OPTIONS = ("--capacity", "--error-rate", "--rotate-every", "--generations", "--k")


def _attach_values(argv: Sequence[str]) -> List[str]:
    """"--rotate-every -1d" -> "--rotate-every=-1d", so that the option's
    own check reports the value."""
    out: List[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if (arg in _VALUE_OPTIONS and i + 1 < len(argv) and len(argv[i + 1]) > 1
                and argv[i + 1][0] == "-" and (argv[i + 1][1].isdigit() or argv[i + 1][1] == ".")):
            out.append(f"{arg}={argv[i + 1]}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(_attach_values(sys.argv[1:] if argv is None else argv))
    # (parse_args exits with status 2 on a usage error)
    err = sys.stderr
    try:
        if args.command == "urls":
            if sys.stdin is None and not args.files:
                raise CrawldedupError("no FILE given and no standard input to read")
            stdin = sys.stdin.buffer if sys.stdin is not None else None
            return _run_urls(args, sys.stdout.buffer, err, stdin)  # type: ignore[arg-type]
        if args.command == "info":
            return _run_info(args, sys.stdout)
        if args.command == "near-dups":
            from crawldedup import _near_dups
            stdin = sys.stdin.buffer if sys.stdin is not None else None
            return _near_dups.run(args, sys.stdout, err, stdin)
        if args.command in ("due", "record"):
            from crawldedup.recrawl import cli as recrawl_cli
            stdin = sys.stdin.buffer if sys.stdin is not None else None
            return recrawl_cli.run(args, sys.stdout, err, stdin)
        raise UsageError(f"unknown command {args.command!r}")  # pragma: no cover
    except UsageError as exc:
        getattr(args, "command_parser", parser).print_usage(err)
        err.write(f"crawldedup: error: {exc}\n")
        return 2
    except (CrawldedupError, OSError) as exc:
        err.write(f"crawldedup: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        err.write("crawldedup: interrupted before any work was done\n")
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
