"""canonicalize_url at the edges, held to w3lib (issue 11, items 19 and 22),
and the batch kernels (threaded == one thread == twin == w3lib)."""

import hashlib
import sys
import unicodedata
import warnings
from urllib.parse import urlparse

import pytest
from hypothesis import given
from hypothesis import strategies as st
from w3lib.url import canonicalize_url as w3lib_canonicalize_url
from w3lib.url import parse_url

import crawldedup
from conftest import load_impl
from crawldedup import (
    canonicalize_url,
    canonicalize_urls,
    fingerprint,
    request_fingerprint,
    request_fingerprints,
    set_threads,
    url_fingerprint,
    url_fingerprints,
)
from test_url_canonical import (
    NFKC_SEPARATORS,
    W3LIB_25,
    fast_urls,
    load_corpus,
    our_outcome,
    urls,
    w3lib_outcome,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # scrapy's own import-time deprecations
    from scrapy import Request
    from scrapy.utils.request import fingerprint as scrapy_fingerprint

# ------------------------------------------------------------------ item 19: long ports

LONG_PORTS = ["0" * 4301, "0" * 4300 + "80", "0" * 4400 + "1", "9" * 5000, "000080",
              "0000000000000000000000443", "00000065535", "00000065536", "1" * 6]


@pytest.mark.parametrize("port", LONG_PORTS)
@pytest.mark.parametrize("scheme", ["http", "HTTPS"])
def test_long_port_is_w3libs_answer(port, scheme):
    url = f"{scheme}://a.com:{port}/x?b=1&a=2"
    assert our_outcome(url) == w3lib_outcome(url)
    assert our_outcome(url.encode()) == w3lib_outcome(url.encode())
    if len(port) > 4300 and W3LIB_25:   # Python's int() digit limit: w3lib 2.5 raises
        with pytest.raises(ValueError):
            canonicalize_url(url)


@pytest.mark.parametrize("port", LONG_PORTS)
def test_long_port_kernels_leave_it_to_w3lib(impl, port):
    # Neither the core nor the twin answers for a port of more than 5
    # digits (the core used to give "http://a.com:0/" for 4301 zeros).
    url = f"http://a.com:{port}/"
    assert impl.canonicalize_url_fast(url) is None
    assert impl.url_fingerprint_fast(url) is None
    assert impl.request_fingerprint_fast(url, "GET", b"") is None
    assert impl.canonicalize_urls_fast([url, url.encode()]) == [None, None]


@given(digits=st.text(alphabet="0123456789", min_size=1, max_size=12),
       path=st.sampled_from(["", "/", "/a?b=1"]))
def test_ports_equal_w3lib(impl, digits, path):
    url = f"http://a.com:{digits}{path}"
    got = impl.canonicalize_url_fast(url)
    if W3LIB_25 and got is not None:
        assert got == w3lib_canonicalize_url(url)
    assert our_outcome(url) == w3lib_outcome(url)


# ------------------------------------------------------------------ item 22: arguments

def test_options_by_position_as_w3lib():
    url = "http://a.com/p?b=&a=1#frag"
    for args in [(False,), (True, True), (False, True, "utf-8"), (True, False, None),
                 (0, 1), ("", "yes")]:
        assert canonicalize_url(url, *args) == w3lib_canonicalize_url(url, *args)
    assert canonicalize_url(url, False, True) == "http://a.com/p?a=1#frag"


def test_parse_result_accepted_as_w3lib():
    for url in ["http://A.com/x?b=1&a=2#f", "https://u:p@例子.测试:8080/é?q=中#x", "ftp://h/p;t=a"]:
        for parsed in (urlparse(url), parse_url(url)):
            assert canonicalize_url(parsed) == w3lib_canonicalize_url(parsed)
            assert canonicalize_url(parsed, keep_fragments=True) == \
                w3lib_canonicalize_url(parsed, keep_fragments=True)
            assert url_fingerprint(parsed) == \
                hashlib.md5(w3lib_canonicalize_url(parsed).encode()).digest()


@pytest.mark.parametrize("bad", [bytearray(b"http://a.com/"), memoryview(b"http://a.com/"),
                                 None, 5, ["http://a.com/"]])
def test_types_w3lib_rejects_raise(bad):
    assert w3lib_outcome(bad) is TypeError
    with pytest.raises(TypeError, match="url must be str, bytes or urllib.parse.ParseResult"):
        canonicalize_url(bad)
    with pytest.raises(TypeError):
        url_fingerprint(bad)


@pytest.mark.parametrize("url", ["http://a.com/x", "http://a.com/x?", "http://a.com/x?b=1;a=2",
                                 "http://a.com/x?b=1&a=2#f", "https://a.com", "ftp://a/b?",
                                 "http://a.com/x#?a"])
@pytest.mark.parametrize("separator", ["", ";", "&&", "ab", 5, b"&", None])
def test_query_separator_as_w3lib(url, separator):
    if not fingerprint._W3LIB_QUERY_SEPARATOR:
        # w3lib before 2.4 (the newest on Python 3.9 is 2.3) has no
        # query_separator: we refuse one, naming it, rather than ignore it.
        with pytest.raises((TypeError, ValueError), match="query_separator"):
            canonicalize_url(url, query_separator=separator)
        return
    expected = w3lib_outcome(url, query_separator=separator)
    got = our_outcome(url, query_separator=separator)
    if isinstance(expected, str):
        assert got == expected     # "" on a URL without a query: w3lib returns it
    else:
        # w3lib raises (AttributeError for a non-str separator): so do we,
        # with a TypeError or ValueError naming query_separator.
        assert got in (TypeError, ValueError)
        with pytest.raises(got, match="query_separator"):
            canonicalize_url(url, query_separator=separator)


# ------------------------------------------------------------------ bytes on the fast path

byte_urls = ((fast_urls() | urls()).map(lambda u: u.encode("utf-8", "surrogatepass"))
             | st.binary(max_size=30).map(lambda b: b"http://a.com/" + b))


@given(url=byte_urls, keep_fragments=st.booleans(), keep_blank_values=st.booleans())
def test_bytes_kernel_equals_w3lib(impl, url, keep_fragments, keep_blank_values):
    # Bytes are read as UTF-8; w3lib percent-encodes the bytes that are not
    # UTF-8, which is what the fast path does with every byte >= 0x80.
    got = impl.canonicalize_url_fast(url, keep_fragments, keep_blank_values)
    if got is not None and W3LIB_25:
        assert got == w3lib_canonicalize_url(url, keep_blank_values, keep_fragments)
    assert our_outcome(url, keep_fragments=keep_fragments,
                       keep_blank_values=keep_blank_values) == \
        w3lib_outcome(url, keep_fragments=keep_fragments, keep_blank_values=keep_blank_values)


# ------------------------------------------------------------------ batches

batch_items = st.lists(fast_urls() | urls() | byte_urls
                       | st.sampled_from([None, 1, bytearray(b"http://a.com/"), "\ud800",
                                          "http://a.com:" + "0" * 4301 + "/"]), max_size=30)


@given(items=batch_items, keep_fragments=st.booleans(), keep_blank_values=st.booleans(),
       as_bytes=st.booleans())
def test_canonical_batch_kernel(impl, items, keep_fragments, keep_blank_values, as_bytes):
    got = impl.canonicalize_urls_fast(items, keep_fragments, keep_blank_values, as_bytes)
    single = [impl.canonicalize_url_fast(u, keep_fragments, keep_blank_values)
              if isinstance(u, (str, bytes)) else None for u in items]
    assert got == [s.encode() if as_bytes and s is not None else s for s in single]


@given(items=batch_items)
def test_digest_batch_kernel(impl, items):
    got = impl.url_digests_fast(items)
    expected = []
    for u in items:
        if isinstance(u, str):
            try:
                u = u.encode("utf-8")
            except UnicodeEncodeError:
                u = None
        expected.append(hashlib.md5(u).digest() if isinstance(u, bytes) else None)
    assert got == expected


def test_digest_batches_at_every_block_boundary(impl):
    """The batch kernels hash several messages side by side (vector lanes,
    each taking the next message when its own ends): messages of every
    length from 0 to 300 bytes (MD5 pads to 1 to 5 blocks), in an order that
    mixes them, with items that have no digest between them, each equal to
    hashlib's MD5, raw and of the canonical form."""
    order = sorted(range(301), key=lambda n: (n * 7919) % 301)
    raw = [bytes((n * 31 + i) % 251 for i in range(n)) for n in order]
    items = [None if n % 13 == 5 else m for n, m in zip(order, raw)]
    assert impl.url_digests_fast(items) == \
        [None if m is None else hashlib.md5(m).digest() for m in items]
    urls = [None if n % 11 == 3 else "http://a.example/" + "p" * n + f"?b={n}&a=1"
            for n in order]
    expected = [None if u is None else hashlib.md5(w3lib_canonicalize_url(u).encode()).digest()
                for u in urls]
    assert impl.url_fingerprints_fast(urls) == expected
    blob, missing = impl.url_digests_packed(urls, True)
    assert missing == [i for i, u in enumerate(urls) if u is None]
    assert blob == b"".join(bytes(16) if d is None else d for d in expected)


@given(items=batch_items, canonical=st.booleans())
def test_packed_digest_kernel(impl, items, canonical):
    """url_digests_packed: the list kernels' digests end to end, zeros and
    the index where those give None."""
    blob, missing = impl.url_digests_packed(items, canonical)
    listed = impl.url_fingerprints_fast(items) if canonical else impl.url_digests_fast(items)
    assert missing == [i for i, d in enumerate(listed) if d is None]
    assert blob == b"".join(bytes(16) if d is None else d for d in listed)


def test_packed_digest_kernel_refuses_what_is_not_a_list(impl):
    with pytest.raises(TypeError, match="urls must be a list, not tuple"):
        impl.url_digests_packed(("http://a/",))


@given(items=st.lists(fast_urls() | urls() | byte_urls, max_size=20),
       keep_fragments=st.booleans(), keep_blank_values=st.booleans())
def test_canonicalize_urls_equals_w3lib(items, keep_fragments, keep_blank_values):
    kwargs = dict(keep_fragments=keep_fragments, keep_blank_values=keep_blank_values)
    expected = [w3lib_outcome(u, **kwargs) for u in items]
    got = canonicalize_urls(items, errors="none", **kwargs)
    assert got == [e if isinstance(e, str) else None for e in expected]
    if all(isinstance(e, str) for e in expected):
        assert canonicalize_urls(items, **kwargs) == expected
    else:
        with pytest.raises(ValueError, match=r"urls\[\d+\]"):
            canonicalize_urls(items, **kwargs)


@pytest.fixture
def threads():
    """Restores the thread setting after the test."""
    previous = set_threads(None)
    yield
    set_threads(previous)


def large_batch():
    """A batch big enough for several threads, with every kind of item at
    slice boundaries: fast-path URLs as str and bytes, non-ASCII, URLs w3lib
    must judge, ones it rejects, lone surrogates."""
    corpus = load_corpus().realistic_urls(20_000)
    odd = ["http://user@a.com/x?b=1&a=2", "http://例子.测试/é", " http://a.com/ x",
           "https://a.com/中文?q=é", "http://a.com:" + "0" * 4301 + "/", "http://a.com:99999/",
           "http://a.com/\ud800", "ftp://a/b?c=d&a=b"]
    items = []
    for i, url in enumerate(corpus):
        items.append(url.encode() if i % 3 == 0 else url)
        if i % 997 == 0 or i % 4096 in (0, 4095):
            items.append(odd[i % len(odd)])
    return items


def test_threaded_batches_equal_single_calls_and_twin(threads, core, reference):
    items = large_batch()
    assert len(items) >= 4 * 4096   # several slices
    set_threads(1)
    one = core.canonicalize_urls_fast(items)
    one_md5 = core.url_fingerprints_fast(items)
    one_raw = core.url_digests_fast(items)
    strs = [u for u in items if isinstance(u, str)]
    one_req = core.request_fingerprints_fast(strs, "GET")
    set_threads(None)
    for n in (None, 2, 3, 7):
        set_threads(n)
        assert core.canonicalize_urls_fast(items) == one
        assert core.canonicalize_urls_fast(items, False, True, True) == \
            [None if c is None else c.encode() for c in one]
        assert core.url_fingerprints_fast(items) == one_md5
        assert core.url_digests_fast(items) == one_raw
        for canonical, listed in ((False, one_raw), (True, one_md5)):
            blob, missing = core.url_digests_packed(items, canonical)
            assert missing == [i for i, d in enumerate(listed) if d is None]
            assert blob == b"".join(bytes(16) if d is None else d for d in listed)
        assert core.request_fingerprints_fast(strs, "GET") == one_req
    assert one == reference.canonicalize_urls_fast(items)
    assert one_md5 == reference.url_fingerprints_fast(items)
    assert one_raw == reference.url_digests_fast(items)
    # and the public batch equals w3lib on every item
    got = canonicalize_urls(items, errors="none")
    for url, canonical in zip(items, got):
        expected = w3lib_outcome(url)
        assert canonical == (expected if isinstance(expected, str) else None), url
    ok = [u for u, c in zip(items, got) if c is not None]
    assert url_fingerprints(ok) == [hashlib.md5(c.encode()).digest() for c in got if c is not None]
    assert url_fingerprints(ok[:3000]) == [url_fingerprint(u) for u in ok[:3000]]


def test_url_fingerprints_not_canonical(threads):
    items = large_batch()[:9000]
    items = [u for u in items if u != "http://a.com/\ud800"]
    expected = [hashlib.md5(u.encode() if isinstance(u, str) else u).digest() for u in items]
    for n in (1, None):
        set_threads(n)
        assert url_fingerprints(items, canonical=False) == expected
    assert url_fingerprint("http://A.com/?b", canonical=False) == hashlib.md5(b"http://A.com/?b").digest()
    assert url_fingerprint(b"\xff", canonical=False) == hashlib.md5(b"\xff").digest()
    with pytest.raises(UnicodeEncodeError):
        url_fingerprints(["http://a.com/", "\ud800"], canonical=False)
    with pytest.raises(TypeError, match=r"urls\[1\]"):
        url_fingerprints(["http://a.com/", bytearray(b"x")], canonical=False)
    with pytest.raises(TypeError, match="canonicalization options"):
        url_fingerprints(["http://a.com/"], canonical=False, strip_params=True)


def test_canonicalize_urls_arguments():
    items = ["http://a.com:80/x?utm_source=1&b=2", b"http://A.com/y#f"]
    assert canonicalize_urls(items, strip_params=True, remove_default_port=True) == \
        [canonicalize_url(u, strip_params=True, remove_default_port=True) for u in items]
    assert (canonicalize_urls(iter(items), True, True)
            == [canonicalize_url(u, True, True) for u in items])
    assert canonicalize_urls(items, encoding="latin-1") == \
        [w3lib_canonicalize_url(u, encoding="latin-1") for u in items]
    assert canonicalize_urls([]) == []
    with pytest.raises(TypeError, match="single str"):
        canonicalize_urls("http://a.com/")
    with pytest.raises(TypeError, match=r"urls\[1\]"):
        canonicalize_urls(["http://a.com/", 5])
    with pytest.raises(ValueError, match="errors must be"):
        canonicalize_urls(["http://a.com/"], errors="ignore")
    with pytest.raises(ValueError, match=r"urls\[0\].*IPv6"):
        canonicalize_urls(["http://[::1/"])
    assert canonicalize_urls(["http://[::1/", "http://b.com"], errors="none") == \
        [None, "http://b.com/"]
    assert "canonicalize_urls" in crawldedup.__all__


@given(drawn=st.lists(fast_urls() | urls() | byte_urls, min_size=1, max_size=12),
       threads_cap=st.sampled_from([None, 2, 3]), data=st.data())
def test_threaded_batch_hypothesis(core, reference, drawn, threads_cap, data):
    # Drawn URLs tiled into a batch large enough for several threads (2 x
    # 4,096 URLs and more), in an order hypothesis picks: each slot's answer
    # must be the one-thread answer, the twin's and w3lib's for its URL.
    n = 8192 + data.draw(st.integers(0, 5000))
    slots = data.draw(st.lists(st.integers(0, len(drawn) - 1), min_size=16, max_size=16))
    which = [slots[i % 16] if i % 7 else i % len(drawn) for i in range(n)]
    items = [drawn[k] for k in which]
    previous = set_threads(threads_cap)
    try:
        many = core.canonicalize_urls_fast(items)
        digests = core.url_fingerprints_fast(items)
        set_threads(1)
        assert core.canonicalize_urls_fast(items) == many
        assert core.url_fingerprints_fast(items) == digests
    finally:
        set_threads(previous)
    twin = reference.canonicalize_urls_fast(drawn)
    assert many == [twin[k] for k in which]
    assert digests == [None if twin[k] is None else hashlib.md5(twin[k].encode()).digest()
                       for k in which]
    if W3LIB_25:
        for url, expected in zip(drawn, twin):
            if expected is not None:
                assert expected == w3lib_canonicalize_url(url)


# ------------------------------------------------------------------ NFKC separators in the netloc

def test_nfkc_separators_are_every_such_code_point(core, reference):
    """Every code point whose NFKC form has a URL separator (as this Python's
    Unicode tables say) is refused in a userinfo by both kernels, and is in
    the alphabet the differential tests draw userinfo from."""
    found = [chr(c) for c in range(0x80, sys.maxunicode + 1) if not 0xD800 <= c < 0xE000
             and any(sep in unicodedata.normalize("NFKC", chr(c)) for sep in "/?#@:")]
    assert sorted(found) == sorted(NFKC_SEPARATORS)
    assert len(NFKC_SEPARATORS) == 19
    for ch in found:
        for impl in (core, reference):
            assert impl.canonicalize_url_fast(f"http://{ch}@a.com/") is None


def nfkc_urls(ch):
    """URLs with ch in the user, in the password, and between other text."""
    return [f"http://{ch}@a.com/", f"http://u:{ch}@a.com/x?b=1&a=2", f"https://é{ch}x:p@a.com",
            f"http://{ch}:{ch}@a.com:8080/#f", f"ftp://a{ch}@a.com/p"]


def scrapy_request_outcome(url):
    try:
        return scrapy_fingerprint(Request(url))
    except Exception as exc:  # noqa: BLE001 - the exception type is the answer
        return type(exc)


@pytest.mark.parametrize("ch", NFKC_SEPARATORS)
def test_nfkc_separator_in_userinfo_raises_as_w3lib_and_scrapy(ch):
    for url in nfkc_urls(ch):
        data = url.encode()
        for given_url in (url, data):
            assert w3lib_outcome(given_url) is ValueError
            with pytest.raises(ValueError, match="NFKC"):
                canonicalize_url(given_url)
            with pytest.raises(ValueError, match="NFKC"):
                url_fingerprint(given_url)
        assert canonicalize_urls([url, data, "http://a.com"], errors="none") == \
            [None, None, "http://a.com/"]
        with pytest.raises(ValueError, match=r"urls\[1\].*NFKC"):
            canonicalize_urls(["http://a.com", url])
        with pytest.raises(ValueError, match=r"urls\[0\].*NFKC"):
            url_fingerprints([data, "http://a.com"])
        assert scrapy_request_outcome(url) is ValueError
        with pytest.raises(ValueError, match="NFKC"):
            request_fingerprint(url)
        with pytest.raises(ValueError, match="NFKC"):
            request_fingerprint(url, "POST", b"x", include_headers=["Accept"])
        with pytest.raises(ValueError, match="NFKC"):
            request_fingerprints(["http://a.com/", url])


@pytest.mark.parametrize("ch", NFKC_SEPARATORS)
def test_nfkc_separator_kernels_leave_it_to_w3lib(impl, ch):
    for url in nfkc_urls(ch):
        data = url.encode()
        assert impl.canonicalize_url_fast(url) is None
        assert impl.canonicalize_url_fast(data) is None
        assert impl.url_fingerprint_fast(url) is None
        assert impl.request_fingerprint_fast(url, "GET", b"") is None
        assert impl.canonicalize_urls_fast([url, data, "http://a.com"]) == \
            [None, None, "http://a.com/"]
        assert impl.canonicalize_urls_fast([url, data], True, False, True) == [None, None]
        assert impl.url_fingerprints_fast([url, data]) == [None, None]
        assert impl.request_fingerprints_fast([url], "GET") == [None]
        blob, missing = impl.url_digests_packed(["http://a.com", data], True)
        assert missing == [1] and blob[16:] == bytes(16)


NFKC_KEPT = ["http://é@a.com/", "http://ｆ:ﬁ@a.com/", "http://①ª@a.com/x?b=1&a=2",
             "https://中文:\u3000@a.com:443/", "http://%EF%BC%8F@a.com/",
             "http://u\u0301:p\u00b4@a.com/"]


@pytest.mark.parametrize("url", NFKC_KEPT)
def test_non_ascii_userinfo_without_separator_stays_on_the_fast_path(impl, url):
    # NFKC changes "ｆ" and "ﬁ" but gives no separator: urllib accepts the
    # netloc, and the kernels still answer, w3lib 2.5's answer (the twin's
    # where an older w3lib is installed: Python 3.9).
    expected = w3lib_canonicalize_url(url) if W3LIB_25 else \
        load_impl("reference").canonicalize_url_fast(url)
    assert impl.canonicalize_url_fast(url) == expected
    assert impl.canonicalize_url_fast(url.encode()) == expected
    refused = url.replace("@", "\uff1a@", 1)
    assert impl.canonicalize_urls_fast([url, refused, url.encode()]) == [expected, None, expected]
    assert impl.url_fingerprints_fast([url]) == [hashlib.md5(expected.encode()).digest()]
    assert request_fingerprint(url) == scrapy_fingerprint(Request(url))


def test_nfkc_separators_in_threaded_batches(threads, core):
    # Refused netlocs spread over a batch big enough for several threads:
    # each is None, each neighbour keeps its answer.
    items = []
    for i in range(3 * 4096):
        ch = NFKC_SEPARATORS[i % len(NFKC_SEPARATORS)]
        items.append(f"http://{ch}@a.com/{i}" if i % 5 == 0 else f"http://é{i}@a.com/{i}")
    for n in (1, 3):
        set_threads(n)
        got = core.canonicalize_urls_fast(items)
        assert [g is None for g in got] == [i % 5 == 0 for i in range(len(items))]
        assert got[1] == (w3lib_canonicalize_url(items[1]) if W3LIB_25 else
                          load_impl("reference").canonicalize_url_fast(items[1]))
        blob, missing = core.url_digests_packed(items, True)
        assert missing == list(range(0, len(items), 5))
