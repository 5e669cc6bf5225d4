"""RecrawlMiddleware on real Scrapy crawls of a local site, checked on the
server's own counts of full responses, 304s and HEADs per path."""

import json
import os
import subprocess
import sys
import uuid

import pytest

from conftest import require_module

import crawldedup

require_module("scrapy")

from recrawl_site import Site  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# The crawldedup these tests import (the source tree's or the installed wheel,
# as CI runs it), for subprocesses too.
SRC = os.path.dirname(os.path.dirname(os.path.abspath(crawldedup.__file__)))

PAGES = {
    **{f"/v/{i}": f"<html><body><h1>Validated page {i}</h1><p>{'text ' * 200}</p></body></html>"
       for i in range(1, 5)},
    **{f"/plain/{i}": f"<html><body><h1>Plain page {i}</h1><p>"
                      + " ".join(f"word{i}x{j}" for j in range(150)) + "</p></body></html>"
       for i in range(1, 5)},
}
LIAR = {f"/liar/{i}": f"<html><body><p>Liar page {i} {'same ' * 100}</p></body></html>"
        for i in range(1, 4)}


def crawl(urls, state, **settings):
    config = {"urls": urls, "settings": {
        "DOWNLOADER_MIDDLEWARES": {"crawldedup.scrapy.RecrawlMiddleware": 580},
        "CRAWLDEDUP_RECRAWL_STATE": state, **settings}}
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, os.path.join(HERE, "recrawl_crawl.py"),
                          json.dumps(config)], capture_output=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr.decode()[-3000:]
    out = json.loads(run.stdout.decode().strip().splitlines()[-1])
    return {url: verdict for url, verdict in out["parsed"]}, out["stats"]


@pytest.fixture
def sites():
    site, liar = Site(PAGES), Site(LIAR)
    yield site, liar
    site.close()
    liar.close()


def test_second_crawl_is_conditional_and_parses_only_changes(sites, tmp_path):
    site, liar = sites
    state = str(tmp_path / "recrawl.db")
    urls = [site.url + p for p in PAGES] + [liar.url + p for p in LIAR]

    # First crawl: every page fetched once, in full, all new.
    parsed, stats = crawl(urls, state, CRAWLDEDUP_RECRAWL_DROP=True)
    assert set(parsed) == set(urls) and set(parsed.values()) == {"new"}
    for path in PAGES:
        assert site.counts[path]["full"] == 1 and site.counts[path]["304"] == 0
    assert stats["crawldedup/recrawl/new"] == len(urls)

    # Between the crawls two pages change.
    site.change("/v/2", PAGES["/v/2"].replace("Validated page 2", "Validated page 2, updated"))
    site.change("/plain/3", "<html><body><p>Rewritten: the page now tells another story."
                            "</p></body></html>")
    site.reset_counts()
    liar.reset_counts()

    # Second crawl, same state: conditional requests, 304s for the unchanged
    # validated pages, and only the changed pages reach the callback (start
    # URLs included).
    parsed, stats = crawl(urls, state, CRAWLDEDUP_RECRAWL_DROP=True)
    assert parsed == {site.url + "/v/2": "changed", site.url + "/plain/3": "changed"}
    for i in (1, 3, 4):
        assert site.counts[f"/v/{i}"]["if_none_match"] == 1
        assert site.counts[f"/v/{i}"]["if_modified_since"] == 0  # one validator is enough
        assert (site.counts[f"/v/{i}"]["304"], site.counts[f"/v/{i}"]["full"]) == (1, 0)
    assert (site.counts["/v/2"]["304"], site.counts["/v/2"]["full"]) == (0, 1)
    for i in range(1, 5):  # no validators: fetched in full, judged by digest
        assert site.counts[f"/plain/{i}"]["full"] == 1
        assert site.counts[f"/plain/{i}"]["if_none_match"] == 0
    assert site.total("full") == 1 + 4
    assert stats["crawldedup/recrawl/not_modified"] == 3
    assert stats["crawldedup/recrawl/unchanged"] == 3 + len(LIAR)
    assert stats["crawldedup/recrawl/changed"] == 2
    assert stats["crawldedup/recrawl/dropped"] == 3 + 3 + len(LIAR)
    assert stats["crawldedup/recrawl/conditional"] == 4 + len(LIAR)
    # The liar moved Last-Modified on every page while the content stayed:
    # its host is caught after this crawl...
    assert sum(liar.counts[p]["if_modified_since"] for p in LIAR) == len(LIAR)

    # ...so the third crawl sends it no If-Modified-Since, while the honest
    # site still gets its validators.
    site.reset_counts()
    liar.reset_counts()
    parsed, stats = crawl(urls, state, CRAWLDEDUP_RECRAWL_DROP=True)
    assert parsed == {}
    assert sum(liar.counts[p]["if_modified_since"] for p in LIAR) == 0
    assert sum(site.counts[p]["if_none_match"] for p in PAGES if p.startswith("/v/")) == 4
    assert site.total("304") == 4


