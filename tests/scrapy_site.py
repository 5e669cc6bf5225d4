"""A generated web site on 127.0.0.1 for real Scrapy crawls, and the spider
that crawls it in a subprocess (used by tests/test_scrapy_crawl.py and
benchmarks/compare_scrapy.py).

The site has ``pages`` pages ``/p/<i>``.  Each links to others several
times over: the same link twice, relative and absolute links, links with a
``#fragment``, query-string variants of one page in two parameter orders,
and a tracking-parameter variant (a different page for Scrapy's default
fingerprint, which keeps every parameter).  The server counts the requests
for each page under its canonical key (path, query arguments sorted, no
fragment), so a test sees exactly what was fetched how often.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Set
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

SPIDER = '''
import datetime, json, os
import scrapy

class SiteSpider(scrapy.Spider):
    name = os.environ.get("SITE_SPIDER_NAME", "site")

    async def start(self):
        yield scrapy.Request(os.environ["SITE_ROOT"])

    def start_requests(self):  # Scrapy before 2.13
        yield scrapy.Request(os.environ["SITE_ROOT"])

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)

    def closed(self, reason):
        out = os.environ.get("SITE_STATS")
        if out:
            all_stats = self.crawler.stats.get_stats()
            stats = {k: v for k, v in all_stats.items() if isinstance(v, (int, float, str))}
            stats["reason"] = reason
            start = all_stats.get("start_time")
            if start is not None:
                now = datetime.datetime.now(start.tzinfo)
                stats["elapsed"] = (now - start).total_seconds()
            with open(out, "w") as f:
                json.dump(stats, f)
'''

# Settings every test crawl uses: fast, quiet, nothing but the site.
CRAWL_SETTINGS = {
    "ROBOTSTXT_OBEY": "False",
    "TELNETCONSOLE_ENABLED": "False",
    "AUTOTHROTTLE_ENABLED": "False",
    "COOKIES_ENABLED": "False",
    "RETRY_ENABLED": "False",
    "REDIRECT_ENABLED": "False",
    "CONCURRENT_REQUESTS": "64",
    # Scrapy runs CONCURRENT_ITEMS tasks over each callback's output: 100 by
    # default, which costs more than the rest of a page here.
    "CONCURRENT_ITEMS": "4",
    "CONCURRENT_REQUESTS_PER_DOMAIN": "64",
    "DOWNLOAD_DELAY": "0",
    "LOG_LEVEL": "INFO",
    "LOGSTATS_INTERVAL": "600",
}


def page_key(url: str) -> str:
    """The canonical key of a URL of the site: path and sorted query."""
    parts = urlsplit(url)
    query = sorted(parse_qsl(parts.query, keep_blank_values=True))
    return parts.path + ("?" + urlencode(query) if query else "")


def links(i: int, pages: int) -> List[str]:
    """The hrefs on page i, relative to /p/<i>."""
    out = [f"/p/{(2 * i + 1) % pages}", f"/p/{(2 * i + 2) % pages}",
           f"/p/{(i + 1) % pages}", f"{(i + 1) % pages}",       # same page, twice
           f"/p/{(i + 3) % pages}#part-{i % 4}",                 # a fragment
           f"{i}",                                                # itself
           f"/p/{i // 2}"]
    if i % 10 == 0:   # one page in two parameter orders
        out += [f"/p/{i // 10}?b=2&a=1", f"/p/{i // 10}?a=1&b=2#top"]
    if i % 25 == 0:   # a tracking variant: another page for Scrapy's fingerprint
        out += [f"/p/{i // 25}?utm_source=feed"]
    return out


def expected_keys(pages: int) -> Set[str]:
    """The key of every page a crawl from "/p/0" reaches."""
    seen = {"/p/0"}
    todo = ["/p/0"]
    while todo:
        key = todo.pop()
        i = int(urlsplit(key).path.rsplit("/", 1)[1])
        for href in links(i, pages):
            k = page_key(urljoin(f"http://h/p/{i}", href))
            if k not in seen:
                seen.add(k)
                todo.append(k)
    return seen


class Site:
    """The server: ``with Site(pages) as site:``, ``site.root``, ``site.counts``."""

    def __init__(self, pages: int = 2000, delay: float = 0.0, gate: bool = False) -> None:
        """``delay``: seconds each response waits.  ``gate``: responses wait
        until ``site.gate.set()`` (requests are counted as they arrive)."""
        self.pages = pages
        self.delay = delay
        self.gate = threading.Event()
        if not gate:
            self.gate.set()
        self.counts: Dict[str, int] = {}
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = urlsplit(self.path).path
                try:
                    i = int(path[3:]) if path.startswith("/p/") else -1
                except ValueError:
                    i = -1
                if not 0 <= i < site.pages:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with site.lock:
                    key = page_key(self.path)
                    site.counts[key] = site.counts.get(key, 0) + 1
                site.gate.wait()
                if site.delay:
                    time.sleep(site.delay)
                anchors = "".join(f'<a href="{h}">l</a>' for h in links(i, site.pages))
                body = ("<html><body>" + anchors + "</body></html>").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a crawler stopped by a signal drops its connections

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.server.server_address[1]}/p/0"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def fetched(self) -> int:
        with self.lock:
            return sum(self.counts.values())

    def repeats(self) -> Dict[str, int]:
        with self.lock:
            return {k: n for k, n in self.counts.items() if n != 1}

    def __enter__(self) -> "Site":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


def spider_file(folder: str) -> str:
    path = os.path.join(folder, "site_spider.py")
    with open(path, "w") as f:
        f.write(SPIDER)
    return path


def crawl_command(folder: str, settings: Dict[str, str]) -> List[str]:
    cmd = [sys.executable, "-m", "scrapy", "runspider", spider_file(folder)]
    for name, value in {**CRAWL_SETTINGS, **settings}.items():
        cmd += ["-s", f"{name}={value}"]
    return cmd


def crawl_env(root: str, stats: Optional[str] = None, name: str = "site") -> Dict[str, str]:
    # The crawldedup these tests import (the source tree's or the installed
    # wheel, as CI runs it), for the crawling subprocess too.
    import crawldedup
    src = os.path.dirname(os.path.dirname(os.path.abspath(crawldedup.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env["SITE_ROOT"] = root
    env["SITE_SPIDER_NAME"] = name
    if stats:
        env["SITE_STATS"] = stats
    return env


def start_crawl(folder: str, root: str, settings: Dict[str, str], stats: Optional[str] = None,
                name: str = "site") -> "subprocess.Popen[str]":
    return subprocess.Popen(crawl_command(folder, settings), cwd=folder,
                            env=crawl_env(root, stats, name), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def run_crawl(folder: str, root: str, settings: Dict[str, str], stats: Optional[str] = None,
              name: str = "site", timeout: float = 120) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(crawl_command(folder, settings), cwd=folder,
                          env=crawl_env(root, stats, name), capture_output=True, text=True,
                          timeout=timeout)
