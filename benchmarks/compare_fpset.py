#!/usr/bin/env python3
"""crawldedup's FingerprintSet and fingerprint stores side by side with what
the seeds use: a Python ``set`` of 16-byte MD5 digests, and a database table.

One run, one machine, one workload: MD5 digests of N (default 1,000,000)
distinct URL-like strings, and N absent ones.

* Single calls, one per digest in a Python loop: ``fps.add(d)`` vs
  ``s.add(d)``, ``d in fps`` vs ``d in s`` (present and absent).  Every pass
  runs over fresh copies of the digests (bytes objects cache their hash, and
  a crawler's digests are always fresh), for both alike; median of --reps.
* The worst single add over the N adds (and the 99.99th percentile): a set
  resizes in one go, FingerprintSet moves its table over a few slots per add.
* Memory: ``sys.getsizeof(set) + sum(getsizeof(d))`` vs ``fps.nbytes``.
* Batches: ``fps.add_many(list)`` and ``fps.add_many(numpy S16 array)`` vs
  ``s.update(list)`` for all N digests into an empty container.
* Stores: ``SQLiteStore.add_many`` of N fingerprints (fingerprints per
  second), ``contains_many``; PostgreSQL and MariaDB through ``SQLStore``
  (--db-n fingerprints, default 200,000) when the servers answer.

Usage (from a clone with crawldedup installed; the database part needs
``pip install 'crawldedup[sql]'`` and reachable servers)::

    python benchmarks/compare_fpset.py
    python benchmarks/compare_fpset.py --quick          # n = 100,000
    python benchmarks/compare_fpset.py --postgres URL --mysql URL

Writes compare_fpset.md and compare_fpset.json to --out (default
benchmarks/results/).
"""

from __future__ import annotations

import os

# numpy's BLAS threads spin while idle and steal CPU on small machines; no
# measurement here uses BLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

import crawldedup  # noqa: E402
from crawldedup import FingerprintSet, SQLiteStore  # noqa: E402

HOSTS = ["news.example.com", "shop.example.cn", "item.jd.com", "www.example.org",
         "blog.example.net", "m.example.com", "bbs.example.cn", "detail.tmall.com"]
WORDS = ["item", "list", "news", "article", "product", "category", "search", "page",
         "tag", "user", "video", "2024", "sale", "detail", "comment"]


def urls(n: int, seed: int) -> list:
    """n distinct URL-like strings, 50..150 characters."""
    rng = random.Random(seed)
    out, seen = [], set()
    while len(out) < n:
        path = "/".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        query = "&".join(f"{rng.choice(WORDS)}={rng.randint(0, 10**6)}"
                         for _ in range(rng.randint(0, 3)))
        u = f"https://{rng.choice(HOSTS)}/{path}/{rng.randint(0, 10**9)}.html"
        if query:
            u += "?" + query
        if u not in seen:
            seen.add(u)
            out.append(u)
    return out


def fresh(digests: list) -> list:
    """New bytes objects with the same contents (no cached hash)."""
    return [bytes(bytearray(d)) for d in digests]


def timed(fn, reps: int, setup=None) -> float:
    times = []
    for _ in range(reps):
        arg = setup() if setup else None
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            fn(arg)
            times.append(time.perf_counter() - t0)
        finally:
            gc.enable()
    return statistics.median(times)


def loop_add(container_factory, digests, reps):
    def run(arg):
        add = arg[0].add
        for d in arg[1]:
            add(d)
    return timed(run, reps, lambda: (container_factory(), fresh(digests)))


def loop_in(container, digests, reps):
    def run(arg):
        for d in arg:
            d in container
    return timed(run, reps, lambda: fresh(digests))


def worst_add(container, digests):
    """Per-add times of one pass: max, 99.99th percentile, adds over 1 ms."""
    add = container.add
    pc = time.perf_counter
    times = np.empty(len(digests))
    gc.collect()
    gc.disable()
    try:
        for i, d in enumerate(digests):
            t0 = pc()
            add(d)
            times[i] = pc() - t0
    finally:
        gc.enable()
    return {"max_ms": float(times.max() * 1e3),
            "p9999_us": float(np.percentile(times, 99.99) * 1e6),
            "over_1ms": int((times > 1e-3).sum()),
            "top5_ms": sorted((times * 1e3).tolist())[-5:]}


def set_memory(s: set) -> int:
    return sys.getsizeof(s) + sum(map(sys.getsizeof, s))


