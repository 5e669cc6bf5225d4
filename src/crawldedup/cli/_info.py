"""``crawldedup info PATH``: what a state file (or a Redis state) holds."""

from __future__ import annotations

import argparse
import os
from typing import IO, Any, List, Optional

from crawldedup import _files
from crawldedup.bloom import BloomFilter
from crawldedup.cli._common import format_duration
from crawldedup.errors import CrawldedupError


def run_info(args: argparse.Namespace, out: IO[str]) -> int:
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
