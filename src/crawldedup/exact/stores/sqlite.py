"""SQLiteStore: fingerprints in one SQLite file, the embedded default."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Iterator, List, Optional, Set

from crawldedup.errors import CorruptDatabaseError, CrawldedupError, StoreUnavailableError
from crawldedup.schemes import sqlite_path

try:
    import sqlite3
except ImportError:  # a Python built without SQLite: the package still imports
    sqlite3 = None  # type: ignore[assignment]
from crawldedup.exact.stores.base import (
    FingerprintStore,
    check_digest_size,
    check_table,
    chunks,
    recorded_answer,
)

# Rows per INSERT/SELECT statement (SQLite allows 32,766 variables since 3.32,
# 999 before) and per write transaction: a batch of a million fingerprints
# commits every TRANSACTION_ROWS, so other processes get the write lock in
# between.
STATEMENT_ROWS = 500
TRANSACTION_ROWS = 50_000
_RETURNING = sqlite3 is not None and sqlite3.sqlite_version_info >= (3, 35, 0)
CACHE_KIB = 64 << 10
#: The table of add_many_once's receipts, beside the stores' tables.
RECEIPTS_TABLE = "crawldedup_receipts"


# SQLite's result codes for a damaged file and for one that is not a database.
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
# ... and for a file it may not open or write: permission denied, read-only,
# cannot open.
_SQLITE_ACCESS = (3, 8, 14)


def access_problem(path: str) -> str:
    """Why a SQLite file at path cannot be opened for writing, as far as the
    file system tells (empty when it does not): SQLite's own message ("unable
    to open database file") names neither the file nor the reason.  SQLite
    keeps PATH-wal and PATH-shm beside a file in WAL mode, so its folder
    must be writable too."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"its folder {folder!r} does not exist"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return "the file is read-only"
    if not os.access(folder, os.W_OK):
        return (f"its folder {folder!r} is read-only (SQLite writes "
                f"{os.path.basename(path)}-wal and -shm beside the file)")
    return ""