def test_head_strategy_and_tags_without_dropping(sites, tmp_path):
    site, _ = sites
    state = str(tmp_path / "recrawl.db")
    urls = [site.url + p for p in PAGES]
    crawl(urls, state)
    site.change("/plain/2", "<html><body><p>A new, longer and entirely different version "
                            "of the second plain page.</p></body></html>")
    site.change("/v/1", PAGES["/v/1"] + "<p>new</p>")
    site.reset_counts()
    parsed, stats = crawl(urls, state, CRAWLDEDUP_RECRAWL_HEAD=True)
    # Pages without validators: a HEAD each, a GET only for the changed one.
    for i in range(1, 5):
        assert site.counts[f"/plain/{i}"]["head"] == 1
    assert [site.counts[f"/plain/{i}"]["full"] for i in range(1, 5)] == [0, 1, 0, 0]
    # Validated pages: conditional GETs, no HEAD.
    assert [site.counts[f"/v/{i}"]["304"] for i in range(1, 5)] == [0, 1, 1, 1]
    assert site.counts["/v/1"]["full"] == 1 and site.total("head") == 4
    # Not dropping: changed pages are parsed and tagged; 304s stop at Scrapy's
    # HttpErrorMiddleware; HEAD-unchanged pages are dropped.
    assert parsed == {site.url + "/plain/2": "changed", site.url + "/v/1": "changed"}
    assert stats["crawldedup/recrawl/head"] == 4
    assert stats["crawldedup/recrawl/not_modified"] == 3 + 3


def test_redis_state_and_near_duplicates(sites, redis_url, tmp_path):
    site, _ = sites
    prefix = f"test:recrawl-scrapy:{uuid.uuid4().hex}"
    urls = [site.url + p for p in PAGES if p.startswith("/plain/")]
    settings = {"CRAWLDEDUP_RECRAWL_PREFIX": prefix, "CRAWLDEDUP_RECRAWL_TEXT": True,
                "CRAWLDEDUP_RECRAWL_DROP": ["unchanged", "near_duplicate"]}
    try:
        crawl(urls, redis_url, **settings)
        # A one-word edit of the text is a near duplicate (SimHash distance 2
        # here, with the fixed hashing); a rewrite is a change.
        site.change("/plain/1", PAGES["/plain/1"].replace("Plain page 1", "Plain cake 1"))
        site.change("/plain/2", "<html><body><p>Completely different now, a new story about "
                                "rivers, bridges and the price of bread.</p></body></html>")
        parsed, stats = crawl(urls, redis_url, **settings)
        assert parsed == {site.url + "/plain/2": "changed"}
        assert stats["crawldedup/recrawl/near_duplicate"] == 1
        assert stats["crawldedup/recrawl/unchanged"] == 2
    finally:
        from crawldedup.recrawl import RecrawlState
        RecrawlState(redis_url, prefix=prefix).store.clear()


def test_bad_drop_setting():
    from crawldedup.recrawl import RecrawlState
    from crawldedup.scrapy import RecrawlMiddleware
    with pytest.raises(ValueError, match="unknown verdicts"):
        RecrawlMiddleware(RecrawlState.__new__(RecrawlState), drop=["stale"])
    with pytest.raises(ValueError, match="cannot drop"):
        RecrawlMiddleware(RecrawlState.__new__(RecrawlState), drop=["changed"])


def test_head_only_when_it_pays(tmp_path):
    """No HEAD before the GET of a page that has probably changed since its
    last fetch, nor of a page smaller than a HEAD answer."""
    import time

    from scrapy import Request

    from crawldedup.recrawl import RecrawlState
    from crawldedup.scrapy import RecrawlMiddleware
    from crawldedup.scrapy.recrawl import HEAD_BYTES

    state = RecrawlState(str(tmp_path / "r.db"))
    middleware = RecrawlMiddleware(state, head=True)
    now = time.time()
    big = b"x" * (20 * HEAD_BYTES)
    for minute in range(30):  # changes at every fetch, a minute apart
        state.record("https://fast.example/p", 200, body=big + b"%d" % minute,
                     now=now - 7200 + 60 * minute)
    state.record("https://slow.example/p", 200, body=big, now=now - 60)
    state.record("https://slow.example/tiny", 200, body=b"tiny", now=now - 60)
    sent = middleware.process_request(Request("https://slow.example/p"))
    assert sent is not None and sent.method == "HEAD"
    assert middleware.process_request(Request("https://fast.example/p")) is None
    assert middleware.process_request(Request("https://slow.example/tiny")) is None
    state.close()
