#!/usr/bin/env python3
"""Exact fingerprints in Redis: memory per digest and add_many speed of
crawldedup's RedisStore, side by side, in one run, on one server.

Rows:

* ``RedisStore (buckets)`` -- the store as a new one is made: digests cut
  by a prefix into small Redis hashes kept as listpacks (capacity = N).
* ``RedisStore (set layout)`` -- the layout of crawldedup 0.1.0: one Redis
  set of raw digests, tested and added by a script per 4,096 digests (a
  store whose metadata key names the ``set`` layout, which is how this
  release opens a store 0.1.0 wrote).
* ``pipelined SADD`` -- ``SADD key digest`` per digest through redis-py,
  1,000 a pipeline: what crawlers do without crawldedup.

Input: N distinct seeded-random 16-byte digests, added in batches of
100,000 of which 30% repeat digests added before (or earlier in the same
batch), shuffled; every row gets the same batches.  Each row is checked to
report exactly N digests new.  Then ``contains_many`` of the N digests, in
batches of 100,000 (``SMISMEMBER`` 1,000 a command, pipelined, for SADD).

Memory: the sum of ``MEMORY USAGE key SAMPLES 0`` over the row's keys, and
the growth of ``INFO memory`` ``used_memory`` over the row (on a server of
its own, flushed before each row), each divided by N.  Speed: digests
submitted per second of wall clock (repeats included), and the server's
CPU per digest (``INFO cpu``, user + system).

Usage::

    python benchmarks/exact_redis.py                 # N = 1,000,000, own redis-server
    python benchmarks/exact_redis.py --n 200000
    python benchmarks/exact_redis.py --redis redis://127.0.0.1:6379/0   # no FLUSHALL there

Writes exact_redis.json to --out (default benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
import redis

import crawldedup
from crawldedup.redis import RedisStore

BATCH = 100_000
REPEATS = 0.3
SADD_PIPELINE = 1_000


def start_server() -> Tuple[Any, str, str]:
    if shutil.which("redis-server") is None:
        sys.exit("redis-server is not installed; pass --redis URL")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    directory = tempfile.mkdtemp(prefix="crawldedup-bench-")
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", directory],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(500):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.02)
    client.close()
    return proc, f"redis://127.0.0.1:{port}/0", directory


def batches(n: int, seed: int) -> Tuple[np.ndarray, List[np.ndarray]]:
    """(the n distinct digests, the batches): each batch BATCH digests, 30%
    of them repeats of digests already given, shuffled."""
    rng = np.random.default_rng(seed)
    distinct = np.unique(rng.integers(0, 256, size=(n + n // 100 + 16, 16), dtype=np.uint8),
                         axis=0)
    distinct = distinct[rng.permutation(len(distinct))[:n]]  # uniform: not the n smallest
    digests = np.ascontiguousarray(distinct).view("S16").ravel()
    out: List[np.ndarray] = []
    fresh_per_batch = int(BATCH * (1 - REPEATS))
    given = 0
    while given < n:
        fresh = digests[given:given + fresh_per_batch]
        given += len(fresh)
        repeats = int(round(len(fresh) * REPEATS / (1 - REPEATS)))
        pool = digests[:given]
        batch = np.concatenate([fresh, pool[rng.integers(0, len(pool), size=repeats)]])
        rng.shuffle(batch)
        out.append(batch)
    return digests, out


def sadd_add(client: redis.Redis, key: str, batch: np.ndarray) -> np.ndarray:
    flags = []
    items = batch.tolist()
    for start in range(0, len(items), SADD_PIPELINE):
        pipe = client.pipeline(transaction=False)
        for d in items[start:start + SADD_PIPELINE]:
            pipe.sadd(key, d)
        flags.extend(pipe.execute())
    return np.asarray(flags, dtype=np.bool_)


def sadd_contains(client: redis.Redis, key: str, batch: np.ndarray) -> np.ndarray:
    items = batch.tolist()
    pipe = client.pipeline(transaction=False)
    for start in range(0, len(items), SADD_PIPELINE):
        pipe.smismember(key, items[start:start + SADD_PIPELINE])
    return np.concatenate([np.asarray(r, dtype=np.bool_) for r in pipe.execute()])


def server_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def memory_usage(client: redis.Redis, name: str) -> Tuple[int, int]:
    """(keys, sum of MEMORY USAGE) of the keys whose name holds ``name``."""
    keys = list(client.scan_iter(match=f"*{name}*", count=10_000))
    total = 0
    for start in range(0, len(keys), 10_000):
        pipe = client.pipeline(transaction=False)
        for key in keys[start:start + 10_000]:
            pipe.memory_usage(key, samples=0)
        total += sum(int(v or 0) for v in pipe.execute())
    return len(keys), total


def run_row(client: redis.Redis, own: bool, label: str, name: str, n: int,
            digests: np.ndarray, work: List[np.ndarray],
            add: Callable[[np.ndarray], np.ndarray],
            contains: Callable[[np.ndarray], np.ndarray]) -> Dict[str, Any]:
    submitted = sum(len(b) for b in work)
    before = int(client.info("memory")["used_memory"])
    cpu0, t0 = server_cpu(client), time.perf_counter()
    new = 0
    for batch in work:
        new += int(add(batch).sum())
    add_s, add_cpu = time.perf_counter() - t0, server_cpu(client) - cpu0
    if new != n:
        raise AssertionError(f"{label}: {new:,} digests reported new, not {n:,}")
    after = int(client.info("memory")["used_memory"])
    keys, usage = memory_usage(client, name)
    cpu0, t0 = server_cpu(client), time.perf_counter()
    found = 0
    for start in range(0, n, BATCH):
        found += int(contains(digests[start:start + BATCH]).sum())
    contains_s, contains_cpu = time.perf_counter() - t0, server_cpu(client) - cpu0
    if found != n:
        raise AssertionError(f"{label}: {found:,} of {n:,} digests found")
    row = {"row": label, "n": n, "submitted": submitted, "keys": keys,
           "memory_usage_per_digest": usage / n, "used_memory_per_digest": (after - before) / n,
           "add_per_s": submitted / add_s, "add_server_us": add_cpu / submitted * 1e6,
           "contains_per_s": n / contains_s, "contains_server_us": contains_cpu / n * 1e6}
    print(f"{label:26s} {row['memory_usage_per_digest']:8.1f} {row['used_memory_per_digest']:8.1f}"
          f" {row['add_per_s']:12,.0f} {row['add_server_us']:7.2f}"
          f" {row['contains_per_s']:12,.0f} {row['contains_server_us']:7.2f} {keys:>8,}",
          flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="distinct digests")
    parser.add_argument("--redis", help="use this server (default: start a redis-server)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = parser.parse_args()
    proc = None
    directory = None
    url = args.redis
    if url is None:
        proc, url, directory = start_server()
    client = redis.Redis.from_url(url)
    own = args.redis is None
    try:
        digests, work = batches(args.n, args.seed)
        print(f"{args.n:,} distinct digests in {len(work)} batches of up to {BATCH:,} "
              f"({REPEATS:.0%} repeats); Redis {client.info('server')['redis_version']}")
        print(f"{'row':26s} {'MU B/d':>8s} {'used B/d':>8s} {'add d/s':>12s} {'srv us':>7s}"
              f" {'contains d/s':>12s} {'srv us':>7s} {'keys':>8s}")
        rows = []
        prefix = f"bench:{uuid.uuid4().hex[:8]}"

        def fresh() -> None:
            if own:
                client.flushall()
            time.sleep(0.2)

        fresh()
        name = f"{prefix}:buckets"
        with RedisStore(url, name, capacity=args.n) as store:
            rows.append(run_row(client, own, "RedisStore (buckets)", name, args.n, digests,
                                work, store.add_many, store.contains_many))
            rows[-1]["buckets"] = store._logic.buckets
            store.clear()
        client.delete(f"{name}:meta")
        fresh()
        name = f"{prefix}:set"
        client.set(f"{name}:meta", json.dumps({
            "format": 1, "kind": "store", "layout": "set", "digest_size": 16, "window": None,
            "windows": None}))
        with RedisStore(url, name) as store:
            assert store.layout == "set"
            rows.append(run_row(client, own, "RedisStore (set layout)", name, args.n, digests,
                                work, store.add_many, store.contains_many))
            store.clear()
        client.delete(f"{name}:meta")
        fresh()
        name = f"{prefix}:sadd"
        rows.append(run_row(client, own, "pipelined SADD", name, args.n, digests, work,
                            lambda b: sadd_add(client, name, b),
                            lambda b: sadd_contains(client, name, b)))
        client.delete(name)
        result = {
            "date": time.strftime("%Y-%m-%d"), "n": args.n, "batch": BATCH, "repeats": REPEATS,
            "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "redis_py": redis.__version__,
            "redis_server": client.info("server")["redis_version"],
            "crawldedup": crawldedup.__version__,
            "command": "python benchmarks/exact_redis.py " + " ".join(sys.argv[1:]),
            "rows": rows}
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "exact_redis.json")
        with open(path, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {path}")
    finally:
        client.close()
        if proc is not None:
            proc.terminate()
            proc.wait()
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
