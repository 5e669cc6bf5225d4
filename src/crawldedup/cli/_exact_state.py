"""The state of ``crawldedup urls --exact``: URL digests, no false positives.

A URL's digest is the MD5 of its bytes (the input line, i.e. the URL's UTF-8
encoding; with --canonical, of its canonical form): 16 bytes, the seeds' scheme
(``crawldedup.url_fingerprint(url, canonical=False)``, in a compiled batch).

Two places to keep them:

* ``--state PATH`` alone: a :class:`~crawldedup.exact.journaled.JournaledSet`,
  a FingerprintSet saved in PATH (file kind 5) and held in memory while the
  command runs.  Digests are recorded before their URLs are printed by
  appending them to ``PATH.log`` (flushed to the OS); the set is saved
  atomically at the end (and whenever the log passes its limit), then the
  log is emptied.  A run that was killed replays the log on start.
* ``--disk``: a :class:`~crawldedup.exact.disk.DiskStore` in the folder
  PATH, for more URLs than memory holds: its add_many journals the digests
  it adds (handed to the OS) before it answers, so they are recorded before
  their URLs are printed; the store is flushed when the command ends.
* ``--db URL``: a fingerprint store (``sqlite:///path`` -> SQLiteStore, any
  other SQLAlchemy URL -> SQLStore).  Its atomic insert-if-absent records
  them, and only URLs that this run's insert added are printed, so several
  crawlers sharing one database print each URL once between them.  ``--state``
  then names the local pending journals (one a process).

It is a ``crawldedup.cli._url_state.UrlState``: the command computes each chunk's
digests once (``keys``) and hands them to the lookup and the insert.
"""

from __future__ import annotations

import argparse
from typing import IO, Any, List, Optional

import numpy as np

import crawldedup
from crawldedup._kernel import span_digests, url_digests_packed
from crawldedup.cli import _key_mode
from crawldedup.cli._url_state import SHARED_PIECE, UrlState, fill_missing, reserve_room
from crawldedup.errors import CrawldedupError, IncompatibleFilterError
from crawldedup.exact.disk import DiskStore
from crawldedup.exact.fpset import FingerprintSet
from crawldedup.exact.journaled import JournaledSet
from crawldedup.exact.stores import open_store
from crawldedup.schemes import is_redis

DIGEST_SIZE = 16
# Digests are random: each insert transaction touches pages all over the
# table's B-tree and commits every page it touched, so a big table costs a
# page written per row inserted unless a transaction holds many rows.  Read
# up to 8 MiB of URLs (about 90,000) per batch when the input has them.
DB_READ_SIZE = 8 << 20
# --db: digests known to be in the database, kept in memory (27 bytes each at
# most) to skip repeats; emptied past this many.
KNOWN_LIMIT = 8_000_000
#: The most digests --exact makes room for ahead of its input (expect()):
#: 16,777,216 digests, a table of about 320 MB; a larger input grows the set
#: as it goes.
RESERVE_LIMIT = 1 << 24


