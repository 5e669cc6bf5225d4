"""request_fingerprint against scrapy.utils.request.fingerprint, url_fingerprint."""

import hashlib
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawldedup import (
    canonicalize_url,
    request_fingerprint,
    request_fingerprints,
    url_fingerprint,
    url_fingerprints,
)
from test_url_canonical import fast_urls, load_corpus, urls

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # scrapy's own import-time deprecations
    from scrapy import Request
    from scrapy.utils.request import fingerprint as scrapy_fingerprint


def scrapy_outcome(url, method="GET", body=b"", headers=None, **kwargs):
    try:
        request = Request(url, method=method, body=body, headers=headers)
    except Exception as exc:  # noqa: BLE001 - the exception type is the answer
        return type(exc)
    return scrapy_fingerprint(request, **kwargs)


def our_outcome(url, method="GET", body=b"", headers=None, **kwargs):
    try:
        return request_fingerprint(url, method, body, headers, **kwargs)
    except Exception as exc:  # noqa: BLE001
        return type(exc)


METHODS = ["GET", "get", "POST", "Post", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH",
           "M-SEARCH", "propfind", "X_Custom.1"]
HEADER_NAMES = ["Accept", "accept", "ACCEPT-LANGUAGE", "accept-language", "X-Token",
                "Cookie", "content-type", "User-Agent"]
header_values = (st.text(max_size=10) | st.binary(max_size=10) | st.integers(0, 10**6)
                 | st.lists(st.text(max_size=5) | st.binary(max_size=5), max_size=3))


@given(url=fast_urls() | urls(), method=st.sampled_from(METHODS),
       body=st.binary(max_size=40) | st.text(max_size=20), keep_fragments=st.booleans())
def test_equals_scrapy(url, method, body, keep_fragments):
    expected = scrapy_outcome(url, method, body, keep_fragments=keep_fragments)
    assert our_outcome(url, method, body, keep_fragments=keep_fragments) == expected


@given(url=fast_urls(), method=st.sampled_from(METHODS), body=st.binary(max_size=20),
       headers=st.dictionaries(st.sampled_from(HEADER_NAMES), header_values, max_size=5)
       | st.lists(st.tuples(st.sampled_from(HEADER_NAMES), header_values), max_size=5),
       include=st.lists(st.sampled_from(HEADER_NAMES + ["Absent"]), max_size=4),
       as_bytes=st.booleans(), keep_fragments=st.booleans())
def test_included_headers_equal_scrapy(url, method, body, headers, include, as_bytes,
                                       keep_fragments):
    if as_bytes:
        include = [name.encode() for name in include]
    kwargs = dict(include_headers=include, keep_fragments=keep_fragments)
    expected = scrapy_outcome(url, method, body, headers, **kwargs)
    assert our_outcome(url, method, body, headers, **kwargs) == expected


@pytest.mark.parametrize("url", [
    "http://www.example.com/résumé?q=中文&x=é#frag", "http://例子.测试/路径?q=值",
    "https://user:pw@example.com:8443/a/../b?b=2&a=1#x", "http://[::1]:80/?a", "about:blank",
    "data:text/plain,hello", "ftp://ftp.example.com/a b", "http://example.com/%E4%B8%AD",
])
@pytest.mark.parametrize("keep_fragments", [False, True])
def test_non_ascii_and_odd_urls_equal_scrapy(url, keep_fragments):
    for method, body in [("GET", b""), ("POST", "é=1".encode()), ("put", "中文")]:
        expected = scrapy_outcome(url, method, body, keep_fragments=keep_fragments)
        assert isinstance(expected, bytes)
        assert request_fingerprint(url, method, body, keep_fragments=keep_fragments) == expected


def test_corpus_equals_scrapy():
    corpus = load_corpus().realistic_urls(20_000)
    for i, url in enumerate(corpus):
        method, body = ("POST", url[::-1].encode()) if i % 5 == 0 else ("GET", b"")
        assert request_fingerprint(url, method, body) == scrapy_outcome(url, method, body), url


