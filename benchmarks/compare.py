#!/usr/bin/env python3
"""crawldedup's BloomFilter side by side with other Python Bloom filters.

One run, one machine, one workload of URL-like strings:

* Scenario 1: capacity n (default 1,000,000), error rate 0.01.  Per peer: add
  every key (one call per key, in a Python loop), look up every present key,
  look up n absent keys; plus the batch calls where a peer has them.
* Scenario 2: capacity 100,000,000, error rate 0.01 (a big crawl frontier: the
  filter does not fit in CPU caches).  1,000,000 random operations: adds of
  new keys and lookups of present and absent keys, one call per operation, and
  in batches of 1,000 for the peers with batch calls.

Peers: rbloom (Python's hash(), and a persistent sha256 hash_func as in its
README), pybloomfiltermmap3, pybloom-live, fastbloom-rs and a plain ``set``.
Peers that are not installed are skipped with a note.

Fairness: CPython caches a str's hash() (used by rbloom and set) and its UTF-8
form (used by the hashing of non-ASCII strings) inside the str object.  So every
timed pass runs over fresh copies of the strings, made outside the timed region,
for every peer alike.  Each measurement is repeated (default 3 times, a fresh
filter each time for adds) and the median is reported, in ns per operation.

Usage (from a clone, with crawldedup and the peers installed)::

    pip install . rbloom pybloomfiltermmap3 pybloom-live fastbloom-rs matplotlib
    python benchmarks/compare.py            # full run, a few minutes
    python benchmarks/compare.py --quick    # smoke run, n = 100,000
    python benchmarks/compare.py --only crawldedup,rbloom --no-chart

Writes ``compare.md``, ``compare.json`` and ``bloom.png`` to ``--out``
(default: benchmarks/results/ next to this script).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib
import importlib.metadata
import json
import math
import os
import platform
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple
from urllib.parse import quote

ERROR_RATE = 0.01
BIG_CAPACITY = 100_000_000
CHUNK = 1_000  # keys per batch call in scenario 2

# Operation names, in table order.
ADD = "add"
HAS_PRESENT = "contains (present)"
HAS_ABSENT = "contains (absent)"
ADD_BATCH = "add, batch"
HAS_PRESENT_BATCH = "contains (present), batch"
HAS_ABSENT_BATCH = "contains (absent), batch"
MIXED = "mixed ops"
MIXED_BATCH = f"mixed ops, batch of {CHUNK}"
SCENARIO1_OPS = [ADD, HAS_PRESENT, HAS_ABSENT, ADD_BATCH, HAS_PRESENT_BATCH, HAS_ABSENT_BATCH]
SCENARIO2_OPS = [MIXED, MIXED_BATCH]


# --------------------------------------------------------------------------
# Workload: deterministic URL-like strings
# --------------------------------------------------------------------------

_WORDS = (
    "news article articles product products category blog post posts user users profile "
    "search tag tags archive page item items video videos photo gallery review reviews "
    "forum thread topic docs help about contact shop cart sale event events story world "
    "sport tech science health travel food music movie books game games local business "
    "politics opinion weather jobs careers media press download files static assets img "
    "en de fr es zh ja wiki index view detail list show comments share feed rss amp mobile "
    "2019 2020 2021 2022 2023 2024 2025 january march june october december"
).split()
_SYLLABLES = ("ka lo mi ne ru ta vo xi ze po la be do fi gu ha ji ko me no pi qu "
              "sa te ul va wo yo zu an el in or ba ce di").split()
_TLDS = ["com"] * 8 + ["org", "net", "de", "fr", "co.uk", "io", "cn", "jp", "ru",
                        "com.br", "es", "it", "nl", "info", "com.cn", "pl", "edu"]
_SUBDOMAINS = ["www"] * 6 + ["", "", "m", "blog", "shop", "news", "en", "forum", "docs", "cdn"]
_UNICODE_WORDS = ["café", "München", "São_Paulo", "Zürich", "niño", "Ελλάδα", "Москва",
                  "東京", "日本語", "한국어", "العربية", "Kraków", "crème_brûlée", "Ålesund",
                  "İstanbul", "Đà_Nẵng", "naïve", "Øresund", "Ñandú", "Straße"]
_CHINESE = ("新闻体育财经科技娱乐汽车房产教育旅游健康时尚游戏文化历史军事国际社会生活美食"
            "读书音乐电影图片视频论坛博客首页中国北京上海广州深圳产品服务关于我们联系")
_EXTENSIONS = [".html", ".htm", ".php", ".aspx", "/", ".jsp", ""]
_QUERY_KEYS = ["page", "sort", "lang", "ref", "utm_source", "utm_medium", "q", "cat",
               "offset", "limit", "session", "v"]


def _make_hosts(rng: random.Random, count: int) -> List[str]:
    hosts: Dict[str, None] = {}
    while len(hosts) < count:
        name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
        if rng.random() < 0.2:
            name += "-" + rng.choice(_WORDS)
        sub = rng.choice(_SUBDOMAINS)
        host = f"{sub}.{name}.{rng.choice(_TLDS)}" if sub else f"{name}.{rng.choice(_TLDS)}"
        hosts[host] = None
    return list(hosts)


def _make_url(rng: random.Random, hosts: Sequence[str]) -> str:
    rand, randint, choice = rng.random, rng.randint, rng.choice
    scheme = "https" if rand() < 0.85 else "http"
    # Skewed host popularity: a few big sites, a long tail.
    host = hosts[min(int(rng.paretovariate(0.8)) - 1, len(hosts) - 1) if rand() < 0.5
                 else randint(0, len(hosts) - 1)]
    segs = []
    for _ in range(randint(1, 5)):
        x = rand()
        if x < 0.55:
            segs.append(choice(_WORDS))
        elif x < 0.8:
            segs.append(str(randint(1, 10 ** randint(1, 8))))
        else:
            segs.append("-".join(choice(_WORDS) for _ in range(randint(2, 6))))
    kind = rand()
    if kind < 0.06:  # non-ASCII path, percent-encoded as a browser sends it
        segs[randint(0, len(segs) - 1)] = quote(choice(_UNICODE_WORDS))
    elif kind < 0.10:  # raw Chinese characters (an IRI, as scraped from a page)
        segs.insert(randint(0, len(segs)),
                    "".join(choice(_CHINESE) for _ in range(randint(2, 6))))
    url = f"{scheme}://{host}/" + "/".join(segs)
    if rand() < 0.3:
        url += choice(_EXTENSIONS)
    if rand() < 0.6:
        params = [f"id={randint(1, 10 ** 9)}"]
        for _ in range(randint(0, 3)):
            key = choice(_QUERY_KEYS)
            params.append(f"{key}={choice(_WORDS) if rand() < 0.5 else randint(0, 999)}")
        rng.shuffle(params)
        url += "?" + "&".join(params)
    return url


def make_urls(n: int, seed: int = 20240601) -> Tuple[List[str], List[str]]:
    """n present and n absent distinct URL-like strings, disjoint, deterministic."""
    rng = random.Random(seed)
    hosts = _make_hosts(rng, 400)
    seen: Dict[str, None] = {}
    while len(seen) < 2 * n:
        seen[_make_url(rng, hosts)] = None
    everything = list(seen)
    # Interleave so both halves have exactly the same distribution.
    return everything[0::2], everything[1::2]


def fresh(keys: Sequence[str]) -> List[str]:
    """New str objects with equal values: no cached hash() or UTF-8 form."""
    return [s.encode().decode() for s in keys]


def fresh_ops(ops: Sequence[Tuple[bool, str]]) -> List[Tuple[bool, str]]:
    return [(is_add, s.encode().decode()) for is_add, s in ops]


def make_ops(present: Sequence[str], absent: Sequence[str], n_ops: int,
             seed: int = 7) -> Tuple[List[Tuple[bool, str]], int, int]:
    """Random crawler-like operations: 50% adds of new keys, 25% lookups of keys
    added in an earlier chunk, 25% lookups of never-added keys.

    Returns (ops, present_lookups, absent_lookups); each op is (is_add, key).
    Lookups of present keys only refer to keys added in earlier chunks of
    CHUNK ops, so the batch form (per chunk: lookups, then adds) gives the
    same answers as the one-call-per-op form.
    """
    rng = random.Random(seed)
    ops: List[Tuple[bool, str]] = []
    next_add = next_absent = 0
    n_present = n_absent = 0
    for start in range(0, n_ops, CHUNK):
        added_before = next_add
        for _ in range(min(CHUNK, n_ops - start)):
            r = rng.random()
            if r < 0.5 or added_before == 0:
                ops.append((True, present[next_add]))
                next_add += 1
            elif r < 0.75:
                ops.append((False, present[rng.randrange(added_before)]))
                n_present += 1
            else:
                ops.append((False, absent[next_absent]))
                next_absent += 1
                n_absent += 1
    return ops, n_present, n_absent


def chunked(ops: Sequence[Tuple[bool, str]]) -> List[Tuple[List[str], List[str]]]:
    """(lookups, adds) per chunk of CHUNK ops."""
    out = []
    for start in range(0, len(ops), CHUNK):
        part = ops[start:start + CHUNK]
        out.append(([k for a, k in part if not a], [k for a, k in part if a]))
    return out


# --------------------------------------------------------------------------
# Peers: each written the way its own documentation suggests
# --------------------------------------------------------------------------

class Peer:
    name = ""
    dist = ""  # distribution name for importlib.metadata
    module = ""
    note = ""
    has_add_batch = False
    has_contains_batch = False

    def __init__(self) -> None:
        self.mod: Any = importlib.import_module(self.module)

    def version(self) -> str:
        try:
            return importlib.metadata.version(self.dist)
        except importlib.metadata.PackageNotFoundError:
            return getattr(self.mod, "__version__", "?")

    def new(self, capacity: int, error_rate: float) -> Any:
        raise NotImplementedError

    # One call per key.  The `in` operator where the peer supports it.
    def add_loop(self, f: Any, keys: Sequence[str]) -> None:
        add = f.add
        for k in keys:
            add(k)

    def contains_loop(self, f: Any, keys: Sequence[str]) -> int:
        hits = 0
        for k in keys:
            if k in f:
                hits += 1
        return hits

    def mixed_loop(self, f: Any, ops: Sequence[Tuple[bool, str]]) -> int:
        add = f.add
        hits = 0
        for is_add, k in ops:
            if is_add:
                add(k)
            elif k in f:
                hits += 1
        return hits

    # Batch calls return their raw results; counting happens outside timing.
    def add_batch(self, f: Any, keys: Sequence[str]) -> Any:
        raise NotImplementedError

    def contains_batch(self, f: Any, keys: Sequence[str]) -> Any:
        raise NotImplementedError

    @staticmethod
    def count(result: Any) -> int:
        return int(sum(1 for x in result if x))

    def mixed_batch(self, f: Any, chunks: Sequence[Tuple[List[str], List[str]]]) -> List[Any]:
        results = []
        for lookups, adds in chunks:
            results.append(self.contains_batch(f, lookups))
            self.add_batch(f, adds)
        return results

    def memory(self, f: Any, keys: Sequence[str]) -> Optional[int]:
        """Bytes of the bit array (bits / 8) where known."""
        return None

    def params(self, f: Any) -> str:
        return ""


class Crawldedup(Peer):
    name, dist, module = "crawldedup", "crawldedup", "crawldedup"
    has_add_batch = has_contains_batch = True

    def new(self, capacity: int, error_rate: float) -> Any:
        return self.mod.BloomFilter(capacity, error_rate)

    def add_batch(self, f: Any, keys: Sequence[str]) -> Any:
        return f.add_many(keys)

    def contains_batch(self, f: Any, keys: Sequence[str]) -> Any:
        return f.contains_many(keys)

    @staticmethod
    def count(result: Any) -> int:
        return int(result.sum())

    def memory(self, f: Any, keys: Sequence[str]) -> Optional[int]:
        return int(f.nbytes)

    def params(self, f: Any) -> str:
        return f"m={f.num_bits}, k={f.num_hashes}"


class CrawldedupBlocked(Crawldedup):
    name = "crawldedup-blocked"
    note = "layout='blocked': a key's bits in one 64-byte cache line"

    def new(self, capacity: int, error_rate: float) -> Any:
        return self.mod.BloomFilter(capacity, error_rate, layout="blocked")


class Rbloom(Peer):
    name, dist, module = "rbloom", "rbloom", "rbloom"
    note = "Python's hash(): salted per process, so it cannot be saved and reloaded"
    has_add_batch = True

    def new(self, capacity: int, error_rate: float) -> Any:
        return self.mod.Bloom(capacity, error_rate)

    def add_batch(self, f: Any, keys: Sequence[str]) -> Any:
        return f.update(keys)

    def memory(self, f: Any, keys: Sequence[str]) -> Optional[int]:
        return int(f.size_in_bits) // 8

    def params(self, f: Any) -> str:
        return f"m={f.size_in_bits}"


def _sha256_hash(key: Any, _sha256: Callable = hashlib.sha256,
                 _from_bytes: Callable = int.from_bytes) -> int:
    """rbloom's persistent hash recipe: the first 16 bytes of sha256 of the
    key as a signed 128-bit int (key bytes here; the README pickles the key)."""
    if isinstance(key, str):
        key = key.encode()
    return _from_bytes(_sha256(key).digest()[:16], "big", signed=True)


class RbloomSha256(Rbloom):
    name = "rbloom-sha256"
    note = "hash_func=sha256 of the UTF-8 key (rbloom's recipe for save/load)"

    def new(self, capacity: int, error_rate: float) -> Any:
        return self.mod.Bloom(capacity, error_rate, hash_func=_sha256_hash)


class PyBloomFilterMmap3(Peer):
    name, dist, module = "pybloomfiltermmap3", "pybloomfiltermmap3", "pybloomfilter"
    note = "in-memory filter (no filename)"
    has_add_batch = True

    def new(self, capacity: int, error_rate: float) -> Any:
        return self.mod.BloomFilter(capacity, error_rate)

    def add_batch(self, f: Any, keys: Sequence[str]) -> Any:
        return f.update(keys)

    def memory(self, f: Any, keys: Sequence[str]) -> Optional[int]:
        return int(f.num_bits) // 8

    def params(self, f: Any) -> str:
        return f"m={f.num_bits}, k={f.num_hashes}"


class PyBloomLive(Peer):
    name, dist, module = "pybloom-live", "pybloom-live", "pybloom_live"

    def new(self, capacity: int, error_rate: float) -> Any:
        return self.mod.BloomFilter(capacity, error_rate)

    def memory(self, f: Any, keys: Sequence[str]) -> Optional[int]:
        return int(f.num_bits) // 8

    def params(self, f: Any) -> str:
        return f"m={f.num_bits}, k={f.num_slices}"


class FastbloomRs(Peer):
    name, dist, module = "fastbloom-rs", "fastbloom-rs", "fastbloom_rs"
    note = "add_str / contains_str (its typed str calls); batch: *_str_batch, check_type=False"
    has_add_batch = has_contains_batch = True

    def new(self, capacity: int, error_rate: float) -> Any:
        return self.mod.BloomFilter(capacity, error_rate)

    def add_loop(self, f: Any, keys: Sequence[str]) -> None:
        add = f.add_str
        for k in keys:
            add(k)

    def contains_loop(self, f: Any, keys: Sequence[str]) -> int:
        has = f.contains_str
        hits = 0
        for k in keys:
            if has(k):
                hits += 1
        return hits

    def mixed_loop(self, f: Any, ops: Sequence[Tuple[bool, str]]) -> int:
        add, has = f.add_str, f.contains_str
        hits = 0
        for is_add, k in ops:
            if is_add:
                add(k)
            elif has(k):
                hits += 1
        return hits

    def add_batch(self, f: Any, keys: Sequence[str]) -> Any:
        return f.add_str_batch(keys)

    def contains_batch(self, f: Any, keys: Sequence[str]) -> Any:
        return f.contains_str_batch(keys, check_type=False)

    def memory(self, f: Any, keys: Sequence[str]) -> Optional[int]:
        return int(f.config().size()) // 8

    def params(self, f: Any) -> str:
        return f"m={f.config().size()}, k={f.hashes()}"


class PySet(Peer):
    name, dist, module = "set", "", "builtins"
    note = "exact; memory = set table + the str objects it holds"
    has_add_batch = True

    def version(self) -> str:
        return platform.python_version()

    def new(self, capacity: int, error_rate: float) -> Any:
        return set()

    def add_batch(self, f: Any, keys: Sequence[str]) -> Any:
        return f.update(keys)

    def memory(self, f: Any, keys: Sequence[str]) -> Optional[int]:
        return sys.getsizeof(f) + sum(sys.getsizeof(k) for k in f)

    def params(self, f: Any) -> str:
        return "exact"


ALL_PEERS = [Crawldedup, CrawldedupBlocked, Rbloom, RbloomSha256, PyBloomFilterMmap3,
             PyBloomLive, FastbloomRs, PySet]
SCENARIO2_PEERS = {"crawldedup", "crawldedup-blocked", "rbloom", "rbloom-sha256",
                   "pybloomfiltermmap3",
                   "pybloom-live", "fastbloom-rs"}


# --------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------

def timed(fn: Callable, *args: Any) -> Tuple[float, Any]:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        result = fn(*args)
        t1 = time.perf_counter()
    finally:
        gc.enable()
    return t1 - t0, result


class Results:
    def __init__(self) -> None:
        # scenario -> peer -> op -> record
        self.data: Dict[str, Dict[str, Dict[str, Dict[str, Any]]]] = {}
        self.peer_info: Dict[str, Dict[str, Dict[str, Any]]] = {}

    def record(self, scenario: str, peer: str, op: str, times: List[float], n_ops: int,
               **extra: Any) -> Dict[str, Any]:
        rec = {"times_s": times, "n_ops": n_ops,
               "ns_per_op": statistics.median(times) / n_ops * 1e9, **extra}
        self.data.setdefault(scenario, {}).setdefault(peer, {})[op] = rec
        print(f"  {peer:<20} {op:<28} {rec['ns_per_op']:9.1f} ns/op  "
              f"(reps: {', '.join(f'{t / n_ops * 1e9:.1f}' for t in times)})", flush=True)
        return rec

    def info(self, scenario: str, peer: str, **kv: Any) -> None:
        self.peer_info.setdefault(scenario, {}).setdefault(peer, {}).update(kv)


def run_scenario1(peer: Peer, present: List[str], absent: List[str], reps: int,
                  res: Results, timed_n: Optional[int] = None) -> None:
    """Capacity len(present): add all, look up all present, all absent.

    timed_n < n times only the first timed_n keys of each pass (for slow
    peers); the filter is still filled to capacity before the lookups.
    """
    sc = "scenario1"
    n = len(present)
    tn = min(timed_n or n, n)
    extra = {"timed_keys": tn} if tn < n else {}

    times = []
    f = None
    for _ in range(reps):
        f = None
        gc.collect()
        keys = fresh(present[:tn])
        f = peer.new(n, ERROR_RATE)
        dt, _ = timed(peer.add_loop, f, keys)
        times.append(dt)
        del keys
    if tn < n:
        peer.add_loop(f, present[tn:])
    res.record(sc, peer.name, ADD, times, tn, **extra)

    times, fns = [], []
    for _ in range(reps):
        keys = fresh(present[:tn])
        dt, hits = timed(peer.contains_loop, f, keys)
        times.append(dt)
        fns.append(tn - hits)
        del keys
    res.record(sc, peer.name, HAS_PRESENT, times, tn, false_negatives=max(fns), **extra)

    times, fps = [], []
    for _ in range(reps):
        keys = fresh(absent[:tn])
        dt, hits = timed(peer.contains_loop, f, keys)
        times.append(dt)
        fps.append(hits)
        del keys
    res.record(sc, peer.name, HAS_ABSENT, times, tn, false_positives=fps[-1], **extra)
    res.info(sc, peer.name, fpr=fps[-1] / tn, fpr_keys=tn, false_negatives=max(fns),
             memory_bytes=peer.memory(f, present), params=peer.params(f), note=peer.note)

    if peer.has_add_batch:
        times = []
        for _ in range(reps):
            f = None
            gc.collect()
            keys = fresh(present)
            f = peer.new(n, ERROR_RATE)
            dt, _ = timed(peer.add_batch, f, keys)
            times.append(dt)
            del keys
        res.record(sc, peer.name, ADD_BATCH, times, n)
    if peer.has_contains_batch:
        for op, source, expect_all in ((HAS_PRESENT_BATCH, present, True),
                                       (HAS_ABSENT_BATCH, absent, False)):
            times, hits = [], 0
            for _ in range(reps):
                keys = fresh(source)
                dt, out = timed(peer.contains_batch, f, keys)
                times.append(dt)
                hits = peer.count(out)
                del keys, out
            if expect_all:
                res.record(sc, peer.name, op, times, n, false_negatives=n - hits)
            else:
                res.record(sc, peer.name, op, times, n, false_positives=hits)
    del f
    gc.collect()


def run_scenario2(peer: Peer, ops: List[Tuple[bool, str]], n_present: int, n_absent: int,
                  capacity: int, reps: int, res: Results) -> None:
    sc = "scenario2"
    n_ops = len(ops)
    times, hits = [], 0
    f = None
    for _ in range(reps):
        f = None
        gc.collect()
        run = fresh_ops(ops)
        f = peer.new(capacity, ERROR_RATE)
        dt, hits = timed(peer.mixed_loop, f, run)
        times.append(dt)
        del run
    # Lookups of present keys must all hit, so the surplus is false positives.
    res.record(sc, peer.name, MIXED, times, n_ops, false_positives=hits - n_present)
    res.info(sc, peer.name, fpr=(hits - n_present) / n_absent, fpr_keys=n_absent,
             memory_bytes=peer.memory(f, []), params=peer.params(f), note=peer.note)
    f = None
    gc.collect()
    if peer.has_add_batch and peer.has_contains_batch:
        times = []
        for _ in range(reps):
            f = None
            gc.collect()
            chunks = chunked(fresh_ops(ops))
            f = peer.new(capacity, ERROR_RATE)
            dt, out = timed(peer.mixed_batch, f, chunks)
            times.append(dt)
            hits = sum(peer.count(r) for r in out)
            del chunks, out
        res.record(sc, peer.name, MIXED_BATCH, times, n_ops, false_positives=hits - n_present)
        f = None
        gc.collect()


# --------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------

def machine_info() -> Dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
    }


def fmt_bytes(b: Optional[int]) -> str:
    if b is None:
        return "?"
    if b >= 1 << 20:
        return f"{b / (1 << 20):.1f} MiB"
    return f"{b / 1024:.0f} KiB"


def fmt_ns(ns: float) -> str:
    return f"{ns:,.0f}" if ns >= 100 else f"{ns:.1f}"


def table(res: Results, scenario: str, op_order: List[str], peer_order: List[str]) -> List[str]:
    data = res.data.get(scenario, {})
    ref = data.get("crawldedup", {})
    lines = ["| Peer | Operation | ns/op | Ratio (peer / crawldedup) | Measured FPR "
             "| Memory | Notes |",
             "|---|---|---:|---:|---:|---:|---|"]
    for op in op_order:
        for peer in peer_order:
            rec = data.get(peer, {}).get(op)
            if rec is None:
                continue
            info = res.peer_info.get(scenario, {}).get(peer, {})
            if peer == "crawldedup":
                ratio = "1.00 (ref)"
            elif op in ref:
                ratio = f"{rec['ns_per_op'] / ref[op]['ns_per_op']:.2f}"
            else:
                ratio = "n/a"
            fpr = info.get("fpr")
            fpr_s = "0" if fpr == 0 else (f"{fpr:.4%}" if fpr is not None else "?")
            notes = []
            if "timed_keys" in rec:
                notes.append(f"timed on the first {rec['timed_keys']:,} keys")
            if rec.get("false_negatives"):
                notes.append(f"**{rec['false_negatives']} FALSE NEGATIVES**")
            lines.append(f"| {peer} | {op} | {fmt_ns(rec['ns_per_op'])} | {ratio} | {fpr_s} "
                         f"| {fmt_bytes(info.get('memory_bytes'))} | {'; '.join(notes)} |")
    return lines


def peer_notes(res: Results, peers: List[Peer]) -> List[str]:
    out = []
    for p in peers:
        params = res.peer_info.get("scenario1", {}).get(p.name, {}).get("params", "")
        bits = f" ({params})" if params else ""
        out.append(f"- **{p.name}** {p.version()}{bits}" + (f": {p.note}" if p.note else ""))
    return out


def targets(res: Results, n: int) -> List[str]:
    """The ratios the project's targets are stated in (crawldedup's single and
    batch calls against the peers' single-call loops), each with its goal."""
    s1 = res.data.get("scenario1", {})

    def ns(peer: str, op: str) -> Optional[float]:
        rec = s1.get(peer, {}).get(op)
        return None if rec is None else rec["ns_per_op"]

    rows = []
    checks = [
        ("single add vs rbloom add", ADD, "rbloom", ADD, 1.0),
        ("single lookup (present) vs rbloom", HAS_PRESENT, "rbloom", HAS_PRESENT, 1.0),
        ("single lookup (absent) vs rbloom", HAS_ABSENT, "rbloom", HAS_ABSENT, 1.0),
        ("single add vs pybloomfiltermmap3", ADD, "pybloomfiltermmap3", ADD, 2.0),
        ("single lookup (present) vs pybloomfiltermmap3", HAS_PRESENT, "pybloomfiltermmap3",
         HAS_PRESENT, 2.0),
        ("single lookup (absent) vs pybloomfiltermmap3", HAS_ABSENT, "pybloomfiltermmap3",
         HAS_ABSENT, 2.0),
        ("add_many vs rbloom's add loop", ADD_BATCH, "rbloom", ADD, 3.0),
        ("contains_many (present) vs rbloom's lookup loop", HAS_PRESENT_BATCH,
         "rbloom", HAS_PRESENT, 3.0),
        ("contains_many (absent) vs rbloom's lookup loop", HAS_ABSENT_BATCH,
         "rbloom", HAS_ABSENT, 3.0),
    ]
    for label, my_op, peer, peer_op, goal in checks:
        mine, theirs = ns("crawldedup", my_op), ns(peer, peer_op)
        if mine is None or theirs is None:
            continue
        ratio = theirs / mine
        rows.append(f"| {label} | {theirs:,.0f} / {mine:,.1f} | {ratio:.2f}x | "
                    f">= {goal:g}x | {'met' if ratio >= goal else 'NOT met'} |")
    info = res.peer_info.get("scenario1", {}).get("crawldedup", {})
    found = re.search(r"m=(\d+)", info.get("params") or "")
    if found:
        bits, optimum = int(found.group(1)), -n * math.log(ERROR_RATE) / math.log(2) ** 2
        rows.append(f"| num_bits vs the optimum | {bits:,} / {optimum:,.0f} | "
                    f"{bits / optimum:.4f} | within 1% | "
                    f"{'met' if abs(bits / optimum - 1) <= 0.01 else 'NOT met'} |")
    fpr = info.get("fpr")
    if fpr is not None:
        rows.append(f"| measured FPR vs target {ERROR_RATE} | {fpr:.5f} | "
                    f"{fpr / ERROR_RATE:.3f}x | <= 1.1x | "
                    f"{'met' if fpr <= 1.1 * ERROR_RATE else 'NOT met'} |")
    if not rows:
        return []
    return ["", "## Targets", "",
            "crawldedup's calls against the peers' one-call-per-key loops (ns/op: peer / "
            "crawldedup), as the targets are stated.", "",
            "| check | ns/op | ratio | goal | |", "|---|---:|---:|---:|---|"] + rows


