"""crawldedup.scrapy against Scrapy's own components, side by side in one run.

1. Memory: RSS growth of a duplicate filter holding N request fingerprints
   (default 4,000,000), each in a fresh process: Scrapy's RFPDupeFilter (a
   ``set`` of 20-byte ``bytes``), crawldedup's DupeFilter "exact" (a
   FingerprintSet), "bloom" (a BloomFilter for N at 1%) and "disk" (a
   DiskStore in a temporary folder, 256 MiB budget); RSS counts the mapped
   files' pages a process has touched, RssAnon only its own memory.
2. ``request_seen`` time per request, fingerprinting included: RFPDupeFilter
   with Scrapy's default fingerprinter against DupeFilter "exact" with
   crawldedup's RequestFingerprinter, on the same requests (fresh Request
   objects for each, so no cached fingerprint carries over); the
   fingerprints are checked identical first.
3. A whole crawl of a local site (tests/scrapy_site.py, served on
   127.0.0.1) with Scrapy's components and with crawldedup's: pages/s.

Reproduce:  python benchmarks/compare_scrapy.py [--n 4000000] [--requests 200000] [--pages 2000]
            [--parts memory,seen,crawl]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

MEMORY_CHILD = r"""
import gc, json, sys
import numpy as np

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

def rss_anon():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0

kind, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(7)
chunk = 100_000
if kind == "scrapy":
    from scrapy.dupefilters import RFPDupeFilter
    df = RFPDupeFilter()
    def add(block):
        # what request_seen does with each new fingerprint
        df._fingerprints.update(block)
else:
    from scrapy.settings import Settings
    from crawldedup.scrapy import DupeFilter
    settings = Settings({"CRAWLDEDUP_CAPACITY": n, "CRAWLDEDUP_ERROR_RATE": 0.01})
    df = DupeFilter(kind, settings=settings)
    seen = df._backend.seen
    def add(block):
        for fp in block:
            seen(fp)

def fingerprints(m):
    data = rng.bytes(20 * m)
    return [data[i:i + 20] for i in range(0, len(data), 20)]
# warm up the code paths and the allocator outside the measurement
add(fingerprints(10))
gc.collect()
before, before_anon = rss(), rss_anon()
for start in range(0, n, chunk):
    m = min(chunk, n - start)
    add(fingerprints(m))
gc.collect()
print(json.dumps({"bytes": rss() - before, "anon": rss_anon() - before_anon,
                  "len": len(df) if kind != "scrapy" else len(df._fingerprints)}))
if kind != "scrapy":
    df.close("finished")  # a "disk" filter's temporary folder goes with it
