"""Twin of ``src/_core_runs.pxi``: lookups in DiskStore's sorted runs."""

from __future__ import annotations

from typing import Any


def _key(rows: memoryview, i: int, row: int) -> int:
    return int.from_bytes(rows[i * row:i * row + 8], "little")


def run_find(rows: Any, count: int, row: int, fence: Any, step: int, keys: Any,
             rest: Any, out: Any) -> None:
    """out[i] = 1 where the run (count rows of row bytes, sorted by their
    first 8 bytes as a little-endian integer) holds the digest (keys[i],
    rest[i * (row - 8):(i + 1) * (row - 8)]), 0 elsewhere.  The fence (the
    key of every step-th row) only speeds the core's search up."""
    data = memoryview(rows).cast("B")
    r = row - 8
    if row < 8 or step < 1 or count < 0:
        raise ValueError("a run's rows are 8 bytes or more, its step 1 or more")
    if len(data) < count * row:
        raise ValueError(f"the rows take {count * row} bytes, the buffer has {len(data)}")
    n = len(keys)
    extra = memoryview(rest).cast("B")
    if len(out) != n or len(extra) != n * r:
        raise ValueError("out takes one byte a key, rest row - 8 bytes a key")
    blocks = (count + step - 1) // step
    if len(fence) < blocks:
        raise ValueError(f"the fence needs {blocks} keys, it has {len(fence)}")
    for i in range(n):
        key = int(keys[i])
        lo, hi = 0, count
        while lo < hi:  # the first row whose key is >= key
            mid = (lo + hi) // 2
            if _key(data, mid, row) < key:
                lo = mid + 1
            else:
                hi = mid
        found = 0
        mine = bytes(extra[i * r:(i + 1) * r])
        while lo < count and _key(data, lo, row) == key:
            if bytes(data[lo * row + 8:(lo + 1) * row]) == mine:
                found = 1
                break
            lo += 1
        out[i] = found


def run_merge(sources: Any, row: int, pos: Any, out: Any) -> int:
    """Merge k sorted runs: copy into out, in ascending key order, the rows
    of sources[s] (buffers of whole rows) from row pos[s] on, until out is
    full or every source is done; pos advances past the rows taken.  The
    number of rows written.  Rows of equal keys come in source order."""
    if row < 8:
        raise ValueError("a run's rows are 8 bytes or more")
    k = len(sources)
    if len(pos) != k:
        raise ValueError(f"pos takes one position a source: {k} sources, {len(pos)} positions")
    data = [memoryview(source).cast("B") for source in sources]
    for s, d in enumerate(data):
        if len(d) % row:
            raise ValueError(f"source {s} holds {len(d)} bytes, not whole {row}-byte rows")
        if not 0 <= pos[s] <= len(d) // row:
            raise ValueError(f"position {pos[s]} is outside source {s}'s "
                             f"{len(d) // row} rows")
    dst = memoryview(out).cast("B")
    room = len(dst) // row
    n = 0
    while n < room:
        best = None
        for s, d in enumerate(data):
            if pos[s] < len(d) // row:
                key = _key(d, int(pos[s]), row)
                if best is None or key < best[0]:
                    best = (key, s)
        if best is None:
            break
        s = best[1]
        i = int(pos[s])
        dst[n * row:(n + 1) * row] = data[s][i * row:(i + 1) * row]
        pos[s] += 1
        n += 1
    return n


def run_sort(digests: Any, ds: int, out: Any) -> None:
    """Fill out with the rows of a run of the n digests of ds bytes
    concatenated in digests: each its key (its first 8 bytes as a
    big-endian integer, zero-padded, stored little-endian), then its other
    bytes; sorted by key, then by those bytes."""
    data = bytes(memoryview(digests).cast("B"))
    if not 1 <= ds <= 64:
        raise ValueError(f"digest size must be between 1 and 64, got {ds}")
    if len(data) % ds:
        raise ValueError(f"{len(data)} bytes are not whole {ds}-byte digests")
    n = len(data) // ds
    row = max(ds, 8)
    dst = memoryview(out).cast("B")
    if len(dst) != n * row:
        raise ValueError(f"out takes {n * row} bytes ({n} rows of {row}), not {len(dst)}")
    rows = []
    for i in range(n):
        d = data[i * ds:(i + 1) * ds]
        key = int.from_bytes(d[:8].ljust(8, b"\0"), "big")
        rows.append((key, d[8:]))
    rows.sort()
    dst[:] = b"".join(key.to_bytes(8, "little") + rest for key, rest in rows)
