#!/usr/bin/env python3
"""crawldedup's MinHash side by side with datasketch and rensa.

One run, one machine, on documents of about 1,000 characters, half English
and half Chinese (benchmarks/simhash_corpus.py's speed corpus: every 10th a
3% edit of another), num_perm 128 and shingles of 5 words (English) or 5
characters (Chinese):

* Signatures, microseconds a document.  crawldedup's ``minhash_many`` takes
  the texts (it shingles them itself), on every core and on one.  The peers
  take the same shingles, made beforehand and not timed (crawldedup's
  tokenizer, as ``crawldedup._reference.simhash.text_features`` gives them,
  encoded to UTF-8 for datasketch): datasketch's ``MinHash.update_batch``
  and rensa's ``RMinHash`` (one object a document, and its bulk
  ``digest_matrix_from_token_sets``).  ``crawldedup.compat.datasketch``'s
  ``MinHash`` is timed against datasketch's on the same values, and its
  ``hashvalues`` are checked equal for every document.  datasketch is timed
  on a spread subset (``--datasketch-docs``): its cost a document does not
  depend on the count.
* The index: build a ``MinHashIndex(threshold=0.8)`` and query every
  document (``add_many`` and ``query_many``) against datasketch's
  ``MinHashLSH(threshold=0.8)`` with ``insert`` and ``query`` a document,
  on datasketch's own signatures of the same shingles (the MinHash objects
  are made before the clock starts).  The candidates of every document are
  checked equal.  Memory a document: the growth of the anonymous memory
  (RssAnon) of a process of its own that builds the index.  crawldedup's
  includes the signatures it keeps (512 bytes at num_perm 128);
  datasketch's does not include its MinHash objects, which its users keep
  beside the index.

Rounds interleave the implementations and each keeps its best wall time.
rensa's batch API runs on every core (rayon) as ``minhash_many`` does;
``--one-thread`` holds both to one.

    pip install . datasketch rensa
    python benchmarks/compare_minhash.py                     # 100,000 documents
    python benchmarks/compare_minhash.py --n 10000 --datasketch-docs 2000   # quick

Writes ``minhash.json`` to ``--out`` (default: benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

NUM_PERM = 128
SHINGLE = 5
THRESHOLD = 0.8


def corpus(n: int) -> List[str]:
    from simhash_corpus import speed_corpus
    return speed_corpus(n, seed=29)


def shingles(docs: List[str]) -> List[List[str]]:
    """crawldedup's shingles of each document, as strings."""
    from crawldedup._reference.simhash import text_features
    out = []
    for doc in docs:
        words, chars = text_features(doc, 0, SHINGLE, SHINGLE)
        out.append(words + chars)
    return out