def _big_key(i: int) -> str:
    # Distinct for distinct i below 10**12 (the multiplier is prime to 10**12).
    return f"https://www.example.com/catalog/item-{i * 2654435761 % 10**12}.html"


def _fill(add_many: Callable[[List[str]], Any], n: int, step: int = 1_000_000) -> None:
    for start in range(0, n, step):
        add_many([_big_key(i) for i in range(start, min(n, start + step))])


def large_lookups(capacity: int, n_keys: int, reps: int, filled: bool) -> List[str]:
    """The issue's crawl-scale targets: a filter of the given capacity, filled
    to capacity (or holding only the looked-up keys), then contains_many over
    n_keys random present keys and as many absent ones, with the blocked
    layout, the standard layout, and each without prefetching (the core's
    benchmark switch); against rbloom's one-call loop at the same capacity
    and fill.  Each lookup pass gets fresh str copies."""
    import crawldedup
    from crawldedup import _kernel
    rng = random.Random(11)
    held = capacity if filled else n_keys
    present = [_big_key(rng.randrange(held)) for _ in range(n_keys)]
    absent = [_big_key(capacity + rng.randrange(10**9)) for _ in range(n_keys)]
    how = (f"filled to capacity ({capacity:,} URL-like keys)" if filled
           else f"holding the {n_keys:,} present keys only")
    lines = ["", f"## Lookups at capacity {capacity:,}", "",
             f"A filter of capacity {capacity:,} (error rate {ERROR_RATE}) {how}; "
             f"`contains_many` over {n_keys:,} random present keys and {n_keys:,} absent ones "
             f"(median of {reps} passes over fresh str copies), with and without the batch "
             "kernels' prefetching; rbloom answers one `in` per key.  `contains_many` "
             "runs on every CPU the process may use (a batch this large is cut into slices "
             "looked up at once) except in the rows that say one thread.",
             "", "| filter | present, ns/key | absent, ns/key |", "|---|---:|---:|"]
    print(f"\nLookups at capacity {capacity:,}, {how}", flush=True)
    results: Dict[str, Tuple[float, float]] = {}

    def measure(name: str, lookup: Callable[[List[str]], Any]) -> None:
        row = []
        for keys in (present, absent):
            times = []
            for _ in range(reps):
                run = fresh(keys)
                times.append(timed(lookup, run)[0])
                del run
            row.append(statistics.median(times) / len(keys) * 1e9)
        results[name] = (row[0], row[1])
        print(f"  {name:<48} present {row[0]:8.1f} ns/key   absent {row[1]:8.1f} ns/key",
              flush=True)

    for layout in ("blocked", "standard"):
        bf = crawldedup.BloomFilter(capacity, ERROR_RATE, layout=layout)
        if filled:
            _fill(bf.add_many, capacity)
        else:
            bf.add_many(present)
        measure(f"crawldedup {layout}, contains_many", bf.contains_many)
        threads = crawldedup.set_threads(1)
        try:
            measure(f"crawldedup {layout}, contains_many, one thread", bf.contains_many)
        finally:
            crawldedup.set_threads(threads)
        previous = _kernel.impl._set_prefetching(False)
        try:
            measure(f"crawldedup {layout}, contains_many, no prefetch", bf.contains_many)
        finally:
            _kernel.impl._set_prefetching(previous)
        del bf
        gc.collect()
    try:
        import rbloom
    except ImportError:
        rbloom = None
    if rbloom is not None:
        rb = rbloom.Bloom(capacity, ERROR_RATE)
        if filled:
            _fill(rb.update, capacity)
        else:
            rb.update(present)
        measure("rbloom, one `in` per key", lambda keys: [key in rb for key in keys])
        del rb
        gc.collect()
    for name, (hit, miss) in results.items():
        lines.append(f"| {name} | {hit:,.1f} | {miss:,.1f} |")
    blocked = results["crawldedup blocked, contains_many"]
    blocked1 = results["crawldedup blocked, contains_many, one thread"]
    plain = results["crawldedup standard, contains_many, no prefetch"]
    lines += ["", "| check | present | absent | goal |", "|---|---:|---:|---:|",
              f"| blocked `contains_many` vs standard without prefetching | "
              f"{plain[0] / blocked[0]:.2f}x | {plain[1] / blocked[1]:.2f}x | >= 3x |"]
    if "rbloom, one `in` per key" in results:
        rb_row = results["rbloom, one `in` per key"]
        lines.append(f"| blocked `contains_many` vs rbloom's loop | {rb_row[0] / blocked[0]:.2f}x "
                     f"| {rb_row[1] / blocked[1]:.2f}x | >= 10x |")
        lines.append(f"| the same on one thread (`set_threads(1)`) | "
                     f"{rb_row[0] / blocked1[0]:.2f}x | {rb_row[1] / blocked1[1]:.2f}x | |")
    print("\n".join(lines[-5:]), flush=True)
    return lines


