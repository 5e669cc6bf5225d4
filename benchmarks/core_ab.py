"""Two builds of the compiled core, side by side in one process.

On a shared machine, two benchmark runs one after the other meet different
neighbours: a change of 5% drowns in the noise.  This script loads two
builds' ``crawldedup._core`` extension files into one Python process and
times the same kernel calls on each, alternating the order every round, so
that both builds meet the same machine.  It calls the kernels directly
(BloomBits, HammingIndex), not the wrappers above them.

    # build the other revision in a worktree of its own first:
    git worktree add ../before <rev> && (cd ../before && python setup.py build_ext --inplace)
    python benchmarks/core_ab.py ../before/src/crawldedup/_core*.so src/crawldedup/_core*.so

Rows: the Bloom filter's calls of benchmarks/compare.py (one call a key,
batches, threads, a 100M-key blocked filter) and the Hamming index's of
benchmarks/compare_index.py (query_many on one thread, pairs).  Prints the
median of each row, in ns per key (Bloom) or ms per call (index), and the
second build's time over the first's.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.machinery
import importlib.util
import inspect
import math
import random
import statistics
import time
from typing import Any, Callable, Dict, List

import numpy as np


def load(path: str) -> Any:
    loader = importlib.machinery.ExtensionFileLoader("crawldedup._core", path)
    spec = importlib.util.spec_from_file_location("crawldedup._core", path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def fresh(keys: List[str]) -> List[str]:
    """New str objects (CPython caches a str's UTF-8 form in it)."""
    return [k.encode().decode() for k in keys]


def bits(mod: Any, n: int, layout: str = "standard") -> Any:
    m = math.ceil(-n * math.log(0.01) / math.log(2) ** 2)
    m = (m + 511) // 512 * 512
    b = mod.BloomBits()
    b._init_bits(m, max(1, round(m / n * math.log(2))), 0, None, layout)
    return b


def per_key(fn: Callable[[List[str]], Any], keys: List[str]) -> float:
    gc.collect()
    t = time.perf_counter()
    fn(keys)
    return (time.perf_counter() - t) / len(keys) * 1e9


def bloom_rows(mod: Any, present: List[str], absent: List[str]) -> Dict[str, float]:
    out = {}
    b = bits(mod, len(present))
    out["add, one call a key (ns/key)"] = per_key(lambda ks: [b.add(k) for k in ks],
                                                  fresh(present))
    out["in, present (ns/key)"] = per_key(lambda ks: [k in b for k in ks], fresh(present))
    out["in, absent (ns/key)"] = per_key(lambda ks: [k in b for k in ks], fresh(absent))
    b = bits(mod, len(present))
    out["add_many (ns/key)"] = per_key(b.add_many, fresh(present))
    out["contains_many, present (ns/key)"] = per_key(b.contains_many, fresh(present))
    out["contains_many, absent (ns/key)"] = per_key(b.contains_many, fresh(absent))
    mod._set_batch_threads(1)
    out["contains_many, present, one thread (ns/key)"] = per_key(b.contains_many,
                                                                  fresh(present))
    mod._set_batch_threads(0)
    big = bits(mod, 100_000_000, "blocked")

    def batches(ks: List[str]) -> None:
        for i in range(0, len(ks), 2000):
            big.add_many(ks[i:i + 1000])
            big.contains_many(ks[i + 1000:i + 2000])
    out["100M blocked, batches of 1,000 (ns/key)"] = per_key(batches, fresh(present))
    out["100M blocked, contains_many (ns/key)"] = per_key(big.contains_many, fresh(present))
    return out


def _ids_first(mod: Any) -> bool:
    """Whether the build's HammingIndex.add_many takes (ids, fps), as the
    builds of this tree do, or (fps, ids), as older ones: the two builds
    compared may differ."""
    return list(inspect.signature(mod.HammingIndex.add_many).parameters)[1] == "ids"


def index_rows(mod: Any, fps: np.ndarray, queries: np.ndarray) -> Dict[str, float]:
    ix = mod.HammingIndex(3)
    ids = np.arange(len(fps), dtype=np.uint64)
    if _ids_first(mod):
        ix.add_many(ids, fps)
    else:
        ix.add_many(fps, ids)
    out = {}
    t = time.perf_counter()
    ix.query_many(queries, threads=1)
    out["index: query_many, one thread (ms)"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    ix.pairs()
    out["index: pairs (ms)"] = (time.perf_counter() - t) * 1e3
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("first", help="the first build's _core extension file")
    ap.add_argument("second", help="the second build's _core extension file")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keys", type=int, default=1_000_000)
    args = ap.parse_args()
    mods = {"first": load(args.first), "second": load(args.second)}
    rng = random.Random(11)
    present = [f"https://shop.site{rng.randrange(10**6)}.example.com/a/{i}?id={rng.random()}"
               for i in range(args.keys)]
    absent = [k + "#x" for k in present]
    gen = np.random.default_rng(7)
    fps = gen.integers(0, 2**64, size=args.keys, dtype=np.uint64)
    flips = np.uint64(1) << gen.integers(0, 64, 10_000).astype(np.uint64)
    queries = np.concatenate([fps[gen.integers(0, len(fps), 10_000)] ^ flips,
                              gen.integers(0, 2**64, size=10_000, dtype=np.uint64)])
    rows: Dict[str, Dict[str, List[float]]] = {}
    for r in range(args.rounds):
        for who in (("first", "second") if r % 2 == 0 else ("second", "first")):
            got = bloom_rows(mods[who], present, absent)
            got.update(index_rows(mods[who], fps, queries))
            for name, value in got.items():
                rows.setdefault(name, {"first": [], "second": []})[who].append(value)
            gc.collect()
    print(f"{args.rounds} rounds, {args.keys:,} keys, medians\n")
    print("| row | first | second | second / first |")
    print("|---|---:|---:|---:|")
    for name, got in rows.items():
        a, b = statistics.median(got["first"]), statistics.median(got["second"])
        print(f"| {name} | {a:.2f} | {b:.2f} | {b / a:.3f} |")


if __name__ == "__main__":
    main()
