"""The fingerprint kernels (compiled SHA-1 and MD5 over the fast path's
canonical URL) against their twin and against hashlib."""

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from test_url_canonical import fast_urls, urls

TOKEN_METHODS = ["GET", "POST", "M-SEARCH", "X_Y.1", "!#$%&'*+-.^_`|~", "a"]


def scrapy_json(method, canonical, body):
    return ('{"body": "%s", "headers": {}, "method": "%s", "url": "%s"}'
            % (body.hex(), method, canonical)).encode()


@given(url=fast_urls() | urls(), method=st.sampled_from(TOKEN_METHODS),
       body=st.binary(max_size=300), keep_fragments=st.booleans())
def test_request_kernel_core_equals_reference(core, reference, url, method, body, keep_fragments):
    got = core.request_fingerprint_fast(url, method, body, keep_fragments)
    assert got == reference.request_fingerprint_fast(url, method, body, keep_fragments)


@given(url=fast_urls() | urls(), keep_fragments=st.booleans(), keep_blank_values=st.booleans())
def test_url_kernel_core_equals_reference(core, reference, url, keep_fragments, keep_blank_values):
    got = core.url_fingerprint_fast(url, keep_fragments, keep_blank_values)
    assert got == reference.url_fingerprint_fast(url, keep_fragments, keep_blank_values)


@pytest.mark.parametrize("size", list(range(0, 200)) + [1000, 4095, 4096, 70_000])
def test_sha1_and_md5_every_padding_case(impl, size):
    # Body and path lengths walk the message across every 64-byte block
    # boundary of SHA-1 and MD5 padding (55, 56, 63, 64, 119, 120...).
    body = bytes((i * 7 + size) & 0xFF for i in range(size))
    url = "http://a.com/" + "x" * size
    canonical = impl.canonicalize_url_fast(url)
    assert canonical == url
    assert impl.request_fingerprint_fast(url, "POST", body) == \
        hashlib.sha1(scrapy_json("POST", canonical, body)).digest()
    assert impl.url_fingerprint_fast(url) == hashlib.md5(canonical.encode()).digest()


def test_kernels_decline_outside_fast_path(impl):
    assert impl.url_fingerprint_fast("http://例子.测试/") is None
    assert impl.request_fingerprint_fast("http://[::ffff:1.2.3.4]/", "GET", b"") is None


@pytest.mark.parametrize("method, body, error", [
    (b"GET", b"", TypeError), (None, b"", TypeError), ("GET", "x", TypeError),
    ("GET", bytearray(b"x"), TypeError), ("", b"", ValueError), ("G T", b"", ValueError),
    ("GÉT", b"", ValueError), ("G\x00", b"", ValueError), ('G"', b"", ValueError),
])
def test_request_kernel_checks_arguments(impl, method, body, error):
    with pytest.raises(error, match="method|body"):
        impl.request_fingerprint_fast("http://a.com/", method, body)


def test_kernels_reject_non_str_url(impl):
    with pytest.raises(TypeError, match="url must be str or bytes"):
        impl.url_fingerprint_fast(bytearray(b"http://a.com/"))
    with pytest.raises(TypeError, match="url must be str,"):
        impl.request_fingerprint_fast(b"http://a.com/", "GET", b"")
    with pytest.raises(TypeError, match="url must be str"):
        impl.request_fingerprint_fast(None, "GET", b"")


# ------------------------------------------------------------------ batches

batch_items = st.lists(fast_urls() | urls()
                       | st.sampled_from([None, 1, b"http://a.com/", "\ud800"]),
                       max_size=30)


@given(items=batch_items, keep_fragments=st.booleans(), keep_blank_values=st.booleans())
def test_url_batch_kernel(impl, items, keep_fragments, keep_blank_values):
    got = impl.url_fingerprints_fast(items, keep_fragments, keep_blank_values)
    assert got == [impl.url_fingerprint_fast(u, keep_fragments, keep_blank_values)
                   if isinstance(u, (str, bytes)) else None for u in items]


@given(items=batch_items, method=st.sampled_from(TOKEN_METHODS), keep_fragments=st.booleans())
def test_request_batch_kernel(impl, items, method, keep_fragments):
    got = impl.request_fingerprints_fast(items, method, keep_fragments)
    assert got == [impl.request_fingerprint_fast(u, method, b"", keep_fragments)
                   if isinstance(u, str) else None for u in items]


def test_batch_kernels_on_long_and_empty_lists(core, reference):
    # Every length up to 64 segments, then longer ones up to 30,000 bytes
    # (the core's work buffers outgrow the stack): the twin's time grows with
    # the total length, so the long ones are spread out.
    items = ["https://a.com/" + "%E4%B8%AD/" * k + "?b=1&a=" + str(k)
             for k in [*range(64), *range(64, 3000, 97)]]
    items.append("http://a.com/\x01b")  # a control character inside: w3lib decides
    for impl in (core, reference):
        assert impl.url_fingerprints_fast([]) == []
        assert impl.request_fingerprints_fast([], "GET") == []
    assert core.url_fingerprints_fast(items) == reference.url_fingerprints_fast(items)
    assert (core.request_fingerprints_fast(items, "PUT")
            == reference.request_fingerprints_fast(items, "PUT"))
    assert core.url_fingerprints_fast(items)[-1] is None


@pytest.mark.parametrize("urls, method, error", [
    (("http://a.com/",), "GET", TypeError), ("http://a.com/", "GET", TypeError),
    ([], b"GET", TypeError), ([], "", ValueError), ([], "G T", ValueError),
])
def test_batch_kernel_arguments(impl, urls, method, error):
    with pytest.raises(error, match="urls|method"):
        impl.request_fingerprints_fast(urls, method)
    if method == "GET":
        with pytest.raises(error, match="urls"):
            impl.url_fingerprints_fast(urls)


def test_batch_kernels_in_threads(core):
    # The loops release the GIL: several threads at once give the same digests.
    from concurrent.futures import ThreadPoolExecutor

    items = [f"https://shop{k % 7}.example.com/item/{k}?b={k % 3}&a=%E4%B8%AD&utm_source=x"
             for k in range(5000)]
    expected_urls = core.url_fingerprints_fast(items)
    expected_requests = core.request_fingerprints_fast(items, "GET")
    with ThreadPoolExecutor(4) as pool:
        urls = list(pool.map(lambda _: core.url_fingerprints_fast(items), range(8)))
        requests = list(pool.map(lambda _: core.request_fingerprints_fast(items, "GET"), range(8)))
    assert all(r == expected_urls for r in urls)
    assert all(r == expected_requests for r in requests)
    assert None not in expected_urls and len(set(expected_requests)) == len(items)
