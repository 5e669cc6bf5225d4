#!/usr/bin/env python3
"""crawldedup's Redis classes side by side with what crawlers use today, on
the same URLs, in one run, against one Redis server.

Peers (small reimplementations of their published algorithms, written for
this benchmark; none of their code is used):

* seed recipe -- the seed articles' Redis Bloom filter: k salted MD5s of
  the URL, each ``% (2**8 * 2**20 * 2 * 3)``; ``is_exists`` sends one GETBIT
  per bit (a round trip each, stopping at the first 0), ``save`` one SETBIT
  per bit.  Check-then-insert: not atomic.  Also "pipelined": the k GETBITs
  in one pipeline, then the k SETBITs in another.
* scrapy-redis-bloomfilter -- seeds 5, 7, 11, 13, 31, 37, 61, m = 2**30,
  ``h = h + seed * h + ord(c)`` over the characters, ``& (m - 1)``; a GETBIT
  round trip per bit to test and a SETBIT per bit to insert.  On raw URLs the
  hash's low bits depend on the last few characters only (``1 + seed`` is
  even), which the "false seen" column shows.
* dupfilter Lua Bloom -- the URL's MD5 hex, six SimpleHash offsets (seeds
  1..6) masked to 28 bits (dupfilter's default is 32, a 512 MB string; 28
  bits cost the server the same per bit), one EVAL per batch of 1,000 URLs
  whose script GETBITs each offset and SETBITs the unset ones: batched and
  atomic.
* pipelined SADD -- ``SADD key md5`` per URL, 1,000 per pipeline.
* dupfilter set -- one EVAL per 1,000 URLs: SISMEMBER then SADD per URL.

URLs: benchmarks/url_corpus.py (realistic crawler URLs, distinct), 1,000,000
for crawldedup and a prefix of them for the slower peers; 200,000 more,
never added, measure the false-positive rate.

crawldedup: ``RedisBloomFilter.add_many`` / ``contains_many`` (standard
layout, k = 7, one shard; the default blocked layout, k = 6, 4 shards; and
the blocked layout at 0.6%, where it takes k = 7, as the target states),
``RedisStore.add_many`` / ``contains_many`` of MD5 digests (the bucket
layout, created with a capacity of the digests it gets),
``RedisSimhashIndex.add_many`` / ``query_many`` of 64-bit fingerprints.
Design alternatives measured on crawldedup's own positions: the same bits
set by a Lua script calling SETBIT per bit, and BITFIELD commands packed by
redis-py instead of by the core.

For every row: keys per second (wall clock), the client's CPU per key, and
the server's CPU per key -- both the time INFO commandstats gives its
commands and the server process's whole CPU (INFO cpu: reading and parsing
the commands too).  Wall-clock rates on a loaded machine mostly measure the
machine; the CPU columns do not.

Usage::

    python benchmarks/compare_redis.py              # starts its own redis-server
    python benchmarks/compare_redis.py --quick      # 10x fewer keys
    python benchmarks/compare_redis.py --redis redis://127.0.0.1:6379/0

Writes compare_redis.md and compare_redis.json to --out (default
benchmarks/results/).
"""

from __future__ import annotations

import argparse
import hashlib
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
from typing import Any, Callable, Dict, List

import numpy as np
import redis

from crawldedup.redis import RedisBloomFilter, RedisSimhashIndex, RedisStore

# ----------------------------------------------------------------- server

def start_server() -> Any:
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


