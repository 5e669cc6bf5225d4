"""The interface every fingerprint store implements, and argument checks."""

from __future__ import annotations

import abc
import hashlib
import re
from typing import Any, List, Optional, Sequence, Set, TypeVar

import numpy as np

from crawldedup._kernel import FP_MAX_DIGEST_SIZE, holds_objects, objects_error
from crawldedup.schemes import opener, scheme_of

_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}\Z")


def check_digest_size(digest_size: Any) -> int:
    if isinstance(digest_size, bool) or not isinstance(digest_size, int):
        raise TypeError(f"digest_size must be an int, not {type(digest_size).__name__}")
    if not 1 <= digest_size <= FP_MAX_DIGEST_SIZE:
        raise ValueError(f"digest_size must be between 1 and {FP_MAX_DIGEST_SIZE}, "
                         f"got {digest_size}")
    return digest_size


def check_table(table: Any) -> str:
    if not isinstance(table, str):
        raise TypeError(f"table must be a str, not {type(table).__name__}")
    if not _TABLE_NAME.match(table):
        raise ValueError(f"table must be a plain SQL identifier (letters, digits and _, "
                         f"at most 63 characters, not starting with a digit), got {table!r}")
    return table


def check_receipt(receipt: Any) -> bytes:
    if not isinstance(receipt, (bytes, bytearray, memoryview)):
        raise TypeError(f"receipt must be bytes, not {type(receipt).__name__}")
    data = bytes(receipt)
    if not 1 <= len(data) <= 64:
        raise ValueError(f"receipt must be 1 to 64 bytes long, got {len(data)}")
    return data


def recorded_answer(row: Any, batch: bytes, count: int) -> Optional[bytes]:
    """The answer a receipt's row (batch digest, flags) records for this
    batch of count distinct fingerprints, or None when it records another
    batch.  ValueError for flags that no add_many_once wrote."""
    if row is None or bytes(row[0]) != batch:
        return None
    flags = bytes(row[1])
    if len(flags) != count or flags.strip(b"\x00\x01"):
        raise ValueError(f"its receipt records {len(flags)} flags for this batch of {count} "
                         f"fingerprints, not one 0 or 1 each")
    return flags


def _first_new(items: List[bytes], new: Set[bytes]) -> np.ndarray:
    """True at the first occurrence in items of each fingerprint of new
    (a set the call consumes)."""
    out = np.zeros(len(items), dtype=np.bool_)
    for i, fp in enumerate(items):
        if fp in new:
            out[i] = True
            new.discard(fp)
    return out


_S = TypeVar("_S", bound="Store")


