"""A batch of page states held column by column (``Pages``), and the packed
form the SQLite store keeps them in.

A page row (``PAGE_FIELDS``) has four strings (url, host, ETag,
Last-Modified) and thirteen numbers.  ``Pages`` keeps the strings in lists
and the numbers in one numpy structured array of ``PAGE_NUM``, so that a
batch is compared, estimated and scheduled with array operations instead of
a Python object per value.  The SQLite store writes each page's numbers but
the due time as one BLOB of ``PACKED_SIZE`` bytes (``pack``/``unpack``;
the due time is a column of its own, for its index).

Absent values (a page without Content-Length, digest or SimHash) are marked
in ``flags`` (``HAS_LENGTH``, ``HAS_DIGEST``, ``HAS_SIMHASH``) and hold 0.

Every row the SQLite store writes carries a checksum of all its values
(``page_sums`` for pages, ``row_sums`` for the other tables), verified when
the row is read: a changed byte in any value is found where it is read.
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from crawldedup._kernel import line_hashes, span_hashes

PAGE_FIELDS = ("url", "host", "etag", "last_modified", "content_length", "digest", "simhash",
               "first_seen", "last_fetched", "last_changed", "fetches", "changes",
               "t_changed", "t_unchanged", "rate", "interval", "due_at")

HAS_LENGTH, HAS_DIGEST, HAS_SIMHASH = 1, 2, 4

#: The numbers of a page (little-endian, no padding); the digest is two
#: 64-bit words (numpy's bytes types would drop its trailing zero bytes).
PAGE_NUM = np.dtype([
    ("content_length", "<i8"), ("digest", "<u8", (2,)), ("simhash", "<i8"),
    ("first_seen", "<f8"), ("last_fetched", "<f8"), ("last_changed", "<f8"),
    ("fetches", "<i8"), ("changes", "<i8"), ("t_changed", "<f8"), ("t_unchanged", "<f8"),
    ("rate", "<f8"), ("interval", "<f8"), ("flags", "<i8"), ("due_at", "<f8")])
#: Bytes of the packed form: every field of PAGE_NUM but the last (due_at).
PACKED_SIZE = PAGE_NUM.itemsize - 8
_ZERO16 = bytes(16)


class Pages:
    """Page states, one entry per page in every column: ``keys``, ``host``,
    ``etag``, ``last_modified`` (lists) and ``num`` (PAGE_NUM array);
    ``index`` maps a key to its position."""

    __slots__ = ("keys", "host", "etag", "last_modified", "num", "_index")

    def __init__(self, keys: List[str], host: List[str], etag: List[Optional[str]],
                 last_modified: List[Optional[str]], num: np.ndarray) -> None:
        self.keys = keys
        self.host = host
        self.etag = etag
        self.last_modified = last_modified
        self.num = num
        self._index: Optional[Dict[str, int]] = None

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def index(self) -> Dict[str, int]:
        if self._index is None:
            self._index = {key: i for i, key in enumerate(self.keys)}
        return self._index

    def subset(self, positions: Sequence[int]) -> "Pages":
        """The pages at those positions, in that order."""
        return Pages([self.keys[i] for i in positions], [self.host[i] for i in positions],
                     [self.etag[i] for i in positions],
                     [self.last_modified[i] for i in positions],
                     self.num[np.asarray(positions, dtype=np.intp)])

    @classmethod
    def empty(cls) -> "Pages":
        return cls([], [], [], [], np.zeros(0, PAGE_NUM))

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[Any]]) -> "Pages":
        """From rows in PAGE_FIELDS order (None where a value is absent)."""
        n = len(rows)
        if n == 0:
            return cls.empty()
        num = np.zeros(n, PAGE_NUM)
        columns = list(zip(*rows))
        lengths = columns[4]
        digests = columns[5]
        sims = columns[6]
        num["content_length"] = [0 if v is None else v for v in lengths]
        num["digest"] = np.frombuffer(b"".join(_ZERO16 if d is None else bytes(d)
                                               for d in digests), "<u8").reshape(n, 2)
        num["simhash"] = [0 if v is None else v for v in sims]
        for j, name in enumerate(PAGE_FIELDS[7:], 7):
            num[name] = columns[j]
        num["flags"] = (np.array([v is not None for v in lengths]) * HAS_LENGTH
                        + np.array([v is not None for v in digests]) * HAS_DIGEST
                        + np.array([v is not None for v in sims]) * HAS_SIMHASH)
        return cls(list(columns[0]), list(columns[1]), list(columns[2]), list(columns[3]), num)

    def rows(self) -> List[Tuple[Any, ...]]:
        """The pages as rows in PAGE_FIELDS order."""
        num = self.num
        flags = num["flags"].tolist()
        raw = num["digest"].tobytes()
        lengths = num["content_length"].tolist()
        sims = num["simhash"].tolist()
        rest = [num[name].tolist() for name in PAGE_FIELDS[7:]]
        out = []
        for i, f in enumerate(flags):
            out.append((self.keys[i], self.host[i], self.etag[i], self.last_modified[i],
                        lengths[i] if f & HAS_LENGTH else None,
                        raw[16 * i:16 * i + 16] if f & HAS_DIGEST else None,
                        sims[i] if f & HAS_SIMHASH else None,
                        *(column[i] for column in rest)))
        return out


def pack(num: np.ndarray) -> List[bytes]:
    """Each page's numbers but its due time, PACKED_SIZE bytes a page."""
    n = len(num)
    raw = np.ascontiguousarray(num).view(np.uint8).reshape(n, PAGE_NUM.itemsize)
    joined = raw[:, :PACKED_SIZE].tobytes()
    return [joined[i:i + PACKED_SIZE] for i in range(0, n * PACKED_SIZE, PACKED_SIZE)]


