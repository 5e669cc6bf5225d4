"""RecrawlMiddleware on real Scrapy crawls of a local site, checked on the
server's own counts of full responses, 304s and HEADs per path."""

import json
import os
import subprocess
import sys
import uuid

import pytest

import crawldedup
from conftest import require_module
from crawldedup.recrawl import RecrawlState

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


def run_crawl(urls, settings, **options):
    """One crawl in a process of its own (tests/recrawl_crawl.py): its output."""
    config = {"urls": urls, "settings": settings, **options}
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.run([sys.executable, os.path.join(HERE, "recrawl_crawl.py"),
                          json.dumps(config)], capture_output=True, timeout=120, env=env)
    assert run.returncode == 0, run.stderr.decode()[-3000:]
    return json.loads(run.stdout.decode().strip().splitlines()[-1])


def crawl(urls, state, **settings):
    out = run_crawl(urls, {
        "DOWNLOADER_MIDDLEWARES": {"crawldedup.scrapy.RecrawlMiddleware": 580},
        "CRAWLDEDUP_RECRAWL_STATE": state, **settings})
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
    with pytest.raises(ValueError, match="CRAWLDEDUP_RECRAWL_BODIES .* choose one"):
        RecrawlMiddleware(RecrawlState.__new__(RecrawlState), drop=True, bodies=True)


def test_a_store_that_keeps_no_links_is_refused_unless_links_are_off(tmp_path):
    """Link storage is a capability a store declares (keeps_links): with
    links on, a state whose store keeps none is refused when the
    middleware is made, naming the setting; a direct call raises
    TypeError naming the store."""
    from crawldedup.recrawl import RecrawlState
    from crawldedup.recrawl.stores import RecrawlStore
    from crawldedup.scrapy import RecrawlMiddleware
    state = RecrawlState(str(tmp_path / "r.db"))
    try:
        assert state.store.keeps_links
        state.store.keeps_links = False  # as a store made for an earlier crawldedup
        with pytest.raises(ValueError, match="keeps no links.*CRAWLDEDUP_RECRAWL_LINKS = False"):
            RecrawlMiddleware(state)
        RecrawlMiddleware(state, links=False)
        for call in (lambda: RecrawlStore.read_links(state.store, ["https://a.example/"]),
                     lambda: RecrawlStore.write_links(state.store, {"https://a.example/": b""})):
            with pytest.raises(TypeError, match="SQLiteRecrawlStore keeps no links"):
                call()
    finally:
        state.close()


def test_head_only_when_it_pays(tmp_path):
    """No HEAD before the GET of a page that has probably changed since its
    last fetch, nor of a page smaller than a HEAD answer."""
    import time

    from scrapy import Request

    from crawldedup.recrawl import RecrawlState
    from crawldedup.scrapy import RecrawlMiddleware
    from crawldedup.scrapy.recrawl import HEAD_BYTES

    state = RecrawlState(str(tmp_path / "r.db"))
    middleware = RecrawlMiddleware(state, head=True, links=False)
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


# ---- a link-following spider ----
# A site of 121 pages in a tree of 3 children a page (depths 0 to 4), each
# page also linking back to its parent; every seventh page sends no
# validators (judged by its digest), the others answer conditional requests.
# The spider is the usual one: it starts at the root, parses every page and
# follows every link.

TREE = 121


def tree_path(i):
    return f"/plain/{i}" if i % 7 == 3 else f"/v/{i}"


def tree_depth(i):
    depth = 0
    while i:
        i, depth = (i - 1) // 3, depth + 1
    return depth


