"""A FingerprintSet kept in a file and a journal beside it, so that a killed
process loses nothing it recorded: the state of ``crawldedup urls --exact``
and of the Scrapy duplicate filter's "exact" backend.

``JournaledSet(path, digest_size)`` loads the set saved in ``path`` (when
there is one) and replays ``path + ".log"``, the digests appended since that
save.  Each digest is appended to the log as it is recorded; ``compact()``
saves the set (atomically) and empties the log; ``close()`` compacts and
removes the log.  A log cut by a kill in the middle of a digest loses that
digest's tail only, which the next open drops.

The log is written without fsync: it guards against a killed process,
whose writes the OS keeps, not against power loss.
"""

from __future__ import annotations

import os
from typing import BinaryIO, Iterable, Optional, Union

import numpy as np

from crawldedup.errors import IncompatibleFilterError
from crawldedup.exact.fpset import FingerprintSet
from crawldedup.formats import files as _files

#: The log is compacted (the set saved, the log emptied) once it passes
#: this many bytes, unless the set was made with another limit.
LOG_LIMIT = 64 << 20

Digests = Union[np.ndarray, Iterable[bytes]]


class JournaledSet:
    """A FingerprintSet saved in ``path``, each digest added journaled in
    ``path.log`` first (see the module docstring).

    ``path`` holding anything but a fingerprint set of ``digest_size``-byte
    digests raises :class:`~crawldedup.IncompatibleFilterError`; damage
    raises :class:`~crawldedup.CorruptFileError`.
    """

    def __init__(self, path: str, digest_size: int, *, log_limit: Optional[int] = LOG_LIMIT,
                 fps: Optional[FingerprintSet] = None) -> None:
        self.path = path
        self.log_limit = log_limit
        if os.path.exists(path):
            header = _files.read_header(path)
            if header.kind != _files.KIND_FPSET:
                raise IncompatibleFilterError(
                    f"{path!r} holds a {_files.kind_name(header.kind)}, not a fingerprint set")
            self.fps = FingerprintSet.load(path)
            if self.fps.digest_size != digest_size:
                raise IncompatibleFilterError(
                    f"{path!r} holds {self.fps.digest_size}-byte digests, not "
                    f"{digest_size}-byte ones")
        else:
            self.fps = fps if fps is not None else FingerprintSet(digest_size)
        self.digest_size = digest_size
        self._log: Optional[BinaryIO] = open(path + ".log", "a+b")
        try:
            self._replay(self._log)
        except BaseException:
            self._log.close()
            raise

    def _replay(self, log: BinaryIO) -> None:
        log.seek(0)
        logged = log.read()
        size = self.digest_size
        whole = len(logged) - len(logged) % size  # a killed write leaves a tail
        if whole:
            self.fps.add_many(np.frombuffer(logged, dtype=f"S{size}", count=whole // size))
        if whole != len(logged):
            log.truncate(whole)
        log.seek(0, os.SEEK_END)

    @property
    def log(self) -> BinaryIO:
        if self._log is None:
            raise ValueError(f"the journaled set {self.path!r} is closed")
        return self._log

    def __len__(self) -> int:
        return len(self.fps)

    def __contains__(self, digest: bytes) -> bool:
        return digest in self.fps

    def contains_many(self, digests: Digests) -> np.ndarray:
        return self.fps.contains_many(digests)

    def add(self, digest: bytes) -> bool:
        """Record one digest; True when it is new.  Its journal entry is
        buffered until ``flush()`` (the add of a crawler's every request
        costs no system call)."""
        log = self.log
        if not self.fps.add(digest):
            return False
        log.write(digest)
        return True

    def add_many(self, digests: np.ndarray) -> np.ndarray:
        """Record the digests (a numpy ``S{digest_size}`` array), journaled
        and flushed to the OS before they are added; True where this call
        added them."""
        log = self.log
        log.write(digests.tobytes())
        log.flush()
        added = self.fps.add_many(digests)
        if self.log_limit is not None and log.tell() > self.log_limit:
            self.compact()
        return added

    def flush(self) -> None:
        """Hand the buffered journal entries to the OS."""
        if self._log is not None:
            self._log.flush()

    def compact(self) -> None:
        """Save the set atomically (it holds everything logged), then
        empty the log."""
        log = self.log
        log.flush()
        self.fps.save(self.path)
        log.seek(0)
        log.truncate()

    def clear(self) -> None:
        """Forget every digest: the set, the log and the saved file."""
        self.fps.clear()
        log = self.log
        log.seek(0)
        log.truncate()
        if os.path.exists(self.path):
            os.unlink(self.path)

    def close(self) -> None:
        """Compact and remove the log; closing twice does nothing."""
        if self._log is None:
            return
        self.compact()
        self._log.close()
        self._log = None
        try:
            os.unlink(self.path + ".log")
        except OSError:
            pass

    def __enter__(self) -> "JournaledSet":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._log is None else f"{len(self.fps)} digests"
        return f"JournaledSet({self.path!r}, {self.digest_size}, {state})"
