"""The ``crawldedup`` command line.

``crawldedup urls`` is the main job: filter a stream of URLs (one per line)
against a persistent state file, printing each URL that no earlier line of this
run, and no earlier run with the same state, has seen.

Guarantees:

* The state is saved atomically at the end, and on Ctrl-C or SIGTERM after the
  URLs already printed have been flushed, so a URL printed as new is never
  printed as new again by a later run, and a URL never printed is never
  recorded as seen.
* If the output is closed early (``| head``) or an error happens while
  writing it, the state is left as it was before the run: the next run prints
  those URLs again rather than losing them (at-least-once delivery).
* One process at a time uses a state file (a lock file beside it); a second
  one exits with an error instead of overwriting the first one's work.

Exit status: 0 on success, 1 on an error, 2 on a usage error, 130/143 when
stopped by SIGINT/SIGTERM (after saving).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from types import FrameType
from typing import IO, Any, BinaryIO, Iterator, List, Optional, Sequence

from crawldedup._version import __version__
from crawldedup.bloom import BloomFilter
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


def _open_state(path: str, capacity: Optional[int], error_rate: Optional[float],
                err: IO[str]) -> BloomFilter:
    if os.path.exists(path):
        bf = BloomFilter.load(path)
        asked = []
        if capacity is not None and capacity != bf.capacity:
            asked.append(f"--capacity {capacity}")
        if error_rate is not None and error_rate != bf.error_rate:
            asked.append(f"--error-rate {error_rate}")
        if asked:
            err.write(f"crawldedup: note: {path} was created with capacity {bf.capacity} and "
                      f"error rate {bf.error_rate}; using those, not {' '.join(asked)}\n")
        return bf
    return BloomFilter(DEFAULT_CAPACITY if capacity is None else capacity,
                       DEFAULT_ERROR_RATE if error_rate is None else error_rate)


def _run_urls(args: argparse.Namespace, out: BinaryIO, err: IO[str], stdin: BinaryIO) -> int:
    state = os.path.abspath(args.state)
    sources: List[BinaryIO] = []
    try:
        for name in args.files or ["-"]:
            sources.append(stdin if name == "-" else open(name, "rb"))
    except OSError as exc:
        for f in sources:
            if f is not stdin:
                f.close()
        raise CrawldedupError(f"cannot read {exc.filename!r}: {exc.strerror}") from None

    read = new = 0
    with _StateLock(state), _SignalGuard() as guard:
        bf = _open_state(state, args.capacity, args.error_rate, err)
        try:
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
                    fresh = bf.add_many(chunk)
                    read += len(chunk)
                    printed = [url for url, is_new in zip(chunk, fresh.tolist()) if is_new]
                    new += len(printed)
                    if printed:
                        try:
                            out.write(b"\n".join(printed) + b"\n")
                            out.flush()
                        except (OSError, ValueError) as exc:
                            raise _OutputFailed(str(exc)) from None
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
            err.write(f"crawldedup: error: cannot write the output ({exc}); the state was "
                      f"not updated, so the next run prints these URLs again\n")
            return 1
        finally:
            for f in sources:
                if f is not stdin:
                    f.close()
        bf.save(state)

    err.write(f"crawldedup: read {read}, new {new}, duplicates {read - new}, "
              f"fill ratio {bf.fill_ratio:.4f}, state {args.state}\n")
    if bf.insert_count > bf.capacity:
        err.write(f"crawldedup: warning: the state holds about {bf.insert_count} URLs, more than "
                  f"its capacity {bf.capacity}; its false-positive rate is now about "
                  f"{bf.estimated_error_rate:.3g} (asked: {bf.error_rate}). Start a new state "
                  f"with a larger --capacity.\n")
    if guard.signum is not None:
        err.write(f"crawldedup: stopped by signal {guard.signum}; the state was saved\n")
        return 128 + guard.signum
    return 0


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
                      help="state file (a Bloom filter), created when missing")
    urls.add_argument("--capacity", type=_positive_int, metavar="N",
                      help=f"URLs the new state is sized for (default {DEFAULT_CAPACITY:,})")
    urls.add_argument("--error-rate", type=_probability, metavar="P",
                      help=f"false-positive rate at capacity (default {DEFAULT_ERROR_RATE})")
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
