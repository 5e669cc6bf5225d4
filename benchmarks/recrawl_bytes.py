"""Bytes of a second Scrapy crawl of a local site, with and without crawldedup.

A local site (127.0.0.1, random port) of 200 pages of about 8 KB: half send
ETag/Last-Modified and answer conditional requests, half send only
Content-Length.  A first crawl with RecrawlMiddleware records them all; then
20% of the pages change, and the second crawl is made three ways over the
same site: plain Scrapy (no crawldedup), crawldedup with conditional requests
only, and crawldedup with conditional requests plus the HEAD strategy for the
pages without validators.  The server counts the bytes it sends (status
line, headers and bodies: every byte of every answer, 304s and HEADs
included; not the requests).  The body bytes (what a full answer carries
beyond its headers) are printed beside them.

The target "bytes fall by at least the share of unchanged pages" holds for
the bodies: no unchanged page sends its body again.  On all bytes it cannot
hold while pages are of similar size: a changed page costs what it cost
before, and an unchanged one still costs the headers of its 304 or HEAD
answer (about 150 to 230 bytes here), so the bytes saved are the unchanged
share minus those headers.  The table shows where every byte goes.

Run:  PYTHONPATH=src python benchmarks/recrawl_bytes.py [--pages 200] [--changed 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
sys.path.insert(0, TESTS)

from recrawl_site import Site  # noqa: E402


WORDS = 1200  # about 8.5 KB a page; --words changes it


def page(i: int, version: int) -> str:
    rng = random.Random(i * 1000 + version)
    words = " ".join(f"w{rng.randrange(100000)}" for _ in range(WORDS))
    return f"<html><body><h1>Page {i} v{version}</h1><p>{words}</p></body></html>"


def crawl(urls, settings) -> dict:
    config = {"urls": urls, "settings": settings}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(os.path.dirname(HERE), "src"),
                                                    env.get("PYTHONPATH")) if p)
    run = subprocess.run([sys.executable, os.path.join(TESTS, "recrawl_crawl.py"),
                          json.dumps(config)], capture_output=True, timeout=600, env=env)
    if run.returncode != 0:
        raise SystemExit(run.stderr.decode()[-3000:])
    return json.loads(run.stdout.decode().strip().splitlines()[-1])


def main() -> None:
    global WORDS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--changed", type=float, default=0.2)
    parser.add_argument("--words", type=int, default=1200,
                        help="words a page (1200: about 8.5 KB)")
    args = parser.parse_args()
    WORDS = args.words
    half = args.pages // 2
    paths = [f"/v/{i}" for i in range(half)] + [f"/plain/{i}" for i in range(half, args.pages)]
    site = Site({p: page(i, 0) for i, p in enumerate(paths)})
    urls = [site.url + p for p in paths]
    middleware = {"DOWNLOADER_MIDDLEWARES": {"crawldedup.scrapy.RecrawlMiddleware": 580}}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            state = os.path.join(tmp, "recrawl.db")
            crawl(urls, {**middleware, "CRAWLDEDUP_RECRAWL_STATE": state})
            first = site.total("bytes")
            rng = random.Random(7)
            changed = rng.sample(range(args.pages), int(args.changed * args.pages))
            for i in changed:
                site.change(paths[i], page(i, 1))
            rows = []
            variants = [
                ("plain Scrapy (no crawldedup)", {}),
                ("crawldedup: conditional requests", {
                    **middleware, "CRAWLDEDUP_RECRAWL_DROP": True}),
                ("crawldedup: conditional + HEAD", {
                    **middleware, "CRAWLDEDUP_RECRAWL_DROP": True,
                    "CRAWLDEDUP_RECRAWL_HEAD": True}),
            ]
            for name, settings in variants:
                copy = os.path.join(tmp, f"state-{len(rows)}.db")
                for suffix in ("", "-wal", "-shm"):
                    if os.path.exists(state + suffix):
                        shutil.copyfile(state + suffix, copy + suffix)
                if settings:
                    settings = {**settings, "CRAWLDEDUP_RECRAWL_STATE": copy}
                site.reset_counts()
                out = crawl(urls, settings)
                bodies = sum(counts["full"] * len(site.pages[path][0].encode("utf-8"))
                             for path, counts in site.counts.items() if path in site.pages)
                rows.append((name, site.total("bytes"), bodies, site.total("full"),
                             site.total("304"), site.total("head"), len(out["parsed"])))
    finally:
        site.close()
    unchanged = 1 - len(changed) / args.pages
    print(f"{args.pages} pages ({half} with ETag/Last-Modified, {args.pages - half} with "
          f"Content-Length only), {len(changed)} changed ({1 - unchanged:.0%}); first crawl "
          f"sent {first:,} bytes ({first // args.pages:,} a page)\n")
    print(f"{'second crawl':<34}{'bytes sent':>11}{'saved':>7}{'bodies':>11}{'saved':>7}"
          f"{'headers':>9}{'200s':>6}{'304s':>6}{'HEADs':>7}{'parsed':>8}")
    base, base_bodies = rows[0][1], rows[0][2]
    for name, sent, bodies, full, not_modified, heads, parsed in rows:
        print(f"{name:<34}{sent:>11,}{1 - sent / base:>7.1%}{bodies:>11,}"
              f"{1 - bodies / base_bodies:>7.1%}{sent - bodies:>9,}{full:>6}{not_modified:>6}"
              f"{heads:>7}{parsed:>8}")
    _name, sent, bodies, full, not_modified, heads, _parsed = rows[-1]
    saved, saved_bodies = 1 - sent / base, 1 - bodies / base_bodies
    print("\n(bytes sent: status lines, headers and bodies of every answer; headers: "
          "bytes sent minus bodies)")
    changed_bodies = sum(len(site.pages[paths[i]][0].encode("utf-8")) for i in changed)
    print(f"share of unchanged pages: {unchanged:.0%}; conditional + HEAD saved {saved:.1%} of "
          f"all bytes sent: target {'met' if saved >= unchanged else 'missed'} "
          f"({(saved - unchanged) * 100:+.1f} points)")
    print(f"bodies: {bodies:,} bytes sent ({saved_bodies:.1%} saved); the bodies of the "
          f"{len(changed)} changed pages are {changed_bodies:,} bytes"
          f"{': no unchanged page sent its body' if bodies == changed_bodies else ''}")
    per_full = (rows[0][1] - rows[0][2]) / max(rows[0][3], 1)  # headers of a 200
    overhead = (sent - bodies) - full * per_full
    print(f"the gap: the headers of the {not_modified} 304 and {heads} HEAD answers, about "
          f"{overhead:,.0f} bytes ({overhead / base:.1%} of the plain crawl's bytes)")
    print(f"\nreproduce: PYTHONPATH=src python benchmarks/recrawl_bytes.py --pages {args.pages} "
          f"--changed {args.changed} --words {args.words}")


if __name__ == "__main__":
    main()
