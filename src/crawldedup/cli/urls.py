"""``crawldedup urls``: the state it opens (a Bloom filter, a rotating one, an
exact set, a database, Redis) and the run over the input (see the package
docstring for its guarantees)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import stat
import sys
from typing import IO, Any, BinaryIO, List, Optional

from crawldedup._extras import install_hint
from crawldedup._kernel import nbytes_for
from crawldedup.bloom.filter import BloomFilter, format_size, optimal_parameters
from crawldedup.bloom.layouts import NAMES as LAYOUTS
from crawldedup.bloom.rotating import RotatingBloomFilter
from crawldedup.cli import _key_mode
from crawldedup.cli import redis_state as redis_cli
from crawldedup.cli._common import (
    DEFAULT_CAPACITY,
    DEFAULT_ERROR_RATE,
    UsageError,
    counted,
    duration,
    generations,
    kind_name,
    positive_int,
    probability,
    show_value,
)
from crawldedup.cli._delivery import (
    Canonical,
    Deliverer,
    Journal,
    OutputFailed,
    Reader,
    SignalGuard,
    StateLock,
    orphans,
    own_journal,
)
from crawldedup.cli._exact_state import open_exact
from crawldedup.cli._inputs import close_inputs, reading_command
from crawldedup.cli._url_state import BloomState
from crawldedup.errors import CrawldedupError
from crawldedup.formats import files as _files


def _open_state(path: str, args: argparse.Namespace, err: IO[str]) -> Any:
    """The state file, mapped in place (created with the options when missing):
    a BloomFilter, or a RotatingBloomFilter with --rotate-every/--generations
    or when the file holds one."""
    rotating_asked = args.rotate_every is not None or args.generations is not None
    header = None
    if os.path.exists(path):
        header = _files.read_header(path)
    if header is not None and header.kind not in (_files.KIND_BLOOM, _files.KIND_ROTATING):
        raise CrawldedupError(
            f"{path!r} holds a {kind_name(header.kind)}; crawldedup urls keeps a Bloom filter "
            f"there (with --exact, a fingerprint set): use another --state path")
    if rotating_asked or (header is not None and header.kind == _files.KIND_ROTATING):
        return _open_rotating(path, header, args, err)
    if header is not None:
        bf = BloomFilter.open(path, mode="c")
        asked = []
        if args.capacity is not None and args.capacity != bf.capacity:
            asked.append(f"--capacity {args.capacity}")
        if args.error_rate is not None and args.error_rate != bf.error_rate:
            asked.append(f"--error-rate {args.error_rate}")
        if args.layout is not None and args.layout != bf.layout:
            asked.append(f"--layout {args.layout}")
        if asked:
            err.write(f"crawldedup: note: {path} was created with capacity {bf.capacity}, error "
                      f"rate {bf.error_rate} and the {bf.layout} layout; using those, not "
                      f"{' '.join(asked)}\n")
        return bf
    return BloomFilter.open(
        path, DEFAULT_CAPACITY if args.capacity is None else args.capacity,
        DEFAULT_ERROR_RATE if args.error_rate is None else args.error_rate,
        layout=args.layout or "standard", mode="c")


def _open_rotating(path: str, header: Optional[_files.Header], args: argparse.Namespace,
                   err: IO[str]) -> Any:
    if header is None:
        return RotatingBloomFilter.open(
            path, DEFAULT_CAPACITY if args.capacity is None else args.capacity,
            DEFAULT_ERROR_RATE if args.error_rate is None else args.error_rate,
            2 if args.generations is None else args.generations,
            rotate_every=args.rotate_every, layout=args.layout or "standard", mode="c")
    if header.kind != _files.KIND_ROTATING:
        raise CrawldedupError(
            f"the state file {path!r} holds a {_files.kind_name(header.kind)}, which cannot "
            f"rotate; give a new --state path for a rotating state "
            f"(--rotate-every/--generations)")
    rf = RotatingBloomFilter.open(path, mode="c")
    wanted = [("--capacity", args.capacity, rf.capacity),
              ("--error-rate", args.error_rate, rf.error_rate),
              ("--layout", args.layout, rf.layout),
              ("--generations", args.generations, rf.generations),
              ("--rotate-every", args.rotate_every, rf.rotate_every)]
    asked = [f"{flag} {show_value(value, flag)}" for flag, value, found in wanted
             if value is not None and value != found]
    if asked:
        err.write(f"crawldedup: note: {path} was created with capacity {rf.capacity}, error "
                  f"rate {rf.error_rate}, the {rf.layout} layout, {rf.generations} "
                  f"generations and rotation every {show_value(rf.rotate_every, '--rotate-every')}"
                  f"; using those, not {' '.join(asked)}\n")
    return rf


def _check_writable(path: str, folder: bool) -> None:
    """Refuse a state file that is read-only (no write permission bit, or
    not writable by this user): every mode updates or replaces it.  With
    --disk the state is a folder, and a file is refused."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if os.path.isdir(path) != folder:
        if folder:
            raise CrawldedupError(f"the state {path!r} is a file; --disk keeps a disk store, "
                                  f"a folder: give --state a new path")
        raise CrawldedupError(f"the state {path!r} is a directory; --state names a file "
                              f"(a disk store's folder takes --disk)")
    if not (st.st_mode & 0o222) or not os.access(path, os.W_OK):
        raise CrawldedupError(f"the state file {path!r} is read-only; crawldedup urls "
                              f"updates its state: make it writable or give another --state")


