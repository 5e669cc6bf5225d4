"""The ``crawldedup`` command line.

``crawldedup urls`` is the main job: filter a stream of URLs (one per line)
against a persistent state file, printing each URL that no earlier line of this
run, and no earlier run with the same state, has seen.

Guarantees:

* The state is a memory-mapped file, updated in place as URLs are printed: a
  URL printed as new is recorded before it is printed, so no later run prints
  it as new again, even after ``kill -9``.
* No URL is lost either: the URLs of the chunk being recorded and printed are
  kept in ``STATE.pending`` until they are printed; a run that was killed, or
  whose output was closed early (``| head``), leaves them there and the next
  run prints them first (at-least-once delivery for that chunk).
* Ctrl-C and SIGTERM stop after the current chunk is printed.
* One ``crawldedup urls`` at a time uses a state file (a lock file beside
  it); a second one exits with an error.

``crawldedup info PATH`` describes any crawldedup state file.

``crawldedup near-dups FILE.jsonl`` prints the near-duplicate documents of a
stream of JSON lines (see ``_near_dups``).

Exit status: 0 on success, 1 on an error, 2 on a usage error, 130/143 when
stopped by SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from types import FrameType
from typing import IO, Any, BinaryIO, Callable, Dict, Iterator, List, Optional, Sequence

from crawldedup import _files
from crawldedup._version import __version__
from crawldedup.bloom import LAYOUTS, BloomFilter
from crawldedup.errors import CrawldedupError

DEFAULT_CAPACITY = 10_000_000
DEFAULT_ERROR_RATE = 0.01
READ_SIZE = 1 << 16


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
    """An exclusive lock on ``PATH.lock``, held while a command uses PATH."""

    def __init__(self, state_path: str) -> None:
        self.path = state_path + ".lock"
        self._fd: Optional[int] = None

    def __enter__(self) -> "_StateLock":
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
                f"the state file {self.path[:-5]!r} is in use by another crawldedup process "
                f"(lock {self.path!r})") from None
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the lock
            self._fd = None


def _lines(source: BinaryIO) -> Iterator[List[bytes]]:
    """Chunks of stripped, non-blank lines, as soon as input is available."""
    pending = b""
    read = getattr(source, "read1", source.read)
    while True:
        data = read(READ_SIZE)
        if not data:
            break
        data = pending + data
        cut = data.rfind(b"\n") + 1
        pending = data[cut:]
        chunk = [line.strip() for line in data[:cut].split(b"\n")]
        chunk = [line for line in chunk if line]
        if chunk:
            yield chunk
    last = pending.strip()
    if last:
        yield [last]


class _OutputFailed(Exception):
    pass


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
    value = _positive_int(text)
    if not MIN_GENERATIONS <= value <= MAX_GENERATIONS:
        raise argparse.ArgumentTypeError(
            f"must be in [{MIN_GENERATIONS}, {MAX_GENERATIONS}], got {value}")
    return value


class _Journal:
    """The URLs of the chunk being recorded and printed, kept in
    ``STATE.pending`` until they are printed.  A run killed in between (or
    whose output failed) left them recorded as seen but maybe not printed: the
    next run prints them first.  Written without fsync: it guards against a
    killed process, whose writes the OS keeps, not against power loss."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file = open(path, "a+b")

    def pending(self) -> List[bytes]:
        self.file.seek(0)
        data = self.file.read()
        if not data.endswith(b"\n"):  # killed while writing it: nothing recorded yet
            data = data[:data.rfind(b"\n") + 1]
        return [line for line in data.split(b"\n") if line]

    def hold(self, urls: List[bytes]) -> None:
        self.file.seek(0)
        self.file.truncate()
        self.file.write(b"\n".join(urls) + b"\n")
        self.file.flush()

    def release(self) -> None:
        self.file.seek(0)
        self.file.truncate()
        self.file.flush()

    def close(self) -> None:
        self.file.close()
        try:
            if os.path.getsize(self.path) == 0:
                os.unlink(self.path)
        except OSError:
            pass


def _new_in_chunk(bf: BloomFilter, chunk: List[bytes],
                  keys: Optional[List[bytes]] = None) -> List[bytes]:
    """The URLs of chunk not in the filter, each once (by key), in order."""
    if keys is None:
        absent = bf.contains_many(chunk).tolist()
        return list(dict.fromkeys(url for url, seen in zip(chunk, absent) if not seen))
    absent = bf.contains_many(keys).tolist()
    fresh: Dict[bytes, bytes] = {}
    for url, key, seen in zip(chunk, keys, absent):
        if not seen and key not in fresh:
            fresh[key] = url
    return list(fresh.values())