def mapped_files(out: Path) -> List[str]:
    """How long BloomFilter.open takes on a 1 GiB state file (created sparse),
    with and without reading it whole to check its checksum; and the memory
    of the blocked layout against the standard one for the same error rate."""
    import tempfile

    import crawldedup
    lines = ["", "## State files and layouts", ""]
    capacity = 900_000_000  # 1.0 GiB of bits at 1%
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        path = os.path.join(tmp, "big.bloom")
        crawldedup.BloomFilter.open(path, capacity=capacity, error_rate=0.01).close()
        size = os.path.getsize(path)
        timings = {}
        for verify in (False, True):
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                bf = crawldedup.BloomFilter.open(path, verify=verify, mode="r")
                times.append(time.perf_counter() - t0)
                bf.close()
            timings[verify] = statistics.median(times)
    lines.append(f"- `BloomFilter.open` of a {size / 2**30:.2f} GiB state file: "
                 f"{timings[False] * 1e3:.2f} ms (default for large files: the bits are not "
                 f"read), {timings[True] * 1e3:.0f} ms with `verify=True` (reads the whole file "
                 f"from the page cache).")
    for p in (0.01, 0.001):
        std = crawldedup.optimal_parameters(capacity, p)[0]
        blk = crawldedup.optimal_parameters(capacity, p, layout="blocked")[0]
        lines.append(f"- Memory of the blocked layout at error rate {p}: {blk / std:.3f}x the "
                     f"standard layout (both sized to meet the rate).")
    print("\n".join(lines), flush=True)
    return lines


