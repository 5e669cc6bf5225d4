"""What the commands share: the defaults of a new state, the usage error,
the argument types (durations, counts, probabilities) and file kinds."""

from __future__ import annotations

import argparse
import ctypes
import re
import sys
from typing import Any

from crawldedup import _defaults
from crawldedup._checks import MAX_GENERATIONS, MIN_GENERATIONS
from crawldedup.formats import files as _files

DEFAULT_CAPACITY = _defaults.CAPACITY
DEFAULT_ERROR_RATE = _defaults.ERROR_RATE


class UsageError(Exception):
    """Bad command-line arguments, found after parsing (exit status 2)."""


class StateModeError(UsageError):
    """Options that do not match the state they name (a key mode other than
    the one the state was made with): a usage error (exit status 2) in one
    line, without the command's usage."""

    show_usage = False


def file_kind(path: str) -> int:
    """The kind of crawldedup file at path (``_files.KIND_*``); CorruptFileError
    for a file that is not one."""
    return _files.read_header(path).kind


def kind_name(kind: int) -> str:
    return _files.KIND_NAMES.get(kind, f"file of unknown kind {kind}")


def counted(n: int, noun: str) -> str:
    """'1 URL', '2 URLs'."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def show_value(value: Any, flag: str) -> str:
    if flag == "--rotate-every":
        return "never (by hand only)" if value is None else format_duration(value)
    return str(value)


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def duration(text: str) -> float:
    """Seconds in '3600', '90s', '15m', '12h', '7d', '2w' or a sum like '1d12h'."""
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


def format_duration(seconds: float) -> str:
    for unit, size in (("w", 604800.0), ("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def generations(text: str) -> int:
    value = integer(text)
    if not MIN_GENERATIONS <= value <= MAX_GENERATIONS:
        raise argparse.ArgumentTypeError(
            f"must be in [{MIN_GENERATIONS}, {MAX_GENERATIONS}], got {value}")
    return value


def positive_int(text: str) -> int:
    value = integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def integer(text: str) -> int:
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


def probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in the open interval (0, 1), got {text}")
    return value


def keep_freed_memory() -> None:
    """Ask glibc's allocator to keep the memory a command frees for its next
    allocations instead of handing it back to the system at once.

    A command that reads a large input in batches frees and allocates tens
    of megabytes a batch (blocks of input, texts, signature arrays); by
    default glibc returns the top of its heap to the system as soon as
    128 KiB are free there and serves each allocation of 128 KiB or more
    by a fresh mapping, so every batch pays the kernel to fault in and zero
    new pages again.  This raises those limits (mappings from 64 MiB, the
    heap trimmed above 256 MiB free): the process keeps, at most, its peak
    plus what it last freed.  Only for command-line processes; elsewhere
    (another C library, no mallopt) it does nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3   # glibc's malloc.h
    mallopt(m_mmap_threshold, 64 << 20)
    mallopt(m_trim_threshold, 256 << 20)
    mallopt(m_top_pad, 16 << 20)
