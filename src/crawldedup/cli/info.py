"""``crawldedup info PATH``: what a state file (or a Redis state) holds."""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
import urllib.parse
from typing import IO, Any, Dict, List, Optional

from crawldedup.bloom.filter import BloomFilter
from crawldedup.bloom.rotating import RotatingBloomFilter
from crawldedup.bloom.scalable import ScalableBloomFilter
from crawldedup.cli import redis_state as redis_cli
from crawldedup.cli._common import format_duration
from crawldedup.errors import CorruptFileError, CrawldedupError
from crawldedup.exact.disk import DiskStore, read_manifest
from crawldedup.exact.fpset import FingerprintSet
from crawldedup.formats import files as _files
from crawldedup.near.index import SimhashIndex
from crawldedup.near.lsh import MinHashIndex
from crawldedup.recrawl.stores import SQLITE_FORMAT, check_wal

try:  # some Pythons are built without it; only the re-crawl description needs it
    import sqlite3
except ImportError:  # pragma: no cover
    sqlite3 = None  # type: ignore[assignment]

SQLITE_MAGIC = b"SQLite format 3\0"


def add_parsers(commands: Any) -> None:
    """Add ``info`` to the crawldedup command line."""
    info = commands.add_parser(
        "info", help="describe a state file",
        description="Print the parameters, layout, fill ratio, estimated count and current "
                    "estimated false-positive rate of a crawldedup state file.")
    info.add_argument("path", metavar="PATH")
    info.add_argument("--verify", action="store_true", default=None,
                      help="check the checksum even of a large file (reads it whole)")
    info.add_argument("--repair", action="store_true",
                      help="seal the checksum of a file left open by a killed writer")


def main(args: argparse.Namespace) -> int:
    """``crawldedup info`` on the process's standard output."""
    return run_info(args, sys.stdout)


def _describe_disk(path: str, args: argparse.Namespace) -> List[str]:
    """A DiskStore's folder: its manifest, its files' sizes; with --verify,
    every run's checksums (by opening the store, which takes its lock)."""
    try:
        manifest = read_manifest(path)
    except ValueError as exc:
        raise CrawldedupError(str(exc)) from None
    if manifest is None:
        raise CrawldedupError(f"{path!r} is an empty folder, not a state")
    runs = manifest["runs"]
    stored = sum(count for _, count in runs)
    size = sum(os.path.getsize(os.path.join(path, name)) for name in os.listdir(path))
    journal = os.path.join(path, f"journal-{manifest['journal']}.log")
    pending = os.path.getsize(journal) if os.path.exists(journal) else 0
    lines = [f"folder: {path} ({size:,} bytes, format version {manifest['format']})",
             "kind: disk store (exact fingerprints on disk)",
             f"digest size: {manifest['digest_size']} bytes",
             f"in runs: {stored:,} digests in {len(runs)} run{'s' if len(runs) != 1 else ''}",
             f"journal: {pending:,} bytes (digests added since the last spill)"]
    if args.verify:
        with DiskStore(path, manifest["digest_size"]) as store:
            lines.append(f"verified: every run's checksums; {len(store):,} digests in all")
    return lines


def run_info(args: argparse.Namespace, out: IO[str]) -> int:
    if redis_cli.is_redis_url(args.path):
        out.write(redis_cli.describe(args.path))
        return 0
    path = os.path.abspath(args.path)
    if not os.path.lexists(path):
        raise CrawldedupError(
            f"no state file at {path!r} (a crawldedup urls --db state keeps its URLs in the "
            f"database: its --state path only names a lock and a journal while it runs)")
    if os.path.isdir(path):
        out.write("\n".join(_describe_disk(path, args)) + "\n")
        return 0
    with open(path, "rb") as f:
        head = f.read(_files.HEADER_SIZE)
    size = os.path.getsize(path)
    if head.startswith(SQLITE_MAGIC):
        out.write("\n".join(_describe_sqlite(path, size, args)) + "\n")
        return 0
    header = _files.parse_header(head, size, path)
    kind = _files.KIND_NAMES.get(header.kind, f"unknown kind {header.kind}")
    lines = [f"file: {path} ({size:,} bytes, format version {header.version})", f"kind: {kind}"]
    if header.kind == _files.KIND_BLOOM:
        mode = "c" if args.repair else "r"
        with BloomFilter.open(path, mode=mode, verify=_verify(args)) as bf:
            dirty = bool(header.flags & _files.FLAG_DIRTY)
            still_dirty = _is_dirty(path)
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
                _checksum_note(dirty, still_dirty, args, size),
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