class Meter:
    """Wall time, client CPU, server CPU (commandstats and the process)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def _server(self) -> Any:
        stats = self.client.info("commandstats")
        # commands that scripts call are counted again under their own
        # names: with scripts, count the scripts only
        scripts = [v["usec"] for k, v in stats.items() if k in ("cmdstat_eval",
                                                                  "cmdstat_evalsha")]
        usec = sum(scripts) if scripts else sum(v["usec"] for v in stats.values())
        cpu = self.client.info("cpu")
        return usec / 1e6, cpu["used_cpu_user"] + cpu["used_cpu_sys"]

    def run(self, fn: Callable[[], Any]) -> Dict[str, float]:
        self.client.config_resetstat()
        s0, p0 = self._server()
        c0, w0 = time.process_time(), time.perf_counter()
        result = fn()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        s1, p1 = self._server()
        return {"wall": wall, "client_cpu": cpu, "server_cmd": s1 - s0,
                "server_cpu": p1 - p0, "result": result}


# ------------------------------------------------------------------ peers

SEED_SALTS = [b"1", b"2", b"3", b"4"]
SEED_M = 2 ** 8 * 2 ** 20 * 2 * 3


def seed_offsets(url: bytes) -> List[int]:
    return [int(hashlib.md5(url + salt).hexdigest(), 16) % SEED_M for salt in SEED_SALTS]


def seed_recipe(client: redis.Redis, key: str, urls: List[bytes], pipelined: bool) -> List[bool]:
    new = []
    for url in urls:
        offsets = seed_offsets(url)
        if pipelined:
            pipe = client.pipeline(transaction=False)
            for o in offsets:
                pipe.getbit(key, o)
            exists = all(pipe.execute())
        else:
            exists = True
            for o in offsets:
                if not client.getbit(key, o):
                    exists = False
                    break
        if not exists:
            if pipelined:
                pipe = client.pipeline(transaction=False)
                for o in offsets:
                    pipe.setbit(key, o, 1)
                pipe.execute()
            else:
                for o in offsets:
                    client.setbit(key, o, 1)
        new.append(not exists)
    return new


SRB_SEEDS = [5, 7, 11, 13, 31, 37, 61]
SRB_M = 1 << 30


def srb_offsets(value: str) -> List[int]:
    out = []
    for seed in SRB_SEEDS:
        h = 0
        for c in value:
            h += seed * h + ord(c)
        out.append((SRB_M - 1) & h)
    return out


def scrapy_redis_bloomfilter(client: redis.Redis, key: str, urls: List[bytes]) -> List[bool]:
    new = []
    for url in urls:
        offsets = srb_offsets(url.decode())
        exists = True
        for o in offsets:
            exists = exists and bool(client.getbit(key + "0", o))
        if not exists:
            for o in offsets:
                client.setbit(key + "0", o, 1)
        new.append(not exists)
    return new


DUP_LUA = """
local r = {}
for i, key in ipairs(KEYS) do
  local seen = 1
  for o in string.gmatch(ARGV[i], "[^,]+") do
    if redis.call('GETBIT', key, o) == 0 then
      seen = 0
      redis.call('SETBIT', key, o, 1)
    end
  end
  r[i] = seen
end
return r
"""
DUP_MASK = (1 << 28) - 1


def dup_offsets(value: str) -> str:
    out = []
    for seed in range(1, 7):
        h = 0
        for c in value:
            h += seed * h + ord(c)
        out.append(str(DUP_MASK & h))
    return ",".join(out)


def dupfilter_bloom(client: redis.Redis, key: str, urls: List[bytes]) -> List[bool]:
    script = client.register_script(DUP_LUA)
    new: List[bool] = []
    for start in range(0, len(urls), 1000):
        chunk = urls[start:start + 1000]
        values = [hashlib.md5(u).hexdigest() for u in chunk]
        seen = script(keys=[key + "0"] * len(values), args=[dup_offsets(v) for v in values])
        new.extend(not s for s in seen)
    return new


def pipelined_sadd(client: redis.Redis, key: str, urls: List[bytes]) -> List[bool]:
    new: List[bool] = []
    for start in range(0, len(urls), 1000):
        pipe = client.pipeline(transaction=False)
        for u in urls[start:start + 1000]:
            pipe.sadd(key, hashlib.md5(u).digest())
        new.extend(bool(r) for r in pipe.execute())
    return new


DUP_SET_LUA = """
local r = {}
for i, key in ipairs(KEYS) do
  local e = redis.call('SISMEMBER', key, ARGV[i])
  if e == 0 then redis.call('SADD', key, ARGV[i]) end
  r[i] = e