def store_rates(make, digests, reps_n=None):
    store = make()
    try:
        t0 = time.perf_counter()
        new = store.add_many(digests)
        add_s = time.perf_counter() - t0
        assert new.all()
        probe = digests[: min(len(digests), 100_000)]
        t0 = time.perf_counter()
        found = store.contains_many(probe)
        contains_s = time.perf_counter() - t0
        assert found.all()
        t0 = time.perf_counter()
        again = store.add_many(probe)
        readd_s = time.perf_counter() - t0
        assert not again.any()
        return {"n": len(digests), "add_many_per_s": len(digests) / add_s,
                "contains_many_per_s": len(probe) / contains_s,
                "re_add_many_per_s": len(probe) / readd_s}
    finally:
        drop = getattr(store, "drop", None)
        if drop:
            drop()
        store.close()


def reachable(url: str) -> str:
    import socket
    from urllib.parse import urlsplit
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port or 0), timeout=3):
            return ""
    except OSError as exc:
        return str(exc)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--db-n", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="n = 100,000, db-n = 50,000")
    ap.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    ap.add_argument("--mysql", default="mysql+pymysql://root@127.0.0.1:3306/test")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = ap.parse_args()
    if args.quick:
        args.n, args.db_n = 100_000, 50_000
    n = args.n
    started = time.time()
    print(f"crawldedup {crawldedup.__version__} ({crawldedup.IMPLEMENTATION}), n = {n:,}",
          flush=True)
    present = [hashlib.md5(u.encode()).digest() for u in urls(n, 1)]
    absent = [hashlib.md5(u.encode()).digest() for u in urls(n, 2)]
    absent_set = set(absent) - set(present)
    absent = [d for d in absent if d in absent_set]
    arr = np.array(present, dtype="S16")
    res: dict = {"n": n, "python": platform.python_version(),
                 "machine": f"{platform.machine()} {os.cpu_count()} CPUs",
                 "crawldedup": crawldedup.__version__}

    # ---- single calls
    r = res["single"] = {}
    r["set_add_ns"] = loop_add(set, present, args.reps) / n * 1e9
    r["fps_add_ns"] = loop_add(FingerprintSet, present, args.reps) / n * 1e9
    s = set(fresh(present))
    fps = FingerprintSet()
    fps.add_many(arr)
    r["set_in_present_ns"] = loop_in(s, present, args.reps) / n * 1e9
    r["fps_in_present_ns"] = loop_in(fps, present, args.reps) / n * 1e9
    r["set_in_absent_ns"] = loop_in(s, absent, args.reps) / len(absent) * 1e9
    r["fps_in_absent_ns"] = loop_in(fps, absent, args.reps) / len(absent) * 1e9
    print("single", json.dumps(r), flush=True)

    # ---- memory (containers filled by single adds, as a crawler fills them)
    s_loop = set()
    w_set = worst_add(s_loop, fresh(present))
    f_loop = FingerprintSet()
    w_fps = worst_add(f_loop, fresh(present))
    res["worst_add"] = {"set": w_set, "fps": w_fps}
    res["memory"] = {"set_bytes": set_memory(s_loop), "fps_bytes": f_loop.nbytes,
                     "fps_bytes_after_add_many": fps.nbytes}
    del s_loop, f_loop
    print("worst", json.dumps(res["worst_add"]), flush=True)
    print("memory", json.dumps(res["memory"]), flush=True)

    # ---- batches
    b = res["batch"] = {}
    b["set_update_s"] = timed(lambda a: set().update(a), args.reps, lambda: fresh(present))
    b["fps_add_many_list_s"] = timed(lambda a: FingerprintSet().add_many(a), args.reps,
                                     lambda: fresh(present))
    b["fps_add_many_numpy_s"] = timed(lambda a: FingerprintSet().add_many(a), args.reps,
                                      lambda: arr.copy())
    b["set_contains_list_s"] = timed(lambda a: [d in s for d in a], args.reps,
                                     lambda: fresh(present))
    b["fps_contains_many_list_s"] = timed(lambda a: fps.contains_many(a), args.reps,
                                          lambda: fresh(present))
    print("batch", json.dumps(b), flush=True)
    s = set()  # free its memory

    # ---- stores
    st = res["stores"] = {}
    with tempfile.TemporaryDirectory() as tmp:
        st["sqlite"] = store_rates(lambda: SQLiteStore(os.path.join(tmp, "fps.db")), present)
    print("sqlite", json.dumps(st["sqlite"]), flush=True)
    db_digests = present[: args.db_n]
    for name, url in (("postgresql", args.postgres), ("mariadb", args.mysql)):
        problem = reachable(url)
        if problem:
            st[name] = {"skipped": f"{url}: {problem}"}
            continue
        from crawldedup import SQLStore
        table = f"bench_{uuid.uuid4().hex[:12]}"
        st[name] = store_rates(lambda: SQLStore(url, table=table), db_digests)
        st[name]["url"] = url.split("@")[-1]
        print(name, json.dumps(st[name]), flush=True)
    res["elapsed_s"] = time.time() - started

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare_fpset.json").write_text(json.dumps(res, indent=2))
    (out / "compare_fpset.md").write_text(report(res))
    print(report(res))