def draw_chart(res: Results, path: Path, peer_order: List[str], title: str,
               subtitles: Dict[str, str]) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, LogLocator
    except ImportError:
        print("note: matplotlib is not installed; no chart (pip install matplotlib)")
        return False
    groups = [(sc, ops) for sc, ops in (("scenario1", SCENARIO1_OPS), ("scenario2", SCENARIO2_OPS))
              if res.data.get(sc)]
    if not groups:
        return False
    layout = []
    for sc, ops in groups:
        data = res.data[sc]
        # Per operation, the peers that have it, in peer order.
        cols = [(op, [p for p in peer_order if op in data.get(p, {})]) for op in ops]
        layout.append((sc, [(op, ps) for op, ps in cols if ps]))
    widths = [sum(len(ps) + 1 for _, ps in cols) for _, cols in layout]
    fig, axes = plt.subplots(1, len(layout), figsize=(16, 6.5), squeeze=False,
                             gridspec_kw={"width_ratios": widths})
    cmap = plt.get_cmap("tab10")
    colors = {p: cmap(i % 10) for i, p in enumerate(peer_order)}
    handles: Dict[str, Any] = {}
    for ax, (sc, cols) in zip(axes[0], layout):
        data = res.data[sc]
        x, centers = 0.0, []
        for op, ps in cols:
            centers.append(x + (len(ps) - 1) / 2)
            for p in ps:
                y = data[p][op]["ns_per_op"]
                handles[p] = ax.bar(x, y, width=0.9, color=colors[p], label=p)
                ax.text(x, y * 1.06, fmt_ns(y), ha="center", va="bottom", fontsize=7,
                        rotation=90)
                x += 1
            x += 1  # gap between operations
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.set_xticks(centers)
        ax.set_xticklabels([op.replace(", ", ",\n").replace(" (", "\n(") for op, _ in cols],
                           fontsize=9)
        ax.set_xlim(-1, x - 1)
        ax.set_ylabel("ns per operation (log scale; lower is better)")
        ax.set_title(subtitles.get(sc, sc), fontsize=11)
        ax.grid(axis="y", which="major", alpha=0.4)
        lowest = min(data[p][op]["ns_per_op"] for op, ps in cols for p in ps)
        _, hi = ax.get_ylim()
        # Bars start at a power of ten, so their heights compare honestly.
        ax.set_ylim(10 ** math.floor(math.log10(lowest * 0.9)), hi * 2.5)
    order = [p for p in peer_order if p in handles]
    fig.legend([handles[p] for p in order], order, loc="upper center", ncol=len(order),
               frameon=False, bbox_to_anchor=(0.5, 0.93))
    fig.suptitle(title, fontsize=13)
    fig.tight_layout(rect=(0, 0, 1, 0.89))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def main(argv: Optional[List[str]] = None) -> int:
    names = [p.name for p in ALL_PEERS]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: n = 100,000 keys, 100,000 ops on a 10M-capacity filter")
    ap.add_argument("--only", default="",
                    help=f"comma-separated peers to run (default all of: {','.join(names)})")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"),
                    help="output directory (default: benchmarks/results/)")
    ap.add_argument("--no-chart", action="store_true", help="do not draw bloom.png")
    ap.add_argument("--n", type=int, default=None, help="keys in scenario 1 (default 1,000,000)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per measurement (median)")
    ap.add_argument("--slow-keys", type=int, default=None,
                    help="time pybloom-live on only this many keys in scenario 1")
    ap.add_argument("--no-scenario2", action="store_true", help="skip the 100M-capacity scenario")
    args = ap.parse_args(argv)

    n = args.n or (100_000 if args.quick else 1_000_000)
    big_capacity = 10_000_000 if args.quick else BIG_CAPACITY
    n_ops = min(n, 1_000_000)
    wanted = [s.strip() for s in args.only.split(",") if s.strip()] or names
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        ap.error(f"unknown peer(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    if args.reps < 1:
        ap.error("--reps must be at least 1")

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    machine = machine_info()
    print(f"Machine: {machine['cpu']}, {machine['logical_cpus']} logical CPUs, "
          f"{machine['python']}, {machine['platform']}")

    peers: List[Peer] = []
    skipped: Dict[str, str] = {}
    for cls in ALL_PEERS:
        if cls.name not in wanted:
            continue
        try:
            peers.append(cls())
        except Exception as exc:  # ImportError, or a broken build of the peer
            skipped[cls.name] = f"{type(exc).__name__}: {exc}"
            print(f"note: skipping {cls.name} ({skipped[cls.name]})")
    if not peers:
        print("nothing to run")
        return 1
    versions: Dict[str, str] = {}
    for p in peers:
        versions.setdefault(p.dist or "python", p.version())
    for extra in ("numpy", "matplotlib"):
        try:
            versions[extra] = importlib.metadata.version(extra)
        except importlib.metadata.PackageNotFoundError:
            pass
    print("Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    cd = next((p for p in peers if p.name == "crawldedup"), None)
    if cd is not None:
        impl = cd.mod.IMPLEMENTATION
        print(f"crawldedup from {os.path.dirname(cd.mod.__file__)} (implementation: {impl})")
        if impl != "core":
            print("WARNING: crawldedup is running its pure-Python twin, not the compiled core")
    else:
        print("note: crawldedup not run; ratios are n/a")

    t0 = time.perf_counter()
    present, absent = make_urls(n)
    avg_len = sum(map(len, present)) / n
    non_ascii = sum(1 for s in present if not s.isascii()) / n
    print(f"Workload: {n:,} present + {n:,} absent distinct URLs in "
          f"{time.perf_counter() - t0:.1f} s (mean {avg_len:.0f} chars, "
          f"{non_ascii:.1%} with raw non-ASCII), e.g.:")
    examples = present[:3]
    for pick in (lambda s: "%" in s, lambda s: not s.isascii()):
        examples.append(next((s for s in present if pick(s) and s not in examples), ""))
    for s in examples:
        print(f"    {s}")

    res = Results()
    print(f"\nScenario 1: capacity {n:,}, error rate {ERROR_RATE}, {args.reps} reps, "
          "median ns/op")
    for p in peers:
        timed_n = args.slow_keys if p.name == "pybloom-live" else None
        run_scenario1(p, present, absent, args.reps, res, timed_n)

    s2_peers = [p for p in peers if p.name in SCENARIO2_PEERS]
    s2_skipped = [p.name for p in peers if p.name not in SCENARIO2_PEERS]
    n_present = n_absent = 0
    if s2_peers and not args.no_scenario2:
        ops, n_present, n_absent = make_ops(present, absent, n_ops)
        print(f"\nScenario 2: capacity {big_capacity:,}, error rate {ERROR_RATE}, {n_ops:,} "
              f"ops ({n_ops - n_present - n_absent:,} adds, {n_present:,} present lookups, "
              f"{n_absent:,} absent lookups)")
        for p in s2_peers:
            run_scenario2(p, ops, n_present, n_absent, big_capacity, args.reps, res)
        del ops
    elapsed = time.perf_counter() - started

    peer_order = [p.name for p in peers]
    title = f"crawldedup vs Python Bloom filters ({machine['cpu']}, {machine['python']})"
    md = ["# crawldedup Bloom filter benchmark", "",
          f"- Machine: {machine['cpu']}, {machine['logical_cpus']} logical CPUs, "
          f"{machine['platform']}",
          f"- Python: {machine['python']}",
          "- Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
          f"- Run: {time.strftime('%Y-%m-%d %H:%M:%S')}, {elapsed:.0f} s, "
          f"`{' '.join(['compare.py'] + (argv if argv is not None else sys.argv[1:]))}`",
          f"- Workload: URL-like strings, mean {avg_len:.0f} characters, "
          f"{non_ascii:.1%} with raw non-ASCII characters, some percent-encoded",
          "- ns/op: median of " f"{args.reps} timed passes over fresh str copies; "
          "ratio > 1 means crawldedup is faster (batch rows are compared with "
          "crawldedup's batch call).",
          "",
          f"## Scenario 1: capacity {n:,}, error rate {ERROR_RATE}",
          "",
          f"Add {n:,} keys one call per key; look up the {n:,} present keys and {n:,} "
          "absent keys; FPR = fraction of the absent keys reported present.",
          ""]
    md += table(res, "scenario1", SCENARIO1_OPS, peer_order)
    if res.data.get("scenario2"):
        md += ["", f"## Scenario 2: capacity {big_capacity:,}, error rate {ERROR_RATE}", "",
               f"{n_ops:,} random operations on an empty filter: "
               f"{n_ops - n_present - n_absent:,} adds of new keys, {n_present:,} lookups of "
               f"keys added earlier, {n_absent:,} lookups of absent keys (one call per op; "
               f"batch rows: per {CHUNK} ops one lookup call and one add call).  The filter is "
               "far from full, so the measured FPR is near 0 by design; this scenario "
               "measures the cost of probing a bit array larger than the CPU caches.",
               ""]
        md += table(res, "scenario2", SCENARIO2_OPS, peer_order)
        if s2_skipped:
            md += ["", "Not run in scenario 2: " + ", ".join(s2_skipped) +
                   " (set is not a fixed-size filter; its scenario 1 numbers apply)."]
    md += targets(res, n)
    if not args.no_scenario2 and (not args.only or "crawldedup" in args.only):
        md += large_lookups(big_capacity, n_ops, args.reps, filled=not args.quick)
    if not args.quick and (not args.only or "crawldedup" in args.only):
        md += mapped_files(out)
    md += ["", "## Peers", ""] + peer_notes(res, peers)
    if skipped:
        md += ["", "Skipped (not installed): " + ", ".join(
            f"{k} ({v})" for k, v in skipped.items())]
    text = "\n".join(md) + "\n"

    print("\n" + text)
    (out / "compare.md").write_text(text, encoding="utf-8")
    payload = {"machine": machine, "versions": versions, "skipped": skipped,
               "config": {"n": n, "error_rate": ERROR_RATE, "reps": args.reps,
                          "scenario2_capacity": big_capacity, "scenario2_ops": n_ops,
                          "scenario2_present_lookups": n_present,
                          "scenario2_absent_lookups": n_absent, "chunk": CHUNK,
                          "quick": args.quick, "slow_keys": args.slow_keys,
                          "mean_key_chars": avg_len, "non_ascii_fraction": non_ascii},
               "elapsed_s": elapsed, "results": res.data, "peers": res.peer_info}
    (out / "compare.json").write_text(json.dumps(payload, indent=2), encoding="utf-8")
    written = [out / "compare.md", out / "compare.json"]
    subtitles = {"scenario1": f"Capacity {n:,}: add / look up {n:,} keys",
                 "scenario2": f"Capacity {big_capacity:,}: {n_ops:,} random ops"}
    if not args.no_chart and draw_chart(res, out / "bloom.png", peer_order, title, subtitles):
        written.append(out / "bloom.png")
    print("Wrote " + ", ".join(str(w) for w in written))
    print(f"Total time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
