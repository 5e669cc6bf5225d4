"""Twin of ``src/_core_lines.pxi``: the input splitter of ``crawldedup urls``."""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

from crawldedup._reference.bloom import _check_seed, murmur3_x64_128
from crawldedup._reference.url import canonicalize_urls_fast, url_digests_packed


def split_lines(data: bytes, final: bool) -> Tuple[List[bytes], int]:
    """(lines, used): the stripped, non-blank lines of data's complete lines
    (each ended by "\\n"; with final, the unended tail too), and how many
    bytes of data they took."""
    if not isinstance(data, bytes):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    used = len(data) if final else data.rfind(b"\n") + 1
    lines = (line.strip() for line in data[:used].split(b"\n"))
    return [line for line in lines if line], used


def line_hashes(lines: object) -> bytes:
    """The 128-bit MurmurHash3 (seed 0) of each bytes object of the list
    lines, end to end: 16 bytes each, h1 then h2, little-endian."""
    if not isinstance(lines, list):
        raise TypeError(f"lines must be a list, not {type(lines).__name__}")
    for i, line in enumerate(lines):
        if not isinstance(line, bytes):
            raise TypeError(f"lines[{i}] must be bytes, not {type(line).__name__}")
    out = []
    for line in lines:
        h1, h2 = murmur3_x64_128(line, 0)
        out.append(h1.to_bytes(8, "little") + h2.to_bytes(8, "little"))
    return b"".join(out)


# ---- lines as spans (see src/_core_lines.pxi)

def line_spans(data: bytes, final: bool) -> Tuple[np.ndarray, int]:
    """(spans, used): where split_lines(data, final) finds its lines, as an
    int64 array of shape (n, 2) of [start, stop) rows, and the same used."""
    if not isinstance(data, bytes):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    used = len(data) if final else data.rfind(b"\n") + 1
    rows = []
    at = 0
    for raw in data[:used].split(b"\n"):
        stripped = raw.lstrip()
        start = at + len(raw) - len(stripped)
        stripped = stripped.rstrip()
        if stripped:
            rows.append((start, start + len(stripped)))
        at += len(raw) + 1
    return np.array(rows, dtype=np.int64).reshape(len(rows), 2), used


def _spans(data: object, spans: object) -> List[Tuple[int, int]]:
    if not isinstance(data, bytes):
        raise TypeError(f"data must be bytes, not {type(data).__name__}")
    if not isinstance(spans, np.ndarray) or spans.dtype != np.int64 or spans.ndim != 2 \
            or spans.shape[1] != 2:
        raise TypeError("spans must be an int64 numpy array of shape (n, 2)")
    rows = [(int(a), int(b)) for a, b in spans]
    for i, (a, b) in enumerate(rows):
        if not 0 <= a <= b <= len(data):
            raise ValueError(f"spans[{i}] = [{a}, {b}) is not within the {len(data)} bytes "
                             f"of data")
    return rows


def span_digests(data: object, spans: object, canonical: bool = False) -> Tuple[bytes, List[int]]:
    """url_digests_packed([data[a:b] for a, b in spans], canonical)."""
    rows = _spans(data, spans)
    assert isinstance(data, bytes)
    return url_digests_packed([data[a:b] for a, b in rows], canonical)


def gather_spans(data: object, spans: object) -> bytes:
    """The lines data[a:b] for each row of spans, each followed by b"\n"."""
    rows = _spans(data, spans)
    assert isinstance(data, bytes)
    return b"".join(data[a:b] + b"\n" for a, b in rows)


def span_hashes(data: object, spans: object) -> bytes:
    """line_hashes([data[a:b] for a, b in spans])."""
    rows = _spans(data, spans)
    assert isinstance(data, bytes)
    return line_hashes([data[a:b] for a, b in rows])


def span_key_hashes(data: object, spans: object, seed: int = 0,
                    canonical: bool = False) -> Tuple[np.ndarray, List[int]]:
    """(hashes, missing): murmur3_x64_128(key, seed) of each line data[a:b]
    (with canonical, of canonicalize_urls_fast(lines, as_bytes=True)'s form)
    as the rows of a uint64 array (n, 2); missing: the lines without a
    compiled canonical form, whose rows are zeros."""
    rows = _spans(data, spans)
    s = _check_seed(seed)
    assert isinstance(data, bytes)
    lines = [data[a:b] for a, b in rows]
    keys: List[object] = list(canonicalize_urls_fast(lines, False, True, True)) if canonical \
        else list(lines)
    out = np.zeros((len(keys), 2), dtype=np.uint64)
    missing = []
    for i, key in enumerate(keys):
        if key is None:
            missing.append(i)
        else:
            assert isinstance(key, bytes)
            out[i] = murmur3_x64_128(key, s)
    return out, missing
