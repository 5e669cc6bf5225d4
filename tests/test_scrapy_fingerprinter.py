"""crawldedup.scrapy.RequestFingerprinter gives Scrapy's default fingerprint,
byte for byte, and hands what it cannot reproduce to Scrapy's own code."""

import gc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import require_module

scrapy = require_module("scrapy")

from scrapy import Request  # noqa: E402
from scrapy.http import FormRequest  # noqa: E402
from scrapy.utils.request import fingerprint as scrapy_fingerprint  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

import crawldedup.scrapy  # noqa: E402
from crawldedup._kernel import request_fingerprint_fast  # noqa: E402
from crawldedup.scrapy import RequestFingerprinter, fingerprint  # noqa: E402
from crawldedup.scrapy import fingerprinter as fpmod  # noqa: E402

# --------------------------------------------------------------- strategies

hosts = st.sampled_from(["example.com", "EXAMPLE.com", "www.shop.example", "127.0.0.1:8080",
                         "example.com:80", "xn--bcher-kva.example", "bücher.example",
                         "user:pw@example.com", "[::1]:8000", "a.b.c.example"])
segment_chars = st.sampled_from(list("abcXYZ019-._~!$&'()*+,;=:@%/ ") + ["%2f", "%41", "é", "中",
                                                                        "%e4%b8%ad", "..", "."])
segments = st.lists(st.lists(segment_chars, max_size=5).map("".join), max_size=4).map(
    lambda parts: "/" + "/".join(parts))
query_keys = st.sampled_from(["a", "b", "B", "id", "utm_source", "q", "中", "a b", "x%20y", ""])
query_values = st.sampled_from(["1", "2", "", "x y", "%20", "é", "a+b", "=", "?", "%zz"])
queries = st.lists(st.tuples(query_keys, query_values), max_size=4).map(
    lambda pairs: "&".join(f"{k}={v}" if v != "?" else k for k, v in pairs))
fragments = st.sampled_from(["", "top", "a/b?c", "中", "x y"])


@st.composite
def urls(draw):
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "ftp"]))
    url = f"{scheme}://{draw(hosts)}{draw(segments)}"
    query = draw(queries)
    if query or draw(st.booleans()):
        url += "?" + query
    fragment = draw(fragments)
    if fragment or draw(st.booleans()):
        url += "#" + fragment
    return url


header_names = st.sampled_from(["Accept-Language", "accept-language", "X-Token", "Cookie",
                                b"x-token", b"ACCEPT-LANGUAGE", "Referer"])
header_values = st.one_of(st.sampled_from(["en", "fr, de", "", "é", "中文"]),
                          st.binary(max_size=6), st.integers(0, 99),
                          st.lists(st.sampled_from(["a", b"b", "c"]), max_size=3))


@st.composite
def requests(draw):
    method = draw(st.sampled_from(["GET", "POST", "get", "Put", "HEAD", "OPTIONS", "PATCH"]))
    body = draw(st.one_of(st.none(), st.binary(max_size=20), st.text(max_size=10)))
    headers = draw(st.dictionaries(header_names, header_values, max_size=3))
    meta = {"verbatim_url": True} if draw(st.integers(0, 9)) == 0 else None
    return Request(draw(urls()), method=method, body=body, headers=headers or None, meta=meta)


# Scrapy sorts the names: one type per list (a mix raises TypeError there too)
include_sets = st.one_of(
    st.none(),
    st.lists(header_names.filter(lambda n: isinstance(n, str)), max_size=3, unique=True),
    st.lists(header_names.filter(lambda n: isinstance(n, bytes)), max_size=3, unique=True))


def same_as_scrapy(request, include_headers=None, keep_fragments=False):
    ours = RequestFingerprinter(include_headers=include_headers,
                                keep_fragments=keep_fragments).fingerprint(request)
    theirs = scrapy_fingerprint(request, include_headers=include_headers,
                                keep_fragments=keep_fragments)
    assert ours == theirs, (request, request.method, request.headers, include_headers,
                            keep_fragments)
    return ours


# --------------------------------------------------------------- equality

@given(requests(), include_sets, st.booleans())
def test_byte_identical_to_scrapy(request, include_headers, keep_fragments):
    same_as_scrapy(request, include_headers, keep_fragments)
    # asked again: the cached value, still Scrapy's
    same_as_scrapy(request, include_headers, keep_fragments)


@given(urls())
def test_plain_get_requests(url):
    request = Request(url)
    digest = same_as_scrapy(request)
    assert len(digest) == 20


def test_common_requests():
    cases = [
        Request("https://example.com/?b=2&a=1#frag"),
        Request("http://example.com/a b/c?x=1 2"),
        Request("https://example.com/api", method="POST", body=b'{"q": 1}'),
        Request("https://example.com/api", method="POST", body="é"),
        FormRequest("https://example.com/login", formdata={"user": "u", "pass": "p"}),
        Request("https://example.com/", headers={"Accept-Language": ["en", "fr"]}),
        Request("data:text/plain,hello"),
        Request("about:blank"),
    ]
    for request in cases:
        for include in (None, ["Accept-Language"], [b"accept-language", b"Content-Type"]):
            for keep in (False, True):
                same_as_scrapy(request, include, keep)
    # fragments count only with keep_fragments
    a, b = Request("https://example.com/p#1"), Request("https://example.com/p#2")
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a, keep_fragments=True) != fingerprint(b, keep_fragments=True)


# --------------------------------------------------------------- hand-off