class Store(abc.ABC):
    """What every store answers (the fingerprint stores here, the re-crawl
    stores of crawldedup.recrawl): its size, ``clear``, ``close`` (which
    releases its connection; a second call does nothing), and ``with``,
    which closes it."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """The entries held."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Forget every entry."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection.  Idempotent."""

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FingerprintStore(Store):
    """Base class: fingerprints of ``digest_size`` bytes in a database.

    Subclasses implement ``_insert(unique) -> set of new`` and
    ``_select(unique) -> set of present`` for batches of distinct bytes, plus
    ``__len__``, ``clear`` and ``close``.
    """

    digest_size: int

    # ------------------------------------------------------------ checks

    def _fp(self, fp: Any) -> bytes:
        if isinstance(fp, bytes) and len(fp) == self.digest_size:
            return bytes(fp)
        if isinstance(fp, str):
            raise TypeError("a fingerprint must be bytes-like, not str (hash the text "
                            "first, e.g. hashlib.md5(url.encode()).digest())")
        try:
            view = memoryview(fp)
        except TypeError:
            raise TypeError(f"a fingerprint must be bytes-like, not "
                            f"{type(fp).__name__}") from None
        if holds_objects(view.format):
            raise objects_error("a fingerprint", fp)
        data = view.tobytes()
        if len(data) != self.digest_size:
            raise ValueError(f"a fingerprint must be exactly {self.digest_size} bytes long, "
                             f"got {len(data)}")
        return data

    def _fps(self, fps: Any) -> List[bytes]:
        ds = self.digest_size
        if isinstance(fps, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"fingerprints must be a list of fingerprints or a numpy S{ds} "
                            f"array, not a single {type(fps).__name__}; use add()/`in` "
                            f"for one")
        if isinstance(fps, np.ndarray):
            if fps.dtype.kind != "S" or fps.dtype.itemsize != ds or fps.ndim != 1:
                raise ValueError(f"fingerprints: a numpy array must be 1-D of dtype S{ds}, "
                                 f"got {fps.ndim}-D {fps.dtype}")
            raw = np.ascontiguousarray(fps).tobytes()
            return [raw[i:i + ds] for i in range(0, len(raw), ds)]
        try:
            items = list(fps)
        except TypeError:
            raise TypeError(f"fingerprints must be an iterable, not "
                            f"{type(fps).__name__}") from None
        return [self._fp(fp) for fp in items]

    # --------------------------------------------------------- interface

    def add(self, fp: Any) -> bool:
        """Add one fingerprint; True when no writer had added it before."""
        return bool(self.add_many([fp])[0])

    def __contains__(self, fp: Any) -> bool:
        return bool(self.contains_many([fp])[0])

    def add_many(self, fps: Any) -> np.ndarray:
        """Add every fingerprint; a numpy bool array, True where this call
        added it (the first of repeats within the call counts as new)."""
        items = self._fps(fps)
        first = dict.fromkeys(items)  # distinct, in order of first occurrence
        new = self._insert(list(first)) if first else set()
        return _first_new(items, new)

    def contains_many(self, fps: Any) -> np.ndarray:
        """A numpy bool array, True where the fingerprint is in the store."""
        items = self._fps(fps)
        found = self._select(list(dict.fromkeys(items))) if items else set()
        return np.fromiter((fp in found for fp in items), dtype=np.bool_, count=len(items))

    def add_many_once(self, fps: Any, receipt: Any) -> np.ndarray:
        """``add_many`` in one transaction whose answer the store records
        with the adds, under ``receipt`` (1 to 64 bytes naming the caller's
        batch, say a journal: ``crawldedup urls`` gives each process's
        journal one).  A later call with the same receipt and the same
        fingerprints, by this process or another (a retry after a crash,
        even while the server still runs the crashed client's transaction),
        returns the recorded answer and adds nothing; other fingerprints
        under that receipt are added, and their answer replaces it.  So a
        writer killed mid-call loses no answer: every fingerprint is
        reported new exactly once.  ``forget_receipt`` drops it.

        The stores here that have it: SQLiteStore and SQLStore
        (``supports_receipts``)."""
        receipt = check_receipt(receipt)
        items = self._fps(fps)
        unique = list(dict.fromkeys(items))
        if not unique:
            return np.zeros(0, dtype=np.bool_)
        # The batch as given (order and repeats): a retry gives the same.
        batch = hashlib.md5(b"".join(items)).digest()
        flags = self._insert_once(unique, receipt, batch)
        return _first_new(items, {fp for fp, flag in zip(unique, flags) if flag})

    #: Whether add_many_once / forget_receipt are available.
    supports_receipts = False

    def forget_receipt(self, receipt: Any) -> None:
        """Drop what add_many_once recorded under receipt (nothing when it
        recorded nothing)."""
        self._forget_receipt(check_receipt(receipt))

    def _insert_once(self, unique: List[bytes], receipt: bytes, batch: bytes) -> bytes:
        """Each store's own: insert unique in one transaction unless the
        receipt records this batch; the answer, one byte (0 or 1) a
        fingerprint of unique."""
        raise NotImplementedError(f"{type(self).__name__} keeps no receipts")

    def _forget_receipt(self, receipt: bytes) -> None:
        raise NotImplementedError(f"{type(self).__name__} keeps no receipts")

    @abc.abstractmethod
    def _insert(self, unique: List[bytes]) -> Set[bytes]:
        """Each store's own."""

    @abc.abstractmethod
    def _select(self, unique: List[bytes]) -> Set[bytes]:
        """Each store's own."""



def chunks(items: Sequence[bytes], size: int) -> List[Sequence[bytes]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def open_store(url: str, *, table: Optional[str] = None, digest_size: int = 16
               ) -> FingerprintStore:
    """A store for a database URL: ``sqlite:///path`` opens a
    :class:`SQLiteStore` (no SQLAlchemy needed), ``disk:///folder`` a
    :class:`~crawldedup.exact.disk.DiskStore`, ``redis://host:port/db/name``
    a :class:`~crawldedup.redis.RedisStore` (``table`` is its name when the
    URL has none), anything else a :class:`SQLStore` through SQLAlchemy."""
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    if scheme_of(url) is None:
        raise ValueError(f"{url!r} is not a database URL (sqlite:///PATH, disk:///FOLDER, "
                         f"redis://HOST:PORT/DB/NAME or an SQLAlchemy URL)")
    store: FingerprintStore = opener("fingerprints", url)(url, table=table,
                                                          digest_size=digest_size)
    return store