def _verify(args: argparse.Namespace) -> Optional[bool]:
    """--repair checks the checksum of a file that is not DIRTY before it
    changes anything, whatever its size: a repair never seals damage."""
    return True if args.repair else args.verify


def _is_dirty(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(_files.HEADER_SIZE)
    flags = int.from_bytes(head[_files.FLAGS_AT:_files.FLAGS_AT + 4], "little")
    return bool(flags & _files.FLAG_DIRTY)


def _checksum_note(dirty: bool, still_dirty: bool, args: argparse.Namespace,
                   size: int) -> str:
    """What the open did with the checksum.  ``dirty``: the file was DIRTY
    before; ``still_dirty``: it is after opening it (a repair seals a DIRTY
    file only when no other process has it open)."""
    if dirty and not args.repair:
        return ("checksum: not up to date (open for writing, or its writer was killed; "
                "--repair seals it)")
    if dirty and still_dirty:
        return "checksum: not sealed (another process has the file open for writing)"
    if dirty:
        return ("checksum: sealed (its writer was killed: the checksum was recomputed over "
                "bits that writer had checked; header, structure and padding checked)")
    if args.verify or args.repair or size < 64 << 20:
        return "checksum: verified"
    return "checksum: not checked (large file; --verify checks it)"


def _when(seconds: Optional[float]) -> str:
    if seconds is None:
        return "never"
    try:
        moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"{seconds:g} s"
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _describe_rotating(path: str, header: _files.Header, size: int,
                       args: argparse.Namespace) -> List[str]:
    dirty = bool(header.flags & _files.FLAG_DIRTY)
    # Read-only: it shows the state its writers left, and rotates nothing.
    with RotatingBloomFilter.open(path, mode="c" if args.repair else "r",
                                  verify=_verify(args)) as rf:
        still_dirty = _is_dirty(path)
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
            "rotation: " + ("by hand only" if every is None else f"every {format_duration(every)}")
            + ("" if rf.rotate_at_fill is None else f", and when the newest generation is "
               f"{rf.rotate_at_fill:g} full"),
            f"rotations: {rf.rotations:,}, last {_when(rf.last_rotation)}, next "
            f"{_when(due)}",
            "inserted per generation (oldest first): "
            + ", ".join(f"{f.insert_count:,}" for f in rf.filters),
            f"estimated count: {rf.estimated_count():,}",
            f"fill ratio: {rf.fill_ratio:.4f}",
            f"estimated false-positive rate now: {rf.estimated_error_rate:.4g}",
            _checksum_note(dirty, still_dirty, args, size),
        ]
    return lines


def _composite_loader(kind: int) -> Optional[Any]:
    if kind == _files.KIND_SCALABLE:
        return ScalableBloomFilter.load
    if kind == _files.KIND_ROTATING:
            return RotatingBloomFilter.load
    if kind == _files.KIND_FPSET:
        return FingerprintSet.load
    if kind == _files.KIND_INDEX:
        return SimhashIndex.load
    if kind == _files.KIND_MINHASH:
        return MinHashIndex.load
    return None


# ------------------------------------------------ a re-crawl state (SQLite)

#: The tables of a re-crawl state's SQLite file (crawldedup.recrawl.stores).
RECRAWL_TABLES = {"pages", "hosts", "hist", "meta"}


def _connect_read_only(path: str) -> Any:
    """A connection that changes nothing on disk.  A file with no WAL beside
    it (closed by its last writer) is read as immutable, so that not even a
    -wal or -shm file appears; with a WAL (a writer has it open, or was
    killed) it is opened read-only, reading the WAL the writer left."""
    quoted = urllib.parse.quote(path)
    if os.path.exists(path + "-wal"):
        uri = f"file:{quoted}?mode=ro"
    else:
        uri = f"file:{quoted}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True)


