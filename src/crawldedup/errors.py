"""The exceptions crawldedup raises on purpose.

Everything derives from :class:`CrawldedupError`, so ``except CrawldedupError``
catches every failure that is crawldedup's own verdict (bad arguments still
raise the built-in ``ValueError``/``TypeError``).
"""

import os
from typing import Any, Optional, Tuple, Union


def _name_of(path: object) -> Optional[str]:
    """The file name of a path, or of a file object read in place of one."""
    if path is None:
        return None
    if isinstance(path, (str, os.PathLike)):
        name = os.fspath(path)
        return name if isinstance(name, str) else os.fsdecode(name)
    name = getattr(path, "name", None)
    return name if isinstance(name, str) else None


class CrawldedupError(Exception):
    """Base class of crawldedup's own exceptions."""


class CorruptFileError(CrawldedupError):
    """A state file is truncated, damaged, empty or not a crawldedup file.

    ``path`` names the file (``None`` for in-memory data) and ``reason`` says
    what is wrong with it.
    """

    def __init__(self, path: Optional[Union[str, "os.PathLike[str]"]], reason: str) -> None:
        self.path = _name_of(path)
        self.reason = reason
        where = "data" if self.path is None else repr(self.path)
        super().__init__(f"{where} is not a valid crawldedup file: {reason}")

    def __reduce__(self) -> Tuple[Any, ...]:
        # Pickled with its arguments (a worker process's error reaches the
        # parent pickled: Spark, multiprocessing).
        return (type(self), (self.path, self.reason))


class CorruptStateError(CorruptFileError):
    """State that crawldedup keeps in a server (Redis keys) holds values it
    never writes: a damaged or hand-edited key.

    ``where`` names the server and the keys' prefix, ``reason`` the key and
    the value; ``path`` is None.
    """

    def __init__(self, where: str, reason: str) -> None:
        CrawldedupError.__init__(self, f"{where}: the crawldedup state is damaged: {reason}")
        self.path = None
        self.where = where
        self.reason = reason

    def __reduce__(self) -> Tuple[Any, ...]:
        return (type(self), (self.where, self.reason))


class IncompatibleFilterError(CrawldedupError, ValueError):
    """Two filters, or a filter and a file, differ in parameters or format
    version, so they cannot be combined or opened as asked."""


class StoreUnavailableError(CrawldedupError):
    """A fingerprint store (a database) cannot be reached or used.

    Raised instead of answering "not seen": a store that fails never lets a
    duplicate through silently.  The driver's exception is the ``__cause__``.
    """


class StoreLockedError(CrawldedupError):
    """A store that takes one process at a time (a DiskStore) is open in
    another process."""


class CorruptDatabaseError(CorruptFileError):
    """A SQLite file that SQLite itself finds damaged ("database disk image
    is malformed"), that is not a database at all, or whose rows fail
    crawldedup's own checks.

    A CorruptFileError naming the file, and deliberately not a
    StoreUnavailableError: an unreachable store is worth retrying, a damaged
    file is not, so code that retries on StoreUnavailableError never loops
    over damage.
    """


__all__ = ["CrawldedupError", "CorruptFileError", "CorruptStateError", "CorruptDatabaseError",
           "IncompatibleFilterError", "StoreLockedError", "StoreUnavailableError"]