def best(fn: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def rss_anon() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


# ------------------------------------------------------------ signatures

def bench_signatures(docs: List[str], shing: List[List[str]], ds_docs: int,
                     rounds: int) -> Dict[str, Any]:
    import crawldedup
    from crawldedup.compat.datasketch import MinHash as CompatMinHash
    from crawldedup.near.minhash import minhash_many
    n = len(docs)
    step = max(1, n // ds_docs)
    subset = list(range(0, n, step))[:ds_docs]
    encoded = [[s.encode("utf-8") for s in shing[i]] for i in subset]
    results: Dict[str, Any] = {"documents": n, "datasketch documents": len(subset),
                               "shingles a document": sum(map(len, shing)) / n}
    try:
        import datasketch
    except ImportError:
        datasketch = None
    try:
        import rensa
    except ImportError:
        rensa = None

    def ours() -> None:
        minhash_many(docs, NUM_PERM, shingle=SHINGLE)

    def ours_one() -> None:
        previous = crawldedup.set_threads(1)
        try:
            minhash_many(docs, NUM_PERM, shingle=SHINGLE)
        finally:
            crawldedup.set_threads(previous)

    def rensa_objects() -> None:
        for sh in shing:
            m = rensa.RMinHash(NUM_PERM, 1)
            m.update(sh)
            m.digest()

    def rensa_bulk() -> None:
        rensa.RMinHash.digest_matrix_from_token_sets(shing, NUM_PERM, 1)

    def ds() -> None:
        for values in encoded:
            m = datasketch.MinHash(num_perm=NUM_PERM)
            m.update_batch(values)

    def compat() -> None:
        for values in encoded:
            m = CompatMinHash(num_perm=NUM_PERM)
            m.update_batch(values)

    timed: Dict[str, float] = {}
    runs = {"crawldedup minhash_many, every core": (ours, n),
            "crawldedup minhash_many, one thread": (ours_one, n),
            "crawldedup.compat.datasketch MinHash": (compat, len(subset))}
    if rensa is not None:
        runs["rensa RMinHash, one a document"] = (rensa_objects, n)
        runs["rensa digest_matrix_from_token_sets"] = (rensa_bulk, n)
    if datasketch is not None:
        runs["datasketch MinHash.update_batch"] = (ds, len(subset))
    for _ in range(rounds):          # interleaved: each keeps its best
        for name, (fn, count) in runs.items():
            t = best(fn, 1) / count
            timed[name] = min(timed.get(name, float("inf")), t)
    results["us a document"] = {k: v * 1e6 for k, v in timed.items()}
    if datasketch is not None:
        for values in encoded:
            a, b = CompatMinHash(num_perm=NUM_PERM), datasketch.MinHash(num_perm=NUM_PERM)
            a.update_batch(values)
            b.update_batch(values)
            assert np.array_equal(a.hashvalues, b.hashvalues), "compat hashvalues differ"
        results["compat hashvalues equal datasketch's"] = True
    ours_t = timed["crawldedup minhash_many, every core"]
    ratios = {}
    if datasketch is not None:
        ratios["minhash_many vs datasketch update_batch"] = \
            timed["datasketch MinHash.update_batch"] / ours_t
        ratios["compat MinHash vs datasketch MinHash"] = \
            timed["datasketch MinHash.update_batch"] / \
            timed["crawldedup.compat.datasketch MinHash"]
    if rensa is not None:
        fastest = min(timed["rensa RMinHash, one a document"],
                      timed["rensa digest_matrix_from_token_sets"])
        ratios["minhash_many vs rensa (its faster API)"] = fastest / ours_t
        ratios["minhash_many one thread vs rensa (its faster API)"] = \
            fastest / timed["crawldedup minhash_many, one thread"]
    results["ratios"] = ratios
    return results


# ------------------------------------------------------------ the index

def ds_signatures(shing: List[List[str]]) -> np.ndarray:
    """datasketch's hashvalues of every document (through the compat
    module, whose values are datasketch's: checked on the subset above)."""
    from crawldedup.compat.datasketch import MinHash
    out = np.empty((len(shing), NUM_PERM), dtype=np.uint32)
    for i, sh in enumerate(shing):
        m = MinHash(num_perm=NUM_PERM)
        m.update_batch([s.encode("utf-8") for s in sh])
        out[i] = m.hashvalues
    return out


def bench_index(sigs: np.ndarray, rounds: int) -> Dict[str, Any]:
    from crawldedup.near.lsh import MinHashIndex
    n = len(sigs)
    ids = list(range(n))
    results: Dict[str, Any] = {"documents": n}
    got: Dict[str, Any] = {}

    def ours() -> None:
        index = MinHashIndex(threshold=THRESHOLD, num_perm=NUM_PERM)
        index.add_many(ids, sigs)
        got["ours"] = index.query_many(sigs)
    timed = {"crawldedup MinHashIndex": best(ours, 1)}
    try:
        import datasketch
    except ImportError:
        datasketch = None
    if datasketch is not None:
        mhs = [datasketch.MinHash(num_perm=NUM_PERM, hashvalues=row, scheme="affine32")
               for row in sigs]

        def theirs() -> None:
            lsh = datasketch.MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
            for i, m in enumerate(mhs):
                lsh.insert(i, m)
            got["theirs"] = [lsh.query(m) for m in mhs]
        timed["datasketch MinHashLSH"] = best(theirs, 1)
        for _ in range(rounds - 1):
            timed["crawldedup MinHashIndex"] = min(timed["crawldedup MinHashIndex"],
                                                   best(ours, 1))
            timed["datasketch MinHashLSH"] = min(timed["datasketch MinHashLSH"], best(theirs, 1))
        offsets, found, _ = got["ours"]
        for i in range(n):
            mine = sorted(found[offsets[i]:offsets[i + 1]].tolist())
            assert mine == sorted(got["theirs"][i]), f"document {i}: candidates differ"
        results["candidates equal datasketch's"] = True
        results["candidates a document"] = len(found) / n
        results["ratio"] = timed["datasketch MinHashLSH"] / timed["crawldedup MinHashIndex"]
    results["s, build and query every document"] = timed
    return results


def index_memory(which: str, n: int) -> float:
    """Bytes of anonymous memory a document of an index built in a process
    of its own (signatures made before the first reading)."""
    out = subprocess.run([sys.executable, __file__, "--memory-of", which, "--n", str(n)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def memory_child(which: str, n: int) -> None:
    rng = np.random.default_rng(1)
    sigs = rng.integers(0, 1 << 32, (n, NUM_PERM), dtype=np.uint64).astype(np.uint32)
    if which == "crawldedup":
        from crawldedup.near.lsh import MinHashIndex
        before = rss_anon()
        index = MinHashIndex(threshold=THRESHOLD, num_perm=NUM_PERM)
        index.add_many(range(n), sigs)
    else:
        import datasketch
        mhs = [datasketch.MinHash(num_perm=NUM_PERM, hashvalues=row, scheme="affine32")
               for row in sigs]
        before = rss_anon()
        index = datasketch.MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
        for i, m in enumerate(mhs):
            index.insert(i, m)
    print((rss_anon() - before) / n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="documents")
    ap.add_argument("--datasketch-docs", type=int, default=10_000,
                    help="documents datasketch's MinHash is timed on")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--one-thread", action="store_true",
                    help="every library on one thread (crawldedup.set_threads(1), "
                         "RAYON_NUM_THREADS=1 for rensa)")
    ap.add_argument("--memory-of", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_of:
        memory_child(args.memory_of, args.n)
        return
    if args.one_thread:
        os.environ["RAYON_NUM_THREADS"] = "1"    # before rensa starts its thread pool
        import crawldedup
        crawldedup.set_threads(1)
    docs = corpus(args.n)
    shing = shingles(docs)
    report: Dict[str, Any] = {
        "machine": platform.machine(), "cpus": os.cpu_count(),
        "python": platform.python_version(), "numpy": np.__version__}
    for name in ("crawldedup", "datasketch", "rensa"):
        try:
            from importlib.metadata import version
            report[name] = version(name)
        except Exception:
            report[name] = None
    report["signatures"] = bench_signatures(docs, shing, args.datasketch_docs, args.rounds)
    print(json.dumps(report["signatures"], indent=2), flush=True)
    report["index"] = bench_index(ds_signatures(shing), args.rounds)
    print(json.dumps(report["index"], indent=2), flush=True)
    report["index"]["bytes a document (RssAnon growth)"] = {
        "crawldedup MinHashIndex": index_memory("crawldedup", args.n)}
    try:
        report["index"]["bytes a document (RssAnon growth)"]["datasketch MinHashLSH"] = \
            index_memory("datasketch", args.n)
    except subprocess.CalledProcessError:
        pass
    print(json.dumps(report["index"]["bytes a document (RssAnon growth)"], indent=2))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "minhash-one-thread.json" if args.one_thread else "minhash.json"
    (out / name).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