def unpack(blobs: Sequence[bytes], due_at: Iterable[float]) -> np.ndarray:
    """The PAGE_NUM array of packed pages and their due times (the caller
    checked that every blob is bytes of PACKED_SIZE)."""
    n = len(blobs)
    num = np.empty(n, PAGE_NUM)
    if n:
        raw = num.view(np.uint8).reshape(n, PAGE_NUM.itemsize)
        raw[:, :PACKED_SIZE] = np.frombuffer(b"".join(blobs), np.uint8).reshape(n, PACKED_SIZE)
        num["due_at"] = np.fromiter(due_at, np.float64, n)
    return num


def _text_hashes(columns: Sequence[Sequence[Optional[str]]]) -> Tuple[np.ndarray, np.ndarray]:
    """(hashes, lengths) of rows of text fields: the low 64 bits of
    MurmurHash3 of each row's fields joined by NUL characters (UTF-8), and
    each field's length in characters (-1 for None) as an int64 array of
    shape (rows, fields)."""
    n = len(columns[0])
    sizes = []
    texts = []
    for column in columns:
        try:
            sizes.append(np.fromiter(map(len, column), np.int64, n))  # type: ignore[arg-type]
        except TypeError:  # a None among the values (len(None) fails)
            sizes.append(np.fromiter((-1 if v is None else len(v) for v in column), np.int64,
                                     n))
            column = [v or "" for v in column]
        texts.append(column)
    lengths = np.stack(sizes, axis=1)
    joined = "\x00".join(chain.from_iterable(zip(*texts)))
    data = joined.encode("utf-8")
    if len(data) == len(joined):  # ASCII (nearly always): rows found by their lengths
        ends = np.cumsum(np.maximum(lengths, 0).sum(axis=1) + len(columns))
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1]
        hashes = span_hashes(data, np.stack([starts, ends - 1], axis=1))
    else:
        hashes = line_hashes(["\x00".join(row).encode("utf-8") for row in zip(*texts)])
    return np.frombuffer(hashes, "<u8")[0::2], lengths


