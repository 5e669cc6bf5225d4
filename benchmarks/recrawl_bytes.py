"""Bytes of a second Scrapy crawl of a local site, with and without crawldedup.

A local site (127.0.0.1, random port) of 200 pages: half send
ETag/Last-Modified and answer conditional requests, half send only
Content-Length.  A first crawl with RecrawlMiddleware records them all; then
20% of the pages change, and the second crawl is made several ways over the
same site: plain Scrapy (no crawldedup), crawldedup with conditional requests
only, crawldedup with conditional requests plus the HEAD strategy for the
pages without validators, and the peers the issue names, each after a first
crawl of its own: Scrapy's HTTP cache with RFC2616Policy, and
scrapy-deltafetch when it is installed (``pip install scrapy-deltafetch``).
Besides the bytes, each row says how many of the changed pages reached the
spider's callback in their new version.

The pages link to each other in a tree (page i to pages 2i+1 and 2i+2,
eight levels), so the second crawl is also made by the usual Scrapy spider
that starts at the root and follows every link: plain, and with
crawldedup after a link-following first crawl of its own.  There the
changed pages sit behind unchanged ones, which are answered 304 or dropped,
and are reached through the requests crawldedup kept from them (the last
row turns that off: ``CRAWLDEDUP_RECRAWL_LINKS = False``).  The output
also says what keeping those requests costs per page (bytes in the state,
time to keep and read them), beside what keeping each page's compressed
body too costs (``CRAWLDEDUP_RECRAWL_BODIES``, which hands the callbacks
the kept version of a page answered 304, as Scrapy's HTTP cache does; its
row parses every page).

What is counted is what the crawler transfers, both ways, as the server sees
it: every request's request line and headers (Scrapy's defaults, plus the
validator crawldedup adds), and every answer's status line, headers and body,
304s and HEADs included.  TCP/IP and TLS framing are not counted (they add
about the same per request to every variant).  The body bytes are printed
beside them.

Sizes.  A page is about 18,000 bytes of HTML (``--page-bytes``; each
version drawn between 80% and 120% of it): the median HTML document of a
home page in the HTTP Archive's Web Almanac 2024 (chapter Page Weight) is
about 18 KB as transferred.  The server is Python's http.server
with the headers a small real server sends: Server, Date, Content-Type,
ETag, Last-Modified, Content-Length on a 200 (about 200 bytes); Server, Date,
ETag and Last-Modified on a 304, as nginx does (RFC 9110 asks a 304 for its
validators and forbids a Content-Length other than the 200's).  Busy sites
send more headers (cookies, cache and security headers), which makes every
304 and HEAD dearer and the saving smaller, not larger.

The target "bytes fall by at least the share of unchanged pages" holds for
the bodies: no unchanged page sends its body again.  On all bytes it cannot
hold: with ``u`` the unchanged share, ``c`` what a plain fetch of a page
costs (request + answer) and ``a`` what asking about an unchanged page
costs (the conditional request + the 304, or the HEAD and its answer), the
saving is at most ``u * (1 - a / c)``, below ``u`` whenever asking costs
anything; the changed pages cost what a plain fetch costs (a HEAD then GET
a little more).  The output prints that bound beside the measured saving.

Run:  PYTHONPATH=src python benchmarks/recrawl_bytes.py [--pages 200] [--changed 0.2]
      [--page-bytes 18000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")
sys.path.insert(0, TESTS)

from recrawl_site import Site  # noqa: E402

PAGE_BYTES = 18_000  # --page-bytes changes it


def page(i: int, version: int, links: str = "") -> str:
    """Version ``version`` of page ``i``: random words, PAGE_BYTES of HTML
    give or take 20% (each version its own length, as edits make them),
    and its ``links``."""
    rng = random.Random(i * 1000 + version)
    target = int(PAGE_BYTES * rng.uniform(0.8, 1.2))
    words = []
    size = 0
    while size < target:
        word = f"w{rng.randrange(100000)}"
        words.append(word)
        size += len(word) + 1
    return (f"<html><body><h1>Page {i} v{version}</h1><p>{' '.join(words)}</p>{links}"
            f"</body></html>")


def children(paths: list, i: int) -> str:
    """The links of page ``i`` in the tree: to pages 2i+1 and 2i+2."""
    return "".join(f'<a href="{paths[c]}">{paths[c]}</a>' for c in (2 * i + 1, 2 * i + 2)
                   if c < len(paths))


def kept_cost(state: str, bodies: list) -> dict:
    """What the link-following state keeps per page, and what keeping
    compressed bodies instead would: bytes, and time to keep and read."""
    from crawldedup.recrawl import RecrawlState
    conn = sqlite3.connect(state)
    records = conn.execute("SELECT url, data FROM links").fetchall()
    conn.close()
    out = {"links_pages": len(records),
           "links_bytes": sum(len(data) for _, data in records) / max(len(records), 1)}
    with tempfile.TemporaryDirectory() as tmp, RecrawlState(os.path.join(tmp, "t.db")) as copy:
        from crawldedup.recrawl.links import decode_links
        decoded = [(url, decode_links(data)) for url, data in records]
        out["links_each"] = sum(len(kept.links or ()) for _, kept in decoded) / max(
            len(decoded), 1)
        start = time.perf_counter()
        for url, kept in decoded:
            copy.set_links(url, kept.digest, kept.links)
        out["links_keep_us"] = (time.perf_counter() - start) / max(len(records), 1) * 1e6
        start = time.perf_counter()
        for url, _ in decoded:
            copy.get_links(url)
        out["links_read_us"] = (time.perf_counter() - start) / max(len(records), 1) * 1e6
    start = time.perf_counter()
    packed = [zlib.compress(body, 6) for body in bodies]
    out["body_keep_us"] = (time.perf_counter() - start) / len(bodies) * 1e6
    start = time.perf_counter()
    for data in packed:
        zlib.decompress(data)
    out["body_read_us"] = (time.perf_counter() - start) / len(bodies) * 1e6
    out["body_bytes"] = sum(map(len, packed)) / len(packed)
    out["body_raw"] = sum(map(len, bodies)) / len(bodies)
    return out


def crawl(urls, settings, options=None) -> dict:
    """One crawl in a process of its own; ``options`` go to recrawl_crawl.py
    (``urls`` there replaces the start URLs)."""
    config = {"urls": urls, "settings": settings, **(options or {})}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(os.path.dirname(HERE), "src"),
                                                    env.get("PYTHONPATH")) if p)
    run = subprocess.run([sys.executable, os.path.join(TESTS, "recrawl_crawl.py"),
                          json.dumps(config)], capture_output=True, timeout=600, env=env)
    if run.returncode != 0:
        raise SystemExit(run.stderr.decode()[-3000:])
    return json.loads(run.stdout.decode().strip().splitlines()[-1])


def copy_state(state: str, copy: str) -> str:
    """A copy of the first crawl's state (with its WAL), for one variant."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(state + suffix):
            shutil.copyfile(state + suffix, copy + suffix)
    return copy