def report(res: dict) -> str:
    n = res["n"]
    r, m, b, w = res["single"], res["memory"], res["batch"], res["worst_add"]
    L = [f"# FingerprintSet and stores vs a Python set ({n:,} MD5 digests of URLs)", "",
         f"crawldedup {res['crawldedup']}, Python {res['python']}, {res['machine']}; one run, "
         f"median of repeats; `python benchmarks/compare_fpset.py`.", "",
         "| measure | Python set | FingerprintSet | ratio (set / FingerprintSet) |",
         "|---|---:|---:|---:|"]

    def row(name, a, f, unit, fmt="{:,.0f}"):
        L.append(f"| {name} | {fmt.format(a)} {unit} | {fmt.format(f)} {unit} | {a / f:.2f}x |")
    row("single add", r["set_add_ns"], r["fps_add_ns"], "ns")
    row("`in`, present", r["set_in_present_ns"], r["fps_in_present_ns"], "ns")
    row("`in`, absent", r["set_in_absent_ns"], r["fps_in_absent_ns"], "ns")
    row("memory after n single adds", m["set_bytes"] / 2**20, m["fps_bytes"] / 2**20, "MiB",
        "{:,.1f}")
    row(f"add {n:,} at once: `set.update` vs `add_many(list)`", b["set_update_s"] * 1e3,
        b["fps_add_many_list_s"] * 1e3, "ms", "{:,.1f}")
    row(f"add {n:,} at once: `set.update` vs `add_many(numpy S16)`", b["set_update_s"] * 1e3,
        b["fps_add_many_numpy_s"] * 1e3, "ms", "{:,.1f}")
    row(f"test {n:,}: `[d in s for d in l]` vs `contains_many(list)`",
        b["set_contains_list_s"] * 1e3, b["fps_contains_many_list_s"] * 1e3, "ms", "{:,.1f}")
    row("worst single add", w["set"]["max_ms"], w["fps"]["max_ms"], "ms", "{:,.2f}")
    row("99.99th percentile add", w["set"]["p9999_us"], w["fps"]["p9999_us"], "us", "{:,.1f}")
    L += ["", f"Memory of FingerprintSet after `add_many` of all {n:,}: "
              f"{m['fps_bytes_after_add_many'] / 2**20:,.1f} MiB "
              f"({m['fps_bytes_after_add_many'] / n:.1f} bytes per digest); after single "
              f"adds {m['fps_bytes'] / n:.1f} bytes per digest; the set "
              f"{m['set_bytes'] / n:.1f}.",
          f"Adds slower than 1 ms: set {w['set']['over_1ms']}, FingerprintSet "
          f"{w['fps']['over_1ms']} (top five, ms: set {fmt_list(w['set']['top5_ms'])}; "
          f"FingerprintSet {fmt_list(w['fps']['top5_ms'])}).", "",
          "## Stores", "",
          "| store | fingerprints | add_many /s | contains_many /s | add_many of present /s |",
          "|---|---:|---:|---:|---:|"]
    for name, d in res["stores"].items():
        if "skipped" in d:
            L.append(f"| {name} | skipped: {d['skipped']} | | | |")
            continue
        L.append(f"| {name}{' (' + d['url'] + ')' if 'url' in d else ''} | {d['n']:,} | "
                 f"{d['add_many_per_s']:,.0f} | {d['contains_many_per_s']:,.0f} | "
                 f"{d['re_add_many_per_s']:,.0f} |")
    L += ["", f"Whole run: {res['elapsed_s']:.0f} s."]
    return "\n".join(L) + "\n"


def fmt_list(xs):
    return ", ".join(f"{x:.2f}" for x in xs)


if __name__ == "__main__":
    main()