def row_sums(columns: Sequence[Sequence[Optional[str]]], numbers: np.ndarray) -> np.ndarray:
    """The checksum of each row, as an int64 array (SQLite's INTEGER): the
    low 64 bits of MurmurHash3 of its text fields (``columns``, one list a
    field) xor those of its numbers (row i of ``numbers``, any fixed-width
    dtype) and its fields' lengths, so that no two different rows share
    what is hashed.  Numbers are given as SQLite gives them back: callers
    add 0.0 to REAL values (SQLite keeps a whole REAL as an integer, so
    -0.0 is read back as 0.0)."""
    n = len(columns[0])
    if n == 0:
        return np.zeros(0, np.int64)
    text, lengths = _text_hashes(columns)
    raw = np.ascontiguousarray(numbers).view(np.uint8).reshape(n, -1)
    rows = np.hstack([raw, lengths.view(np.uint8).reshape(n, -1)])
    width = rows.shape[1]
    starts = np.arange(n, dtype=np.int64) * width
    values = np.frombuffer(span_hashes(rows.tobytes(), np.stack([starts, starts + width],
                                                                 axis=1)), "<u8")[0::2]
    sums: np.ndarray = (text ^ values).view(np.int64)
    return sums


def page_sums(pages: "Pages") -> np.ndarray:
    """The checksum of each page's row: its four strings and every number
    of ``num``, the due time included."""
    num = pages.num.copy()
    num["due_at"] += 0.0
    return row_sums((pages.keys, pages.host, pages.etag, pages.last_modified), num)


_TIMES = ("first_seen", "last_fetched", "last_changed", "due_at")
_SPANS = ("t_changed", "t_unchanged", "rate", "interval")


def damaged(num: np.ndarray) -> Optional[Tuple[int, str]]:
    """The first page whose numbers RecrawlState never writes, and what is
    wrong with them; None when every page is sound.  (A damaged or
    hand-edited store: times that are not finite, counts below zero or
    more changes than fetches, a negative or infinite rate, interval or
    interval sum, unknown flags.)"""
    if not len(num):
        return None
    fetches, changes = num["fetches"], num["changes"]
    spans = np.stack([num[f] for f in _SPANS])
    tests: Tuple[Tuple[np.ndarray, Callable[[int], str]], ...] = (
        ((fetches < 1) | (changes < 0) | (changes > fetches),
         lambda i: f"{int(changes[i])} changes in {int(fetches[i])} fetches"),
        (~np.isfinite(np.stack([num[t] for t in _TIMES])).all(axis=0),
         lambda i: "a time that is not a finite number: " + ", ".join(
             f"{t}={float(num[t][i])!r}" for t in _TIMES)),
        (~(np.isfinite(spans) & (spans >= 0)).all(axis=0),
         lambda i: "a negative or infinite rate, interval or interval sum: " + ", ".join(
             f"{f}={float(num[f][i])!r}" for f in _SPANS)),
        ((num["flags"] & ~(HAS_LENGTH | HAS_DIGEST | HAS_SIMHASH)) != 0,
         lambda i: f"unknown flags {int(num['flags'][i])}"),
        (num["content_length"] < 0,
         lambda i: f"a negative Content-Length {int(num['content_length'][i])}"),
    )
    first = None
    for bad, say in tests:
        if bad.any():
            i = int(np.argmax(bad))
            if first is None or i < first[0]:
                first = (i, say(i))
    return first


def bad_blob(blobs: Sequence[Any]) -> int:
    """The position of the first blob that is not bytes of PACKED_SIZE, or -1."""
    for i, blob in enumerate(blobs):
        if type(blob) is not bytes or len(blob) != PACKED_SIZE:
            return i
    return -1


__all__ = ["Pages", "PAGE_FIELDS", "PAGE_NUM", "PACKED_SIZE", "HAS_LENGTH", "HAS_DIGEST",
           "HAS_SIMHASH", "pack", "unpack", "bad_blob", "damaged", "row_sums", "page_sums"]