def _is_damage(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11 and later
    if code is not None:
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    # Before 3.11: sqlite3 raises DatabaseError itself (no subclass) for
    # SQLITE_CORRUPT, SQLITE_NOTADB and SQLITE_FORMAT, sometimes with no
    # message at all.
    if sqlite3 is not None and type(exc) is sqlite3.DatabaseError:
        return True
    text = str(exc)
    return isinstance(exc, sqlite3.DatabaseError) and (
        "file is not a database" in text or "database disk image is malformed" in text)


class SQLiteFile:
    """One SQLite file in WAL mode, shared by threads and processes: what
    every SQLite-backed store of the package has in common.

    It checks ``path``, ``timeout`` and ``synchronous``, opens one connection
    per process (a store opened before ``fork`` opens its own in the child),
    switches the file to WAL, and runs work under a lock with SQLite's errors
    turned into StoreUnavailableError (an open transaction rolled back).  A
    subclass creates its tables in ``_prepare`` and names itself in
    ``_fail``.
    """

    #: The page size of a file this store creates (None: SQLite's default).
    _page_size: Optional[int] = None

    def _open_file(self, path: Any, timeout: Any, synchronous: Any) -> None:
        if sqlite3 is None:
            raise ImportError(f"{type(self).__name__} needs the sqlite3 module, which this "
                              f"Python was built without")
        self.path = os.fspath(path)
        if not isinstance(self.path, str):
            raise TypeError("path must be a str or os.PathLike of str")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise ValueError(f"timeout must be a number of seconds >= 0, got {timeout!r}")
        if synchronous not in ("OFF", "NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'OFF', 'NORMAL' or 'FULL', got "
                             f"{synchronous!r}")
        self.timeout = float(timeout)
        self.synchronous = synchronous
        self._lock = threading.RLock()
        self._conn: "Optional[sqlite3.Connection]" = None
        self._pid = -1
        self._closed = False
        self._connection()

    def _fail(self, exc: BaseException) -> StoreUnavailableError:
        return StoreUnavailableError(f"SQLite file {self.path!r}: {exc}")

    def _error(self, exc: BaseException) -> CrawldedupError:
        """What an error of SQLite raises: CorruptDatabaseError when SQLite
        finds the file damaged or not a database, else ``_fail``'s error."""
        if _is_damage(exc):
            return CorruptDatabaseError(self.path, f"SQLite says: {exc}")
        error = self._fail(exc)
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _SQLITE_ACCESS:
            why = access_problem(self.path)
            if why:
                error.args = (f"{error}: {why}",)
        return error

    def _prepare(self, conn: "sqlite3.Connection") -> None:
        """Create the tables (and set the pragmas) a new connection needs."""

    def _before_connect(self) -> None:
        """Check the file before SQLite opens it (a subclass's hook)."""

    def _undecodable(self, exc: UnicodeDecodeError) -> CorruptDatabaseError:
        """sqlite3 could not decode SQLite's own message: it quotes bytes of
        the file that are not UTF-8 (a damaged schema)."""
        return CorruptDatabaseError(self.path, f"SQLite's message quotes damaged bytes: "
                                    f"{exc.object[:200]!r}")

    def _connection(self) -> "sqlite3.Connection":
        if self._closed:
            raise ValueError("the store is closed")
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        # First use, or the first in a forked child (which must not touch
        # the parent's connection).
        self._before_connect()
        try:
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        try:
            if self._page_size:  # a new file's page size (an existing one keeps its own)
                conn.execute(f"PRAGMA page_size={int(self._page_size)}")
            # Switching a new database to WAL while another process does the
            # same fails at once with "database is locked" (SQLite does not
            # wait on its busy timeout there): try again until the timeout.
            deadline = time.monotonic() + self.timeout
            pause = 0.005
            while True:
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                        raise
                    time.sleep(pause)
                    pause = min(pause * 2, 0.1)
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            # A bigger page cache than the default 2 MiB keeps the upper
            # levels of a large table's B-tree in memory.
            conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            self._prepare(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise self._error(exc) from exc
        except UnicodeDecodeError as exc:
            conn.close()
            raise self._undecodable(exc) from exc
        except BaseException:
            conn.close()
            raise
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _run(self, work: Any) -> Any:
        with self._lock:
            conn = self._connection()
            try:
                return work(conn)
            except sqlite3.Error as exc:
                self._roll_back(conn)
                raise self._error(exc) from exc
            except UnicodeDecodeError as exc:
                self._roll_back(conn)
                raise self._undecodable(exc) from exc
            except BaseException:
                # (a value sqlite3 cannot bind, an interrupt): the
                # transaction is not left open for the next call
                self._roll_back(conn)
                raise

    @staticmethod
    def _roll_back(conn: "sqlite3.Connection") -> None:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def close(self) -> None:
        """Close the connection (the data is already committed).  Idempotent."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
            self._closed = True


class SQLiteStore(SQLiteFile, FingerprintStore):
    """Fingerprints in a SQLite file: ``SQLiteStore("seen.db")``.

    The table (``fp BLOB PRIMARY KEY``, WITHOUT ROWID) is created when
    missing.  The file is in WAL mode: readers never wait for the writer, and
    several processes (each with its own SQLiteStore) can add to it at once;
    SQLite's write lock makes every insert-if-absent atomic, so each
    fingerprint is reported new exactly once overall.  ``add_many`` writes
    in transactions of TRANSACTION_ROWS rows.  Commits are durable against a
    crash of the process; ``synchronous="FULL"`` makes them durable against
    power loss too (slower).

    A file that cannot be opened, or a lock held longer than ``timeout``
    seconds, raises StoreUnavailableError.  A store opened before ``fork``
    opens its own connection in the child.
    """

    def __init__(self, path: Any, *, table: str = "fingerprints", digest_size: int = 16,
                 timeout: float = 60.0, synchronous: str = "NORMAL") -> None:
        if sqlite3 is None:
            raise ImportError("SQLiteStore needs the sqlite3 module, which this Python was "
                              "built without")
        self.digest_size = check_digest_size(digest_size)
        self.table = check_table(table)
        self._open_file(path, timeout, synchronous)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r}, table={self.table!r})"

    # ------------------------------------------------------ connection

    def _fail(self, exc: BaseException) -> StoreUnavailableError:
        return StoreUnavailableError(f"SQLite store {self.path!r} (table {self.table!r}): {exc}")

    def _prepare(self, conn: "sqlite3.Connection") -> None:
        conn.execute(f'CREATE TABLE IF NOT EXISTS "{self.table}" '
                     f'(fp BLOB PRIMARY KEY NOT NULL) WITHOUT ROWID')

    # ------------------------------------------------------- operations

    def add(self, fp: Any) -> bool:
        data = self._fp(fp)
        sql = f'INSERT OR IGNORE INTO "{self.table}" (fp) VALUES (?)'
        return bool(self._run(lambda conn: conn.execute(sql, (data,)).rowcount == 1))

    def __contains__(self, fp: Any) -> bool:
        data = self._fp(fp)
        sql = f'SELECT 1 FROM "{self.table}" WHERE fp = ?'
        return bool(self._run(lambda conn: conn.execute(sql, (data,)).fetchone() is not None))

    def _insert(self, unique: List[bytes]) -> Set[bytes]:
        def work(conn: "sqlite3.Connection") -> Set[bytes]:
            new: Set[bytes] = set()
            for batch in chunks(unique, TRANSACTION_ROWS):
                conn.execute("BEGIN IMMEDIATE")
                # In key order, each transaction's inserts walk the B-tree
                # from left to right instead of touching random pages.
                for rows in chunks(sorted(batch), STATEMENT_ROWS):
                    new.update(self._insert_rows(conn, rows))
                conn.execute("COMMIT")
            return new
        return self._run(work)  # type: ignore[no-any-return]

    # ----------------------------------------------------------- receipts

    supports_receipts = True

    def _insert_once(self, unique: List[bytes], receipt: bytes, batch: bytes) -> bytes:
        def work(conn: "sqlite3.Connection") -> bytes:
            # BEGIN IMMEDIATE: the write lock first, so that the receipt read
            # and the inserts see one state (a killed writer's transaction
            # is either committed or rolled back by then).
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(f'CREATE TABLE IF NOT EXISTS "{RECEIPTS_TABLE}" (tbl TEXT NOT NULL, '
                         f'receipt BLOB NOT NULL, batch BLOB NOT NULL, flags BLOB NOT NULL, '
                         f'PRIMARY KEY (tbl, receipt)) WITHOUT ROWID')
            row = conn.execute(f'SELECT batch, flags FROM "{RECEIPTS_TABLE}" WHERE tbl = ? '
                               f'AND receipt = ?', (self.table, receipt)).fetchone()
            try:
                known = recorded_answer(row, batch, len(unique))
            except ValueError as exc:
                raise CorruptDatabaseError(self.path, f"table {RECEIPTS_TABLE!r}: {exc}") \
                    from None
            if known is not None:
                conn.execute("COMMIT")
                return known
            new: Set[bytes] = set()
            for rows in chunks(sorted(unique), STATEMENT_ROWS):
                new.update(self._insert_rows(conn, rows))
            flags = bytes(fp in new for fp in unique)
            conn.execute(f'INSERT OR REPLACE INTO "{RECEIPTS_TABLE}" VALUES (?, ?, ?, ?)',
                         (self.table, receipt, batch, flags))
            conn.execute("COMMIT")
            return flags
        return self._run(work)  # type: ignore[no-any-return]

    def _forget_receipt(self, receipt: bytes) -> None:
        self._run(lambda conn: self._forget_receipts(conn, receipt))

    def _forget_receipts(self, conn: "sqlite3.Connection",
                         receipt: Optional[bytes] = None) -> None:
        """Delete the receipt (every receipt of this table: None), if the
        receipts table exists."""
        exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                              "name = ?", (RECEIPTS_TABLE,)).fetchone()
        if not exists:
            return
        if receipt is None:
            conn.execute(f'DELETE FROM "{RECEIPTS_TABLE}" WHERE tbl = ?', (self.table,))
        else:
            conn.execute(f'DELETE FROM "{RECEIPTS_TABLE}" WHERE tbl = ? AND receipt = ?',
                         (self.table, receipt))

    def _insert_rows(self, conn: "sqlite3.Connection", rows: Any) -> Iterator[bytes]:
        if _RETURNING:
            sql = (f'INSERT OR IGNORE INTO "{self.table}" (fp) VALUES '
                   + ",".join(["(?)"] * len(rows)) + " RETURNING fp")
            return (row[0] for row in conn.execute(sql, rows).fetchall())
        sql = f'INSERT OR IGNORE INTO "{self.table}" (fp) VALUES (?)'
        return (fp for fp in rows if conn.execute(sql, (fp,)).rowcount == 1)

    def _select(self, unique: List[bytes]) -> Set[bytes]:
        def work(conn: "sqlite3.Connection") -> Set[bytes]:
            found: Set[bytes] = set()
            for rows in chunks(unique, STATEMENT_ROWS):
                sql = (f'SELECT fp FROM "{self.table}" WHERE fp IN ('
                       + ",".join(["?"] * len(rows)) + ")")
                found.update(row[0] for row in conn.execute(sql, rows))
            return found
        return self._run(work)  # type: ignore[no-any-return]

    def __len__(self) -> int:
        sql = f'SELECT COUNT(*) FROM "{self.table}"'
        return int(self._run(lambda conn: conn.execute(sql).fetchone()[0]))

    def clear(self) -> None:
        """Remove every fingerprint (from every process's view), and the
        receipts of add_many_once for them."""
        def work(conn: "sqlite3.Connection") -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(f'DELETE FROM "{self.table}"')
            self._forget_receipts(conn)
            conn.execute("COMMIT")
        self._run(work)


def open_sqlite_url(url: str, *, table: Optional[str] = None,
                    digest_size: int = 16) -> SQLiteStore:
    """The SQLiteStore of a ``sqlite:///PATH`` URL (open_store's backend)."""
    path = sqlite_path(url)
    if not path or path == ":memory:":
        raise ValueError("a sqlite:/// URL needs a file path (sqlite:///seen.db, or "
                         "sqlite:////absolute/path.db)")
    if table is None:
        return SQLiteStore(path, digest_size=digest_size)
    return SQLiteStore(path, table=table, digest_size=digest_size)