def _open_urls_state(state: str, args: argparse.Namespace, err: IO[str]) -> Any:
    """The UrlState (see crawldedup.cli._url_state) that --state/--db/--exact ask for."""
    if redis_cli.is_redis_url(args.state) and not (args.exact or args.db):
        return redis_cli.RedisState(args.state, args, err)
    if args.exact or args.db:
        return open_exact(state, args, err)
    return BloomState(_open_state(state, args, err))


def expected_lines(sources: List[BinaryIO]) -> int:
    """About how many lines the regular files among sources hold from where
    they stand: their bytes over the mean line length of the first 64 KiB
    (read with pread: nothing moves).  0 when nothing tells (pipes)."""
    total = 0
    sample = b""
    for source in sources:
        try:
            fd = source.fileno()
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                continue
            at = source.tell()
            if not sample:
                sample = os.pread(fd, 1 << 16, at)
        except (OSError, ValueError, AttributeError):
            continue
        total += max(0, st.st_size - at)
    lines = sample.count(b"\n")
    return total * lines // len(sample) if lines else 0


def add_parsers(commands: Any) -> None:
    """Add ``urls`` to the crawldedup command line."""
    urls = reading_command(
        commands, "urls", help="print the URLs not seen before",
        description="Read URLs, one per line, from FILEs (or standard input) and print each "
                    "one not seen before in this run or in earlier runs with the same state "
                    "file. Blank lines and surrounding whitespace are ignored.")
    urls.add_argument("--state", required=True, metavar="PATH",
                      help="state file (a Bloom filter), created when missing; or "
                           "redis://HOST:PORT/DB/NAME, a Bloom filter in Redis shared by "
                           f"crawlers on several machines ({install_hint('redis')})")
    urls.add_argument("--capacity", type=positive_int, metavar="N",
                      help=f"URLs the new state is sized for (default {DEFAULT_CAPACITY:,})")
    urls.add_argument("--error-rate", type=probability, metavar="P",
                      help=f"false-positive rate at capacity (default {DEFAULT_ERROR_RATE})")
    urls.add_argument("--layout", choices=LAYOUTS,
                      help="bit layout of a new state: 'blocked' keeps each URL's bits in one "
                           "cache line (faster for big states, a few %% more memory)")
    urls.add_argument("--rotate-every", type=duration, metavar="DURATION",
                      help="a rotating state: forget a URL not met for about GENERATIONS x "
                           "DURATION (e.g. 1d, 12h, 3600), so it is printed again; the "
                           "capacity is per DURATION")
    urls.add_argument("--generations", type=generations, metavar="N",
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
    urls.add_argument("--disk", action="store_true",
                      help="with --exact (implied): keep the MD5s in a disk store, the folder "
                           "--state names, in about 256 MiB of memory whatever its size: for "
                           "more URLs than memory holds (a billion is 16 GB on disk)")
    urls.add_argument("--db", metavar="URL",
                      help="keep the MD5s in a database instead (implies --exact): "
                           "sqlite:///PATH, redis://HOST:PORT/DB/NAME, or any SQLAlchemy URL "
                           f"(PostgreSQL, MySQL/MariaDB; {install_hint('sql')}); "
                           "--state then names the local journals (one a process); "
                           "crawlers sharing the database print each URL once")


def main(args: argparse.Namespace) -> int:
    """``crawldedup urls`` on the process's standard streams."""
    if sys.stdin is None and not args.files:
        raise CrawldedupError("no FILE given and no standard input to read")
    stdin = sys.stdin.buffer if sys.stdin is not None else None
    return run_urls(args, sys.stdout.buffer, sys.stderr, stdin)  # type: ignore[arg-type]


def run_urls(args: argparse.Namespace, out: BinaryIO, err: IO[str], stdin: BinaryIO) -> int:
    _check_urls_args(args)
    if args.disk:
        args.exact = True
    in_redis = redis_cli.is_redis_url(args.state)  # its journals stay local
    state_path = redis_cli.local_state_path(args.state) if in_redis else \
        os.path.abspath(args.state)
    if not args.db and not in_redis:
        _check_writable(state_path, args.disk)
    if not (args.exact or args.db or in_redis) and not os.path.exists(state_path):
        _check_new_state_size(state_path, args)
    mode = _key_mode.mode_of(args)
    shared = bool(args.db) or in_redis
    if not shared:
        # Another key mode is refused before anything is opened (and again
        # under the state's lock, where the mode is recorded).
        _key_mode.check(_file_record(state_path, args), mode, f"the state {args.state}",
                        lambda: True, err, write=False)
    canonical = Canonical(args.strip_tracking) if args.canonical else None
    sources: List[BinaryIO] = []
    try:
        for name in args.files or ["-"]:
            sources.append(stdin if name == "-" else open(name, "rb"))
    except OSError as exc:
        close_inputs(sources, stdin)
        raise CrawldedupError(f"cannot read {exc.filename!r}: {exc.strerror}") from None

    read = new = replayed = 0
    # A local state file takes one writer at a time (its lock) and one
    # journal; a state shared with other processes (Redis, a database) takes
    # one journal per process, and this one finishes the journals that
    # killed processes left (see _delivery.orphans).
    with (contextlib.nullcontext() if shared else StateLock(state_path)), \
            SignalGuard() as guard:
        # A local state's key mode is recorded once the state opened.
        record = None if shared else _file_record(state_path, args)
        state = _open_urls_state(state_path, args, err)
        journal = own_journal(state_path) if shared else Journal(state_path + ".pending")
        deliver = Deliverer(state, journal, canonical, out)
        deliver.expect(expected_lines(sources))
        reader: Optional[Reader] = None
        try:
            if record is not None:
                _key_mode.check(record, mode, f"the state {args.state}", lambda: True, err)
            else:
                state.check_key_mode(mode, err)
            if shared:
                for orphan in orphans(state_path):
                    try:
                        replayed += _replay(deliver, orphan, err)
                        deliver.forget_receipt(orphan)  # finished: empty
                    finally:
                        orphan.close()
            else:
                replayed += _replay(deliver, journal, err)
            reader = Reader(deliver)  # the read loop, chosen once
            for source in sources:
                done, printed = reader.run(source, guard)
                read += done
                new += printed
                if guard.signum is not None:
                    break
        except OutputFailed as exc:
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
            if reader is not None:
                reader.close()
            close_inputs(sources, stdin)
            try:
                detail = state.describe()
                warnings = state.warnings()
                if shared and not journal.dirty:  # released: nothing pending
                    deliver.forget_receipt(journal)
            finally:
                state.close()
                journal.close()
                deliver.output.close()

    again = f" (and {replayed} from an interrupted run)" if replayed else ""
    raw = ""
    if canonical is not None and canonical.raw:
        raw = (f", {counted(canonical.raw, 'line')} not canonicalizable (no URL "
               f"canonicalize_url accepts) compared as read")
    err.write(f"crawldedup: read {read}, new {new}{again}, duplicates {read - new}{raw}, "
              f"{detail}, state {args.state}\n")
    for warning in warnings:
        err.write(f"crawldedup: warning: {warning}\n")
    if guard.signum is not None:
        err.write(f"crawldedup: stopped by signal {guard.signum}; the state was saved\n")
        return 128 + guard.signum
    return 0


def _file_record(state_path: str, args: argparse.Namespace) -> _key_mode.FileRecord:
    """The key mode record of a local state file."""
    return _key_mode.FileRecord(state_path, _key_mode.file_is_new(
        state_path, state_path + ".log" if args.exact else None))


def _replay(deliver: Deliverer, journal: Journal, err: IO[str]) -> int:
    """Finish the delivery an interrupted run left in journal; how many URLs
    it printed."""
    pending = journal.pending()
    if pending is None or not pending.count():
        if pending is not None:
            journal.release()
        return 0
    err.write(f"crawldedup: note: printing {counted(pending.count(), 'URL')} that an "
              f"interrupted run recorded but may not have printed\n")
    return deliver.replay(journal, pending)


def _check_new_state_size(path: str, args: argparse.Namespace) -> None:
    """Usage errors, before anything is created, for a new Bloom state that
    the options cannot size (too many hash functions or bits) or that would
    not fit on the file system that would hold it."""
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


def _check_urls_args(args: argparse.Namespace) -> None:
    """Usage errors that argparse cannot see (exit status 2)."""
    redis_cli.check_args(args)
    if (args.exact or args.db) and (args.rotate_every is not None or args.generations is not None):
        raise UsageError("--exact/--db keep every URL forever: they cannot be combined with "
                         "--rotate-every/--generations")
    if args.disk and (args.db or redis_cli.is_redis_url(args.state)):
        raise UsageError("--disk keeps the URLs in a local folder: it cannot be combined with "
                         "--db or a Redis --state")
    if args.strip_tracking and not args.canonical:
        raise UsageError("--strip-tracking needs --canonical")
    if args.generations is not None and args.rotate_every is None:
        raise UsageError("--generations needs --rotate-every: a rotating state forgets a URL "
                         "after GENERATIONS rotations, and rotates every DURATION")