def test_fingerprint_shape_and_sensitivity():
    fp = request_fingerprint("http://example.com/?b=2&a=1")
    assert isinstance(fp, bytes) and len(fp) == 20
    assert fp == request_fingerprint("HTTP://EXAMPLE.com?a=1&b=2#top")
    assert fp != request_fingerprint("http://example.com/?b=2&a=1", "POST")
    assert fp != request_fingerprint("http://example.com/?b=2&a=1", body=b"x")
    assert fp != request_fingerprint("http://example.com/?b=2&a=1#top", keep_fragments=True)
    assert request_fingerprint("http://e.com/", body=None) == request_fingerprint("http://e.com/")
    assert request_fingerprint("http://e.com/", body=0) == request_fingerprint("http://e.com/")


def test_missing_scheme_is_value_error():
    with pytest.raises(ValueError, match="no scheme"):
        request_fingerprint("www.example.com/path")


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(url=b"http://a.com/"), TypeError, "url must be str"),
    (dict(url=None), TypeError, "url must be str"),
    (dict(url="http://a.com/", method=b"GET"), TypeError, "method must be str"),
    (dict(url="http://a.com/", method=""), ValueError, "method must be an HTTP method"),
    (dict(url="http://a.com/", method="GE T"), ValueError, "method must be an HTTP method"),
    (dict(url="http://a.com/", method="GET\n"), ValueError, "method must be an HTTP method"),
    (dict(url="http://a.com/", method="GÉT"), ValueError, "method must be an HTTP method"),
    (dict(url="http://a.com/", body=123), TypeError, "body must be"),
    (dict(url="http://a.com/", headers="Accept: x"), ValueError, "headers must be"),
    (dict(url="http://a.com/", headers=[("a",)], include_headers=["a"]), ValueError,
     "headers must be"),
    (dict(url="http://a.com/", headers=5), TypeError, "headers must be"),
    (dict(url="http://a.com/", headers={1: "x"}, include_headers=["a"]), TypeError,
     "header name"),
    (dict(url="http://a.com/", headers={"a": 1.5}, include_headers=["a"]), TypeError,
     "header value"),
    (dict(url="http://a.com/", include_headers=[5]), TypeError, "include_headers"),
    (dict(url="http://a.com/", include_headers=["a", b"b"]), TypeError, "include_headers"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        request_fingerprint(**kwargs)


def test_url_fingerprint_is_md5_of_canonical_url():
    url = "https://Example.com/a/b?z=1&utm_source=x&a=%e4%b8%ad#top"
    assert url_fingerprint(url) == hashlib.md5(canonicalize_url(url).encode()).digest()
    assert len(url_fingerprint(url)) == 16
    assert url_fingerprint(url, strip_params=True) == \
        hashlib.md5(b"https://example.com/a/b?a=%E4%B8%AD&z=1").digest()
    assert url_fingerprint(url) == url_fingerprint("https://example.com/a/b?a=%E4%B8%AD&utm_source=x&z=1")
    with pytest.raises(TypeError):
        url_fingerprint(42)


def test_batches_equal_single_calls():
    corpus = load_corpus().realistic_urls(3000)
    assert url_fingerprints(corpus) == [url_fingerprint(u) for u in corpus]
    assert url_fingerprints(iter(corpus[:50]), strip_params=True) == \
        [url_fingerprint(u, strip_params=True) for u in corpus[:50]]
    assert request_fingerprints(corpus) == [scrapy_outcome(u) for u in corpus]
    assert request_fingerprints(corpus[:200], "post", keep_fragments=True) == \
        [scrapy_outcome(u, "POST", keep_fragments=True) for u in corpus[:200]]
    assert url_fingerprints([]) == [] and request_fingerprints(()) == []


@pytest.mark.parametrize("call, error, match", [
    (lambda: url_fingerprints("http://a.com/"), TypeError, "single str"),
    (lambda: url_fingerprints(5), TypeError, "iterable of URLs"),
    (lambda: url_fingerprints(["http://a.com/", 5]), TypeError, "url must be"),
    (lambda: request_fingerprints(["http://a.com/", None]), TypeError,
     "url must be str"),
    (lambda: request_fingerprints(["www.a.com"]), ValueError, "no scheme"),
    (lambda: request_fingerprints(["http://a.com/"], "G T"), ValueError,
     "method"),
])
def test_batch_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