end
return r
"""


def dupfilter_set(client: redis.Redis, key: str, urls: List[bytes]) -> List[bool]:
    script = client.register_script(DUP_SET_LUA)
    new: List[bool] = []
    for start in range(0, len(urls), 1000):
        values = [hashlib.md5(u).hexdigest() for u in urls[start:start + 1000]]
        new.extend(not s for s in script(keys=[key + "0"] * len(values), args=values))
    return new


# ------------------------------------------------- design alternatives

LUA_SETBIT = """
local k = tonumber(ARGV[1])
local r = {}
local n = (#ARGV - 1) / k
for i = 0, n - 1 do
  local new = 0
  for j = 1, k do
    if redis.call('SETBIT', KEYS[1], ARGV[1 + i * k + j], 1) == 0 then new = 1 end
  end
  r[i + 1] = new
end
return r
"""


def lua_setbit_design(client: redis.Redis, key: str, urls: List[bytes], m: int, k: int
                      ) -> List[bool]:
    from crawldedup import hash_indices
    script = client.register_script(LUA_SETBIT)
    new: List[bool] = []
    for start in range(0, len(urls), 1000):
        args: List[Any] = [k]
        for u in urls[start:start + 1000]:
            args.extend(hash_indices(u, k, m))
        new.extend(bool(x) for x in script(keys=[key], args=args))
    return new


def redis_py_bitfield_design(client: redis.Redis, key: str, urls: List[bytes], m: int, k: int
                             ) -> List[bool]:
    from crawldedup import hash_indices
    new: List[bool] = []
    for start in range(0, len(urls), 1000):
        args: List[Any] = []
        for u in urls[start:start + 1000]:
            for p in hash_indices(u, k, m):
                args += ["SET", "u1", p, 1]
        bits = np.array(client.execute_command("BITFIELD", key, *args), dtype=np.uint8)
        new.extend((bits.reshape(-1, k).min(axis=1) == 0).tolist())
    return new


# ------------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis", help="use this server (default: start a redis-server)")
    parser.add_argument("--quick", action="store_true", help="10x fewer keys")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    n_main = 1_000_000 // scale
    sizes = {"seed recipe": 5_000 // scale, "seed recipe, pipelined": 10_000 // scale,
             "scrapy-redis-bloomfilter": 5_000 // scale, "dupfilter Lua Bloom": 50_000 // scale,
             "pipelined SADD": 200_000 // scale, "dupfilter set": 200_000 // scale,
             "design: Lua SETBIT per bit": 50_000 // scale,
             "design: BITFIELD packed by redis-py": 50_000 // scale}
    proc = directory = None
    if args.redis:
        url = args.redis
    else:
        proc, url, directory = start_server()
    client = redis.Redis.from_url(url)
    meter = Meter(client)
    prefix = f"bench:{uuid.uuid4().hex[:8]}"
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from url_corpus import realistic_urls  # the project's crawler-URL corpus
    corpus = realistic_urls(n_main + 200_000 // scale, seed=11)
    urls_s, absent = corpus[:n_main], corpus[n_main:]
    urls = [u.encode() for u in urls_s]
    rows: List[Dict[str, Any]] = []

    def record(name: str, op: str, n: int, m: Dict[str, Any], extra: str = "") -> None:
        row = {"name": name, "op": op, "n": n, "keys_per_s": n / m["wall"],
               "client_us": m["client_cpu"] / n * 1e6, "server_cmd_us": m["server_cmd"] / n * 1e6,
               "server_cpu_us": m["server_cpu"] / n * 1e6, "note": extra}
        rows.append(row)
        print(f"{name:42s} {op:14s} n={n:>9,} {row['keys_per_s']:>11,.0f} keys/s  "
              f"client {row['client_us']:6.2f} us  server {row['server_cmd_us']:6.2f} / "
              f"{row['server_cpu_us']:6.2f} us  {extra}", flush=True)

    def false_seen(flags: List[bool]) -> str:
        return f"{1 - np.mean(flags):.1%} of new URLs called seen"

    # peers
    for name, fn in [
        ("seed recipe", lambda u: seed_recipe(client, prefix + ":seed", u, False)),
        ("seed recipe, pipelined", lambda u: seed_recipe(client, prefix + ":seedp", u, True)),
        ("scrapy-redis-bloomfilter", lambda u: scrapy_redis_bloomfilter(client, prefix + ":srb",
                                                                        u)),
        ("dupfilter Lua Bloom", lambda u: dupfilter_bloom(client, prefix + ":dup", u)),
        ("pipelined SADD", lambda u: pipelined_sadd(client, prefix + ":sadd", u)),
        ("dupfilter set", lambda u: dupfilter_set(client, prefix + ":dupset", u)),
    ]:
        n = sizes[name]
        m = meter.run(lambda fn=fn, n=n: fn(urls[:n]))
        record(name, "test-and-add", n, m, false_seen(m["result"]))
    for key in client.scan_iter(match=prefix + "*"):
        client.delete(key)

    # crawldedup Bloom
    # The target is for k = 7: the standard layout has k = 7 at 1%,
    # the blocked one k = 6 at 1% and k = 7 at 0.6%.
    for label, layout, shards, rate in [("standard, k=7, 1 shard", "standard", 1, 0.01),
                                        ("blocked, k=6, 4 shards", "blocked", 4, 0.01),
                                        ("blocked, k=7, 4 shards, 0.6%", "blocked", 4, 0.006)]:
        bf = RedisBloomFilter(url, f"{prefix}:cd:{layout}:{rate}", n_main, rate, layout=layout,
                              shards=shards)
        assert f"k={bf.num_hashes}," in label, (label, bf.num_hashes)
        m = meter.run(lambda bf=bf: bf.add_many(urls_s))
        record(f"crawldedup RedisBloomFilter ({label})", "add_many", n_main, m,
               false_seen(m["result"].tolist()))
        m = meter.run(lambda bf=bf: bf.contains_many(urls_s))
        assert m["result"].all()
        record(f"crawldedup RedisBloomFilter ({label})", "contains_many", n_main, m)
        fp = float(bf.contains_many(absent).mean())
        rows[-1]["note"] = f"false-positive rate {fp:.4f} (target {rate}: {fp / rate:.2f}x)"
        print(f"{'':42s} false-positive rate on {len(absent):,} absent URLs: {fp:.4f} "
              f"({fp / rate:.2f}x the target)")
        if layout == "standard":
            m_bits, k = bf.num_bits, bf.num_hashes
        bf.drop()

    # design alternatives on crawldedup's positions
    n = sizes["design: Lua SETBIT per bit"]
    m = meter.run(lambda: lua_setbit_design(client, prefix + ":lua", urls[:n], m_bits, k))
    record("design: Lua SETBIT per bit", "test-and-add", n, m)
    n = sizes["design: BITFIELD packed by redis-py"]
    m = meter.run(lambda: redis_py_bitfield_design(client, prefix + ":rp", urls[:n], m_bits, k))
    record("design: BITFIELD packed by redis-py", "test-and-add", n, m)
    client.delete(prefix + ":lua", prefix + ":rp")

    # crawldedup RedisStore
    digests = np.array([hashlib.md5(u).digest() for u in urls], dtype="S16")
    # Sized for what it gets: the bucket count, and so the memory per digest,
    # follows the capacity (docs/redis.md, "RedisStore").
    store = RedisStore(url, f"{prefix}:store", capacity=n_main)
    used0 = client.info("memory")["used_memory"]
    m = meter.run(lambda: store.add_many(digests))
    assert m["result"].all()
    record("crawldedup RedisStore", "add_many", n_main, m,
           f"{(client.info('memory')['used_memory'] - used0) / n_main:.0f} B/digest in Redis")
    m = meter.run(lambda: store.contains_many(digests))
    record("crawldedup RedisStore", "contains_many", n_main, m)
    store.clear()
    client.delete(f"{prefix}:store:meta")
    store.close()

    # crawldedup RedisSimhashIndex
    n_sim = 100_000 // scale
    rng = np.random.default_rng(1)
    fps = rng.integers(0, 2 ** 63, size=n_sim, dtype=np.int64).astype(np.uint64)
    index = RedisSimhashIndex(url, f"{prefix}:sim", k=3)
    used0 = client.info("memory")["used_memory"]
    m = meter.run(lambda: index.add_many(np.arange(n_sim, dtype=np.uint64), fps))
    mem = (client.info("memory")["used_memory"] - used0) / n_sim
    record("crawldedup RedisSimhashIndex (k=3)", "add_many", n_sim, m,
           f"{mem:.0f} B/fingerprint in Redis")
    queries = fps ^ np.uint64(0b101)  # each 2 bits away from a stored one
    m = meter.run(lambda: index.query_many(queries))
    assert len(m["result"][1]) >= n_sim
    record("crawldedup RedisSimhashIndex (k=3)", "query_many", n_sim, m)
    index.drop()

    info = client.info("server")
    client.close()
    if proc is not None:
        proc.terminate()
        proc.wait()
        shutil.rmtree(directory, ignore_errors=True)

    os.makedirs(args.out, exist_ok=True)
    head = (f"Redis {info['redis_version']} on loopback, {platform.machine()}, "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"redis-py {redis.__version__}; load average {os.getloadavg()[0]:.1f}")
    lines = [f"# crawldedup on Redis vs peers\n\n{head}\n",
             f"Command: `python benchmarks/compare_redis.py{' --quick' if args.quick else ''}`\n",
             "| implementation | operation | keys | keys/s | client CPU us/key | "
             "server us/key (commands) | server CPU us/key (process) | note |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['op']} | {r['n']:,} | {r['keys_per_s']:,.0f} | "
                     f"{r['client_us']:.2f} | {r['server_cmd_us']:.2f} | "
                     f"{r['server_cpu_us']:.2f} | {r['note']} |")
    with open(os.path.join(args.out, "compare_redis.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "compare_redis.json"), "w") as f:
        json.dump({"setup": head, "rows": rows}, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
