#!/usr/bin/env python3
"""crawldedup's canonicalize_url and request_fingerprint side by side with
w3lib's canonicalize_url and Scrapy's request fingerprint.

One run, one machine, the same URLs for every contender:

* ``realistic``: 100,000 URLs from ``benchmarks/url_corpus.py`` (e-commerce,
  news, Chinese percent-encoded search and tag pages, tracking parameters,
  repeated and empty keys, fragments, and about 3% of URLs outside the
  compiled fast path, which go to w3lib).
* ``frontier`` (when the project's shared workload module is found, see
  ``--workloads``): the 100,000 ``URLS`` the project's peer harness measures.

Per corpus, one Python call per URL in a loop (as a crawler calls them):

* ``w3lib.url.canonicalize_url(url)`` vs ``crawldedup.canonicalize_url(url)``;
* ``scrapy.utils.request.fingerprint(scrapy.Request(url))`` vs
  ``crawldedup.request_fingerprint(url)``; also Scrapy's fingerprint of
  pre-built Requests (Request construction not timed) for reference;
* ``md5(w3lib canonicalize_url(url))`` (the seeds' recipe) vs
  ``crawldedup.url_fingerprint(url)``;
* the batch calls ``crawldedup.url_fingerprints(urls)`` and
  ``crawldedup.request_fingerprints(urls)`` against the same peer loops, and
  ``canonicalize_urls``, ``url_fingerprints`` (also ``canonical=False``),
  ``request_fingerprints`` again with ``crawldedup.set_threads(1)`` and with
  every usable CPU (large batches are cut into slices run on several
  threads, none holding the GIL), str URLs and UTF-8 bytes lines;
* crawldedup's opt-in extras (``strip_params=True``, ``remove_default_port``).

Every crawldedup result is checked equal to the peer's before timing.
CPython caches a str's UTF-8 form inside the object, so every timed pass runs
over fresh copies of the URLs, made outside the timed region, for every
contender alike.  Each measurement is repeated (default 3) and the median is
reported in microseconds per URL, with the ratio peer / crawldedup.

Usage (from a clone)::

    pip install . scrapy w3lib
    python benchmarks/compare_url.py                 # about a minute
    python benchmarks/compare_url.py --n 20000 --reps 1
    python benchmarks/compare_url.py --workloads /path/to/dir/with/workloads.py

Writes ``compare_url.md`` and ``compare_url.json`` to ``--out`` (default:
benchmarks/results/ next to this script).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

HERE = Path(__file__).resolve().parent
DEFAULT_WORKLOADS = "/work/shared/bench"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def fresh(urls: List[Any]) -> List[Any]:
    """New str (or bytes) objects with the same text (no cached UTF-8 or hash)."""
    if urls and isinstance(urls[0], bytes):
        return [(u + b"\x00")[:-1] for u in urls]
    return [(u + "\x00")[:-1] for u in urls]


def timed(fn: Callable[[Any], Any], urls: List[str], reps: int) -> float:
    """Median microseconds per call of fn over fresh copies of urls."""
    times = []
    for _ in range(reps):
        xs = fresh(urls)
        gc.collect()
        t0 = time.perf_counter()
        for x in xs:
            fn(x)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / len(urls) * 1e6


def timed_prepared(fn: Callable[[Any], Any], make: Callable[[List[str]], List[Any]],
                   urls: List[str], reps: int) -> float:
    times = []
    for _ in range(reps):
        xs = make(fresh(urls))
        gc.collect()
        t0 = time.perf_counter()
        for x in xs:
            fn(x)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / len(urls) * 1e6


def timed_batch(fn: Callable[[List[str]], Any], urls: List[str], reps: int) -> float:
    """Median microseconds per URL of one fn(urls) call over fresh copies."""
    times = []
    for _ in range(reps):
        xs = fresh(urls)
        gc.collect()
        t0 = time.perf_counter()
        fn(xs)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) / len(urls) * 1e6


def run_corpus(name: str, urls: List[str], reps: int) -> Dict[str, Any]:
    from w3lib.url import canonicalize_url as w3_canonicalize_url

    import crawldedup
    from crawldedup import (
        canonicalize_url,
        canonicalize_urls,
        request_fingerprint,
        request_fingerprints,
        url_fingerprint,
        url_fingerprints,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from scrapy import Request
        from scrapy.utils.request import fingerprint as scrapy_fingerprint

    md5 = hashlib.md5

    # Correctness first: identical output on every URL.
    mismatches = {"canonicalize_url": 0, "request_fingerprint": 0, "url_fingerprint": 0}
    for u in urls:
        c = w3_canonicalize_url(u)
        mismatches["canonicalize_url"] += canonicalize_url(u) != c
        mismatches["url_fingerprint"] += url_fingerprint(u) != md5(c.encode()).digest()
        mismatches["request_fingerprint"] += (request_fingerprint(u)
                                              != scrapy_fingerprint(Request(u)))
    mismatches["url_fingerprints (batch)"] = sum(
        a != md5(w3_canonicalize_url(u).encode()).digest()
        for a, u in zip(url_fingerprints(urls), urls))
    mismatches["canonicalize_urls (batch)"] = sum(
        a != w3_canonicalize_url(u) for a, u in zip(canonicalize_urls(urls), urls))
    mismatches["canonicalize_urls (batch, bytes)"] = sum(
        a != w3_canonicalize_url(u) for a, u in zip(canonicalize_urls([u.encode() for u in urls]),
                                                    urls))
    mismatches["request_fingerprints (batch)"] = sum(
        a != b for a, b in zip(request_fingerprints(urls), map(request_fingerprint, urls)))
    fast = sum(crawldedup._kernel.canonicalize_url_fast(u) is not None for u in urls)

    rows = []

    def pair(op: str, peer_name: str, peer_us: float, ours_name: str, ours_us: float,
             note: str = "") -> None:
        rows.append({"op": op, "peer": peer_name, "peer_us": peer_us, "crawldedup": ours_name,
                     "crawldedup_us": ours_us, "ratio": peer_us / ours_us, "note": note})
        print(f"  [{name}] {op:28s} peer {peer_us:8.3f} us  crawldedup {ours_us:7.3f} us  "
              f"x{peer_us / ours_us:6.1f}", flush=True)

    pair("canonicalize_url", "w3lib.url.canonicalize_url(url)",
         timed(w3_canonicalize_url, urls, reps), "crawldedup.canonicalize_url(url)",
         timed(canonicalize_url, urls, reps))
    ours_fp = timed(request_fingerprint, urls, reps)
    pair("request_fingerprint", "scrapy fingerprint(Request(url))",
         timed(lambda u: scrapy_fingerprint(Request(u)), urls, reps),
         "crawldedup.request_fingerprint(url)", ours_fp, "end to end, as a dupe filter sees it")
    pair("request_fingerprint (pre-built)", "scrapy fingerprint(req), Request built untimed",
         timed_prepared(scrapy_fingerprint, lambda us: [Request(u) for u in us], urls, reps),
         "crawldedup.request_fingerprint(url)", ours_fp, "Scrapy's cost without Request()")
    pair("url_fingerprint", "md5(w3lib canonicalize_url(url)).digest()",
         timed(lambda u: md5(w3_canonicalize_url(u).encode()).digest(), urls, reps),
         "crawldedup.url_fingerprint(url)", timed(url_fingerprint, urls, reps))
    peer_fp = rows[1]["peer_us"]
    pair("request_fingerprints (batch)", "scrapy fingerprint(Request(url))", peer_fp,
         "crawldedup.request_fingerprints(urls)", timed_batch(request_fingerprints, urls, reps),
         "one call for all URLs; the loop releases the GIL")
    pair("url_fingerprints (batch)", "md5(w3lib canonicalize_url(url)).digest()",
         rows[3]["peer_us"], "crawldedup.url_fingerprints(urls)",
         timed_batch(url_fingerprints, urls, reps), "one call for all URLs")
    # The batch kernels on one thread and on every usable CPU, against the
    # same peer loops (w3lib has no batch form).
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    as_bytes = [u.encode() for u in urls]
    peer_bytes = timed(lambda u: w3_canonicalize_url(u), as_bytes, reps)
    for threads, label in ((1, "1 thread"), (None, f"all threads ({cpus})")):
        previous = crawldedup.set_threads(threads)
        try:
            pair(f"canonicalize_urls, {label}", "w3lib.url.canonicalize_url(url)",
                 rows[0]["peer_us"], "crawldedup.canonicalize_urls(urls)",
                 timed_batch(canonicalize_urls, urls, reps), "one call for all URLs")
            pair(f"canonicalize_urls bytes, {label}", "w3lib canonicalize_url(line), bytes",
                 peer_bytes, "crawldedup.canonicalize_urls(lines)",
                 timed_batch(canonicalize_urls, as_bytes, reps),
                 "UTF-8 lines as a file gives them, as the command line does")
            pair(f"url_fingerprints, {label}", "md5(w3lib canonicalize_url(url)).digest()",
                 rows[3]["peer_us"], "crawldedup.url_fingerprints(urls)",
                 timed_batch(url_fingerprints, urls, reps), "one call for all URLs")
            pair(f"request_fingerprints, {label}", "scrapy fingerprint(Request(url))", peer_fp,
                 "crawldedup.request_fingerprints(urls)",
                 timed_batch(request_fingerprints, urls, reps), "one call for all URLs")
            pair(f"url_fingerprints raw, {label}", "hashlib.md5(line).digest()",
                 timed(lambda u: md5(u).digest(), as_bytes, reps),
                 "url_fingerprints(lines, canonical=False)",
                 timed_batch(lambda xs: url_fingerprints(xs, canonical=False), as_bytes, reps),
                 "no canonicalization (the --exact key)")
        finally:
            crawldedup.set_threads(previous)
    extras = timed(lambda u: canonicalize_url(u, strip_params=True, remove_default_port=True),
                   urls, reps)
    pair("canonicalize + extras", "w3lib.url.canonicalize_url(url)", rows[0]["peer_us"],
         "canonicalize_url(url, strip_params=True, remove_default_port=True)", extras,
         "extras have no w3lib equivalent; ratio vs plain w3lib")
    return {"corpus": name, "n": len(urls), "fast_path_share": fast / len(urls),
            "mismatches": mismatches, "rows": rows}


def markdown(payload: Dict[str, Any]) -> str:
    cfg = payload["config"]
    lines = ["# URL canonicalization and request fingerprints",
             "",
             f"crawldedup {cfg['crawldedup']} ({cfg['implementation']}), w3lib {cfg['w3lib']}, "
             f"scrapy {cfg['scrapy']}, Python {cfg['python']}, {cfg['machine']}; "
             f"median of {cfg['reps']} runs, one call per URL, fresh str objects per run.",
             ""]
    for res in payload["results"]:
        lines += [f"## {res['corpus']}: {res['n']:,} URLs "
                  f"({res['fast_path_share']:.1%} on the compiled fast path; "
                  f"mismatches: {', '.join(f'{k} {v}' for k, v in res['mismatches'].items())})",
                  "",
                  "| operation | peer | peer us/url | crawldedup | crawldedup us/url | speed-up |",
                  "|---|---|---:|---|---:|---:|"]
        for r in res["rows"]:
            lines.append(f"| {r['op']} | {r['peer']} | {r['peer_us']:.3f} | {r['crawldedup']} | "
                         f"{r['crawldedup_us']:.3f} | {r['ratio']:.1f}x |")
        lines.append("")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="URLs per corpus (default 100,000)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per measurement (median)")
    ap.add_argument("--workloads",
                    default=os.environ.get("CRAWLDEDUP_WORKLOADS", DEFAULT_WORKLOADS),
                    help="directory holding the project's workloads.py (frontier corpus); "
                         "skipped when absent")
    ap.add_argument("--out", default=str(HERE / "results"), help="output directory")
    args = ap.parse_args(argv)

    import scrapy
    import w3lib

    import crawldedup

    corpus = _load(HERE / "url_corpus.py", "url_corpus")
    results = [run_corpus("realistic", corpus.realistic_urls(args.n), args.reps)]
    workloads_py = Path(args.workloads) / "workloads.py"
    if workloads_py.exists():
        workloads = _load(workloads_py, "crawldedup_bench_workloads")
        results.append(run_corpus("frontier (workloads.URLS)", workloads.URLS(args.n), args.reps))
    else:
        print(f"no {workloads_py}: frontier corpus skipped", flush=True)

    payload = {"config": {"crawldedup": crawldedup.__version__,
                          "implementation": crawldedup.IMPLEMENTATION,
                          "w3lib": w3lib.__version__, "scrapy": scrapy.__version__,
                          "python": platform.python_version(),
                          "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
                          "reps": args.reps, "n": args.n},
               "results": results}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare_url.json").write_text(json.dumps(payload, indent=2), encoding="utf-8")
    (out / "compare_url.md").write_text(markdown(payload), encoding="utf-8")
    print(markdown(payload))
    bad = sum(v for res in results for v in res["mismatches"].values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
