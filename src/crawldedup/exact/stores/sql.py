"""SQLStore: fingerprints in PostgreSQL or MySQL/MariaDB through SQLAlchemy."""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from crawldedup._checks import check_flag
from crawldedup._extras import install_hint
from crawldedup.errors import CorruptStateError, StoreUnavailableError
from crawldedup.exact.stores.base import (
    FingerprintStore,
    check_digest_size,
    check_table,
    chunks,
    recorded_answer,
)

_DEADLOCK_RETRIES = 8
#: The table of add_many_once's receipts, beside the stores' tables.
RECEIPTS_TABLE = "crawldedup_receipts"


def _sqlalchemy() -> Any:
    try:
        import sqlalchemy
    except ImportError:
        raise ImportError(f"SQLStore needs SQLAlchemy 2: {install_hint('sql')}") from None
    return sqlalchemy


def _with_installed_driver(url: Any) -> Any:
    """``postgresql://`` and ``mysql://`` name SQLAlchemy's default drivers
    (psycopg2, mysqlclient); when that one is missing but the driver of the
    ``sql`` extra is installed (psycopg 3, PyMySQL), use it."""
    if url.drivername == "postgresql" and importlib.util.find_spec("psycopg2") is None \
            and importlib.util.find_spec("psycopg") is not None:
        return url.set(drivername="postgresql+psycopg")
    if url.drivername in ("mysql", "mariadb") and importlib.util.find_spec("MySQLdb") is None \
            and importlib.util.find_spec("pymysql") is not None:
        return url.set(drivername=url.drivername + "+pymysql")
    return url