"""


def measure_memory(kind: str, n: int) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    out = subprocess.run([sys.executable, "-c", MEMORY_CHILD, kind, str(n)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def make_requests(n: int):
    from scrapy import Request
    # a crawl's mix: many repeats, query strings in any order, fragments
    urls = []
    for i in range(n):
        j = (i * 7919) % max(1, n // 3)
        if i % 3 == 0:
            urls.append(f"https://shop.example.com/item/{j}?b=2&a={j % 17}#reviews")
        elif i % 3 == 1:
            urls.append(f"https://shop.example.com/item/{j}?a={j % 17}&b=2")
        else:
            urls.append(f"https://www.example.org/list/{j % 997}/page/{j}?utm_source=x&sort=new")
    return urls, Request


def time_request_seen(n: int) -> dict:
    from scrapy.dupefilters import RFPDupeFilter
    from scrapy.utils.request import RequestFingerprinter as ScrapyFingerprinter

    from crawldedup.scrapy import DupeFilter, RequestFingerprinter

    urls, Request = make_requests(n)
    # identical fingerprints, checked on every URL
    ours_fp, theirs_fp = RequestFingerprinter(), ScrapyFingerprinter()
    for url in urls[: min(n, 50_000)]:
        assert ours_fp.fingerprint(Request(url)) == theirs_fp.fingerprint(Request(url)), url
    results = {}
    for name in ("scrapy", "crawldedup", "scrapy", "crawldedup"):  # twice each, best kept
        requests = [Request(u) for u in urls]
        if name == "scrapy":
            df = RFPDupeFilter(fingerprinter=ScrapyFingerprinter())
        else:
            df = DupeFilter("exact", fingerprinter=RequestFingerprinter())
        seen = df.request_seen
        t = time.perf_counter()
        dups = sum(1 for r in requests if seen(r))
        dt = time.perf_counter() - t
        results[name] = min(results.get(name, dt), dt)
        results[name + "_dups"] = dups
        del requests
    assert results["scrapy_dups"] == results["crawldedup_dups"]
    return results


def crawl(pages: int) -> dict:
    import tempfile

    from scrapy_site import Site, run_crawl
    ours = {"DUPEFILTER_CLASS": "crawldedup.scrapy.DupeFilter",
            "REQUEST_FINGERPRINTER_CLASS": "crawldedup.scrapy.RequestFingerprinter"}
    out = {}
    for name, settings in (("scrapy", {}), ("crawldedup", ours), ("scrapy", {}),
                           ("crawldedup", ours)):
        with Site(pages) as site, tempfile.TemporaryDirectory() as folder:
            stats_path = os.path.join(folder, "stats.json")
            result = run_crawl(folder, site.root, {**settings, "LOG_LEVEL": "WARNING"},
                               stats_path, timeout=600)
            assert result.returncode == 0, result.stderr[-2000:]
            assert not site.repeats()
            with open(stats_path) as f:
                stats = json.load(f)
            rate = stats["downloader/response_count"] / stats["elapsed"]
            out[name] = max(out.get(name, 0.0), rate)
            out["pages"] = stats["downloader/response_count"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=4_000_000, help="fingerprints for memory")
    parser.add_argument("--requests", type=int, default=200_000, help="requests timed")
    parser.add_argument("--pages", type=int, default=2000, help="pages of the crawled site")
    parser.add_argument("--parts", default="memory,seen,crawl",
                        help="comma-separated parts to run (default: all three)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if not parts or parts - {"memory", "seen", "crawl"}:
        parser.error("--parts takes memory, seen and/or crawl")
    import scrapy

    import crawldedup
    print(f"Scrapy {scrapy.__version__}, crawldedup {crawldedup.__version__} "
          f"({crawldedup.IMPLEMENTATION}), Python {sys.version.split()[0]}")
    print(f"reproduce: python benchmarks/compare_scrapy.py --n {args.n} "
          f"--requests {args.requests} --pages {args.pages} --parts {args.parts}\n")
    if "memory" in parts:
        report_memory(args.n)
    if "seen" in parts:
        report_request_seen(args.requests)
    if "crawl" in parts:
        report_crawl(args.pages)


def report_memory(n: int) -> None:
    mem = {kind: measure_memory(kind, n) for kind in ("scrapy", "exact", "bloom", "disk")}
    base = mem["scrapy"]["bytes"] / n
    print(f"Memory: RSS growth for {n:,} request fingerprints (20 bytes each)")
    print(f"  {'filter':42s} {'bytes/fp':>9s} {'vs Scrapy':>10s} {'RssAnon/fp':>11s}")
    for kind, label in (("scrapy", "Scrapy RFPDupeFilter (set of bytes)"),
                        ("exact", "crawldedup DupeFilter 'exact'"),
                        ("bloom", "crawldedup DupeFilter 'bloom' (1%)"),
                        ("disk", "crawldedup DupeFilter 'disk'")):
        per = mem[kind]["bytes"] / n
        anon = mem[kind]["anon"] / n
        print(f"  {label:42s} {per:9.2f} {base / per if per else float('inf'):9.1f}x "
              f"{anon:11.2f}")


def report_request_seen(requests: int) -> None:
    t = time_request_seen(requests)
    s_us = t["scrapy"] / requests * 1e6
    c_us = t["crawldedup"] / requests * 1e6
    print(f"\nrequest_seen, fingerprinting included ({requests:,} requests, "
          f"{t['scrapy_dups']:,} duplicates, identical fingerprints checked)")
    print(f"  {'filter':58s} {'us/request':>10s} {'speed-up':>9s}")
    print(f"  {'Scrapy RFPDupeFilter + default RequestFingerprinter':58s} {s_us:10.2f} {1:8.1f}x")
    print(f"  {'crawldedup DupeFilter exact + RequestFingerprinter':58s} {c_us:10.2f} "
          f"{s_us / c_us:8.1f}x")


def report_crawl(pages: int) -> None:
    c = crawl(pages)
    print(f"\nWhole crawl of a local site ({c['pages']:,} pages, 127.0.0.1, best of two)")
    print(f"  {'components':42s} {'pages/s':>9s} {'ratio':>7s}")
    print(f"  {'Scrapy defaults':42s} {c['scrapy']:9.1f} {1:6.2f}x")
    print(f"  {'crawldedup fingerprinter + DupeFilter':42s} {c['crawldedup']:9.1f} "
          f"{c['crawldedup'] / c['scrapy']:6.2f}x")


if __name__ == "__main__":
    main()
