"""The key mode of a ``crawldedup urls`` state, recorded with the state.

A state holds keys made one way: the lines as read, their canonical forms
(``--canonical``), or their canonical forms without tracking parameters
(``--canonical --strip-tracking``).  A run that made its keys another way
would take every URL whose key differs for a new one and print it again, so
the mode is recorded where the state is, and a run asking for another one is
refused with a usage error naming the mode the state was made with.

Where the mode is kept, by kind of state:

* a local state file (Bloom filter, rotating filter, ``--exact`` set):
  ``STATE.keys`` beside it, one line, written (atomically) when the state
  is made;
* ``--db`` SQLite or SQLAlchemy: the table ``crawldedup_urls_keys`` of the
  same database, holding the MD5 of the mode's name (a fingerprint store);
* a Redis state and ``--db redis://``: the string key ``NAME:urls-keys``
  beside the state's keys.

A state that records no mode was made before the mode was recorded (or is
new): the run records its own mode and goes on, with a note on standard
error for a state that holds URLs already (the mode it was made with is not
known: the first run that records one decides).  A record that disagrees
with a state that holds nothing (a state emptied or made anew while its
record stayed) is replaced.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from typing import IO, Any, BinaryIO, Callable, List, Optional

from crawldedup.cli._common import StateModeError
from crawldedup.errors import CrawldedupError, StoreUnavailableError
from crawldedup.exact.stores import open_store
from crawldedup.formats import files as _files

#: The modes, in the words a record keeps.
AS_READ = "as-read"
CANONICAL = "canonical"
STRIP_TRACKING = "canonical strip-tracking"
MODES = (AS_READ, CANONICAL, STRIP_TRACKING)
_MADE = {AS_READ: "without --canonical", CANONICAL: "with --canonical (no --strip-tracking)",
         STRIP_TRACKING: "with --canonical --strip-tracking"}
_ASKED = {AS_READ: "has no --canonical", CANONICAL: "has --canonical without --strip-tracking",
          STRIP_TRACKING: "has --canonical --strip-tracking"}
_WORDS = {AS_READ: "compares URLs as read", CANONICAL: "compares URLs by their canonical form",
          STRIP_TRACKING: "compares URLs by their canonical form without tracking "
                          "parameters"}
FILE_HEADER = "crawldedup urls keys: "
DB_TABLE = "crawldedup_urls_keys"
REDIS_SUFFIX = ":urls-keys"


def mode_of(args: argparse.Namespace) -> str:
    if not args.canonical:
        return AS_READ
    return STRIP_TRACKING if args.strip_tracking else CANONICAL


class FileRecord:
    """``STATE.keys``, beside a local state file (one writer: its lock)."""

    def __init__(self, state_path: str, new: bool) -> None:
        self.path = state_path + ".keys"
        self.new = new

    def get(self) -> List[str]:
        try:
            with open(self.path, "r", encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return []
        mode = text[len(FILE_HEADER):].strip() if text.startswith(FILE_HEADER) else None
        if mode not in MODES:
            raise CrawldedupError(f"{self.path!r} is damaged: it does not say how the keys of "
                                  f"the state beside it were made (remove it, and the next run "
                                  f"records its own mode)")
        return [mode]

    def put(self, mode: str) -> None:
        data = f"{FILE_HEADER}{mode}\n".encode("utf-8")

        def write(f: BinaryIO) -> None:
            f.write(data)
        _files.atomic_write(self.path, write)

    replace = put

    def close(self) -> None:
        pass


def _digest(mode: str) -> bytes:
    return hashlib.md5(f"{FILE_HEADER}{mode}".encode("utf-8")).digest()


class StoreRecord:
    """The table DB_TABLE of a --db database: the digest of each mode
    recorded (several only if processes with different modes made the
    state at the same moment)."""

    new = False

    def __init__(self, db: str) -> None:
        self.store = open_store(db, table=DB_TABLE, digest_size=16)

    def get(self) -> List[str]:
        found = self.store.contains_many([_digest(mode) for mode in MODES])
        return [mode for mode, hit in zip(MODES, found.tolist()) if hit]

    def put(self, mode: str) -> None:
        self.store.add(_digest(mode))

    def replace(self, mode: str) -> None:
        self.store.clear()
        self.store.add(_digest(mode))

    def close(self) -> None:
        self.store.close()


class RedisRecord:
    """The string key ``NAME:urls-keys`` beside a Redis state's keys."""

    def __init__(self, client: Any, name: str, new: bool) -> None:
        self.client = client
        self.key = name + REDIS_SUFFIX
        self.new = new

    def _call(self, command: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self.client, command)(*args, **kwargs)
        except Exception as exc:  # redis-py's errors: the optional dependency's own
            if type(exc).__module__.split(".")[0] != "redis":
                raise
            raise StoreUnavailableError(f"Redis key {self.key!r}: {exc}") from None

    def get(self) -> List[str]:
        value = self._call("get", self.key)
        if value is None:
            return []
        mode = value.decode("utf-8", "replace")
        if mode not in MODES:
            raise CrawldedupError(f"the Redis key {self.key!r} is damaged: {mode!r} is not a "
                                  f"key mode ({', '.join(MODES)})")
        return [mode]

    def put(self, mode: str) -> None:
        self._call("set", self.key, mode, nx=True)

    def replace(self, mode: str) -> None:
        self._call("set", self.key, mode)

    def close(self) -> None:
        pass


def check(record: Any, mode: str, where: str, holds_urls: Callable[[], bool],
          err: IO[str], write: bool = True) -> None:
    """Record mode for a state that has none, or refuse (StateModeError) a
    state made with another one; holds_urls() tells whether the state
    holds URLs (asked only when the record does not match).  With write
    False, only refuse (before the state is opened)."""
    if record.new:
        if write:
            record.replace(mode)
        return
    found = record.get()
    if found == [mode]:
        return
    if not found:
        if not write:
            return
        record.put(mode)
        found = record.get()  # another process may have recorded another mode first
        if found == [mode]:
            if holds_urls():
                err.write(f"crawldedup: note: {where} records no key mode (it was made by an "
                          f"older crawldedup); recording that it {_WORDS[mode]} "
                          f"(as if made {_MADE[mode]}): later runs with another mode are refused\n")
            return
    elif not holds_urls():
        if write:
            record.replace(mode)
        return
    made = [m for m in found if m != mode] or found
    raise StateModeError(
        f"{where} was made {' and '.join(_MADE[m] for m in made)} (it {_WORDS[made[0]]}); "
        f"this run {_ASKED[mode]}, which would print URLs it holds again as new: run with "
        f"the state's mode, or use another state")


def file_is_new(path: str, log: Optional[str] = None) -> bool:
    """Whether a local state file is made by this run: missing (and, for an
    --exact state, no log of digests of a killed run either)."""
    if os.path.exists(path):
        return False
    return not (log is not None and os.path.exists(log) and os.path.getsize(log) > 0)
