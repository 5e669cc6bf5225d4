"""Throughput of RecrawlState on SQLite: record_many + due over 1,000,000 URLs.

Two rounds over N URLs (10,000 hosts), in batches:

1. first crawl: ``record_many`` of every URL (all NEW), in batches;
2. re-crawl: ``due(now, 10,000, fill=True)`` then ``record_many`` of the
   URLs it returned (a third changed, a third unchanged, a third 304) until
   N re-fetches are recorded.

The peer is what the seed articles do, done as fast as plain sqlite3 allows:
one table url -> (ETag, Last-Modified, MD5), read the batch's rows, compare,
upsert them with executemany, in the same batches (no verdict history, no
rates, no schedule).  Both run in this process one after the other; the
rates are records per second of wall time and of this process's CPU time
(the machine may be shared: CPU time is what one core would do).

Each batch size (``--batch``; by default 10,000 then 50,000, since the issue
sets none) is a run of its own, on a new file.

Run:  PYTHONPATH=src python benchmarks/recrawl_throughput.py [--urls 1000000] [--batch 10000,50000]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import tempfile
import time

from crawldedup.recrawl import RecrawlState

#: The batch sizes run by default: the issue sets no size.
BATCHES = (10_000, 50_000)
#: The issue's target, records per second over both crawls.
TARGET = 50_000
T0 = 1_700_000_000.0


def url_of(i: int) -> str:
    return f"https://site{i % 10_000}.example.com/articles/{i}.html"


def fetch(i: int, round_: int, now: float) -> dict:
    kind = i % 3 if round_ else -1
    if kind == 0:
        return {"url": url_of(i), "status": 304, "headers": {}, "time": now}
    version = round_ if kind == 1 else 0
    return {"url": url_of(i), "status": 200, "time": now,
            "headers": {"ETag": f'"{i}-{version}"',
                        "Last-Modified": "Tue, 01 Dec 2026 00:00:00 GMT"},
            "digest": (i * 2 + version).to_bytes(16, "little")}


class Clock:
    """Wall and CPU seconds of the timed calls only (building the fetches,
    which a crawler does anyway, is not counted, for either side)."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def __enter__(self) -> "Clock":
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall += time.perf_counter() - self._wall
        self.cpu += time.process_time() - self._cpu


def run_crawldedup(path: str, n: int, batch: int) -> tuple:
    state = RecrawlState(path, canonical=False)
    first = Clock()
    for start in range(0, n, batch):
        fetches = [fetch(i, 0, T0) for i in range(start, min(n, start + batch))]
        with first:
            state.record_many(fetches)
    second = Clock()
    due = Clock()
    done = 0
    now = T0 + 86400
    while done < n:
        with second, due:
            urls = state.due(now, min(batch, n - done), fill=True)
        fetches = [fetch(int(url.rsplit("/", 1)[1].split(".")[0]), 1, now) for url in urls]
        with second:
            state.record_many(fetches)
        done += len(urls)
        now += 60
    state.close()
    opened = Clock()  # opening the full state: SQLite's integrity check
    with opened:
        RecrawlState(path, canonical=False).close()
    return (first.wall, first.cpu), (second.wall, second.cpu), due.wall, opened


def run_peer(path: str, n: int, batch: int) -> tuple:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE pages (url TEXT PRIMARY KEY, etag TEXT, lm TEXT, md5 BLOB)")
    times = []
    for round_ in (0, 1):
        clock = Clock()
        now = T0 + round_ * 86400
        for start in range(0, n, batch):
            fetches = [fetch(i, round_, now) for i in range(start, min(n, start + batch))]
            with clock:
                urls = [f["url"] for f in fetches]
                old = {}
                for s in range(0, len(urls), 500):
                    part = urls[s:s + 500]
                    old.update((row[0], row[1:]) for row in conn.execute(
                        "SELECT url, etag, lm, md5 FROM pages WHERE url IN ("
                        + ",".join("?" * len(part)) + ")", part))
                rows = []
                for f in fetches:
                    if f["status"] == 304:
                        continue
                    md5 = hashlib.md5(f["digest"]).digest()
                    prev = old.get(f["url"])
                    _changed = prev is None or prev[2] != md5
                    headers = f["headers"]
                    rows.append((f["url"], headers["ETag"], headers["Last-Modified"], md5))
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT OR REPLACE INTO pages VALUES (?, ?, ?, ?)", rows)
                conn.execute("COMMIT")
        times.append((clock.wall, clock.cpu))
    conn.close()
    return times[0], times[1]


def batch_sizes(text: str) -> list:
    """--batch: one size or several, comma-separated."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"batch sizes must be integers, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"batch sizes must be >= 1, got {text!r}")
    return sizes


def report(n: int, batch: int) -> None:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        ours = run_crawldedup(os.path.join(tmp, "recrawl.db"), n, batch)
        peer = run_peer(os.path.join(tmp, "peer.db"), n, batch)
    load_after = os.getloadavg()
    print(f"{n:,} URLs, batches of {batch:,}, SQLite (WAL, synchronous=NORMAL); load average "
          f"{load_before[0]:.2f} before, {load_after[0]:.2f} after, on {os.cpu_count()} "
          f"CPUs\n")
    print(f"{'':<44}{'records/s (wall)':>18}{'records/s (CPU)':>17}")
    rows = [("crawldedup first crawl (record_many)", ours[0]),
            ("crawldedup re-crawl (due + record_many)", ours[1]),
            ("seed-style sqlite3 table, first crawl", peer[0]),
            ("seed-style sqlite3 table, re-crawl", peer[1])]
    for name, (wall, cpu) in rows:
        print(f"{name:<44}{n / wall:>18,.0f}{n / cpu:>17,.0f}")
    total_wall = ours[0][0] + ours[1][0]
    total_cpu = ours[0][1] + ours[1][1]
    overall = 2 * n / total_wall
    print(f"\ncrawldedup overall: {overall:,.0f} records/s wall, "
          f"{2 * n / total_cpu:,.0f} records/s CPU; due() took {ours[2]:.1f} s of the "
          f"re-crawl")
    print(f"opening the state of {n:,} pages (its integrity check): {ours[3].wall:.2f} s "
          f"wall, {ours[3].cpu:.2f} s CPU")
    print(f"issue target, 50,000 records/s over both crawls (wall): "
          f"{'met' if overall >= TARGET else 'not met'} with batches of {batch:,}")
    print(f"ratio crawldedup / seed-style (re-crawl, CPU): {peer[1][1] / ours[1][1]:.2f}")
    print(f"\nreproduce: PYTHONPATH=src python benchmarks/recrawl_throughput.py --urls {n} "
          f"--batch {batch}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--batch", type=batch_sizes, default=list(BATCHES),
                        help="fetches a record_many call; several sizes comma-separated, "
                             "each run in turn (default "
                             + ",".join(str(b) for b in BATCHES) + ")")
    args = parser.parse_args()
    for batch in args.batch:
        report(args.urls, batch)


if __name__ == "__main__":
    main()