def _canonical_keys(strip_tracking: bool) -> Callable[[List[bytes]], List[bytes]]:
    """--canonical: each URL's key is its canonical form (w3lib's rules, and
    without tracking parameters with --strip-tracking), as UTF-8.  A line
    that is not UTF-8 is its own key."""
    from crawldedup.fingerprint import canonicalize_url

    def keys(urls: List[bytes]) -> List[bytes]:
        out = []
        for url in urls:
            try:
                text = url.decode("utf-8")
                out.append(canonicalize_url(text, strip_params=strip_tracking or None)
                           .encode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                out.append(url)
        return out
    return keys


def _run_urls(args: argparse.Namespace, out: BinaryIO, err: IO[str], stdin: BinaryIO) -> int:
    if (args.exact or args.db) and (args.rotate_every is not None or args.generations is not None):
        raise UsageError("--exact/--db keep every URL forever: they cannot be combined with "
                         "--rotate-every/--generations")
    from crawldedup.redis import cli as redis_cli
    in_redis = redis_cli.is_redis_url(args.state)  # the lock and journal stay local
    state = redis_cli.local_state_path(args.state) if in_redis else os.path.abspath(args.state)
    if args.strip_tracking and not args.canonical:
        raise UsageError("--strip-tracking needs --canonical")
    keyed = _canonical_keys(args.strip_tracking) if args.canonical else None
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

    def deliver(urls: List[bytes], replaying: bool = False) -> int:
        # Recorded first (in the journal, then in the filter), printed next,
        # released last: killed anywhere, no URL is lost and none printed as
        # new is forgotten.
        journal.hold(urls)
        added = bf.add_many(urls if keyed is None else keyed(urls))
        if getattr(bf, "exact", False) and not replaying:
            # --exact/--db: print only what this run added (another crawler
            # sharing the database may have added the rest meanwhile).
            urls = [url for url, new in zip(urls, added.tolist()) if new]
        try:
            if urls:
                out.write(b"\n".join(urls) + b"\n")
                out.flush()
        except (OSError, ValueError) as exc:
            raise _OutputFailed(str(exc)) from None
        journal.release()
        return len(urls)

    with _StateLock(state), _SignalGuard() as guard:
        if args.exact or args.db:
            from crawldedup._exact_state import open_exact
            bf = open_exact(state, args, err)  # type: ignore[assignment]
        elif in_redis:
            bf = redis_cli.RedisState(args.state, args, err)  # type: ignore[assignment]
        else:
            bf = _open_state(state, args, err)
        rotating = hasattr(bf, "generations")
        journal = _Journal(state + ".pending")
        try:
            replay = journal.pending()
            if replay:
                err.write(f"crawldedup: note: printing {len(replay)} URLs that an interrupted "
                          f"run recorded but may not have printed\n")
                deliver(replay, replaying=True)
                replayed = len(replay)
            for source in sources:
                chunks = _lines(source)
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
                    keys = None if keyed is None else keyed(chunk)
                    fresh = _new_in_chunk(bf, chunk, keys)
                    if fresh:
                        new += deliver(fresh)
                    if rotating and len(fresh) < len(chunk):
                        # Refresh on sight: a URL that keeps coming stays
                        # remembered; one not met for a whole window is
                        # forgotten and printed again when it comes back.
                        bf.add_many(chunk if keys is None else keys)
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
            for f in sources:
                if f is not stdin:
                    f.close()
            summary = (bf.fill_ratio,
                       bf.filters[-1].insert_count if rotating else bf.insert_count,
                       bf.capacity, bf.estimated_error_rate, bf.error_rate)
            detail = getattr(bf, "detail", None) or f"fill ratio {bf.fill_ratio:.4g}"
            bf.close()
            journal.close()

    fill, count, capacity, rate_now, rate = summary
    again = f" (and {replayed} from an interrupted run)" if replayed else ""
    err.write(f"crawldedup: read {read}, new {new}{again}, duplicates {read - new}, "
              f"{detail}, state {args.state}\n")
    if count > capacity:
        where = "its newest generation holds" if rotating else "the state holds about"
        err.write(f"crawldedup: warning: {where} {count} URLs, more than "
                  f"its capacity {capacity}; its false-positive rate is now about "
                  f"{rate_now:.3g} (asked: {rate}). Start a new state "
                  f"with a larger --capacity" + (" or rotate more often" if rotating else "")
                  + ".\n")
    if guard.signum is not None:
        err.write(f"crawldedup: stopped by signal {guard.signum}; the state was saved\n")
        return 128 + guard.signum
    return 0


def _run_info(args: argparse.Namespace, out: IO[str]) -> int:
    from crawldedup.redis import cli as redis_cli
    if redis_cli.is_redis_url(args.path):
        out.write(redis_cli.describe(args.path))
        return 0
    path = os.path.abspath(args.path)
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
            f"error rate (target): {rf.error_rate:g} (each generation {rf.error_rate / rf.generations:.3g})",
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
    if kind == getattr(_files, "KIND_SCALABLE", None):
        from crawldedup.scalable import ScalableBloomFilter
        return ScalableBloomFilter.load
    if kind == getattr(_files, "KIND_ROTATING", None):
        from crawldedup.rotating import RotatingBloomFilter
        return RotatingBloomFilter.load
    if kind == getattr(_files, "KIND_FPSET", None):
        from crawldedup.fpset import FingerprintSet
        return FingerprintSet.load
    if kind == getattr(_files, "KIND_INDEX", None):
        from crawldedup.index import SimhashIndex
        return SimhashIndex.load
    return None


def _positive_int(text: str) -> int:
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
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
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
                           "--state then names the local lock and journal; crawlers sharing the database print each URL once")

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
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits with status 2 on a usage error
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
        parser.print_usage(err)
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
