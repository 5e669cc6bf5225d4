"""Store-only model of two SQLite row layouts for the re-crawl state.

N URLs (default 1,000,000) recorded, then re-recorded in batches of 10,000
(the batches of benchmarks/recrawl_throughput.py), with plain sqlite3 and the
same pragmas as SQLiteRecrawlStore (WAL, synchronous NORMAL, 256 MiB cache):

* "17 columns": one column a field (the layout of format 0 and 1 files,
  which the store converts when it opens them).
* "packed BLOB": url, host, etag, last_modified and due_at as columns, the 12
  numeric fields in one BLOB of fixed layout, packed and unpacked a batch at
  a time with a numpy structured array (the layout the store writes, without
  its checksum column).

The re-crawl reads the due URLs by the due index, their rows by URL, and
rewrites them by row id, as the store does.  No verdicts, rates or
schedule: this measures what the layout costs the store alone, in records
per second of this process's CPU time.

Run:  python benchmarks/recrawl_layouts.py [N]
"""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
import time
from typing import Dict, List, Tuple

import numpy as np

BATCH = 10_000
FIELDS = ("host", "etag", "last_modified", "content_length", "digest", "simhash",
          "first_seen", "last_fetched", "last_changed", "fetches", "changes", "t_changed",
          "t_unchanged", "rate", "interval", "due_at")
NUMERIC = np.dtype([("content_length", "<i8"), ("digest", "S16"), ("simhash", "<u8"),
                    ("first_seen", "<f8"), ("last_fetched", "<f8"), ("last_changed", "<f8"),
                    ("fetches", "<i8"), ("changes", "<i8"), ("t_changed", "<f8"),
                    ("t_unchanged", "<f8"), ("rate", "<f8"), ("interval", "<f8")])
LM = "Tue, 01 Dec 2026 00:00:00 GMT"


def url_of(i: int) -> str:
    return f"https://site{i % 10_000}.example.com/articles/{i}.html"


def connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "cache_size=-262144",
                   "wal_autocheckpoint=16384"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


def due_urls(conn: sqlite3.Connection) -> List[str]:
    sql = "SELECT url FROM pages WHERE due_at <= ? ORDER BY due_at LIMIT ?"
    return [u for (u,) in conn.execute(sql, (2e9, BATCH))]


def rows_of(conn: sqlite3.Connection, columns: str, urls: List[str]) -> Dict[str, tuple]:
    got = {}
    for s in range(0, len(urls), 500):
        part = urls[s:s + 500]
        sql = f"SELECT id, url, {columns} FROM pages WHERE url IN ({','.join('?' * len(part))})"
        for row in conn.execute(sql, part):
            got[row[1]] = row
    return got


def write(conn: sqlite3.Connection, sql: str, rows: list) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(sql, rows)
    conn.execute("COMMIT")


def wide(path: str, n: int) -> Tuple[float, float]:
    conn = connect(path)
    kinds = {"host": "TEXT", "etag": "TEXT", "last_modified": "TEXT", "digest": "BLOB",
             "content_length": "INTEGER", "simhash": "INTEGER", "fetches": "INTEGER",
             "changes": "INTEGER"}
    columns = ", ".join(f"{f} {kinds.get(f, 'REAL')}" for f in FIELDS)
    conn.execute(f"CREATE TABLE pages (id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE, "
                 f"{columns})")
    conn.execute("CREATE INDEX pages_due ON pages (due_at)")
    insert = (f"INSERT INTO pages (url, {', '.join(FIELDS)}) VALUES ("
              + ",".join("?" * (len(FIELDS) + 1)) + ")")
    update = ("UPDATE pages SET " + ", ".join(f"{f} = ?" for f in FIELDS)
              + " WHERE id = ? AND url = ?")
    cpu = time.process_time()
    for s in range(0, n, BATCH):
        write(conn, insert, [
            (url_of(i), f"site{i % 10_000}", f'"{i}-0"', LM, 18_000, i.to_bytes(16, "little"),
             i, 1e9, 1e9, 1e9, 1, 0, 0.0, 0.0, 1e-6, 86_400.0, 1e9 + 86_400 + i % 1000)
            for i in range(s, min(n, s + BATCH))])
    first = time.process_time() - cpu
    cpu = time.process_time()
    done = 0
    while done < n:
        urls = due_urls(conn)
        got = rows_of(conn, ", ".join(FIELDS), urls)
        out = []
        for u in urls:
            r = got[u]
            out.append((*r[2:9], 2e9, r[10], r[11] + 1, *r[12:17], 3e9, r[0], u))
        out.sort(key=lambda row: row[-2])
        write(conn, update, out)
        done += len(urls)
    conn.close()
    return first, time.process_time() - cpu


def packed(path: str, n: int) -> Tuple[float, float]:
    conn = connect(path)
    conn.execute("CREATE TABLE pages (id INTEGER PRIMARY KEY, url TEXT NOT NULL UNIQUE, "
                 "host TEXT, etag TEXT, last_modified TEXT, due_at REAL, data BLOB)")
    conn.execute("CREATE INDEX pages_due ON pages (due_at)")
    insert = ("INSERT INTO pages (url, host, etag, last_modified, due_at, data) "
              "VALUES (?, ?, ?, ?, ?, ?)")
    update = ("UPDATE pages SET host = ?, etag = ?, last_modified = ?, due_at = ?, data = ? "
              "WHERE id = ? AND url = ?")
    size = NUMERIC.itemsize
    cpu = time.process_time()
    for s in range(0, n, BATCH):
        ids = np.arange(s, min(n, s + BATCH))
        a = np.zeros(len(ids), NUMERIC)
        a["content_length"] = 18_000
        a["digest"] = [int(i).to_bytes(16, "little") for i in ids]
        a["simhash"] = ids
        a["first_seen"] = a["last_fetched"] = a["last_changed"] = 1e9
        a["fetches"] = 1
        a["rate"] = 1e-6
        a["interval"] = 86_400.0
        raw = a.tobytes()
        write(conn, insert, [
            (url_of(i), f"site{i % 10_000}", f'"{i}-0"', LM, 1e9 + 86_400 + i % 1000,
             raw[j * size:(j + 1) * size]) for j, i in enumerate(ids.tolist())])
    first = time.process_time() - cpu
    cpu = time.process_time()
    done = 0
    while done < n:
        urls = due_urls(conn)
        got = rows_of(conn, "host, etag, last_modified, due_at, data", urls)
        rows = [got[u] for u in urls]
        a = np.frombuffer(b"".join(r[6] for r in rows), NUMERIC).copy()
        a["fetches"] += 1
        a["last_fetched"] = 2e9
        raw = a.tobytes()
        out = [(r[2], r[3], r[4], 3e9, raw[j * size:(j + 1) * size], r[0], r[1])
               for j, r in enumerate(rows)]
        out.sort(key=lambda row: row[-2])
        write(conn, update, out)
        done += len(urls)
    conn.close()
    return first, time.process_time() - cpu


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    print(f"{n:,} URLs, batches of {BATCH:,}, load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        for name, run in (("17 columns", wide), ("packed BLOB", packed)):
            first, again = run(os.path.join(folder, name.replace(" ", "-") + ".db"), n)
            print(f"{name:<12} first crawl {n / first:>9,.0f} records/s of CPU, re-crawl "
                  f"{n / again:>9,.0f}, both {2 * n / (first + again):>9,.0f}", flush=True)


if __name__ == "__main__":
    main()