def peers(tmp: str, index: str) -> list:
    """The peers the issue names, as (name, settings, crawl options): Scrapy's
    HTTP cache with RFC2616Policy (conditional requests, as a cache), and
    scrapy-deltafetch when installed (it skips a request that once gave an
    item; it filters only requests made by callbacks, so its spider starts
    from an index page that links to the pages; tests/recrawl_peers.py
    lets it run on Scrapy 2.13 and later)."""
    found = [("Scrapy HTTP cache (RFC2616Policy)", {
        "HTTPCACHE_ENABLED": True,
        "HTTPCACHE_POLICY": "scrapy.extensions.httpcache.RFC2616Policy",
        "HTTPCACHE_DIR": os.path.join(tmp, "httpcache")}, {})]
    if importlib.util.find_spec("scrapy_deltafetch") is None:
        print("scrapy-deltafetch is not installed: its row is left out "
              "(pip install scrapy-deltafetch)\n")
    else:
        found.append(("scrapy-deltafetch (from an index)", {
            "SPIDER_MIDDLEWARES": {"recrawl_peers.DeltaFetchAsync": 100},
            "DELTAFETCH_ENABLED": True, "DELTAFETCH_DIR": os.path.join(tmp, "deltafetch")},
            {"urls": [index], "follow": True, "items": True}))
    return found