def _describe_sqlite(path: str, size: int, args: argparse.Namespace) -> List[str]:
    """What a SQLite file holds: a re-crawl state (``RecrawlState``,
    ``crawldedup record``) is described (pages, hosts, due pages, scheduler
    settings); any other SQLite database is named as such.  Nothing is
    written.  SQLite's damage reports are a CorruptFileError naming the file."""
    if args.repair:
        raise CrawldedupError(f"{path!r} is a SQLite database: --repair seals crawldedup's "
                              f"own state files only")
    if sqlite3 is None:  # pragma: no cover
        raise CrawldedupError("describing a SQLite file needs the sqlite3 module, which this "
                              "Python was built without")
    # SQLite would read a damaged WAL as far as its first bad frame only
    check_wal(path)
    try:
        conn = _connect_read_only(path)
    except sqlite3.Error as exc:
        raise CrawldedupError(f"cannot open the SQLite file {path!r}: {exc}") from None
    try:
        return _sqlite_lines(conn, path, size, bool(args.verify))
    except sqlite3.DatabaseError as exc:
        raise CorruptFileError(path, f"SQLite reports: {exc}") from None
    finally:
        conn.close()


def _sqlite_lines(conn: Any, path: str, size: int, verify: bool) -> List[str]:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = sorted(r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'"))
    lines = [f"file: {path} ({size:,} bytes, SQLite)"]
    columns = {r[1] for r in conn.execute("PRAGMA table_info(pages)")}
    if not (RECRAWL_TABLES <= set(tables) or {"url", "host"} <= columns):
        lines.append("kind: a SQLite database, not a crawldedup re-crawl state (tables: "
                     + (", ".join(tables) or "none") + ")")
        return lines
    lines.append(f"kind: re-crawl state (RecrawlState, crawldedup record / due), format "
                 f"{version}" + ("" if version == SQLITE_FORMAT else
                                 f" (RecrawlState converts it to format {SQLITE_FORMAT} "
                                 f"when it opens it for writing)"))
    pages = conn.execute("SELECT COUNT(*) FROM pages").fetchone()[0]
    lines.append(f"pages: {pages:,}")
    if "hosts" in tables:
        hosts = conn.execute("SELECT COUNT(*) FROM hosts").fetchone()[0]
        lines.append(f"hosts: {hosts:,}")
    if "due_at" in columns:
        now = time.time()
        due = conn.execute("SELECT COUNT(*) FROM pages WHERE due_at <= ?", (now,)).fetchone()[0]
        first = conn.execute("SELECT MIN(due_at) FROM pages").fetchone()[0]
        lines.append(f"due now: {due:,}" + ("" if first is None or isinstance(first, str)
                                             else f", earliest due {_when(float(first))}"))
    if "meta" in tables:
        meta: Dict[str, Any] = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        lines.append("scheduler settings: " + (_settings(meta) or "none saved yet"))
    if verify:
        result = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
        if result != ["ok"]:
            raise CorruptFileError(path, "SQLite integrity check: " + "; ".join(result[:5]))
        lines.append("integrity: SQLite integrity check passed")
    else:
        lines.append("integrity: not checked (--verify runs SQLite's integrity check)")
    return lines


def _settings(meta: Dict[str, Any]) -> str:
    """The re-crawl scheduler's saved numbers (crawldedup.recrawl.state)."""
    parts = []
    for key in sorted(meta):
        value = meta[key]
        if key == "last_due" and isinstance(value, (int, float)):
            parts.append(f"last due call {_when(float(value))}")
        elif key == "budget" and isinstance(value, (int, float)):
            parts.append(f"measured budget {value * 86400:,.1f} fetches a day")
        elif key == "mu" and isinstance(value, (int, float)):
            parts.append(f"mu {value:g}")
        else:
            parts.append(f"{key} {value!r}")
    return ", ".join(parts)