def tree_page(i, version, extra=""):
    links = [tree_path(c) for c in range(3 * i + 1, 3 * i + 4) if c < TREE]
    if i:
        links.append(tree_path((i - 1) // 3))
    anchors = "".join(f'<a href="{p}">{p}</a> ' for p in links)
    filler = " ".join(f"w{(i * 7919 + j * version * 31 + j) % 100003}" for j in range(500))
    return (f"<html><body><h1>Page {i} v{version}</h1><p>{filler}</p>{anchors}{extra}"
            f"</body></html>")


#: Changed between the crawls: pages three and four levels below the root,
#: every page above them unchanged (one of them without validators).
TREE_CHANGED = [17, 24, 31, 45, 59, 77, 100, 119]
#: A page linked for the first time from a changed page (26, depth 3).
TREE_NEW = "/v/new"


def tree_site():
    pages = {tree_path(i): tree_page(i, 0) for i in range(TREE)}
    pages[TREE_NEW] = "<html><body><h1>Page 999 v0</h1><p>a page nobody linked</p></body></html>"
    return Site(pages)


def ancestors(i):
    while i:
        i = (i - 1) // 3
        yield i


def test_tree_changes_are_deep_behind_unchanged_pages():
    assert all(tree_depth(i) >= 3 for i in TREE_CHANGED + [26])
    assert not (set(TREE_CHANGED) | {26}) & {a for i in TREE_CHANGED + [26] for a in ancestors(i)}
    assert any(tree_path(i).startswith("/plain/") for i in TREE_CHANGED)
    assert any(tree_path(a).startswith("/plain/") for i in TREE_CHANGED for a in ancestors(i))


@pytest.mark.parametrize("store, drop, callback, bodies", [
    ("sqlite", True, "sync", False), ("sqlite", False, "sync", False),
    ("redis", True, "sync", False), ("sqlite", True, "async", False),
    ("sqlite", False, "sync", True), ("redis", False, "async", True),
    ("sqlite", True, "crawlspider", False)])
def test_link_following_spider_sees_every_deep_change(store, drop, callback, bodies, tmp_path,
                                                       request):
    """The usual spider (start at the root, follow every link): the second
    crawl reaches every changed page behind unchanged ones (the 304s and
    unchanged pages give the requests their callbacks made last time, or,
    with CRAWLDEDUP_RECRAWL_BODIES, the callbacks get the kept version of
    each page answered 304), sees each in its new version, and transfers
    far fewer bytes than a plain re-crawl."""
    site = tree_site()
    prefix = None
    if store == "redis":
        redis_url = request.getfixturevalue("redis_url")
        prefix = f"test:recrawl-links:{uuid.uuid4().hex}"
        state = redis_url
    else:
        state = str(tmp_path / "recrawl.db")
    settings = {"DOWNLOADER_MIDDLEWARES": {"crawldedup.scrapy.RecrawlMiddleware": 580},
                "CRAWLDEDUP_RECRAWL_STATE": state, "CRAWLDEDUP_RECRAWL_DROP": drop,
                "CRAWLDEDUP_RECRAWL_BODIES": bodies,
                **({"CRAWLDEDUP_RECRAWL_PREFIX": prefix} if prefix else {})}
    root = [site.url + tree_path(0)]
    every = {site.url + tree_path(i) for i in range(TREE)}
    try:
        first = run_crawl(root, settings, crawl=True, callback=callback)
        assert {url for url, _ in first["parsed"]} == every
        # what a callback made is kept as it made it (without the Referer
        # and depth the spider middlewares add afterwards)
        with RecrawlState(state, **({"prefix": prefix} if prefix else {})) as opened:
            kept = opened.get_links(site.url + tree_path(1)).links
        made = [site.url + tree_path(c) for c in (4, 5, 6)] + root
        if callback == "crawlspider":  # its own callback, the rule in meta
            assert [link[:2] for link in kept] == [[url, "_callback"] for url in made]
            assert all(link[2]["meta"]["rule"] == 0 and link[2]["errback"] == "_errback"
                       for link in kept)
        else:
            name = {"sync": "parse", "async": "parse_async"}[callback]
            assert kept == [[url, name] for url in made]

        for i in TREE_CHANGED:
            site.change(tree_path(i), tree_page(i, 1))
        site.change(tree_path(26), tree_page(26, 1, f'<a href="{TREE_NEW}">new</a>'))
        changed = {site.url + tree_path(i) for i in TREE_CHANGED + [26]}
        site.reset_counts()

        second = run_crawl(root, settings, crawl=True, callback=callback)
        parsed = dict(map(tuple, second["parsed"]))
        versions = second["versions"]
        # every changed page reached the callback, in its new version
        assert {url: parsed.get(url) for url in changed} == {url: "changed" for url in changed}
        assert {url: versions[url] for url in changed} == {url: "v1" for url in changed}
        assert parsed[site.url + TREE_NEW] == "new"
        assert first["stats"]["crawldedup/recrawl/links_kept"] == TREE
        if bodies:  # ...and every other page did, in the version kept
            assert set(parsed) == every | {site.url + TREE_NEW}
            assert {versions[url] for url in every - changed} == {"v0"}
            assert second["stats"]["crawldedup/recrawl/from_kept"] == second["stats"][
                "crawldedup/recrawl/not_modified"]
        elif drop:  # ...and nothing else did
            assert set(parsed) == changed | {site.url + TREE_NEW}
        else:  # the 304s did not, the unchanged pages without validators did
            assert set(parsed) == changed | {site.url + TREE_NEW} | {
                site.url + tree_path(i) for i in range(TREE)
                if tree_path(i).startswith("/plain/")}
        # every page was asked about once: none lost, none fetched twice
        # (but the root: a start request is not filtered as a duplicate, so
        # its children's links back to it ask again, as in any Scrapy crawl)
        for i in range(TREE):
            counts = site.counts[tree_path(i)]
            if i in TREE_CHANGED or i == 26 or tree_path(i).startswith("/plain/"):
                assert (counts["full"], counts["304"]) == (1, 0), tree_path(i)
            else:
                assert (counts["full"], counts["304"]) == (0, 1 + (i == 0)), tree_path(i)
        assert second["stats"].get("crawldedup/recrawl/replayed", 0) > 0 or bodies
        crawled = site.total("bytes") + site.total("received")

        # A plain re-crawl of the same site, for the bytes
        site.reset_counts()
        plain = run_crawl(root, {}, crawl=True, callback=callback)
        assert {url for url, _ in plain["parsed"]} == every | {site.url + TREE_NEW}
        plain_bytes = site.total("bytes") + site.total("received")
        assert 1 - crawled / plain_bytes > 0.6, (crawled, plain_bytes)

        # A third crawl, nothing changed: the whole tree is walked again on
        # 304s and kept requests, and no page reaches the callback.
        site.reset_counts()
        third = run_crawl(root, settings, crawl=True, callback=callback)
        if drop:
            assert third["parsed"] == []
        if bodies:
            assert len(third["parsed"]) == TREE + 2  # the root twice
        assert sum(site.counts[p]["304"] + site.counts[p]["full"]
                   for p in list(site.counts)) == TREE + 1 + 1
        assert site.total("304") == sum(not tree_path(i).startswith("/plain/")
                                        for i in range(TREE)) + 1 + 1
    finally:
        site.close()
        if prefix:
            with RecrawlState(state, prefix=prefix) as cleanup:
                cleanup.store.clear()


def test_kept_requests_come_back_the_same():
    """A request a callback made, kept as a link and made again: same URL,
    callback, errback, method, headers, body, meta, cb_kwargs, priority and
    dont_filter; what cannot be made again exactly is not kept."""
    import scrapy
    from scrapy.http import FormRequest

    from crawldedup.scrapy.recrawl import link_to_request, request_to_link

    class Spider(scrapy.Spider):
        name = "s"

        def parse_item(self, response, page):
            pass

        def failed(self, failure):
            pass

    spider = Spider()
    post = FormRequest("https://example.com/search", formdata={"q": "b\u00e9"},
                       callback=spider.parse_item, errback=spider.failed,
                       meta={"page": 2, "depth": 5, "download_slot": "x",
                             "crawldedup_verdict": "new"},
                       cb_kwargs={"page": 2}, priority=-3, dont_filter=True)
    link = request_to_link(post, spider)
    again = link_to_request(link, spider)
    assert type(again) is scrapy.Request
    for name in ("url", "method", "body", "cb_kwargs", "priority", "dont_filter"):
        assert getattr(again, name) == getattr(post, name), name
    assert again.callback == spider.parse_item and again.errback == spider.failed
    assert dict(again.headers) == dict(post.headers)
    assert again.meta == {"page": 2}  # what Scrapy and crawldedup set on the way is not kept
    plain = request_to_link(scrapy.Request("https://example.com/b"), spider)
    assert plain == ["https://example.com/b", None]
    assert link_to_request(plain, spider).callback is None

    def elsewhere(response):
        pass

    for unkept in (scrapy.Request("https://x/", callback=elsewhere),
                   scrapy.Request("https://x/", callback=lambda r: None),
                   scrapy.Request("https://x/", errback=elsewhere),
                   scrapy.Request("https://x/", meta={"when": (1, 2)}),
                   scrapy.Request("https://x/", cb_kwargs={"n": float("nan")}),
                   type("MyRequest", (scrapy.Request,), {})("https://x/")):
        assert request_to_link(unkept, spider) is None
    with pytest.raises(ValueError, match="the spider has no method 'gone'"):
        link_to_request(["https://x/", "gone"], spider)
    with pytest.raises(ValueError, match="the request kept for 'https://x/' is damaged"):
        link_to_request(["https://x/", None, {"body": "not base64!"}], spider)


def test_no_validators_for_a_page_whose_requests_were_not_kept(tmp_path):
    """A known page whose callbacks' requests are not kept for the version
    the state holds (recorded elsewhere, kept from another version, or not
    keepable) is fetched without validators, so that its callbacks run;
    with its requests kept it gets them."""
    from scrapy import Request

    from crawldedup.recrawl import RecrawlState
    from crawldedup.scrapy import RecrawlMiddleware

    state = RecrawlState(str(tmp_path / "r.db"))
    middleware = RecrawlMiddleware(state)
    url = "https://example.com/p"
    state.record(url, 200, {"ETag": '"1"'}, body=b"<p>one</p>")
    digest = state.get(url).digest

    def headers():
        request = Request(url)
        middleware.process_request(request)
        return request.headers.get("If-None-Match")

    assert headers() is None  # recorded by another client: no requests kept
    state.set_links(url, bytes(16), [])
    assert headers() is None  # kept from another version
    state.set_links(url, digest, None)
    assert headers() is None  # could not be kept
    state.set_links(url, digest, [["https://example.com/q", None]])
    assert headers() == b'"1"'
    request = Request(url)
    state.set_links(url, bytes(16), [])
    RecrawlMiddleware(state, links=False).process_request(request)
    assert request.headers.get("If-None-Match") == b'"1"'  # CRAWLDEDUP_RECRAWL_LINKS = False
    state.close()


def test_requests_that_cannot_be_kept_mean_full_fetches(tmp_path):
    """A spider whose requests cannot be kept (a lambda as callback) is
    re-crawled without validators: no bytes saved, no change missed."""
    site = tree_site()
    settings = {"DOWNLOADER_MIDDLEWARES": {"crawldedup.scrapy.RecrawlMiddleware": 580},
                "CRAWLDEDUP_RECRAWL_STATE": str(tmp_path / "recrawl.db"),
                "CRAWLDEDUP_RECRAWL_DROP": True}
    root = [site.url + tree_path(0)]
    try:
        first = run_crawl(root, settings, crawl=True, callback="lambda")
        assert first["stats"]["crawldedup/recrawl/links_unkept"] > 0
        for i in TREE_CHANGED:
            site.change(tree_path(i), tree_page(i, 1))
        site.reset_counts()
        second = run_crawl(root, settings, crawl=True, callback="lambda")
        changed = {site.url + tree_path(i) for i in TREE_CHANGED}
        assert {url for url, verdict in second["parsed"] if verdict == "changed"} == changed
        assert all(second["versions"][url] == "v1" for url in changed)
        assert site.total("304") == 0 and site.total("if_none_match") == 0
        # every page links back to its parent with the lambda: none can be
        # dropped, each reaches the callbacks again
        assert {url for url, _ in second["parsed"]} == {site.url + tree_path(i)
                                                        for i in range(TREE)}
        # (the root twice: the start request, and its children's links back)
        assert second["stats"]["crawldedup/recrawl/kept_for_links"] == TREE - len(changed) + 1
    finally:
        site.close()


def test_refresh_sends_no_validators_and_drops_nothing(tmp_path):
    """CRAWLDEDUP_RECRAWL_REFRESH: a crawl that parses every page again
    (after the spider's callbacks changed), its requests kept anew."""
    import scrapy
    from scrapy.http import HtmlResponse

    from crawldedup.recrawl import RecrawlState
    from crawldedup.scrapy import RecrawlMiddleware

    class Spider(scrapy.Spider):
        name = "s"

        def parse(self, response):
            yield response.follow("/new", callback=self.parse)

    spider = Spider()
    state = RecrawlState(str(tmp_path / "r.db"))
    url = "https://example.com/p"
    state.record(url, 200, {"ETag": '"1"'}, body=b"<p>one</p>")
    state.set_links(url, state.get(url).digest, [["https://example.com/old", None]])
    middleware = RecrawlMiddleware(state, drop=True, refresh=True)
    request = scrapy.Request(url)
    assert middleware.process_request(request, spider) is None
    assert "If-None-Match" not in request.headers
    response = HtmlResponse(url, body=b"<p>one</p>", headers={"ETag": '"1"'}, request=request)
    out = middleware.process_response(request, response, spider)  # unchanged, not dropped
    assert out is response and request.meta["crawldedup_verdict"] == "unchanged"
    made = list(request.callback(response))
    assert [r.url for r in made] == ["https://example.com/new"]
    assert state.get_links(url).links == [["https://example.com/new", "parse"]]
    state.close()
