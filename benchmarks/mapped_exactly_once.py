"""What exactly-once adds cost a shared (mapped) Bloom filter, in one process.

An add to storage that other processes may write (a file opened with
``BloomFilter.open``) decides "new" on one bit's atomic fetch-or, after
reading the key's bits, so that processes adding one key at once are told
"new" exactly once (docs/format.md, "Exactly one new").  This times the
core's kernel on such storage (an anonymous shared mapping: the same atomic
path as a mapped file, without the file's page faults) for two builds of the
core in one process, interleaved run by run so that the load of a shared
machine falls on both alike:

* ``add_many new``: batches of keys not in the filter;
* ``add_many seen``: the same batches again (every bit already set);
* ``add new``: single adds of new keys.

    python benchmarks/mapped_exactly_once.py --before OLD/_core....so \\
        [--after NEW/_core....so] [--capacity 10000000] [--keys 1000000]

``--after`` defaults to the core of the crawldedup that is imported.  Figures
are ns a key, medians of ``--repeat`` runs, and the ratio after / before.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import mmap
import statistics
import time
from types import ModuleType
from typing import Dict, List

import crawldedup
from crawldedup import _core
from crawldedup.bloom.filter import optimal_parameters


def load_core(path: str, name: str) -> ModuleType:
    """A build of crawldedup._core from its shared object, under another name
    (the init function is named after the last part, _core)."""
    loader = importlib.machinery.ExtensionFileLoader(f"{name}._core", path)
    spec = importlib.util.spec_from_file_location(f"{name}._core", path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def one_run(core: ModuleType, num_bits: int, num_hashes: int, layout: str,
            keys: List[bytes], singles: List[bytes], batch: int) -> Dict[str, float]:
    size = core.nbytes_for(num_bits)
    buffer = mmap.mmap(-1, size)  # shared, page-aligned: the atomic path
    for at in range(0, size, mmap.PAGESIZE):  # fault every page in, untimed
        buffer[at] = 0
    bits = core.BloomBits()
    bits._init_bits(num_bits, num_hashes, 0, buffer, layout)
    out = {}
    try:
        for name, batch_keys in (("add_many new", keys), ("add_many seen", keys)):
            start = time.perf_counter()
            for at in range(0, len(batch_keys), batch):
                bits.add_many(batch_keys[at:at + batch])
            out[name] = (time.perf_counter() - start) / len(batch_keys) * 1e9
        add = bits.add
        start = time.perf_counter()
        for key in singles:
            add(key)
        out["add new"] = (time.perf_counter() - start) / len(singles) * 1e9
    finally:
        bits._release()
        buffer.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the other build's _core .so")
    parser.add_argument("--after", default=_core.__file__)
    parser.add_argument("--capacity", type=int, default=10_000_000)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--layout", default="standard", choices=["standard", "blocked"])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    builds = {"before": load_core(args.before, "before"), "after": load_core(args.after, "after")}
    num_bits, num_hashes = optimal_parameters(args.capacity, 0.01, args.layout)
    keys = [f"https://example.com/page/{i}".encode() for i in range(args.keys)]
    singles = [f"https://example.org/one/{i}".encode() for i in range(args.keys // 5)]
    runs: Dict[str, List[Dict[str, float]]] = {name: [] for name in builds}
    for _ in range(args.repeat):
        for name, core in builds.items():
            runs[name].append(one_run(core, num_bits, num_hashes, args.layout, keys, singles,
                                      args.batch))
    print(f"crawldedup {crawldedup.__version__}; capacity {args.capacity:,} "
          f"({num_bits:,} bits, k={num_hashes}), layout {args.layout}, {args.keys:,} keys "
          f"in batches of {args.batch:,}; ns a key, median of {args.repeat}")
    medians = {name: {what: statistics.median(r[what] for r in rows) for what in rows[0]}
               for name, rows in runs.items()}
    for what in medians["before"]:
        before, after = medians["before"][what], medians["after"][what]
        print(f"  {what:14s} before {before:7.1f}  after {after:7.1f}  "
              f"after / before {after / before:5.2f}")


if __name__ == "__main__":
    main()