def flag_list(names: List[str]) -> str:
    """'--a', '--a and --b', '--a, --b and --c'."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


class ExactState(UrlState):
    """Exact URL state for the command line (see the module docstring)."""

    keys_are_lines = False  # MD5 digests, a pass of their own
    takes_spans = True
    # In block mode the compiled canonical form and MD5 of a line cost
    # about what remembering the line would (a 128-bit hash and an insert
    # into a set of millions), and skipping repeats takes memory: the block
    # mode computes every line's key.  The output and the state are the same
    # either way.
    block_repeats = False

    def __init__(self, path: str, args: argparse.Namespace, err: IO[str]) -> None:
        self.path = path
        self.db: Optional[str] = getattr(args, "db", None)
        self.store: Any = None
        self.fps: Optional[FingerprintSet] = None
        self.disk: Optional[DiskStore] = None
        self.journaled: Optional[JournaledSet] = None
        ignored = [f"--{name.replace('_', '-')}" for name in ("capacity", "error_rate", "layout")
                   if getattr(args, name, None) is not None]
        if ignored:
            verb = "applies" if len(ignored) == 1 else "apply"
            err.write(f"crawldedup: note: {flag_list(ignored)} only {verb} to Bloom filter "
                      f"states; ignored with --exact/--db\n")
        if self.db:
            try:
                self.store = open_store(self.db, digest_size=DIGEST_SIZE)
            except ImportError as exc:
                raise CrawldedupError(str(exc)) from None
            except ValueError as exc:
                raise CrawldedupError(f"--db {self.db!r}: {exc}") from None
            # The store's insert-if-absent is atomic and reports what it
            # added.  The lookup before it asks the database about the
            # digests this run does not know to be there (it added or met
            # them: repeats never reach the database), so that the pending
            # journal holds only what the database did not have.  Big
            # batches.
            self.read_size = DB_READ_SIZE
            self.record_piece = SHARED_PIECE
            self.receipts = bool(self.store.supports_receipts)
            self.known = FingerprintSet(DIGEST_SIZE)
            self.contains_many = self._db_contains_many
            return
        if getattr(args, "disk", False):
            try:
                self.disk = DiskStore(path, DIGEST_SIZE)
            except ValueError as exc:
                raise CrawldedupError(f"--state {path!r}: {exc}") from None
            self.contains_many = self.disk.contains_many
            return
        try:
            journaled = self.journaled = JournaledSet(path, DIGEST_SIZE)
        except IncompatibleFilterError as exc:
            raise CrawldedupError(f"{exc}; --exact keeps {DIGEST_SIZE}-byte MD5 digests in a "
                                  f"fingerprint set: use another --state path") from None
        self.fps = journaled.fps
        self.contains_many = self.fps.contains_many

    def keys(self, lines: List[Any]) -> np.ndarray:
        """The MD5 digests of the lines (of their canonical forms with
        --canonical), computed once per chunk: ``crawldedup.url_fingerprints(lines,
        canonical=False)``, through its batch kernel (without the GIL, on
        several threads for big chunks), end to end in one buffer."""
        blob, missing = url_digests_packed(lines)
        if missing:  # not for lines read (bytes) nor canonical forms (str)
            return fill_missing(blob, missing, crawldedup.url_fingerprints(
                [lines[i] for i in missing], canonical=False))
        return np.frombuffer(blob, dtype=f"S{DIGEST_SIZE}")

    def span_keys(self, canonical: Any, data: bytes, spans: np.ndarray) -> np.ndarray:
        """The digests of the lines ``data[a:b]`` for each row (a, b) of
        spans (of their canonical forms with a canonicalizer), in one
        compiled pass over the block: no object per line."""
        blob, missing = span_digests(data, spans, canonical is not None)
        if not missing:
            return np.frombuffer(blob, dtype=f"S{DIGEST_SIZE}")
        lines = [data[int(spans[i, 0]):int(spans[i, 1])] for i in missing]
        if canonical is None:  # a line as read always has its MD5: never here
            return fill_missing(blob, missing, crawldedup.url_fingerprints(lines, canonical=False))
        return fill_missing(blob, missing, canonical.slow_digests(lines))

    def canonical_keys(self, canonical: Any, lines: List[Any]) -> np.ndarray:
        """The MD5 digests of the canonical forms, in the canonicalizer's
        own compiled pass."""
        return canonical.digests(lines)  # type: ignore[no-any-return]

    def check_key_mode(self, mode: str, err: IO[str]) -> None:
        """--db: record the key mode in the database, or refuse another
        (cli._key_mode)."""
        assert self.db is not None
        if is_redis(self.db):  # a RedisStore
            record: Any = _key_mode.RedisRecord(self.store._transport.client, self.store.name,
                                                False)
        else:
            record = _key_mode.StoreRecord(self.db)
        try:
            _key_mode.check(record, mode, f"the database {self.db}",
                            lambda: len(self.store) > 0, err)
        finally:
            record.close()

    def _db_contains_many(self, digests: np.ndarray) -> np.ndarray:
        """True where the database holds the digest: known to this run, or
        found by a lookup of the others in the database."""
        seen = self.known.contains_many(digests)
        ask = np.flatnonzero(~seen)
        if len(ask):
            # In key order, the lookups walk the table's B-tree from left to
            # right (as the store's inserts do) instead of jumping about it.
            order = np.argsort(digests.take(ask))
            ask = ask[order]
            asked = digests.take(ask)
            found = self.store.contains_many(asked)
            if found.any():
                seen[ask[found]] = True
                self._know(asked[found])
        return seen

    def _know(self, digests: np.ndarray) -> None:
        if len(self.known) > KNOWN_LIMIT:
            self.known.clear()  # only a cache: the database decides
        self.known.add_many(digests)

    def add_many(self, digests: np.ndarray) -> np.ndarray:
        """Record the digests (in the log first, or in the database); True
        where this call added them."""
        if self.store is not None:
            added = self.store.add_many(digests)
            self._know(digests)
            return added  # type: ignore[no-any-return]
        if self.disk is not None:
            return self.disk.add_many(digests)
        assert self.journaled is not None
        return self.journaled.add_many(digests)

    def add_many_once(self, digests: np.ndarray, receipt: bytes) -> np.ndarray:
        """--db, a store that keeps receipts: add_many under receipt
        (FingerprintStore.add_many_once)."""
        added = self.store.add_many_once(digests, receipt)
        self._know(digests)
        return added  # type: ignore[no-any-return]

    def forget_receipt(self, receipt: bytes) -> None:
        self.store.forget_receipt(receipt)

    def expect(self, lines: int) -> None:
        """Room for the digests of this many more lines (at most
        RESERVE_LIMIT) in the fingerprint set, taken at once: a set that
        grows as it goes moves every digest at each growth, which took half
        the time of recording 1,950,000 new digests."""
        if self.fps is not None and lines > 0:
            reserve_room(self.fps, len(self.fps) + min(lines, RESERVE_LIMIT))

    def describe(self) -> str:
        if self.disk is not None:
            return (f"exact, {len(self.disk)} URLs in a disk store "
                    f"({self.disk.runs} run{'s' if self.disk.runs != 1 else ''})")
        if self.store is not None:
            return f"exact, {len(self.store)} URLs in {self.store!r}"
        assert self.fps is not None
        return f"exact, {len(self.fps)} URLs"

    def close(self) -> None:
        if self.disk is not None:
            self.disk.close()
            return
        if self.store is not None:
            self.store.close()
            return
        if self.journaled is not None:
            self.journaled.close()


def open_exact(path: str, args: argparse.Namespace, err: IO[str]) -> ExactState:
    return ExactState(path, args, err)