def main() -> None:
    global PAGE_BYTES
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--changed", type=float, default=0.2)
    parser.add_argument("--page-bytes", type=int, default=18_000,
                        help="HTML bytes a page (18000: the Web Almanac 2024 median)")
    args = parser.parse_args()
    PAGE_BYTES = args.page_bytes
    half = args.pages // 2
    paths = [f"/v/{i}" for i in range(half)] + [f"/plain/{i}" for i in range(half, args.pages)]
    links = "".join(f'<a href="{p}">{p}</a>' for p in paths)
    site = Site({**{p: page(i, 0, children(paths, i)) for i, p in enumerate(paths)},
                 "/index": f"<html><body>{links}</body></html>"})
    urls = [site.url + p for p in paths]
    middleware = {"DOWNLOADER_MIDDLEWARES": {"crawldedup.scrapy.RecrawlMiddleware": 580}}
    following = {"urls": urls[:1], "crawl": True}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            others = peers(tmp, site.url + "/index")
            state = os.path.join(tmp, "recrawl.db")
            crawl(urls, {**middleware, "CRAWLDEDUP_RECRAWL_STATE": state})
            first = site.total("bytes") + site.total("received")
            # the link-following spider's first crawl, with a state of its own
            follow_state = os.path.join(tmp, "follow.db")
            crawl(urls, {**middleware, "CRAWLDEDUP_RECRAWL_STATE": follow_state}, following)
            # ...and one keeping the bodies too
            bodies_state = os.path.join(tmp, "bodies.db")
            crawl(urls, {**middleware, "CRAWLDEDUP_RECRAWL_STATE": bodies_state,
                         "CRAWLDEDUP_RECRAWL_BODIES": True}, following)
            for _name, settings, options in others:  # their own first crawls
                crawl(urls, settings, options)
            rng = random.Random(7)
            changed = rng.sample(range(args.pages), int(args.changed * args.pages))
            for i in changed:
                site.change(paths[i], page(i, 1, children(paths, i)))
            # changed pages below an unchanged one: reached only through it
            behind = sum(1 for i in changed if i and (i - 1) // 2 not in changed)
            kept = set(range(args.pages)) - set(changed)
            still = [paths[i] for i in sorted(kept)]
            rows = []
            # what asking about an unchanged page cost (request + answer), a variant
            ask_cost = {}
            variants = [
                ("plain Scrapy (no crawldedup)", {}, {}),
                ("crawldedup: conditional requests", {
                    **middleware, "CRAWLDEDUP_RECRAWL_DROP": True}, {}),
                ("crawldedup: conditional + HEAD", {
                    **middleware, "CRAWLDEDUP_RECRAWL_DROP": True,
                    "CRAWLDEDUP_RECRAWL_HEAD": True}, {}),
                *others,
                ("plain Scrapy, following links", {}, following),
                ("crawldedup: conditional, following", {
                    **middleware, "CRAWLDEDUP_RECRAWL_DROP": True}, following),
                ("crawldedup: cond. + HEAD, following", {
                    **middleware, "CRAWLDEDUP_RECRAWL_DROP": True,
                    "CRAWLDEDUP_RECRAWL_HEAD": True}, following),
                # every page to the callbacks: the 304s as their kept version
                ("crawldedup: + HEAD, BODIES, following", {
                    **middleware, "CRAWLDEDUP_RECRAWL_HEAD": True,
                    "CRAWLDEDUP_RECRAWL_BODIES": True}, following),
                # without the kept requests: the root's 304 ends the crawl
                ("crawldedup: LINKS off, following", {
                    **middleware, "CRAWLDEDUP_RECRAWL_DROP": True,
                    "CRAWLDEDUP_RECRAWL_LINKS": False}, following),
            ]
            for name, settings, options in variants:
                if name.startswith("crawldedup"):
                    first_state = (bodies_state if "BODIES" in name else
                                   follow_state if options else state)
                    settings = {**settings, "CRAWLDEDUP_RECRAWL_STATE": copy_state(
                        first_state, os.path.join(tmp, f"state-{len(rows)}.db"))}
                site.reset_counts()
                out = crawl(urls, settings, options)
                bodies = sum(counts["full"] * len(site.pages[path][0].encode("utf-8"))
                             for path, counts in site.counts.items() if path in site.pages)
                seen = sum(out["versions"].get(urls[i]) == "v1" for i in changed)
                rows.append((name, site.total("received"), site.total("bytes"), bodies,
                             site.total("full"), site.total("304"), site.total("head"),
                             len(out["parsed"]), seen))
                ask_cost[name] = sum(site.counts[p]["received"] + site.counts[p]["bytes"]
                                     for p in still) / max(len(still), 1)
            cost = kept_cost(follow_state, [site.pages[p][0].encode("utf-8") for p in paths])
            conn = sqlite3.connect(bodies_state)
            kept_bodies = conn.execute("SELECT AVG(LENGTH(data)) FROM links").fetchone()[0]
            conn.close()
    finally:
        site.close()
    unchanged = 1 - len(changed) / args.pages
    print(f"{args.pages} pages of about {PAGE_BYTES:,} bytes ({half} with ETag/Last-Modified, "
          f"{args.pages - half} with Content-Length only), {len(changed)} changed "
          f"({1 - unchanged:.0%}); the first crawl transferred {first:,} bytes\n")
    print(f"{'second crawl':<36}{'requests':>9}{'answers':>11}{'all bytes':>11}{'saved':>7}"
          f"{'bodies':>11}{'saved':>7}{'200s':>6}{'304s':>6}{'HEADs':>7}{'parsed':>8}"
          f"{'changed seen':>14}")
    base_all = rows[0][1] + rows[0][2]
    base_bodies = rows[0][3]
    follow_base = next(i for i, row in enumerate(rows) if row[0].endswith("following links"))
    for n, (name, received, sent, bodies, full, not_modified, heads, parsed,
            seen) in enumerate(rows):
        if n == follow_base:
            print(f"-- following links from the root; saved: against plain Scrapy following "
                  f"them ({behind} of the {len(changed)} changed pages lie below an unchanged "
                  f"page)")
            base_all, base_bodies = received + sent, bodies
        total = received + sent
        print(f"{name:<36}{received:>9,}{sent:>11,}{total:>11,}{1 - total / base_all:>7.1%}"
              f"{bodies:>11,}{1 - bodies / base_bodies:>7.1%}{full:>6}{not_modified:>6}"
              f"{heads:>7}{parsed:>8}{f'{seen} of {len(changed)}':>14}")
    print("\n(requests: request lines and headers the crawler sent; answers: status lines, "
          "headers and bodies it received; parsed: responses that reached the spider's "
          "callback; changed seen: changed pages whose new version reached it)")
    _name, received, sent, bodies, full, not_modified, heads, parsed, seen = rows[2]
    saved = 1 - (received + sent) / base_all
    saved_bodies = 1 - bodies / base_bodies
    print(f"share of unchanged pages: {unchanged:.0%}; conditional + HEAD saved {saved:.1%} of "
          f"all bytes transferred: target {'met' if saved >= unchanged else 'missed'} "
          f"({(saved - unchanged) * 100:+.1f} points)")
    if seen != len(changed):
        print(f"WARNING: the HEAD strategy missed {len(changed) - seen} changed pages")
    changed_bodies = sum(len(site.pages[paths[i]][0].encode("utf-8")) for i in changed)
    print(f"bodies: {bodies:,} bytes ({saved_bodies:.1%} saved); the bodies of the "
          f"{len(changed)} changed pages are {changed_bodies:,} bytes "
          f"({changed_bodies / base_bodies:.1%} of the plain crawl's)"
          f"{': no unchanged page sent its body' if bodies == changed_bodies else ''}")
    # The bound: a plain fetch costs c, asking about an unchanged page costs a
    # (both ways, from the server's counts of the crawldedup + HEAD crawl).
    plain_fetch = base_all / args.pages
    per_ask = ask_cost[rows[2][0]]
    print(f"a plain fetch costs {plain_fetch:,.0f} bytes; asking about an unchanged page "
          f"(request + 304 or HEAD answer) about {per_ask:,.0f}: the best possible saving is "
          f"{unchanged:.0%} x (1 - {per_ask:,.0f} / {plain_fetch:,.0f}) = "
          f"{unchanged * (1 - per_ask / plain_fetch):.1%}")
    seen_following = next(row[-1] for row in rows if row[0].startswith("crawldedup: cond. + "
                                                                        "HEAD, following"))
    print(f"\nlink-following spider: {seen_following} of {len(changed)} changed pages seen; the "
          f"state kept the requests of {cost['links_pages']} pages, {cost['links_bytes']:,.0f} "
          f"bytes a page ({cost['links_each']:.1f} requests), {cost['links_keep_us']:,.0f} us "
          f"to keep and {cost['links_read_us']:,.0f} us to read them a page (SQLite)")
    print(f"keeping each page's body instead (to hand callbacks the page on a 304): "
          f"{cost['body_bytes']:,.0f} bytes a page compressed (zlib 6, of "
          f"{cost['body_raw']:,.0f}), "
          f"{cost['body_keep_us']:,.0f} us to compress and {cost['body_read_us']:,.0f} us to "
          f"inflate a page, before any write or read of the state; measured with "
          f"CRAWLDEDUP_RECRAWL_BODIES: {kept_bodies:,.0f} bytes a page kept")
    if seen_following != len(changed):
        print(f"WARNING: the link-following crawl missed {len(changed) - seen_following} changed "
              f"pages")
    print(f"\nreproduce: PYTHONPATH=src python benchmarks/recrawl_bytes.py --pages {args.pages} "
          f"--changed {args.changed} --page-bytes {args.page_bytes}")


if __name__ == "__main__":
    main()