def test_handoff_verbatim_url():
    request = Request("https://example.com/?b=2&a=1", meta={"verbatim_url": True})
    canonical = Request("https://example.com/?a=1&b=2")
    digest = same_as_scrapy(request)
    # Scrapy 2.19 does not canonicalize a verbatim URL: another fingerprint
    if "verbatim_url" in scrapy_fingerprint.__code__.co_names or \
            "verbatim_url" in str(scrapy_fingerprint.__code__.co_consts):
        assert digest != fingerprint(canonical)


def test_handoff_method_changed_after_construction():
    request = Request("https://example.com/x")
    request.method = "get"  # Scrapy takes it as it is; the kernel would upper-case it
    digest = same_as_scrapy(request)
    assert digest != request_fingerprint_fast(request.url, "GET", b"", False)
    assert digest != fingerprint(Request("https://example.com/x"))


# IDNA, IPv4-mapped IPv6 and ws: off the fast path; userinfo, IPv6 and ftp: on
# it since it widened; all as Scrapy.
@pytest.mark.parametrize("url", ["https://bücher.example/é?x=1", "http://[::ffff:1.2.3.4]/a",
                                 "ws://example.com/a;b", "https://user:pw@example.com/",
                                 "http://[::1]:8080/a?b=1", "ftp://example.com/file"])
def test_handoff_urls_off_the_fast_path(url):
    request = Request(url)
    same_as_scrapy(request)
    same_as_scrapy(request, ["Accept"], True)


def test_handoff_non_ascii_include_headers():
    request = Request("https://example.com/", headers={"X-Ünï": "1", b"x-\xc3\xbcn\xc3\xaf": "2"})
    for include in (["x-ünï"], [b"X-\xc3\x9cn\xc3\x8f"], ["X-ÜNÏ", "accept"]):
        same_as_scrapy(request, include)


def test_handoff_legacy_implementation_setting():
    crawler = get_crawler(settings_dict={"REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.6"})
    ours = RequestFingerprinter.from_crawler(crawler)
    assert ours._scrapy is not None  # everything goes to Scrapy's own fingerprinter
    request = Request("https://example.com/?b=1&a=2")
    from scrapy.utils.request import RequestFingerprinter as ScrapyFingerprinter
    assert ours.fingerprint(request) == ScrapyFingerprinter(crawler).fingerprint(request)


# --------------------------------------------------------------- settings, cache

def test_settings_from_crawler():
    crawler = get_crawler(settings_dict={
        "CRAWLDEDUP_FINGERPRINT_INCLUDE_HEADERS": ["Accept-Language"],
        "CRAWLDEDUP_FINGERPRINT_KEEP_FRAGMENTS": True})
    fp = RequestFingerprinter.from_crawler(crawler)
    assert fp.keep_fragments is True and fp.include_headers == (b"accept-language",)
    request = Request("https://example.com/#a", headers={"Accept-Language": "fr"})
    assert fp.fingerprint(request) == scrapy_fingerprint(
        request, include_headers=["Accept-Language"], keep_fragments=True)
    assert fp.fingerprint(request) != scrapy_fingerprint(request)


def test_bad_arguments():
    with pytest.raises(TypeError):  # as Scrapy's sorted() of the names
        scrapy_fingerprint(Request("https://a.example/"), include_headers=["a", b"b"])
    with pytest.raises(TypeError):
        RequestFingerprinter(include_headers=["a", b"b"])
    with pytest.raises(TypeError, match="include_headers"):
        RequestFingerprinter(include_headers="Accept")
    with pytest.raises(TypeError, match="include_headers names"):
        RequestFingerprinter(include_headers=[1])
    with pytest.raises(TypeError, match="keep_fragments"):
        RequestFingerprinter(keep_fragments="yes")


def test_cache_is_per_request_and_weak():
    fp = RequestFingerprinter()
    cache = fp._cache
    request = Request("https://example.com/cached?b=1&a=2")
    first = fp.fingerprint(request)
    assert fp.fingerprint(request) is first  # from the cache
    assert first == scrapy_fingerprint(request)
    before = len(cache)
    del request
    gc.collect()
    assert len(cache) == before - 1  # the cache never keeps a request alive
    # another configuration has its own cache
    other = RequestFingerprinter(keep_fragments=True)
    assert other._cache is not cache
    assert RequestFingerprinter()._cache is cache


def test_public_names_are_lazy():
    assert crawldedup.scrapy.RequestFingerprinter is fpmod.RequestFingerprinter
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        crawldedup.scrapy.Nope  # noqa: B018
    assert "DupeFilter" in dir(crawldedup.scrapy)


@pytest.mark.parametrize("include_headers, keep_fragments", [(None, False), (["Accept"], True)])
def test_uncached_fingerprint_equals_fingerprint(include_headers, keep_fragments):
    # The duplicate filter's path: the same bytes as fingerprint() (and as
    # Scrapy), for kernel requests, hand-offs and verbatim_url alike, and
    # nothing cached.
    fpr = RequestFingerprinter(include_headers=include_headers, keep_fragments=keep_fragments)
    requests = [Request("https://example.com/b?y=2&x=1#f", headers={"Accept": "x"}),
                Request("https://bücher.example/é?x=1"),
                Request("https://example.com/a", method="post", body=b"x"),
                Request("https://example.com/?b=1&a=2", meta={"verbatim_url": True})]
    for request in requests:
        expected = scrapy_fingerprint(request, include_headers=include_headers,
                                      keep_fragments=keep_fragments)
        before = len(fpr._cache)
        assert fpr.uncached_fingerprint(request) == expected
        assert len(fpr._cache) == before
        assert fpr.fingerprint(request) == expected
