"""A local web site for re-crawl tests and benchmarks (127.0.0.1, random port).

Pages under ``/v/`` send ETag and Last-Modified and answer conditional
requests with 304; pages under ``/plain/`` send neither (only
Content-Length); pages under ``/liar/`` send a Last-Modified that moves on
every request while the content stays the same, and never answer 304.
``site.change(path)`` makes a new version of a page.  The server counts, per
path, full responses, 304s, HEADs, conditional headers received, bytes
received (request lines and headers) and bytes sent.

A 304 carries what RFC 9110 (section 15.4.5) asks of it and nginx sends:
Server, Date, ETag and Last-Modified, no Content-Type and no Content-Length
(a Content-Length other than the 200's would be wrong there).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Counting:
    """A write-only file that counts the bytes written through it."""

    def __init__(self, raw) -> None:
        self.raw = raw
        self.count = 0

    def write(self, data) -> int:
        self.count += len(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()

    def __getattr__(self, name):
        return getattr(self.raw, name)


class _CountingReader:
    """A read-only file that counts the bytes read through it."""

    def __init__(self, raw) -> None:
        self.raw = raw
        self.count = 0

    def readline(self, *args) -> bytes:
        data = self.raw.readline(*args)
        self.count += len(data)
        return data

    def read(self, *args) -> bytes:
        data = self.raw.read(*args)
        self.count += len(data)
        return data

    def __getattr__(self, name):
        return getattr(self.raw, name)


class Site:
    def __init__(self, pages: dict) -> None:
        """pages: path -> body (str)."""
        self.lock = threading.Lock()
        self.pages = {path: [body, 1, time.time() - 86400] for path, body in pages.items()}
        self.counts: dict = defaultdict(lambda: defaultdict(int))
        self.liar_clock = time.time() - 3600
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                self.wfile = _Counting(self.wfile)
                self.rfile = _CountingReader(self.rfile)

            def handle_one_request(self):
                self.request_start = self.rfile.count
                super().handle_one_request()

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                site.answer(self, head=False)

            def do_HEAD(self):
                site.answer(self, head=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def change(self, path: str, body: str) -> None:
        with self.lock:
            page = self.pages[path]
            page[0], page[1], page[2] = body, page[1] + 1, page[2] + 60

    def reset_counts(self) -> None:
        with self.lock:
            self.counts.clear()

    def total(self, what: str) -> int:
        with self.lock:
            return sum(c[what] for c in self.counts.values())

    def answer(self, handler: BaseHTTPRequestHandler, head: bool) -> None:
        path = handler.path
        with self.lock:
            page = self.pages.get(path)
            counts = self.counts[path]
            counts["received"] += handler.rfile.count - handler.request_start
            if handler.headers.get("If-None-Match"):
                counts["if_none_match"] += 1
            if handler.headers.get("If-Modified-Since"):
                counts["if_modified_since"] += 1
            if page is None:
                status, headers, body = 404, {}, b"not found"
            else:
                text, version, modified = page
                body = text.encode("utf-8")
                headers = {"Content-Type": "text/html; charset=utf-8"}
                status = 200
                if path.startswith("/v/"):
                    etag = f'"{path}-{version}"'
                    lm = formatdate(modified, usegmt=True)
                    headers.update({"ETag": etag, "Last-Modified": lm})
                    inm = handler.headers.get("If-None-Match")
                    ims = handler.headers.get("If-Modified-Since")
                    if (inm is not None and inm == etag) or (inm is None and ims == lm):
                        status = 304
                elif path.startswith("/liar/"):
                    self.liar_clock += 1
                    headers["Last-Modified"] = formatdate(self.liar_clock, usegmt=True)
            if status == 304:
                counts["304"] += 1
                body = b""
            elif head:
                counts["head"] += 1
            else:
                counts["full"] += 1
        start = handler.wfile.count
        handler.send_response(status)
        for name, value in headers.items():
            if status != 304 or name != "Content-Type":
                handler.send_header(name, value)
        if status != 304:
            handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if not head and status != 304:
            handler.wfile.write(body)
        handler.wfile.flush()
        with self.lock:
            counts["bytes"] += handler.wfile.count - start
