"""Packing Redis commands (RESP2 arrays of bulk strings) without redis-py's
per-argument Python work: small commands argument by argument, and runs of
fixed-size items (digests) with numpy in one pass."""

from __future__ import annotations

from typing import Union

import numpy as np

Arg = Union[bytes, str, int]


def _arg(a: Arg) -> bytes:
    if isinstance(a, bytes):
        return a
    if isinstance(a, str):
        return a.encode("utf-8")
    if isinstance(a, int) and not isinstance(a, bool):
        return str(a).encode("ascii")
    raise TypeError(f"a Redis argument must be bytes, str or int, not {type(a).__name__}")


def command(*args: Arg) -> bytes:
    """``*N\\r\\n$len\\r\\narg\\r\\n...`` for a small command."""
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        data = _arg(a)
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def head(count: int, *args: Arg) -> bytes:
    """The start of a command of ``count`` arguments whose first ones are
    ``args``; the rest follows as bulk strings (see :func:`bulk_fixed`)."""
    parts = [b"*%d\r\n" % count]
    for a in args:
        data = _arg(a)
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def bulk_fixed(items: bytes, size: int) -> bytes:
    """``$size\\r\\n<item>\\r\\n`` for each ``size``-byte item of ``items``
    (concatenated), built as one numpy array."""
    count = len(items) // size
    if count * size != len(items):
        raise ValueError(f"items: {len(items)} bytes is not a multiple of {size}")
    prefix = b"$%d\r\n" % size
    width = len(prefix) + size + 2
    out = np.empty((count, width), dtype=np.uint8)
    out[:, :len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
    out[:, len(prefix):len(prefix) + size] = np.frombuffer(items, dtype=np.uint8).reshape(
        count, size)
    out[:, -2] = 13
    out[:, -1] = 10
    return out.tobytes()