class SQLStore(FingerprintStore):
    """Fingerprints in a SQL database: ``SQLStore("postgresql+psycopg://u@host/db")``.

    Works with PostgreSQL, MySQL/MariaDB and SQLite URLs (any SQLAlchemy URL
    of those dialects).  The table (default ``crawldedup_fingerprints``) has
    one column, ``fp``, the primary key (BYTEA / VARBINARY / BLOB), created
    when missing.  Adding is one atomic insert-if-absent — ``INSERT ... ON
    CONFLICT DO NOTHING`` on PostgreSQL and SQLite, ``INSERT IGNORE`` on
    MySQL/MariaDB — and a fingerprint counts as new only when this statement
    inserted it (``RETURNING`` for batches; MySQL without RETURNING falls
    back to one statement per fingerprint), so with any number of concurrent
    writers each fingerprint is reported new exactly once.  Batches are
    sorted (concurrent batches lock keys in the same order) and a transaction
    that the server aborts as a deadlock is retried.

    An unreachable server, or any database error, raises
    StoreUnavailableError.  Needs ``pip install 'crawldedup[sql]'``.
    """

    def __init__(self, url: Any, *, table: str = "crawldedup_fingerprints",
                 digest_size: int = 16, engine_kwargs: Optional[Dict[str, Any]] = None,
                 create: bool = True) -> None:
        self.digest_size = check_digest_size(digest_size)
        self.table_name = check_table(table)
        create = check_flag("create", create)
        sa = _sqlalchemy()
        from sqlalchemy.dialects import mysql
        self._sa = sa
        self._lock = threading.RLock()
        try:
            parsed = _with_installed_driver(sa.engine.make_url(url))
        except sa.exc.ArgumentError as exc:
            raise ValueError(f"url: not a database URL: {exc}") from None
        self.url = parsed.render_as_string(hide_password=True)
        if parsed.get_backend_name() not in ("postgresql", "mysql", "mariadb", "sqlite"):
            raise ValueError(f"url: dialect {parsed.get_backend_name()!r} is not supported "
                             f"(PostgreSQL, MySQL/MariaDB or SQLite)")
        kwargs: Dict[str, Any] = {"pool_pre_ping": True}
        if parsed.get_backend_name() == "sqlite":
            # Wait for other writers instead of failing at once ("database is
            # locked"); WAL is set on every new connection below.
            kwargs["connect_args"] = {"timeout": 60.0}
        kwargs.update(engine_kwargs or {})
        try:
            self._engine = sa.create_engine(parsed, **kwargs)
        except ImportError as exc:
            raise ImportError(f"no driver for {parsed.drivername!r} ({exc}); "
                              f"{install_hint('sql')} brings psycopg and PyMySQL") from None
        self.dialect = self._engine.dialect.name
        if self.dialect == "sqlite":
            def wal(dbapi_connection: Any, record: Any) -> None:
                cursor = dbapi_connection.cursor()
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.close()
            sa.event.listen(self._engine, "connect", wal)
        self._mysql = self.dialect in ("mysql", "mariadb")
        column_type = sa.LargeBinary(self.digest_size).with_variant(
            mysql.VARBINARY(self.digest_size), "mysql", "mariadb")
        self._table = sa.Table(self.table_name, sa.MetaData(),
                               sa.Column("fp", column_type, primary_key=True, nullable=False))
        self._pid = os.getpid()
        self._closed = False
        with self._guard():
            created = False
            if create:
                try:
                    with self._engine.begin() as conn:
                        self._table.create(conn, checkfirst=True)
                    created = True
                except (sa.exc.ProgrammingError, sa.exc.OperationalError,
                        sa.exc.IntegrityError):
                    pass  # maybe another process created it meanwhile: check below
            if not created:
                with self._engine.connect() as conn:
                    conn.execute(sa.select(sa.func.count()).select_from(self._table))
        self._returning = bool(getattr(self._engine.dialect, "insert_returning", False))
        self._quoted = self._engine.dialect.identifier_preparer.quote(self.table_name)
        # Rows per statement: SQLite allows 32,766 parameters (999 before 3.32).
        self._rows = {"postgresql": 5000, "sqlite": 500}.get(self.dialect, 2000)
        self._receipts_table: Any = None

    def __repr__(self) -> str:
        return f"SQLStore({self.url!r}, table={self.table_name!r})"

    # ------------------------------------------------------ connection

    def _guard(self) -> Any:
        store = self

        class Guard:
            def __enter__(self) -> None:
                store._lock.acquire()
                if store._closed:
                    store._lock.release()
                    raise ValueError("the store is closed")
                if store._pid != os.getpid():  # forked: never reuse the parent's sockets
                    store._engine.dispose(close=False)
                    store._pid = os.getpid()

            def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
                store._lock.release()
                if isinstance(exc, store._sa.exc.SQLAlchemyError):
                    raise StoreUnavailableError(
                        f"SQL store {store.url} (table {store.table_name!r}): "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from exc
        return Guard()

    def _is_deadlock(self, exc: BaseException) -> bool:
        orig = getattr(exc, "orig", None)
        code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
        if code in ("40P01", "40001"):
            return True
        args: Tuple[Any, ...] = getattr(orig, "args", ())
        return bool(args) and args[0] in (1213, 1205)  # MySQL deadlock / lock wait timeout

    # Statements go to the driver as SQL text (no SQLAlchemy compilation of
    # a thousand-row VALUES list per batch).  PostgreSQL takes a batch as one
    # bytea[] parameter; the others a VALUES / IN list of placeholders.

    def _sql(self, conn: Any, sql: str, params: Any) -> Any:
        return conn.exec_driver_sql(sql, params)

    def _mark(self) -> str:
        return "?" if self._engine.dialect.paramstyle in ("qmark", "numeric") else "%s"

    def _insert_rows(self, rows: Any) -> Set[bytes]:
        with self._engine.begin() as conn:
            return self._insert_rows_in(conn, rows)

    def _insert_rows_in(self, conn: Any, rows: Any) -> Set[bytes]:
        """Insert rows in the transaction of conn; the ones inserted."""
        q, mark = self._quoted, self._mark()
        if self.dialect == "postgresql":
            result = self._sql(conn, f"INSERT INTO {q} (fp) SELECT unnest({mark}::bytea[]) "
                                     f"ON CONFLICT DO NOTHING RETURNING fp", (list(rows),))
            return {bytes(r[0]) for r in result}
        head = f"INSERT IGNORE INTO {q} (fp) VALUES " if self._mysql else \
            f"INSERT INTO {q} (fp) VALUES "
        tail = "" if self._mysql else " ON CONFLICT DO NOTHING"
        if self._returning:
            sql = head + ",".join([f"({mark})"] * len(rows)) + tail + " RETURNING fp"
            return {bytes(r[0]) for r in self._sql(conn, sql, tuple(rows))}
        one = head + f"({mark})" + tail
        return {fp for fp in rows if self._sql(conn, one, (fp,)).rowcount == 1}

    # ----------------------------------------------------------- receipts

    supports_receipts = True

    def _receipts(self) -> str:
        """The receipts table (``crawldedup_receipts``, one row a receipt and
        store table: the batch's digest and its answer), created when
        first needed; its quoted name."""
        if self._receipts_table is None:
            sa = self._sa
            from sqlalchemy.dialects import mysql
            table = sa.Table(
                RECEIPTS_TABLE, sa.MetaData(),
                sa.Column("tbl", sa.String(64), primary_key=True, nullable=False),
                sa.Column("receipt", sa.LargeBinary(64).with_variant(
                    mysql.VARBINARY(64), "mysql", "mariadb"), primary_key=True, nullable=False),
                sa.Column("batch", sa.LargeBinary(16).with_variant(
                    mysql.VARBINARY(16), "mysql", "mariadb"), nullable=False),
                sa.Column("flags", sa.LargeBinary().with_variant(
                    mysql.LONGBLOB(), "mysql", "mariadb"), nullable=False))
            try:
                with self._engine.begin() as conn:
                    table.create(conn, checkfirst=True)
            except (sa.exc.ProgrammingError, sa.exc.OperationalError, sa.exc.IntegrityError):
                pass  # created by another process meanwhile: used below
            self._receipts_table = table
        return str(self._engine.dialect.identifier_preparer.quote(RECEIPTS_TABLE))

    def _insert_once(self, unique: List[bytes], receipt: bytes, batch: bytes) -> bytes:
        mark = self._mark()
        with self._guard():
            r = self._receipts()
            claim = {"postgresql": "INSERT INTO {r} VALUES ({m}, {m}, {m}, {m}) "
                                   "ON CONFLICT DO NOTHING",
                     "sqlite": "INSERT OR IGNORE INTO {r} VALUES ({m}, {m}, {m}, {m})"}.get(
                self.dialect, "INSERT IGNORE INTO {r} VALUES ({m}, {m}, {m}, {m})")
            read = (f"SELECT batch, flags FROM {r} WHERE tbl = {mark} AND receipt = {mark}"
                    + ("" if self.dialect == "sqlite" else " FOR UPDATE"))
            for attempt in range(_DEADLOCK_RETRIES):
                try:
                    with self._engine.begin() as conn:
                        # The receipt's row first, locked to the end of the
                        # transaction: a call under the same receipt that the
                        # server still runs (its client killed) holds it, and
                        # this one waits for it to end, committed or not.
                        self._sql(conn, claim.format(r=r, m=mark),
                                  (self.table_name, receipt, b"", b""))
                        row = self._sql(conn, read, (self.table_name, receipt)).first()
                        try:
                            known = recorded_answer(row, batch, len(unique))
                        except ValueError as exc:
                            raise CorruptStateError(
                                f"SQL store {self.url} (table {self.table_name!r}, "
                                f"{RECEIPTS_TABLE})", str(exc)) from None
                        if known is not None:
                            return known
                        new: Set[bytes] = set()
                        for rows in chunks(sorted(unique), self._rows):
                            new.update(self._insert_rows_in(conn, rows))
                        flags = bytes(fp in new for fp in unique)
                        self._sql(conn, f"UPDATE {r} SET batch = {mark}, flags = {mark} "
                                        f"WHERE tbl = {mark} AND receipt = {mark}",
                                  (batch, flags, self.table_name, receipt))
                    return flags
                except self._sa.exc.DBAPIError as exc:
                    if not self._is_deadlock(exc) or attempt == _DEADLOCK_RETRIES - 1:
                        raise
                    time.sleep(0.01 * (attempt + 1))  # rolled back: nothing inserted
        raise AssertionError("unreachable")

    def _forget_receipt(self, receipt: bytes) -> None:
        mark = self._mark()
        with self._guard():
            r = self._receipts()
            with self._engine.begin() as conn:
                self._sql(conn, f"DELETE FROM {r} WHERE tbl = {mark} AND receipt = {mark}",
                          (self.table_name, receipt))

    def add(self, fp: Any) -> bool:
        data = self._fp(fp)
        with self._guard():
            return bool(self._insert_rows([data]))

    def __contains__(self, fp: Any) -> bool:
        data = self._fp(fp)
        with self._guard():
            with self._engine.connect() as conn:
                row = self._sql(conn, f"SELECT 1 FROM {self._quoted} WHERE fp = {self._mark()}",
                                (data,)).first()
        return row is not None

    def _insert(self, unique: List[bytes]) -> Set[bytes]:
        new: Set[bytes] = set()
        with self._guard():
            for rows in chunks(sorted(unique), self._rows):
                for attempt in range(_DEADLOCK_RETRIES):
                    try:
                        new.update(self._insert_rows(rows))
                        break
                    except self._sa.exc.DBAPIError as exc:
                        if not self._is_deadlock(exc) or attempt == _DEADLOCK_RETRIES - 1:
                            raise
                        time.sleep(0.01 * (attempt + 1))  # rolled back: nothing inserted
        return new

    def _select(self, unique: List[bytes]) -> Set[bytes]:
        q, mark = self._quoted, self._mark()
        found: Set[bytes] = set()
        with self._guard():
            with self._engine.connect() as conn:
                for rows in chunks(unique, self._rows):
                    if self.dialect == "postgresql":
                        result = self._sql(conn, f"SELECT fp FROM {q} WHERE fp = "
                                                 f"ANY({mark}::bytea[])", (list(rows),))
                    else:
                        result = self._sql(conn, f"SELECT fp FROM {q} WHERE fp IN ("
                                           + ",".join([mark] * len(rows)) + ")", tuple(rows))
                    found.update(bytes(r[0]) for r in result)
        return found

    def __len__(self) -> int:
        sa = self._sa
        with self._guard():
            with self._engine.connect() as conn:
                return int(conn.execute(sa.select(sa.func.count())
                                        .select_from(self._table)).scalar_one())

    def clear(self) -> None:
        """Remove every fingerprint from the table (and the receipts of
        add_many_once for it)."""
        with self._guard():
            with self._engine.begin() as conn:
                conn.execute(self._sa.delete(self._table))
                self._drop_receipts(conn)

    def _drop_receipts(self, conn: Any) -> None:
        if self._sa.inspect(conn).has_table(RECEIPTS_TABLE):
            r = self._engine.dialect.identifier_preparer.quote(RECEIPTS_TABLE)
            self._sql(conn, f"DELETE FROM {r} WHERE tbl = {self._mark()}", (self.table_name,))

    def drop(self) -> None:
        """Drop the table (tests and tools; the store is unusable after)."""
        with self._guard():
            with self._engine.begin() as conn:
                self._table.drop(conn, checkfirst=True)
                self._drop_receipts(conn)

    def close(self) -> None:
        """Release the connections.  Idempotent."""
        with self._lock:
            if not self._closed:
                self._engine.dispose()
                self._closed = True


def open_sql_url(url: str, *, table: Optional[str] = None, digest_size: int = 16) -> SQLStore:
    """The SQLStore of an SQLAlchemy URL (open_store's backend)."""
    if table is None:
        return SQLStore(url, digest_size=digest_size)
    return SQLStore(url, table=table, digest_size=digest_size)
