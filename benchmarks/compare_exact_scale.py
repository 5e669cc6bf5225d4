"""Exact deduplication beyond RAM: DiskStore against SQLite, RocksDB and LMDB.

The workload of issue 28: distinct 16-byte digests (seeded, uniform: MD5s
of URLs look so), added in batches of 100,000, each batch 30% repeats of
digests added before.  Each engine runs in a process of its own, one after
the other, on the same digests and in a folder of its own, and reports:

* add_many digests/s over the whole run and over its last tenth;
* the process's peak anonymous memory (RssAnon, sampled every 2 ms by the
  parent process: the page cache of mapped files is not counted, as the OS
  may drop it), and its anonymous memory before the engine opened (Python,
  numpy and the workload's own arrays: not the engine's);
* bytes on disk per stored digest (allocated blocks) and bytes written per
  digest (``/proc/self/io`` write_bytes: the write amplification);
* contains_many of 1,000,000 present and 1,000,000 absent digests, per s;
* single ``add`` latency, p50 and p99 of 20,000 calls (half of them new),
  first with the files in the page cache, then after the engine is closed,
  its files dropped from the page cache (``posix_fadvise(DONTNEED)``) and
  the engine opened again; the time that opening takes is reported too (a
  DiskStore reads every run when it opens, to check its checksums, so its
  runs are in the page cache after that unless memory is short).

    python benchmarks/compare_exact_scale.py --n 10000000
    python benchmarks/compare_exact_scale.py --n 100000000 --engines disk,sqlite,rocksdict,lmdb
    python benchmarks/compare_exact_scale.py --n 1000000000 --engines disk

The peers: ``crawldedup.SQLiteStore``; RocksDB through ``rocksdict``
(``multi_get`` of the batch's distinct digests, then a ``WriteBatch`` of the
absent ones, with a Bloom filter of 10 bits a key, a 128 MiB block cache
for data blocks, index and filter blocks in memory, and 64 MiB write
buffers, as its tuning guide suggests); LMDB through
``lmdb`` (``put(overwrite=False)`` a digest, one write transaction a batch,
``writemap``).  Writes JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
BATCH = 100_000
REPEATS = 0.3


def batches(total: int, seed: int) -> Iterator[np.ndarray]:
    """Batches of BATCH digests adding up to ``total`` distinct ones, 30%
    of each batch repeats of the batch before (the first batch repeats
    its own)."""
    rng = np.random.default_rng(seed)
    fresh_n = int(BATCH * (1 - REPEATS))
    made = 0
    previous = None
    while made < total:
        n = min(fresh_n, total - made)
        fresh = rng.integers(0, 256, size=(n, 16), dtype=np.uint8).view("S16").ravel()
        pool = fresh if previous is None else previous
        reps = pool[rng.integers(0, len(pool), int(n * REPEATS / (1 - REPEATS)))]
        batch = np.concatenate([fresh, reps])
        rng.shuffle(batch)
        previous = fresh
        made += n
        yield batch


def rss_anon() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def written() -> int:
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def drop_from_cache(path: str) -> None:
    """Ask the OS to drop the page cache of every file under path (the
    files are closed and written back, so their pages are clean)."""
    os.sync()
    for d, _, files in os.walk(path):
        for f in files:
            fd = os.open(os.path.join(d, f), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def single_adds(add: Callable[[bytes], bool], probes: np.ndarray) -> Tuple[float, float]:
    """p50 and p99 of one add call, in microseconds."""
    got_times = []
    # bytes(row), not tolist(): numpy's S16 items drop trailing NULs
    for key in [bytes(row) for row in probes.view(np.uint8).reshape(-1, 16)]:
        t = time.perf_counter()
        add(key)
        got_times.append(time.perf_counter() - t)
    us = np.array(got_times) * 1e6
    return float(np.percentile(us, 50)), float(np.percentile(us, 99))


def disk_bytes(path: str) -> int:
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512
               for d, _, files in os.walk(path) for f in files)


# ------------------------------------------------------------------ engines

Engine = Tuple[Callable[[np.ndarray], int], Callable[[np.ndarray], np.ndarray],
               Callable[[bytes], bool], Callable[[], None]]


def open_disk(path: str, memory: int) -> Engine:
    from crawldedup.exact.disk import DiskStore
    store = DiskStore(path, memory=memory)
    return (lambda b: int(store.add_many(b).sum()), store.contains_many, store.add,
            store.close)


def open_sqlite(path: str, memory: int) -> Engine:
    from crawldedup import SQLiteStore
    os.makedirs(path, exist_ok=True)
    store = SQLiteStore(os.path.join(path, "store.sqlite"))
    return (lambda b: int(store.add_many(b).sum()), store.contains_many, store.add,
            store.close)


def open_rocksdict(path: str, memory: int) -> Engine:
    from rocksdict import BlockBasedOptions, Cache, Options, Rdict, WriteBatch
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    table = BlockBasedOptions()
    table.set_bloom_filter(10, False)
    table.set_block_cache(Cache(128 << 20))
    # Index and filter blocks stay in the table readers' memory (RocksDB's
    # default): held in a 128 MiB block cache, the filters of 100 million
    # keys (125 MB) would be evicted and read again by every get.
    table.set_cache_index_and_filter_blocks(False)
    opts.set_block_based_table_factory(table)
    opts.set_write_buffer_size(64 << 20)
    opts.set_max_background_jobs(2)
    opts.increase_parallelism(2)
    db = Rdict(path, opts)

    def add_many(batch: np.ndarray) -> int:
        keys = np.unique(batch).tolist()
        wb = WriteBatch(raw_mode=True)
        new = 0
        for key, value in zip(keys, db.get(keys)):
            if value is None:
                wb.put(key, b"")
                new += 1
        db.write(wb)
        return new

    def contains_many(batch: np.ndarray) -> np.ndarray:
        return np.array([v is not None for v in db.get(batch.tolist())], dtype=np.bool_)

    def add(key: bytes) -> bool:
        if db.get(key) is not None:
            return False
        db.put(key, b"")
        return True
    return add_many, contains_many, add, db.close


def open_lmdb(path: str, memory: int) -> Engine:
    import lmdb
    # Like a DiskStore's add_many, a commit is handed to the OS, not fsynced:
    # durable at env.sync() (a DiskStore's flush); kill -9 loses nothing.
    env = lmdb.open(path, map_size=1 << 40, writemap=True, sync=False, metasync=False)

    def add_many(batch: np.ndarray) -> int:
        new = 0
        with env.begin(write=True) as txn:
            for key in np.unique(batch).tolist():
                new += bool(txn.put(key, b"", overwrite=False))
        return new

    def contains_many(batch: np.ndarray) -> np.ndarray:
        with env.begin() as txn:
            return np.array([txn.get(k) is not None for k in batch.tolist()], dtype=np.bool_)

    def add(key: bytes) -> bool:
        with env.begin(write=True) as txn:
            return bool(txn.put(key, b"", overwrite=False))
    return add_many, contains_many, add, env.close


ENGINES = {"disk": open_disk, "sqlite": open_sqlite, "rocksdict": open_rocksdict,
           "lmdb": open_lmdb}


def versions() -> Dict[str, str]:
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for name in ("crawldedup", "rocksdict", "lmdb"):
        try:
            module = __import__(name)
            out[name] = str(getattr(module, "__version__", "?"))
        except ImportError:
            pass
    import sqlite3
    out["sqlite"] = sqlite3.sqlite_version
    return out


def run_engine(name: str, path: str, n: int, memory: int, seed: int) -> Dict[str, Any]:
    """One engine's figures (run in a process of its own)."""
    shutil.rmtree(path, ignore_errors=True)
    before = rss_anon()
    add_many, contains_many, add, close = ENGINES[name](path, memory)
    start_written = written()
    times: List[float] = []
    stored = 0
    rng = np.random.default_rng(seed + 1)
    sample: List[np.ndarray] = []
    t0 = time.perf_counter()
    total = 0
    for batch in batches(n, seed):
        t = time.perf_counter()
        stored += add_many(batch)
        times.append(time.perf_counter() - t)
        total += len(batch)
        if not sample or rng.random() < 0.05:
            sample.append(batch[rng.integers(0, len(batch), 2000)])
    elapsed = time.perf_counter() - t0
    tenth = max(1, len(times) // 10)
    present = np.concatenate(sample)[:1_000_000]
    absent = np.random.default_rng(seed + 2).integers(
        0, 256, (len(present), 16), dtype=np.uint8).view("S16").ravel()
    lookups = {}
    for label, keys in (("present", present), ("absent", absent)):
        t = time.perf_counter()
        for i in range(0, len(keys), BATCH):
            got = contains_many(keys[i:i + BATCH])
            assert bool(got.all()) if label == "present" else not bool(got.any()), label
        lookups[f"contains_many {label} /s"] = len(keys) / (time.perf_counter() - t)
    latency: Dict[str, float] = {}
    probe_rng = np.random.default_rng(seed + 3)
    for n, label in enumerate(("cached", "dropped")):
        # half stored before, half new
        probes = np.concatenate([present[n * 10_000:(n + 1) * 10_000], probe_rng.integers(
            0, 256, (10_000, 16), dtype=np.uint8).view("S16").ravel()])
        probe_rng.shuffle(probes)
        if label == "dropped":
            close()
            del add_many, contains_many, add, close  # the closed engine's memory goes
            drop_from_cache(path)
            t = time.perf_counter()
            add_many, contains_many, add, close = ENGINES[name](path, memory)
            latency["open s (dropped)"] = time.perf_counter() - t
        p50, p99 = single_adds(add, probes)
        latency[f"add p50 us ({label})"] = p50
        latency[f"add p99 us ({label})"] = p99
    close()
    written_total = written() - start_written
    return {
        "engine": name, "digests added": total, "stored": stored,
        "add_many /s": total / elapsed,
        "add_many /s, last tenth": tenth * BATCH / sum(times[-tenth:]),
        "RssAnon before MiB": before / 2**20,
        "disk bytes / digest": disk_bytes(path) / max(stored, 1),
        "written bytes / digest": written_total / max(stored, 1),
        **lookups, **latency,
    }


def run_sampled(command: List[str]) -> Tuple[int, str, str, int]:
    """Run command; its return code, output, errors and peak RssAnon, read
    from /proc every 2 ms (a sample after each batch would miss what a call
    holds for a moment)."""
    import tempfile
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        status = f"/proc/{proc.pid}/status"
        peak = 0
        while proc.poll() is None:
            try:
                with open(status) as f:
                    for line in f:
                        if line.startswith("RssAnon:"):
                            peak = max(peak, int(line.split()[1]) * 1024)
            except OSError:
                pass
            time.sleep(0.002)
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(), err.read(), peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000_000, help="distinct digests")
    ap.add_argument("--engines", default="disk,sqlite,rocksdict,lmdb")
    ap.add_argument("--memory", type=int, default=256 << 20, help="DiskStore's budget")
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--dir", default=str(HERE / "results" / "exact-scale"),
                    help="where the stores are made (removed afterwards)")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        path = os.path.join(args.dir, args.one)
        result = run_engine(args.one, path, args.n, args.memory, args.seed)
        shutil.rmtree(path, ignore_errors=True)
        print(json.dumps(result))
        return
    results = []
    for name in args.engines.split(","):
        code, out, err, peak = run_sampled([
            sys.executable, __file__, "--one", name, "--n", str(args.n), "--memory",
            str(args.memory), "--seed", str(args.seed), "--dir", args.dir])
        if code:
            print(f"{name}: failed\n{err}", file=sys.stderr)
            continue
        results.append(json.loads(out.strip().splitlines()[-1]))
        results[-1]["peak RssAnon MiB"] = peak / 2**20
        print(json.dumps(results[-1]), flush=True)
    keys = [k for k in results[0] if k != "engine"] if results else []
    print(f"\n{args.n:,} distinct digests, batches of {BATCH:,} with {REPEATS:.0%} repeats\n")
    print("| | " + " | ".join(r["engine"] for r in results) + " |")
    print("|---|" + "---:|" * len(results))
    for key in keys:
        cells = []
        for r in results:
            value = r.get(key)
            cells.append("" if value is None else
                         f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}")
        print(f"| {key} | " + " | ".join(cells) + " |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare_exact_scale.json").write_text(json.dumps(
        {"n": args.n, "machine": platform.machine(), "cpus": os.cpu_count(),
         "versions": versions(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
