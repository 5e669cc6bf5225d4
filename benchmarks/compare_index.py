#!/usr/bin/env python3
"""crawldedup.SimhashIndex side by side with other near-duplicate indexes.

Workload (the project's index workload): n = 1,000,000 random 64-bit
fingerprints (numpy default_rng(1)), 10,000 queries of which the even ones are
stored fingerprints with 1-3 random bits flipped and the odd ones random,
Hamming distance <= k = 3.  Per peer, in a fresh process:

* build: the peer's bulk add of the n fingerprints (seconds) and the process
  RSS growth over it (memory, MiB and bytes per fingerprint);
* batch query: one call for all queries, where the peer has one (us/query),
  alone and followed by a Python list of per-query result slices (as the
  project's peers.py harness does);
* one call per query, in a Python loop (us/query);
* recall and precision of the (query, stored index) pairs against a numpy
  brute-force scan (computed once and cached in --out);
* pairs: the self-join of the whole index (every pair within k), crawldedup's
  pairs() against simhash-pybind's find_all(hashes, k + 1, k) when it imports.

Peers: faiss IndexBinaryMultiHash(64, nhash=4, b=16) with nflip=0 (exact for
k=3: four 16-bit hash tables), faiss IndexBinaryFlat (C brute force), the
``simhash`` package's SimhashIndex (leonsim; Python dict of hex strings),
numpy brute force (xor + bitwise_count), simhash-pybind (seomoz) find_all.
faiss range_search keeps d < radius, so radius k + 1 is passed.  Every peer
runs on one thread (faiss.omp_set_num_threads(1), query_many(threads=1));
the interleaved timings also time both batch searches on every CPU the
process may use (crawldedup's default for a batch this large).  Peers that
are not installed are skipped with a note.  simhash and simhash-pybind both
install a top-level ``simhash`` package; give the folder of a
``pip install --target DIR simhash-pybind`` as --seomoz-path.

Usage::

    pip install . faiss-cpu simhash
    pip install --target /tmp/seomoz simhash-pybind
    python benchmarks/compare_index.py --seomoz-path /tmp/seomoz
    python benchmarks/compare_index.py --quick     # n = 100,000, smoke run
    python benchmarks/compare_index.py --skew      # crawldedup on skewed data

Writes compare_index.md and compare_index.json to --out (default
benchmarks/results/ next to this script).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 1
perf = time.perf_counter


# ----------------------------------------------------------------- workload

def fingerprints(n: int, seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, np.iinfo(np.uint64).max, size=n, dtype=np.uint64, endpoint=True)


def queries(q: int, n: int, seed: int = SEED) -> np.ndarray:
    """Even positions: a stored fingerprint with 1-3 bits flipped; odd: random."""
    fps = fingerprints(n, seed)
    rng = np.random.default_rng([seed, 0xC0FFEE])
    out = rng.integers(0, np.iinfo(np.uint64).max, size=q, dtype=np.uint64, endpoint=True)
    for i in range(0, q, 2):
        j = int(rng.integers(0, n))
        k = int(rng.integers(1, 4))
        v = int(fps[j])
        for b in rng.choice(64, size=k, replace=False):
            v ^= 1 << int(b)
        out[i] = np.uint64(v)
    return out


def popcount(a: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(a)
    a = a - ((a >> np.uint64(1)) & np.uint64(0x5555555555555555))
    a = (a & np.uint64(0x3333333333333333)) + ((a >> np.uint64(2)) & np.uint64(0x3333333333333333))
    a = (a + (a >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (a * np.uint64(0x0101010101010101)) >> np.uint64(56)


def truth(n: int, q: int, k: int, out: Path) -> set:
    path = out / f"index_truth_{n}_{q}_{k}_{SEED}.npy"
    if path.exists():
        arr = np.load(path)
    else:
        fps, qs = fingerprints(n), queries(q, n)
        rows = []
        for i, v in enumerate(qs):
            for j in np.flatnonzero(popcount(fps ^ v) <= k):
                rows.append((i, int(j)))
        arr = np.array(rows, dtype=np.int64).reshape(-1, 2)
        out.mkdir(parents=True, exist_ok=True)
        np.save(path, arr)
    return {(int(a), int(b)) for a, b in arr}


# ----------------------------------------------------------------- helpers

def trim() -> None:
    gc.collect()
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except Exception:
        pass


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


# ----------------------------------------------------------------- peers

class Peer:
    name = "base"
    batch = False        # has a batch query
    single = True        # time one call per query
    single_limit = None  # time only the first this many single calls
    reps = None          # override --reps

    def build(self, fps: np.ndarray) -> None:
        raise NotImplementedError

    def query(self, q: int, k: int) -> List[int]:
        raise NotImplementedError

    def query_batch(self, qs: np.ndarray, k: int) -> List[List[int]]:
        raise NotImplementedError

    def pairs(self) -> int:
        raise NotImplementedError


class Crawldedup(Peer):
    name = "crawldedup SimhashIndex(k=3)"
    batch = True

    def build(self, fps):
        import crawldedup
        self.ix = crawldedup.SimhashIndex(k=3)
        self.ix.add_many(np.arange(len(fps), dtype=np.uint64), fps)

    def query(self, q, k):
        return [i for i, _ in self.ix.query(q)]

    # One thread, as faiss is given one (--threads measures both on more).
    def query_batch(self, qs, k):
        offsets, ids, _ = self.ix.query_many(qs, threads=1)
        return [ids[offsets[i]:offsets[i + 1]] for i in range(len(qs))]

    def query_batch_raw(self, qs, k, threads=1):
        return self.ix.query_many(qs, threads=threads)

    def pairs(self):
        return sum(1 for _ in self.ix.pairs())

    def note(self):
        return {"nbytes": self.ix.nbytes}


class _Faiss(Peer):
    batch = True
    single = False

    def build(self, fps):
        import faiss
        faiss.omp_set_num_threads(1)
        self.ix = self.make(faiss)
        self.ix.add(fps.view("uint8").reshape(-1, 8))

    def query(self, q, k):
        lims, _, ids = self.ix.range_search(
            np.array([q], dtype=np.uint64).view("uint8").reshape(-1, 8), k + 1)
        return ids

    def query_batch(self, qs, k):
        lims, _, ids = self.ix.range_search(qs.view("uint8").reshape(-1, 8), k + 1)
        return [ids[lims[i]:lims[i + 1]] for i in range(len(qs))]

    def query_batch_raw(self, qs, k):
        return self.ix.range_search(qs.view("uint8").reshape(-1, 8), k + 1)


class FaissMultiHash(_Faiss):
    name = "faiss IndexBinaryMultiHash(64, nhash=4, b=16), nflip=0"
    single = True

    def make(self, faiss):
        ix = faiss.IndexBinaryMultiHash(64, 4, 16)
        ix.nflip = 0
        return ix


class FaissFlat(_Faiss):
    name = "faiss IndexBinaryFlat (C brute force)"
    query_batch_raw = None   # slow: timed once, with the slices

    def make(self, faiss):
        return faiss.IndexBinaryFlat(64)


class Leonsim(Peer):
    name = "simhash (leonsim) SimhashIndex(k=3).get_near_dups"
    reps = 1

    def build(self, fps):
        import logging
        logging.getLogger().setLevel(logging.ERROR)   # "Big bucket found" warnings
        import simhash
        self.m = simhash
        objs = [(str(i), simhash.Simhash(v, f=64)) for i, v in enumerate(fps.tolist())]
        self.ix = simhash.SimhashIndex(objs, f=64, k=3)

    def query(self, q, k):
        return [int(s) for s in self.ix.get_near_dups(self.m.Simhash(q, f=64))]


class NumpyBrute(Peer):
    name = "numpy brute force (xor + bitwise_count)"
    single_limit = 300

    def build(self, fps):
        self.fps = fps

    def query(self, q, k):
        return np.flatnonzero(popcount(self.fps ^ np.uint64(q)) <= k)


PEERS = [Crawldedup, FaissMultiHash, FaissFlat, Leonsim, NumpyBrute]


def worker(name: str, n: int, q: int, k: int, reps: int) -> Dict[str, Any]:
    cls = next(c for c in PEERS if c.name == name)
    fps, qs = fingerprints(n), queries(q, n)
    qlist = qs.tolist()
    out: Dict[str, Any] = {"peer": name, "n": n}
    w = cls()                          # warm-up: imports, first calls
    w.build(fps[:1000].copy())
    w.query(qlist[0], k)
    if cls.batch:
        w.query_batch(qs[:10], k)
    del w
    reps = cls.reps or reps
    builds, mems = [], []
    p = None
    for _ in range(reps):
        p = None
        trim()
        r0 = rss_bytes()
        t0 = perf()
        p = cls()
        p.build(fps)
        builds.append(perf() - t0)
        mems.append(rss_bytes() - r0)
    assert p is not None
    out["build_s"] = statistics.median(builds)
    out["rss_delta"] = mems[0]
    found = None
    if cls.single:
        sub = qlist[:cls.single_limit] if cls.single_limit else qlist
        ts = []
        for _ in range(reps):
            gc.collect()
            t0 = perf()
            res = [p.query(v, k) for v in sub]
            ts.append(perf() - t0)
        out["us_per_query"] = statistics.median(ts) / len(sub) * 1e6
        if len(sub) == len(qlist):
            found = res
        else:
            out["single_queries_timed"] = len(sub)
    if cls.batch:
        ts = []
        for _ in range(max(reps, 5) if cls is Crawldedup else reps):
            gc.collect()
            t0 = perf()
            res = p.query_batch(qs, k)
            ts.append(perf() - t0)
        out["us_per_query_batch"] = statistics.median(ts) / len(qlist) * 1e6
        found = res
        if getattr(p, "query_batch_raw", None) is not None:
            ts = []
            for _ in range(max(reps, 5) if cls is Crawldedup else reps):
                gc.collect()
                t0 = perf()
                p.query_batch_raw(qs, k)
                ts.append(perf() - t0)
            out["us_per_query_raw"] = statistics.median(ts) / len(qlist) * 1e6
    if found is not None:
        out["found"] = [[i, int(j)] for i, r in enumerate(found) for j in r]
    if cls is Crawldedup:
        out.update(p.note())
        ts = []
        for _ in range(reps):
            t0 = perf()
            count = p.pairs()
            ts.append(perf() - t0)
        out["pairs_s"] = statistics.median(ts)
        out["pairs_found"] = count
    return out


def interleaved(n: int, q: int, k: int, rounds: int, leonsim_q: int) -> Dict[str, Any]:
    """Query timings of crawldedup, faiss MultiHash and the simhash package
    taken in turns, round after round, in one process: on a shared machine
    the load then weighs on every peer alike, and the median of the
    per-round ratios is steadier than ratios of timings taken minutes apart."""
    fps, qs = fingerprints(n), queries(q, n)
    qlist = qs.tolist()
    threads = usable_cpus()
    peers: Dict[str, Any] = {}
    for cls in (Crawldedup, FaissMultiHash, Leonsim):
        try:
            p = cls()
            p.build(fps)
            peers[cls.name] = p
        except Exception as exc:  # not installed
            print(f"  interleaved: {cls.name} skipped ({exc})", file=sys.stderr)
    me = peers.get(Crawldedup.name)
    timings: Dict[str, List[float]] = {}

    def timed(key, fn, count):
        gc.collect()
        t0 = perf()
        fn()
        timings.setdefault(key, []).append((perf() - t0) / count * 1e6)
    for _ in range(rounds):
        if me is not None:
            timed("crawldedup batch alone", lambda: me.query_batch_raw(qs, k), q)
            timed("crawldedup batch + slices", lambda: me.query_batch(qs, k), q)
            timed("crawldedup one call each", lambda: [me.query(v, k) for v in qlist], q)
        fm = peers.get(FaissMultiHash.name)
        if fm is not None:
            timed("faiss batch alone", lambda: fm.query_batch_raw(qs, k), q)
            timed("faiss batch + slices", lambda: fm.query_batch(qs, k), q)
            timed("faiss one call each", lambda: [fm.query(v, k) for v in qlist], q)
        ls = peers.get(Leonsim.name)
        if ls is not None:
            sub = qlist[:leonsim_q]
            timed("simhash get_near_dups", lambda: [ls.query(v, k) for v in sub], len(sub))
        if threads > 1:
            # Both batch searches again, on every CPU this process may use.
            if me is not None:
                timed(f"crawldedup batch alone, {threads} threads",
                      lambda: me.query_batch_raw(qs, k, threads=threads), q)
            if fm is not None:
                import faiss
                faiss.omp_set_num_threads(threads)
                try:
                    timed(f"faiss batch alone, {threads} threads",
                          lambda: fm.query_batch_raw(qs, k), q)
                finally:
                    faiss.omp_set_num_threads(1)
    return {key: v for key, v in timings.items()}


def seomoz_find_all(path: Optional[str], n: int, k: int, reps: int) -> Dict[str, Any]:
    code = (
        "import sys, time, json, statistics\n"
        f"sys.path.insert(0, {path!r})\n" if path else "import sys, time, json, statistics\n")
    code += (
        "import simhash\n"
        "assert hasattr(simhash, 'find_all'), 'not simhash-pybind'\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from compare_index import fingerprints\n"
        f"h = fingerprints({n}).tolist()\n"
        "ts = []\n"
        f"for _ in range({reps}):\n"
        "    t = time.perf_counter()\n"
        f"    r = simhash.find_all(h, {k + 1}, {k})\n"
        "    ts.append(time.perf_counter() - t)\n"
        "print(json.dumps({'pairs_s': statistics.median(ts), 'pairs_found': len(r)}))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if r.returncode:
        return {"error": (r.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(r.stdout)


def skew(n: int) -> str:
    """Skewed data: how query and pairs() costs grow (crawldedup only)."""
    import crawldedup
    rng = np.random.default_rng(SEED)
    top = np.uint64(0xABCD) << np.uint64(48)
    cases = [
        ("random (baseline)", fingerprints(n)),
        ("100 copies of each of n/100 fingerprints",
         np.repeat(fingerprints(n // 100), 100)),
        ("all share the top 16 bits (one block), random below",
         top | rng.integers(0, 1 << 48, n, dtype=np.uint64)),
        ("cluster: all within 3 bits of one fingerprint (output-bound)",
         None),
    ]
    lines = [f"Skewed data, n = {n:,}, k = 3 (crawldedup SimhashIndex):", "",
             "| data | build s | us/query (batch of 1,000) | results/query | pairs() s | pairs |",
             "|---|---:|---:|---:|---:|---:|"]
    for label, fps in cases:
        if fps is None:
            m = min(n, 5_000)
            base = int(fingerprints(1)[0])
            fps = np.full(m, base, dtype=np.uint64)
            for i in range(m):
                for b in rng.choice(64, size=int(rng.integers(0, 4)), replace=False):
                    fps[i] ^= np.uint64(1 << int(b))
            label += f" (n = {m:,})"
        ix = crawldedup.SimhashIndex(3)
        t0 = perf()
        ix.add_many(np.arange(len(fps), dtype=np.uint64), fps)
        build = perf() - t0
        qs = fps[rng.integers(0, len(fps), 1000)] ^ np.uint64(1 << 5)
        if "share" in label:
            qs = top | rng.integers(0, 1 << 48, 1000, dtype=np.uint64)
        t0 = perf()
        offsets, _, _ = ix.query_many(qs)
        qt = (perf() - t0) / len(qs) * 1e6
        per = offsets[-1] / len(qs)
        if "copies" in label and n > 100_000:
            lines.append(f"| {label} | {build:.3f} | {qt:,.1f} | {per:,.1f} | (skipped: "
                         f"{len(fps) // 100 * 4950:,} pairs) | - |")
            continue
        t0 = perf()
        a, _, _ = ix._core.pairs()
        pt = perf() - t0
        lines.append(f"| {label} | {build:.3f} | {qt:,.1f} | {per:,.1f} | {pt:.3f} | {len(a):,} |")
    return "\n".join(lines) + "\n"


def run_worker(name: str, args) -> Dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--n", str(args.n),
           "--queries", str(args.queries), "--k", str(args.k), "--reps", str(args.reps)]
    if name == Leonsim.name and args.leonsim_n:
        cmd[cmd.index("--n") + 1] = str(args.leonsim_n)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        last = (r.stderr.strip().splitlines() or ["failed"])[-1]
        return {"peer": name, "error": last}
    return json.loads(r.stdout.strip().splitlines()[-1])


def fmt(x, digits=2):
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="n = 100,000, 2,000 queries")
    ap.add_argument("--only", help="comma-separated peer names (prefixes)")
    ap.add_argument("--leonsim-n", type=int, default=0, help="n for the slow simhash peer")
    ap.add_argument("--seomoz-path", help="folder holding simhash-pybind's `simhash`")
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds of the interleaved query timings (0: skip them)")
    ap.add_argument("--leonsim-queries", type=int, default=2000,
                    help="queries per interleaved round for the slow simhash peer")
    ap.add_argument("--interleaved-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--skew", action="store_true",
                    help="only measure crawldedup on skewed data (writes compare_index_skew.md)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.queries = 100_000, 2_000
    if args.worker:
        print(json.dumps(worker(args.worker, args.n, args.queries, args.k, args.reps)))
        return 0
    if args.interleaved_worker:
        print(json.dumps(interleaved(args.n, args.queries, args.k, args.rounds,
                                     args.leonsim_queries)))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.skew:
        text = skew(args.n)
        print(text)
        (out / "compare_index_skew.md").write_text(text)
        return 0
    t_start = perf()
    expected = truth(args.n, args.queries, args.k, out)
    rows = []
    for cls in PEERS:
        if args.only and not any(cls.name.startswith(p) for p in args.only.split(",")):
            continue
        t0 = perf()
        r = run_worker(cls.name, args)
        found = r.pop("found", None)
        if found is not None and r.get("n") == args.n:
            got = {(a, b) for a, b in found}
            r["results"] = len(got)
            r["recall"] = len(got & expected) / len(expected) if expected else 1.0
            r["precision"] = len(got & expected) / len(got) if got else 1.0
        r["wall_s"] = round(perf() - t0, 1)
        print(f"  {cls.name[:58]:58s} " + json.dumps({k: r.get(k) for k in (
            "build_s", "us_per_query", "us_per_query_batch", "us_per_query_raw", "recall",
            "error")}), flush=True)
        rows.append(r)
    seomoz = None
    if (not args.only or "simhash-pybind".startswith(args.only.split(",")[0])
            or "seomoz" in args.only):
        seomoz = seomoz_find_all(args.seomoz_path, args.n, args.k, args.reps)
        print("  simhash-pybind find_all", json.dumps(seomoz), flush=True)

    inter = None
    if args.rounds and not args.only:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--interleaved-worker",
               "--n", str(args.n), "--queries", str(args.queries), "--k", str(args.k),
               "--rounds", str(args.rounds), "--leonsim-queries", str(args.leonsim_queries)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 0:
            inter = json.loads(r.stdout.strip().splitlines()[-1])
        else:
            print("  interleaved timings failed:", (r.stderr.strip().splitlines() or ["?"])[-1])

    by = {r["peer"]: r for r in rows}
    me = by.get(Crawldedup.name, {})

    def ratio(peer, key, mine_key=None):
        a = by.get(peer, {}).get(key)
        b = me.get(mine_key or key)
        return a / b if a and b else None

    lines = [
        f"# SimhashIndex benchmark (n = {args.n:,}, {args.queries:,} queries, k = {args.k})",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()},"
        f" numpy {np.__version__}.  One process per peer, medians of {args.reps} runs "
        "(the simhash package: 1 run).  One thread each (faiss threads = 1, crawldedup "
        "query_many(threads=1)); the interleaved timings add both batch searches on every CPU.",
        "",
        "| peer | n | build s | RSS delta MiB (bytes/fp) | us/query (batch call alone) "
        "| us/query (batch + per-query slices) | us/query (1 call each) | recall | precision |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['peer']} | - | skipped: {r['error']} | | | | | | |")
            continue
        mem = r.get("rss_delta", 0)
        single = fmt(r.get("us_per_query"), 3)
        if r.get("single_queries_timed"):
            single += f" (first {r['single_queries_timed']})"
        lines.append(
            f"| {r['peer']} | {r['n']:,} | {fmt(r.get('build_s'), 3)} | "
            f"{fmt(mem / 2 ** 20)} ({fmt(mem / r['n'], 1)}) | "
            f"{fmt(r.get('us_per_query_raw'), 3)} | "
            f"{fmt(r.get('us_per_query_batch'), 3)} | "
            f"{single} | {fmt(r.get('recall'), 4)} | {fmt(r.get('precision'), 4)} |")
    lines += ["", "Ratios (peer time / crawldedup time; > 1 means crawldedup is faster):", ""]
    fm, ls = FaissMultiHash.name, Leonsim.name
    checks = [
        ("query, batch call alone vs faiss MultiHash range_search alone (target >= 10x)",
         ratio(fm, "us_per_query_raw"), 10),
        ("query, batch + per-query slices (peers.py style) vs the same for faiss MultiHash",
         ratio(fm, "us_per_query_batch"), 10),
        ("query, crawldedup batch call alone vs simhash get_near_dups (target >= 1000x)",
         ratio(ls, "us_per_query", "us_per_query_raw"), 1000),
        ("query, crawldedup batch + per-query slices vs simhash get_near_dups",
         ratio(ls, "us_per_query", "us_per_query_batch"), 1000),
        ("query, one call each vs faiss MultiHash one call each",
         ratio(fm, "us_per_query"), None),
        ("query, one call each vs simhash get_near_dups",
         ratio(ls, "us_per_query"), None),
        ("build vs faiss MultiHash add (target >= 5x)", ratio(fm, "build_s"), 5),
        ("build vs simhash SimhashIndex(objs)", ratio(ls, "build_s"), None),
    ]
    for label, value, target in checks:
        mark = ("" if target is None or value is None
                else (" — met" if value >= target else " — MISSED"))
        lines.append(f"- {label}: {fmt(value, 1)}x{mark}")
    if me.get("rss_delta"):
        bpf = me["rss_delta"] / me["n"]
        lines.append(f"- crawldedup memory: {bpf:.1f} bytes per fingerprint by RSS, "
                     f"{me['nbytes'] / me['n']:.1f} by nbytes (target <= 40)"
                     + (" — met" if bpf <= 40 else " — MISSED"))
    if me.get("recall") is not None:
        lines.append(f"- crawldedup recall {me['recall']:.4f}, precision {me['precision']:.4f}"
                     " against numpy brute force (target 1.0)")
    if inter:
        lines += ["", f"Interleaved query timings ({args.rounds} rounds in one process, the peers "
                  "timed in turns within each round; us/query, median of the rounds; ratio = "
                  "median over rounds of peer / crawldedup):", "",
                  "| measurement | us/query | per-round values |", "|---|---:|---|"]
        for key, vals in inter.items():
            lines.append(f"| {key} | {statistics.median(vals):,.3f} | "
                         + ", ".join(f"{v:,.3f}" for v in vals) + " |")

        def iratio(a, b):
            if a not in inter or b not in inter:
                return None
            return statistics.median(x / y for x, y in zip(inter[a], inter[b]))
        lines += [""]
        for label, a, b, target in [
                ("faiss batch alone / crawldedup batch alone", "faiss batch alone",
                 "crawldedup batch alone", 10),
                ("faiss batch + slices / crawldedup batch + slices", "faiss batch + slices",
                 "crawldedup batch + slices", 10),
                ("simhash get_near_dups / crawldedup batch alone", "simhash get_near_dups",
                 "crawldedup batch alone", 1000),
                ("simhash get_near_dups / crawldedup batch + slices", "simhash get_near_dups",
                 "crawldedup batch + slices", 1000),
                ("faiss one call each / crawldedup one call each", "faiss one call each",
                 "crawldedup one call each", None),
                ("simhash get_near_dups / crawldedup one call each", "simhash get_near_dups",
                 "crawldedup one call each", None),
                (f"on {usable_cpus()} threads: faiss batch alone / crawldedup batch alone",
                 f"faiss batch alone, {usable_cpus()} threads",
                 f"crawldedup batch alone, {usable_cpus()} threads", 10),
                (f"on {usable_cpus()} threads: simhash get_near_dups (one thread) / "
                 "crawldedup batch alone", "simhash get_near_dups",
                 f"crawldedup batch alone, {usable_cpus()} threads", 1000)]:
            v = iratio(a, b)
            mark = "" if target is None or v is None else (
                f" (target >= {target}x: " + ("met)" if v >= target else "MISSED)"))
            lines.append(f"- {label}: {fmt(v, 1)}x{mark}")
    lines += ["", f"pairs() over all {args.n:,} fingerprints (self-join, k = {args.k}):", ""]
    if me.get("pairs_s") is not None:
        lines.append(f"- crawldedup SimhashIndex.pairs(): {me['pairs_s']:.3f} s, "
                     f"{me['pairs_found']:,} pairs")
    if seomoz is not None:
        if "error" in seomoz:
            lines.append(f"- simhash-pybind find_all: skipped ({seomoz['error']})")
        else:
            sp = seomoz["pairs_s"]
            lines.append(f"- simhash-pybind find_all(hashes, {args.k + 1}, {args.k}): {sp:.3f} s, "
                         f"{seomoz['pairs_found']:,} pairs"
                         + (f" — crawldedup {sp / me['pairs_s']:.1f}x faster"
                            if me.get("pairs_s") else ""))
    given = argv or sys.argv[1:]
    command = "python benchmarks/compare_index.py" + (" " + " ".join(given) if given else "")
    lines += ["", f"Total wall time {perf() - t_start:.0f} s.  Command: `{command}`", ""]
    text = "\n".join(lines)
    print(text)
    (out / "compare_index.md").write_text(text)
    (out / "compare_index.json").write_text(json.dumps({"rows": rows, "seomoz": seomoz,
                                                        "interleaved": inter,
                                                        "args": vars(args)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
